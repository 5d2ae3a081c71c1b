import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../src/ledger/canonical.js';
import { BEGIN_COLS, END_COLS, FIN_COLS, LINKED_COLS, linkedDigest, linkedValues } from '../../src/ledger/audit-apply.js';
import { ColumnsDigest, GENESIS_HASH, rowDigest } from '../../src/ledger/chain.js';

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
  fc.dictionary(fc.constantFrom('b', 'a'), fc.integer(), { maxKeys: 2 }),
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

  it('over values in a fixed column order, equals the digest of the same row as an object', () => {
    fc.assert(
      fc.property(fc.uniqueArray(columnName, { maxLength: 30 }).chain((cols) => fc.tuple(fc.constant(cols), fc.array(column, { minLength: cols.length, maxLength: cols.length }))), ([cols, values]) => {
        const row = Object.fromEntries(cols.map((c, i) => [c, values[i]]));
        expect(new ColumnsDigest(cols).digest(GENESIS_HASH, values)).toBe(reference(GENESIS_HASH, row));
      }),
      { numRuns: 500 },
    );
  });

  it('encodes rows of text and numbers only (every audit row) as the generic digest does, array-index column names too', () => {
    const scalar = fc.oneof(fc.constant(null), fc.string({ unit: 'binary' }), fc.double(), fc.integer(), fc.constantFrom(-0, Number.NaN, Infinity, 1e21, 5e-7));
    const name = fc.oneof(columnName, fc.constantFrom('0', '7', '10', '9', '01'));
    fc.assert(
      fc.property(fc.uniqueArray(name, { maxLength: 30 }).chain((cols) => fc.tuple(fc.constant(cols), fc.array(scalar, { minLength: cols.length, maxLength: cols.length }))), ([cols, values]) => {
        const row = Object.fromEntries(cols.map((c, i) => [c, values[i]]));
        expect(new ColumnsDigest(cols).digest(GENESIS_HASH, values)).toBe(reference(GENESIS_HASH, row));
      }),
      { numRuns: 1000 },
    );
    // Numeric names would be put first by JSON.stringify; sorted as text, "10" comes before "9".
    expect(new ColumnsDigest(['9', '10']).digest('p', [1, 2])).toBe(sha256Hex('p\n{"10":2,"9":1}'));
  });

  it("the applier's digest of a finished row (one object literal) equals ColumnsDigest's and the generic digest, rows side by side too", () => {
    const scalar = fc.oneof(fc.constant(null), fc.constant(undefined), fc.string({ unit: 'binary' }), fc.double(), fc.integer(), fc.constantFrom(-0, Number.NaN, 1e21));
    // Mostly text and numbers, as audit rows are; now and then another value, which takes ColumnsDigest's general path.
    const value = fc.oneof({ weight: 20, arbitrary: scalar }, { weight: 1, arbitrary: column });
    const row = fc.array(value, { minLength: LINKED_COLS.length, maxLength: LINKED_COLS.length });
    const columns = new ColumnsDigest(LINKED_COLS);
    fc.assert(
      fc.property(row, row, fc.string(), (a, b, prev) => {
        for (const [values, at] of [[a, 0], [[...a, ...b], LINKED_COLS.length]] as const) {
          const asObject = Object.fromEntries(LINKED_COLS.map((c, i) => [c, values[at + i]]));
          expect(linkedDigest.digest(prev, values, at)).toBe(reference(prev, asObject));
          expect(linkedDigest.digest(prev, values, at)).toBe(columns.digest(prev, values, at));
        }
      }),
      { numRuns: 1000 },
    );
    // Each column from its own place: a row whose values are all distinct.
    const distinct = LINKED_COLS.map((c, i) => (i % 2 === 0 ? `${c}-${i}` : i * 1000 + 7));
    expect(linkedDigest.digest(GENESIS_HASH, distinct)).toBe(reference(GENESIS_HASH, Object.fromEntries(LINKED_COLS.map((c, i) => [c, distinct[i]]))));
  });

  it('the applier builds a finished row in its column order, with server and upstream from the finish', () => {
    // A finished record: the begin's values in BEGIN_COLS order, then the finish's in FIN_COLS order.
    const v = linkedValues([...BEGIN_COLS.map((c) => `${c}@begin`), ...FIN_COLS.map((c) => `${c}@end`)]);
    expect(v).toHaveLength(LINKED_COLS.length);
    LINKED_COLS.forEach((c, i) => {
      const late = (END_COLS as readonly string[]).includes(c) || ['server', 'upstream_name', 'upstream_era'].includes(c);
      expect(v[i]).toBe(c === 'seq' || c === 'hash' ? null : `${c}@${late ? 'end' : 'begin'}`);
    });
  });
});
