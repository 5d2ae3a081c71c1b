/**
 * The exact secret values of the running config (see src/config/secret-values.ts for which
 * ones), replaced by "[redacted:config-secret]" wherever text the hub did not write leaves it
 * on an error or log path: an upstream that echoes the token it was given, bare, has no shape
 * the rules of secret-text.ts could know it by, but the hub knows the value itself.
 *
 * Process-wide, as the logger is: each hub in the process registers its config's values
 * (useConfigSecrets, again at each reload) and drops them when it stops; the union is redacted.
 * The cost is one substring search per value, paid only by the text of errors and log lines:
 * tool results are not searched (they are the upstream's answer to the client).
 */

export const CONFIG_SECRET_MARK = '[redacted:config-secret]';

/** Values shorter than this are never treated as secrets: they would redact ordinary words. */
export const MIN_SECRET_LENGTH = 8;

const byOwner = new Map<object, readonly string[]>();
/** What to look for in text, longest first (a value inside another is found after it). */
let inText: readonly string[] = [];
/** The same, as they appear inside a JSON string (a serialised log line). */
let inJson: readonly string[] = [];

/** Set (or replace) the values of one owner (a hub): those of its config as it runs now. */
export function useConfigSecrets(owner: object, values: Iterable<string>): void {
  const kept = [...new Set(values)].filter((v) => typeof v === 'string' && v.length >= MIN_SECRET_LENGTH);
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

function rebuild(): void {
  const values = new Set([...byOwner.values()].flat());
  const text = new Set<string>();
  const json = new Set<string>();
  for (const v of values) {
    text.add(v);
    // An upstream that puts the value in a URL or a query string sends it encoded.
    const encoded = encodeURIComponent(v);
    if (encoded !== v) text.add(encoded);
    json.add(JSON.stringify(v).slice(1, -1));
  }
  const longestFirst = (s: Set<string>): string[] => [...s].sort((a, b) => b.length - a.length);
  inText = longestFirst(text);
  inJson = longestFirst(json);
}

function replaceAll(text: string, values: readonly string[]): string {
  if (values.length === 0 || text.length < MIN_SECRET_LENGTH) return text;
  let out = text;
  for (const v of values) if (out.includes(v)) out = out.split(v).join(CONFIG_SECRET_MARK);
  return out;
}

/** `text` with every configured secret value replaced by CONFIG_SECRET_MARK. */
export function redactConfigSecrets(text: string): string {
  return replaceAll(text, inText);
}

/**
 * A serialised JSON text (a log line) with every configured secret value replaced, as the
 * value appears there (escaped); the text stays valid JSON.
 */
export function redactConfigSecretsInJson(text: string): string {
  return replaceAll(text, inJson);
}
