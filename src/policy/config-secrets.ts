/**
 * The exact secret values of the running config (see src/config/secret-values.ts for which
 * ones), replaced by "[redacted:config-secret]" wherever text the hub did not write leaves it
 * on an error or log path: an upstream that echoes the token it was given, bare, has no shape
 * the rules of secret-text.ts could know it by, but the hub knows the value itself.
 *
 * Process-wide, as the logger is: each hub in the process registers its config's values
 * (useConfigSecrets, again at each reload) and drops them when it stops; the union is redacted.
 * The cost is one pass over the text (form-index.ts), whatever the number of values and their
 * forms, paid by the text of errors, log lines and ledger rows: tool results are not searched
 * (they are the upstream's answer to the client).
 */

import { FormIndex } from './form-index.js';

export const CONFIG_SECRET_MARK = '[redacted:config-secret]';

/** Values shorter than this are never treated as secrets: they would redact ordinary words. */
export const MIN_SECRET_LENGTH = 8;

/**
 * Purely numeric values are never treated as secrets either: they would blank the digits of
 * timestamps, latencies, ids and counts that happen to contain them.
 */
const NUMERIC = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

const byOwner = new Map<object, readonly string[]>();
/** What to look for in text, longest first (a value inside another is found after it). */
let inText = new FormIndex([]);
/** The same, as they appear inside a JSON string (a serialised log line). */
let inJson = new FormIndex([]);

/** Set (or replace) the values of one owner (a hub): those of its config as it runs now. */
export function useConfigSecrets(owner: object, values: Iterable<string>): void {
  const kept = [...new Set(values)].filter((v) => typeof v === 'string' && v.length >= MIN_SECRET_LENGTH && !NUMERIC.test(v));
  if (kept.length === 0) byOwner.delete(owner);
  else byOwner.set(owner, kept);
  rebuild();
}

/** The owner stopped: its values are no longer redacted (unless another owner has them). */
export function dropConfigSecrets(owner: object): void {
  if (byOwner.delete(owner)) rebuild();
}

/** How many distinct values are redacted now (for tests and diagnostics). */
export function configSecretCount(): number {
  return new Set([...byOwner.values()].flat()).size;
}

/** Changes whenever the secret values do: what was redacted before may redact differently now. */
let version = 0;

/** The secret values' version, for a cache of redacted text (src/ledger/columns.ts) to know it is stale. */
export function configSecretsVersion(): number {
  return version;
}

function rebuild(): void {
  version++;
  const values = new Set([...byOwner.values()].flat());
  const text = new Set<string>();
  const json = new Set<string>();
  for (const v of values)
    for (const f of secretForms(v)) {
      text.add(f);
      json.add(jsonEscaped(f));
    }
  inText = new FormIndex(longestFirst(text));
  inJson = new FormIndex(longestFirst(json));
}

function longestFirst(s: Iterable<string>): string[] {
  return [...s].sort((a, b) => b.length - a.length);
}

/** The inside of the JSON string of `s` (a value as a JSON text quotes it). */
function jsonEscaped(s: string): string {
  return JSON.stringify(s).slice(1, -1);
}

/**
 * Every form in which the secret `v` may come back in text the other side wrote: as it is;
 * URL-encoded (a query string) and form-encoded (a form body as URLSearchParams writes it, the
 * parts of a Basic authorization); JSON-escaped (a JSON text quoted in a message); and base64,
 * standard and URL-safe (a Basic authorization echoed: base64 of `id:secret`). Inside a longer
 * base64 text a value starts at one of three positions, and the characters that encode it
 * alone differ with each: all three are forms, without the characters at either end that
 * also encode a neighbour's bits (redacted with the rest, they leave a character or two of
 * the text around).
 */
export function secretForms(v: string): string[] {
  const textual = new Set([v, uriEncoded(v), new URLSearchParams({ v }).toString().slice(2)]);
  const out = new Set<string>();
  for (const t of textual) {
    out.add(t);
    out.add(jsonEscaped(t));
  }
  for (const t of [v, new URLSearchParams({ v }).toString().slice(2)]) {
    const bytes = Buffer.from(t, 'utf8');
    for (let k = 0; k < 3; k++) {
      const b64 = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64');
      const core = b64.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6));
      if (core.length < MIN_SECRET_LENGTH) continue;
      out.add(core);
      out.add(core.replace(/\+/g, '-').replace(/\//g, '_'));
    }
  }
  return [...out];
}

/**
 * `v` URL-encoded; `v` itself when it cannot be (a lone surrogate: encodeURIComponent threw
 * "URI malformed", and a hub whose config or token held one failed to start or to take it).
 */
function uriEncoded(v: string): string {
  try {
    return encodeURIComponent(v);
  } catch {
    return v;
  }
}

/**
 * `text` with the given secrets (values this process sent, which a config does not hold: a
 * login's tokens, a client assertion) replaced by CONFIG_SECRET_MARK in every form
 * secretForms knows. Empty values are passed over.
 */
export function redactSecretValues(text: string, secrets: Iterable<string | undefined>): string {
  const forms = new Set<string>();
  for (const v of secrets) if (v) for (const f of secretForms(v)) forms.add(f);
  return replaceAll(text, longestFirst(forms), 1);
}

function replaceAll(text: string, values: readonly string[], shortest = MIN_SECRET_LENGTH): string {
  if (values.length === 0 || text.length < shortest) return text;
  let out = text;
  for (const v of values) if (out.includes(v)) out = out.split(v).join(CONFIG_SECRET_MARK);
  return out;
}

/** `text` with every configured secret value replaced by CONFIG_SECRET_MARK. */
export function redactConfigSecrets(text: string): string {
  if (inText.forms.length === 0 || text.length < MIN_SECRET_LENGTH) return text;
  return replaceAll(text, inText.present(text));
}

/**
 * A serialised JSON text (a log line) with every configured secret value replaced, as the
 * value appears there (escaped), inside its string tokens only: numbers, keywords and the
 * structure are never touched, so the text stays valid JSON. A line that holds none of the
 * values anywhere is returned as it is, without the scan.
 */
export function redactConfigSecretsInJson(text: string): string {
  if (inJson.forms.length === 0 || text.length < MIN_SECRET_LENGTH) return text;
  // The values in the line: the string tokens, parts of it, are searched for these alone.
  const present = inJson.present(text);
  if (present.length === 0) return text;
  let out = '';
  let from = 0; // text before this is in `out`
  let open = text.indexOf('"');
  while (open >= 0) {
    // The closing quote: the next one not escaped (not after an odd run of backslashes).
    let close = text.indexOf('"', open + 1);
    while (close >= 0 && escapedAt(text, close)) close = text.indexOf('"', close + 1);
    const end = close < 0 ? text.length : close;
    out += text.slice(from, open + 1) + redactJsonStringBody(text.slice(open + 1, end), present);
    from = end;
    if (close < 0) break;
    open = text.indexOf('"', close + 1);
  }
  return out + text.slice(from);
}

/** Whether the character at `i` is preceded by an odd run of backslashes (so it is escaped). */
function escapedAt(s: string, i: number): boolean {
  let k = i;
  while (k > 0 && s.charCodeAt(k - 1) === 92) k--;
  return (i - k) % 2 === 1;
}

/**
 * The inside of one JSON string token, each value replaced where it starts at a character of
 * its own (never after the backslash of an escape: `\n` followed by the rest of a value).
 */
function redactJsonStringBody(body: string, values: readonly string[]): string {
  if (body.length < MIN_SECRET_LENGTH) return body;
  let s = body;
  for (const v of values) {
    if (!s.includes(v)) continue;
    let out = '';
    let from = 0;
    for (let at = s.indexOf(v); at >= 0; at = s.indexOf(v, from)) {
      if (escapedAt(s, at)) {
        out += s.slice(from, at + 1);
        from = at + 1;
        continue;
      }
      out += s.slice(from, at) + CONFIG_SECRET_MARK;
      from = at + v.length;
    }
    s = out + s.slice(from);
  }
  return s;
}
