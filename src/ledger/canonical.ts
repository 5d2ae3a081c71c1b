import * as crypto from 'node:crypto';

/**
 * Canonical JSON: object keys sorted (by UTF-16 code unit, like Array.prototype.sort),
 * no whitespace, otherwise JSON.stringify's rules (toJSON honoured, undefined/functions
 * dropped from objects and null in arrays, non-finite numbers null). Two values that are
 * equal as JSON always give the same text, so the hash of it is a stable identity for
 * tool arguments (idempotency) and for audit rows (hash chain).
 */
export function canonicalJson(value: unknown): string {
  const out = encode(value, new Set());
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

function encode(value: unknown, seen: Set<object>): string | undefined {
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
  if (seen.has(obj)) throw new TypeError('canonicalJson: cyclic structure');
  seen.add(obj);
  try {
    if (Array.isArray(obj)) {
      return '[' + obj.map((v) => encode(v, seen) ?? 'null').join(',') + ']';
    }
    const rec = obj as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(rec).sort()) {
      const v = encode(rec[key], seen);
      if (v !== undefined) parts.push(JSON.stringify(key) + ':' + v);
    }
    return '{' + parts.join(',') + '}';
  } finally {
    seen.delete(obj);
  }
}
