import { redactConfigSecrets } from '../policy/config-secrets.js';
import { redactSecretText } from '../policy/secret-text.js';

/** Default pattern of object keys whose values never reach the ledger. */
export const DEFAULT_REDACT_KEYS = /(pass(word)?|secret|token|api[-_]?key|authorization|cookie|credential)/i;

export const REDACTED = '[redacted]';

// RFC 6750 b64token characters; anything after "Bearer " that looks like a token.
const BEARER = /\bBearer\s+[A-Za-z0-9\-._~+/]+=*/gi;

/**
 * Replaces credentials inside a free-text string (error messages, argument strings): bearer
 * tokens of any length, then the shapes every part of the hub redacts (well-known token
 * formats, passwords in URLs; src/policy/secret-text.ts), then the config's own secret values
 * (src/policy/config-secrets.ts).
 */
export function redactString(s: string): string {
  return redactConfigSecrets(redactSecretText(s.replace(BEARER, `Bearer ${REDACTED}`)));
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
