/**
 * How a row's text columns are made from what a request carried: cut to MAX_TEXT, well-formed,
 * names that may be URIs redacted before the cut. The live feed (observe.ts) shows the same.
 */
import { KeyedTable } from '../keyed-table.js';
import { configSecretsVersion } from '../policy/config-secrets.js';
import { redactString } from './redact.js';

/** The longest text a column keeps. */
export const MAX_TEXT = 4096;

/** Text columns take whatever arrives (ids may be numbers) but never fail the insert. */
export function text(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  const s = typeof v === 'string' ? v : typeof v === 'object' ? safeStringify(v) : String(v);
  return wellFormed(s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s);
}

/**
 * A row's hub or upstream name. A resource URI (the name of a resources/read, a subscription,
 * a completion's template) can carry credentials: a URL's password, a token in its query, one
 * of the config's secret values an upstream put in the URIs it lists. So can the name of a tool
 * or prompt no server has, which is whatever the client sent (a pasted token, `ghp_…`): its
 * row's error message ("Unknown tool: …") is redacted, and the name beside it must be too.
 * Every name is redacted as an error message is, never stored (a catalog name of a known tool
 * comes out as it went in, at a fraction of a microsecond; see `names`).
 */
export function nameText(v: unknown): string | null {
  if (typeof v !== 'string' || v.length > NAME_CACHED_CHARS) return redactedName(v);
  if (namesVersion !== configSecretsVersion()) {
    names.clear();
    namesVersion = configSecretsVersion();
  }
  if (names.has(v)) return v;
  const out = redactedName(v)!;
  if (out === v) {
    if (names.size >= NAMES_CACHED) names.clear();
    names.set(v, true);
  }
  return out;
}

/**
 * Names that redaction left as they were, for the config's secret values as they are now (a
 * reload's new values start it over). A row's hub and upstream names are the catalog's, the
 * same few strings call after call, and redacting one (the bearer search, the secret shapes'
 * gate, the config's values) cost ~1.5k instructions, twice a call (callgrind); a lookup is a
 * tenth of that. Only names nothing was found in are kept, so no name with a secret the rules
 * know stays in memory for this. Bounded: names a client makes up (unknown tools) only fill it
 * until it starts over. A KeyedTable, not a Map, for the reason keyed-table.ts gives.
 */
const names = new KeyedTable<true>();
let namesVersion = configSecretsVersion();
const NAMES_CACHED = 256;
const NAME_CACHED_CHARS = 256;

function redactedName(v: unknown): string | null {
  // Redacted before the cut (twice the length kept, not all of a client's 4 MiB): a secret
  // across the cut would otherwise be stored by its first half, which no rule recognises.
  const s = typeof v === 'string' ? v : text(v);
  if (s === null) return null;
  return text(redactString(s.slice(0, 2 * MAX_TEXT)));
}

/**
 * A lone surrogate (sent on purpose in a name or an id, or half an emoji a cut left) is stored
 * by SQLite's UTF-8 as U+FFFD: the row's hash must cover the text as stored, or `verify` would
 * call an untouched row changed, stop there for good, and `prune` with it. So it becomes U+FFFD
 * before the row is hashed. Well-formed text (nearly all of it) is returned as it is.
 */
export function wellFormed(s: string): string {
  return s.isWellFormed() ? s : s.toWellFormed();
}

function safeStringify(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return '[unserializable]';
  }
}
