import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex } from '../../src/ledger/canonical.js';
import { BEGIN_COLS, END_COLS, FIN_COLS, LINKED_COLS, LineDigest, linkedDigest, linkedValues } from '../../src/ledger/audit-apply.js';
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

  it("a finished row's digest built from its line (the ingest thread's) equals linkedDigest's, for any line JSON.stringify writes", () => {
    const seqAt = LINKED_COLS.indexOf('seq');
    const n = BEGIN_COLS.length + FIN_COLS.length;
    // Text that needs escapes (quotes, backslashes, control characters, lone surrogates), text
    // beyond the BMP, and numbers whose JSON is not their plain digits.
    const scalar = fc.oneof(
      { weight: 8, arbitrary: fc.constant(null) },
      { weight: 8, arbitrary: fc.string().filter((s) => !/["\\]/.test(s)) },
      { weight: 8, arbitrary: fc.double() },
      { weight: 4, arbitrary: fc.integer() },
      { weight: 4, arbitrary: fc.constantFrom('', '\u{1F600}', 'é', 'x,y]', '[null]', -0, 1e21, 5e-324, 0.1 + 0.2, -1.5e-7, Number.NaN, Infinity) },
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.constantFrom('a"b', 'c\\d', 'e\nf', '\ud800'),
    );
    const record = fc.array(scalar, { minLength: n, maxLength: n });
    const line = new LineDigest();
    let fromLines = 0;
    fc.assert(
      fc.property(record, fc.integer({ min: 1, max: 2 ** 40 }), fc.string(), (written, seq, prev) => {
        // As the ingest thread has it: the line the hub wrote, and its record parsed back.
        const text = JSON.stringify(written);
        const r = JSON.parse(text) as unknown[];
        const values = linkedValues(r);
        values[seqAt] = seq;
        const before = line.taken;
        expect(line.of(r, text).digest(prev, values)).toBe(linkedDigest.digest(prev, values));
        if (line.taken > before) fromLines++;
        // Rows side by side, as a run holds them.
        const two = [...linkedValues(r), ...values];
        expect(line.of(r, text).digest(prev, two, LINKED_COLS.length)).toBe(linkedDigest.digest(prev, two, LINKED_COLS.length));
      }),
      { numRuns: 2000 },
    );
    // Lines without an escape were built from the line, the others took linkedDigest.
    expect(fromLines).toBeGreaterThan(100);
    // An audit row's line, typical of a hub's, is taken from its line; one not in JSON.stringify's compact form is not.
    const row = [...BEGIN_COLS.map((c, i) => (c === 'id' || c === 'ts' ? i + 1 : `${c}-v`)), ...FIN_COLS.map((c) => (c === 'latency_ms' ? 0.25 : c))];
    const values = linkedValues(row);
    values[seqAt] = 9;
    const taken = line.taken;
    expect(line.of(row, JSON.stringify(row)).digest('p', values)).toBe(linkedDigest.digest('p', values));
    expect(line.taken).toBe(taken + 1);
    expect(line.of(row, JSON.stringify(row, null, 1)).digest('p', values)).toBe(linkedDigest.digest('p', values));
    expect(line.taken).toBe(taken + 1);
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
