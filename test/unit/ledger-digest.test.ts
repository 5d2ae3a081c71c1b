import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../src/ledger/canonical.js';
import { GENESIS_HASH, rowDigest } from '../../src/ledger/chain.js';

/** The definition the chain documents: sha256(prev + "\n" + canonical JSON of the non-null columns but hash). */
function reference(prev: string, row: Record<string, unknown>): string {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) if (k !== 'hash' && v !== null && v !== undefined) fields[k] = v;
  return sha256Hex(prev + '\n' + canonicalJson(fields));
}

// Column names (a row's keys are SQL identifiers, never __proto__).
const columnName = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => k !== '__proto__');

const column = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.string({ unit: 'binary' }),
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.array(fc.integer(), { maxLength: 3 }),
);

describe('row digest (the chain hash of one row)', () => {
  it('equals the generic canonical-JSON digest for any flat row, in any key order', () => {
    fc.assert(
      fc.property(fc.dictionary(columnName, column, { maxKeys: 30 }), (row) => {
        expect(rowDigest(GENESIS_HASH, row)).toBe(reference(GENESIS_HASH, row));
        const reversed = Object.fromEntries(Object.entries(row).reverse());
        expect(rowDigest(GENESIS_HASH, reversed)).toBe(reference(GENESIS_HASH, row));
      }),
      { numRuns: 500 },
    );
  });

  it('leaves out hash and null columns, and keeps zero, empty text and -0 as written', () => {
    const base = { id: 1, ts: 5, outcome: 'ok' };
    expect(rowDigest('p', { ...base, hash: 'x', error_code: null })).toBe(rowDigest('p', base));
    expect(rowDigest('p', { ...base, latency_ms: 0 })).not.toBe(rowDigest('p', base));
    expect(rowDigest('p', { ...base, request_id: '' })).not.toBe(rowDigest('p', base));
    expect(rowDigest('p', { ...base, latency_ms: -0 })).toBe(reference('p', { ...base, latency_ms: 0 }));
  });
});
