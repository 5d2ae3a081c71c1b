import { redactConfigSecrets } from '../policy/config-secrets.js';
import { redactSecretText } from '../policy/secret-text.js';

/** A case-insensitive spelling of a word, in a pattern matched case-sensitively. */
const anyCase = (w: string): string => w.replace(/[a-z]/g, (c) => `[${c}${c.toUpperCase()}]`);

/**
 * The ends of a word within a key, which is split at `_`, `-`, `.`, anything not a letter, and
 * changes of case (`accessToken`, `APIKey`): written as `word`, `Word` or `WORD`, followed by no
 * lower-case letter, and an upper-case one only where it starts a word of its own (`TOKENValue`).
 */
const endsWord = (w: string): string => {
  const cap = w[0]!.toUpperCase() + w.slice(1);
  return `(?:(?:${w}|${cap})(?![a-z])|${w.toUpperCase()}(?![a-z])(?![A-Z](?![a-z])))`;
};

/**
 * Default pattern of object keys whose values never reach the ledger (nor a confirmation's
 * summary): credential words, as words of a key rather than anywhere in it, so that `max_tokens`,
 * `passage` or `bypass_cache` keep their values. Long words are found anywhere, in any case, as
 * no other word holds them (`dbpassword`, `clientSecret`, `x-api-key`, `privateKey`, `cookies`);
 * `token` ends a word (`token`, `accessToken`, `csrftoken`, `GITHUB_TOKEN`; not `tokens`,
 * `tokenizer`); `pass` ends a word too (`pass`, `db_pass`, `smtpPass`), but not the English
 * words that end so (`bypass`, `compass`, `overpass`…). Matched case-sensitively, to see a word
 * start at a capital; a `ledger.redactKeys` of the config replaces it (matched case-insensitively).
 */
export const DEFAULT_REDACT_KEYS = new RegExp(
  [
    ...['passw(?:or)?d', 'passphrase', 'secret', 'credential', 'authorization', 'cookie'].map((w) => anyCase(w)),
    ...[['api', 'key'], ['private', 'key']].map((ws) => ws.map(anyCase).join('[-_. ]?')),
    endsWord('token'),
    `(?<!${['by', 'com', 'over', 'under', 'tres', 'sur'].map(anyCase).join('|')})${endsWord('pass')}`,
  ].join('|'),
);

export const REDACTED = '[redacted]';

// RFC 6750 b64token characters; anything after "Bearer " that looks like a token.
const BEARER = /\bBearer\s+[A-Za-z0-9\-._~+/]+=*/gi;
// An Authorization header written out in text (a curl line, a request dump), whatever its
// scheme: `Basic <user:password in base64>`, `Token …`, `Digest …` carry credentials as Bearer
// does, and no shape rule knows them. The scheme is kept, the credential goes.
const AUTHORIZATION = /\b((?:proxy-)?authorization\s*[:=]\s*["']?)([A-Za-z][\w.~+-]*[ \t]+)?[^\s"',;]+/gi;

/**
 * Replaces credentials inside a free-text string (error messages, argument strings): an
 * Authorization header's credentials and bearer tokens of any length, then the shapes every
 * part of the hub redacts (well-known token formats, passwords in URLs;
 * src/policy/secret-text.ts), then the config's own secret values (src/policy/config-secrets.ts).
 */
export function redactString(s: string): string {
  return redactConfigSecrets(redactSecretText(s.replace(AUTHORIZATION, `$1$2${REDACTED}`).replace(BEARER, `Bearer ${REDACTED}`)));
}

const MAX_DEPTH = 64;

/**
 * A redacted deep copy of a JSON-like value: values under keys matching `keys` become
 * "[redacted]", bearer tokens in any string are blanked. Never throws: cycles and very
 * deep nesting are cut off with a marker rather than followed.
 */
export function redact(value: unknown, keys: RegExp = DEFAULT_REDACT_KEYS): unknown {
  // A global/sticky regex carries lastIndex between test() calls; use a stateless copy.
  const pattern = keys.global || keys.sticky ? new RegExp(keys.source, keys.flags.replace(/[gy]/g, '')) : keys;
  return walk(value, pattern, new Set(), 0);
}

function walk(value: unknown, keys: RegExp, seen: Set<object>, depth: number): unknown {
  if (typeof value === 'string') return redactString(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (seen.has(value)) return '[cycle]';
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((v) => walk(v, keys, seen, depth + 1));
    const src = value as Record<string, unknown>;
    const json = typeof (src as { toJSON?: unknown }).toJSON === 'function' ? (src as { toJSON: () => unknown }).toJSON() : undefined;
    if (json !== undefined && json !== src) return walk(json, keys, seen, depth + 1);
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(src)) {
      const v = keys.test(k) ? REDACTED : walk(src[k], keys, seen, depth + 1);
      // A parsed "__proto__" key is data; plain assignment would set the copy's prototype.
      if (k === '__proto__') Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
      else out[k] = v;
    }
    return out;
  } finally {
    seen.delete(value);
  }
}
