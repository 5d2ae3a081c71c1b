import { redactConfigSecrets } from '../policy/config-secrets.js';
import { LOG_SECRET_RULES, redactSecretText } from '../policy/secret-text.js';
import { DEFAULT_REDACT_KEYS } from '../policy/secret-keys.js';

export { DEFAULT_REDACT_KEYS };

export const REDACTED = '[redacted]';

// RFC 6750 b64token characters; anything after "Bearer " that looks like a token.
const BEARER = /\bBearer\s+[A-Za-z0-9\-._~+/]+=*/gi;
// An Authorization header written out in text (a curl line, a request dump), whatever its
// scheme: `Basic <user:password in base64>`, `Token …`, `Digest …` carry credentials as Bearer
// does, and no shape rule knows them. The scheme is kept, the credential goes.
const AUTHORIZATION = /\b((?:proxy-)?authorization\s*[:=]\s*["']?)([A-Za-z][\w.~+-]*[ \t]+)?[^\s"',;]+/gi;

/**
 * Replaces credentials inside a free-text string (error messages, argument strings): an
 * Authorization header's credentials and bearer tokens of any length, then what every part of
 * the hub redacts in text it writes out (well-known token formats, passwords in URLs, values
 * assigned to a credential's name: `password=…`; src/policy/secret-text.ts LOG_SECRET_RULES),
 * then the config's own secret values (src/policy/config-secrets.ts). The ledger is the hub's
 * record, not the client's answer: a false positive there costs a word.
 */
export function redactString(s: string): string {
  return redactConfigSecrets(redactSecretText(s.replace(AUTHORIZATION, `$1$2${REDACTED}`).replace(BEARER, `Bearer ${REDACTED}`), LOG_SECRET_RULES));
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
