import * as crypto from 'node:crypto';

/**
 * Canonical JSON: object keys sorted (by UTF-16 code unit, like Array.prototype.sort),
 * no whitespace, otherwise JSON.stringify's rules (toJSON honoured, undefined/functions
 * dropped from objects and null in arrays, non-finite numbers null). Two values that are
 * equal as JSON always give the same text, so the hash of it is a stable identity for
 * tool arguments (idempotency) and for audit rows (hash chain).
 */
export function canonicalJson(value: unknown): string {
  // Arguments parsed from a request often have their keys in order already: then V8's own
  // JSON.stringify writes the same text, about twice as fast as encode() below.
  if (value !== undefined && inCanonicalOrder(value, 0)) return JSON.stringify(value);
  const out = encode(value, new Set(), 0);
  // A bare undefined/function has no JSON form; hash it like null rather than throwing.
  return out ?? 'null';
}

/** sha256 hex of the canonical JSON of `args` (absent arguments hash like `{}`). */
export function argsHash(args: unknown): string {
  return sha256Hex(canonicalJson(args === undefined ? {} : args));
}

// One-shot crypto.hash (Node >= 20.12) is about 2.5x cheaper than a Hash object, and the
// ledger hashes twice per call (arguments, chain link).
const oneShot = (crypto as { hash?: (alg: string, data: string, enc: 'hex') => string }).hash;

export function sha256Hex(text: string): string {
  return oneShot ? oneShot('sha256', text, 'hex') : crypto.createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Nesting deeper than this goes the slow way (which also finds cycles). */
const MAX_FAST_DEPTH = 32;
/** Deeper than this is refused (the recursion would otherwise end in a stack overflow). */
export const MAX_CANONICAL_DEPTH = 1000;

/** A value nested deeper than MAX_CANONICAL_DEPTH: no canonical form, so no identity. */
export class NestingTooDeepError extends Error {
  override readonly name = 'NestingTooDeepError';
  constructor() {
    super(`nested more than ${MAX_CANONICAL_DEPTH} levels deep`);
  }
}

/**
 * Whether JSON.stringify(value) is its canonical JSON: every object's keys are in sorted
 * order, and nothing has a toJSON (whose result could be unsorted) or is a bigint (which
 * JSON.stringify refuses). Everything else JSON.stringify writes as encode() does.
 */
function inCanonicalOrder(value: unknown, depth: number): boolean {
  if (typeof value !== 'object' || value === null) return typeof value !== 'bigint';
  if (depth > MAX_FAST_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!inCanonicalOrder(value[i], depth + 1)) return false;
    return true;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  const rec = value as Record<string, unknown>;
  const keys = Object.keys(rec);
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && keys[i - 1]! > keys[i]!) return false;
    if (!inCanonicalOrder(rec[keys[i]!], depth + 1)) return false;
  }
  return true;
}

function encode(value: unknown, seen: Set<object>, depth: number): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    value = (value as { toJSON: () => unknown }).toJSON();
  }
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      // JSON.stringify throws here; a decimal literal is the natural, stable JSON spelling.
      return value.toString();
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';
  const obj = value as object;
  if (depth >= MAX_CANONICAL_DEPTH) throw new NestingTooDeepError();
  if (seen.has(obj)) throw new TypeError('canonicalJson: cyclic structure');
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      // An index loop, not map(): a hole in a sparse array is null, as JSON.stringify has it.
      const items: string[] = [];
      for (let i = 0; i < obj.length; i++) items.push(encode(obj[i], seen, depth + 1) ?? 'null');
      return '[' + items.join(',') + ']';
    }
    const rec = obj as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(rec).sort()) {
      const v = encode(rec[key], seen, depth + 1);
      if (v !== undefined) parts.push(JSON.stringify(key) + ':' + v);
    }
    return '{' + parts.join(',') + '}';
  } finally {
    seen.delete(obj);
  }
}
