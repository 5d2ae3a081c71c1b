/**
 * The applier (the ledger's ingest thread's SQLite side) against a real database: new finished
 * rows go in several to an INSERT; a row of such a run that SQLite does not take is found,
 * logged and left out alone, as when every row had a statement of its own.
 */
import type { Database } from 'better-sqlite3';
import fc from 'fast-check';
import { pino } from 'pino';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AuditApplier, BEGIN_COLS, FIN_COLS, parseLine } from '../../src/ledger/audit-apply.js';
import { verifyChain } from '../../src/ledger/chain.js';
import { openLedgerDb } from '../../src/ledger/db.js';
import { joinChunks, splitChunks } from '../../src/ledger/batch-lines.js';
import { tempDir } from './ledger-helpers.js';
import { applyFinishedAsBefore } from '../helpers/audit-runs-reference.js';

let db: Database | undefined;
let t: ReturnType<typeof tempDir> | undefined;
afterEach(() => {
  db?.close();
  t?.cleanup();
  db = t = undefined;
});

/** A finished record as the hub writes it: the begin's values, then the finish's. */
function finished(id: number, outcome = 'ok'): unknown[] {
  const begin: Record<string, unknown> = {
    id,
    ts: 1_700_000_000_000 + id,
    request_id: `r${id}`,
    principal: 'alice',
    client_era: '2026-07-28',
    method: 'tools/call',
    hub_name: 'fs__read',
    server: 'fs',
    upstream_name: 'read',
    upstream_era: '2025-11-25',
    request_bytes: 100 + id,
  };
  const fin: Record<string, unknown> = { outcome, latency_ms: id / 8, response_bytes: 200 + id, server: 'fs', upstream_name: 'read', upstream_era: '2025-11-25' };
  return [...BEGIN_COLS.map((c) => begin[c] ?? null), ...FIN_COLS.map((c) => fin[c] ?? null)];
}

function open(): { applier: AuditApplier; logged: string[] } {
  t = tempDir();
  db = openLedgerDb({ path: t.db });
  const logged: string[] = [];
  return { applier: new AuditApplier(db, pino({ level: 'error' }, { write: (line: string) => void logged.push(line) })), logged };
}

const rows = (): { id: number; seq: number; request_bytes: number; response_bytes: number }[] =>
  db!.prepare('SELECT id, seq, request_bytes, response_bytes FROM audit ORDER BY id').all() as never;

describe('the applier, finished rows in runs', () => {
  it('puts a batch of finished rows (longer than one run) in, each with its own values, chained in order', () => {
    const { applier, logged } = open();
    const ids = Array.from({ length: 37 }, (_, i) => i + 1);
    applier.take(ids.map((id) => finished(id)));
    expect(applier.flush()).toBe(true);
    expect(rows()).toEqual(ids.map((id) => ({ id, seq: id, request_bytes: 100 + id, response_bytes: 200 + id })));
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 37, headSeq: 37 });
    expect(logged).toEqual([]);
    expect(applier.runInserts).toBe(3); // 16 + 16 + 5, not a statement per row
  });

  it('stores every column of a row as a statement of its own would, with the same chain', () => {
    const { applier } = open();
    // Every column distinct and set where the record allows (late facts differ from the begin's).
    const full = (id: number): unknown[] => [...BEGIN_COLS.map((c, i) => (c === 'id' ? id : c === 'ts' || c === 'request_bytes' ? id * 10 + i : `${c}-${id}`)), ...FIN_COLS.map((c, i) => (c === 'latency_ms' || c === 'response_bytes' || c === 'error_code' ? id + i / 4 : c === 'outcome' ? 'tool_error' : `${c}-fin-${id}`))];
    const records = Array.from({ length: 20 }, (_, i) => full(i + 1));
    applier.take(records);
    expect(applier.flush()).toBe(true);
    expect(applier.runInserts).toBe(2);
    const other = tempDir();
    const alone = openLedgerDb({ path: other.db });
    try {
      const one = new AuditApplier(alone, pino({ level: 'silent' }));
      one.take(records);
      expect(one.flush(true)).toBe(true); // replay: a statement per row
      expect(one.runInserts).toBe(0);
      const all = (d: Database) => d.prepare('SELECT * FROM audit ORDER BY id').all();
      expect(all(db!)).toEqual(all(alone));
      expect(db!.prepare('SELECT * FROM chain_state').get()).toEqual(alone.prepare('SELECT * FROM chain_state').get());
    } finally {
      alone.close();
      other.cleanup();
    }
  });

  it('runs break around a begin without its finish and around a finish of a row already in SQLite', () => {
    const { applier } = open();
    applier.take([finished(1), finished(2), finished(3).slice(0, BEGIN_COLS.length), finished(4), finished(5)]);
    expect(applier.flush()).toBe(true);
    applier.take([finished(6), finished(3), finished(7), finished(8)]);
    expect(applier.flush()).toBe(true);
    const all = db!.prepare('SELECT id, seq, outcome FROM audit ORDER BY id').all();
    expect(all).toEqual([
      { id: 1, seq: 1, outcome: 'ok' },
      { id: 2, seq: 2, outcome: 'ok' },
      { id: 3, seq: 6, outcome: 'ok' },
      { id: 4, seq: 3, outcome: 'ok' },
      { id: 5, seq: 4, outcome: 'ok' },
      { id: 6, seq: 5, outcome: 'ok' },
      { id: 7, seq: 7, outcome: 'ok' },
      { id: 8, seq: 8, outcome: 'ok' },
    ]);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 8 });
    expect(applier.runInserts).toBe(3); // [1, 2], [4, 5], [7, 8]
  });

  it('a row of a run that SQLite does not take is logged and left out alone; the rest of the run goes in, the chain unbroken', () => {
    const { applier, logged } = open();
    // Another writer put row 3 in first: the run's INSERT leaves it out.
    db!.prepare(`INSERT INTO audit (id, ts, request_id, principal, client_era, method, outcome) VALUES (3, 1, 'other', 'bob', '2026-07-28', 'tools/call', 'ok')`).run();
    applier.take([1, 2, 3, 4, 5].map((id) => finished(id)));
    expect(applier.flush()).toBe(true);
    expect(rows()).toEqual([
      { id: 1, seq: 1, request_bytes: 101, response_bytes: 201 },
      { id: 2, seq: 2, request_bytes: 102, response_bytes: 202 },
      { id: 3, seq: null, request_bytes: null, response_bytes: null },
      { id: 4, seq: 3, request_bytes: 104, response_bytes: 204 },
      { id: 5, seq: 4, request_bytes: 105, response_bytes: 205 },
    ]);
    expect(logged.join('')).toMatch(/audit row 3 is not in flight/);
    expect(logged).toHaveLength(1);
    // Row 3 as the other writer left it is finished and unchained; the chain itself holds.
    expect(db!.prepare('SELECT head_seq FROM chain_state').get()).toEqual({ head_seq: 4 });
    expect(verifyChain(db!, 4)).toMatchObject({ ok: true, rows: 4 });
  });

  it('a finish taken with its line chains the row its begin put in flight from that line', () => {
    const { applier, logged } = open();
    const r = finished(1);
    applier.take([r.slice(0, BEGIN_COLS.length)]);
    expect(applier.flush()).toBe(true);
    applier.take([JSON.parse(JSON.stringify(r)) as unknown[], finished(2)], [JSON.stringify(r), JSON.stringify(finished(2))]);
    expect(applier.flush()).toBe(true);
    expect(applier.lineDigests).toBe(2);
    expect(logged).toEqual([]);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 2, headSeq: 2 });
  });

  it('binds a column the rows of a run share once, not once a row', () => {
    const { applier } = open();
    applier.take(Array.from({ length: 16 }, (_, i) => finished(i + 1)));
    expect(applier.flush()).toBe(true);
    expect(applier.runInserts).toBe(1);
    // Per row: id, ts, request_id, request_bytes, latency_ms, response_bytes, seq, hash; the
    // other 22 columns (the same principal, server, … and nulls in every row) once.
    expect(applier.runParams).toBe(22 + 16 * 8);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 16 });
  });
});

describe('runs with shared columns write what the runs before them wrote', () => {
  /** Every column of every row as SQLite holds it (its value quoted, and its type). */
  const stored = (d: Database): unknown[] => {
    const cols = (d.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('audit') as string[]).map((c) => `quote(${c}) || ' ' || typeof(${c})`);
    return d.prepare(`SELECT ${cols.join(', ')} FROM audit ORDER BY id`).raw().all();
  };
  const state = (d: Database): unknown => [d.prepare('SELECT * FROM chain_state').get(), d.prepare('SELECT * FROM sqlite_sequence').all()];

  /** `batches` through the applier and through the path before (test/helpers/audit-runs-reference.ts): the same rows, ids and chain. */
  function sameAsBefore(batches: unknown[][][], withLines = false): AuditApplier {
    const dirs = [tempDir(), tempDir()];
    const [now, before] = dirs.map((d) => openLedgerDb({ path: d.db }));
    try {
      const logged: string[] = [];
      const applier = new AuditApplier(now!, pino({ level: 'error' }, { write: (line: string) => void logged.push(line) }));
      for (const b of batches) {
        // With lines, as the ingest thread takes them: the line JSON.stringify wrote, and its record parsed back.
        if (withLines) applier.take(b.map((r) => JSON.parse(JSON.stringify(r)) as unknown[]), b.map((r) => JSON.stringify(r)));
        else applier.take(b.map((r) => [...r]));
        expect(applier.flush()).toBe(true);
        applyFinishedAsBefore(before!, withLines ? b.map((r) => JSON.parse(JSON.stringify(r)) as unknown[]) : b);
      }
      expect(logged).toEqual([]);
      expect(stored(now!)).toEqual(stored(before!));
      expect(state(now!)).toEqual(state(before!));
      expect(verifyChain(now!)).toMatchObject({ ok: true, rows: batches.flat().length });
      return applier;
    } finally {
      now!.close();
      before!.close();
      for (const d of dirs) d.cleanup();
    }
  }

  const NOT_NULL = new Set(['request_id', 'principal', 'client_era', 'method', 'outcome']);
  const NUMBERS = new Set(['request_bytes', 'error_code', 'latency_ms', 'response_bytes']);
  // Few values a column, so that the rows of a run often share some and differ in others.
  const plainText = fc.constantFrom('a', 'b', '', '\u{1F600}x', 'tools/call');
  // With the one text that has an escape: a line holding it takes the values' digest, not its own.
  const text = fc.constantFrom('a', 'b', '', 'é "q"\n\\', '\u{1F600}x', 'tools/call');
  const number = fc.constantFrom(0, -0, 1, 2.5, 0.1 + 0.2, -3, 1e21, 2 ** 53 - 1);
  const recordOf = (t: fc.Arbitrary<string>) => {
    const value = (c: string) => (NUMBERS.has(c) ? fc.option(number) : NOT_NULL.has(c) ? t : fc.option(t));
    return fc.tuple(fc.constantFrom(1_700_000_000_000, 1_796_629_622_467, 0), fc.tuple(...BEGIN_COLS.slice(2).map(value)), fc.tuple(...FIN_COLS.map(value)));
  };
  // With some twenty text columns a row, one with no escape anywhere is rare (a run of twenty
  // could draw none: CI saw it once); half the rows are drawn without it, so both digests are met.
  const record = fc.oneof(recordOf(text), recordOf(plainText));

  it('for any records (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.array(record, { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 3 }), (batches) => {
        let id = 0;
        const applier = sameAsBefore(batches.map((b) => b.map(([ts, begin, fin]) => [++id, ts, ...begin, ...fin])));
        return applier.runInserts >= batches.filter((b) => b.length > 1).length;
      }),
      { numRuns: 20 },
    );
  });

  it("taken with their lines, as the ingest thread takes them, the rows' digests are built from the lines (property)", () => {
    let fromLines = 0;
    let rows = 0;
    fc.assert(
      fc.property(fc.array(fc.array(record, { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 3 }), (batches) => {
        let id = 0;
        rows += batches.flat().length;
        fromLines += sameAsBefore(batches.map((b) => b.map(([ts, begin, fin]) => [++id, ts, ...begin, ...fin])), true).lineDigests;
      }),
      { numRuns: 20 },
    );
    // Lines with an escape (the text 'é "q"\n\\') take the values' digest; the others their line's.
    expect(fromLines).toBeGreaterThan(0);
    expect(fromLines).toBeLessThan(rows);
    const plain = Array.from({ length: 20 }, (_, i) => finished(i + 1));
    expect(sameAsBefore([plain.slice(0, 1), plain.slice(1)], true).lineDigests).toBe(20);
  });

  it('for more kinds of run than the applier keeps statements for', () => {
    // Batch i: two rows that share the text columns of i's bits and differ in the others.
    const shareable = ['principal', 'client_address', 'client_name', 'client_version', 'hub_name', 'idempotency_key', 'tool_group'] as const;
    let id = 0;
    const batches = Array.from({ length: 100 }, (_, i) =>
      [0, 1].map((k) => {
        const r = finished(++id);
        shareable.forEach((c, bit) => (r[BEGIN_COLS.indexOf(c)] = i & (1 << bit) ? `shared-${i}` : `${c}-${id}`));
        r[BEGIN_COLS.length + FIN_COLS.indexOf('server')] = k === 0 ? 'fs' : 'git';
        return r;
      }),
    );
    const applier = sameAsBefore(batches);
    expect(applier.runInserts).toBe(100);
  });
});

describe('a pending line read as the ingest thread reads it (parseLine)', () => {
  it('gives what JSON.parse gives, for any line JSON.stringify writes (property)', () => {
    const scalar = fc.oneof(
      { weight: 6, arbitrary: fc.constant(null) },
      { weight: 6, arbitrary: fc.string().filter((t) => !/["\\]/.test(t)) },
      { weight: 6, arbitrary: fc.double() },
      { weight: 3, arbitrary: fc.integer() },
      // Whole numbers of up to 16 digits (ids, ms timestamps): the digit-by-digit reading and its edges.
      { weight: 3, arbitrary: fc.oneof(fc.maxSafeNat(), fc.integer({ min: 0, max: 10 ** 15 - 1 }), fc.integer({ min: 10 ** 14, max: 10 ** 16 })) },
      { weight: 3, arbitrary: fc.constantFrom('', ',', ']', 'null', 'nul', 'nulL', '1', '\u{1F600}', 'é', -0, 0, 10, 1e21, 5e-324, -1.5e-7, 2 ** 53 + 2, 999999999999999, 1e15, 1e16) },
      fc.string({ unit: 'binary' }),
      fc.constantFrom('a"b', 'c\\d', 'e\nf', '\ud800', true, false, { a: 1 }, [1, 'x'], Number.NaN),
    );
    fc.assert(
      fc.property(fc.array(scalar, { maxLength: 40 }), (values) => {
        const line = JSON.stringify(values);
        const got = parseLine(line) as unknown[];
        const want = JSON.parse(line) as unknown[];
        expect(got).toEqual(want);
        // -0 as -0 (toEqual takes it for 0), and each value of JSON.parse's type.
        got.forEach((v, i) => typeof v !== 'object' && expect(Object.is(v, want[i])).toBe(true));
      }),
      { numRuns: 3000 },
    );
    // Lines that are no array of such values: JSON.parse's reading.
    for (const line of ['{"g":3}', '{"s":{"id":1},"e":{"outcome":"ok"}}', '[1,[2]]', '[]', '[true]', '"x"', '7', 'null'])
      expect(parseLine(line)).toEqual(JSON.parse(line));
    expect(() => parseLine('[1,')).toThrow(SyntaxError);
  });

  it('reads an audit row\'s line by slicing it, not by JSON.parse', () => {
    const line = JSON.stringify(finished(7));
    const parse = vi.spyOn(JSON, 'parse');
    try {
      expect(parseLine(line)).toEqual(finished(7));
      expect(parse).not.toHaveBeenCalled();
      parseLine('["a\\"b"]');
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
  });
});

describe('a queue committed a few entries a transaction (flush with a most)', () => {
  it('commits only the first entries; a begin committed in flight takes its finish, taken later, as an UPDATE, one still queued in place; every row ends once, chained', () => {
    const { applier, logged } = open();
    const begin = (id: number) => finished(id).slice(0, BEGIN_COLS.length);
    applier.take([begin(1), finished(7), begin(2), finished(8), begin(3), finished(9), begin(4), finished(10), begin(5), begin(6)]);
    expect(applier.flush(false, 4)).toBe(true);
    expect([applier.queued, applier.flushed]).toEqual([6, 4]);
    const stored = () => db!.prepare('SELECT id, seq, outcome FROM audit ORDER BY id').all();
    expect(stored()).toEqual([
      { id: 1, seq: null, outcome: 'in_flight' },
      { id: 2, seq: null, outcome: 'in_flight' },
      { id: 7, seq: 1, outcome: 'ok' },
      { id: 8, seq: 2, outcome: 'ok' },
    ]);
    // The finishes of 1 and 2 (in SQLite) are entries of their own; those of 3–6 (queued) complete their begins.
    applier.take([1, 2, 3, 4, 5, 6].map((id) => finished(id)));
    expect(applier.queued).toBe(8);
    while (applier.queued > 0) expect(applier.flush(false, 3)).toBe(true);
    expect(applier.flushed).toBe(12);
    expect(stored()).toEqual([
      { id: 1, seq: 9, outcome: 'ok' },
      { id: 2, seq: 10, outcome: 'ok' },
      { id: 3, seq: 3, outcome: 'ok' },
      { id: 4, seq: 5, outcome: 'ok' },
      { id: 5, seq: 7, outcome: 'ok' },
      { id: 6, seq: 8, outcome: 'ok' },
      { id: 7, seq: 1, outcome: 'ok' },
      { id: 8, seq: 2, outcome: 'ok' },
      { id: 9, seq: 4, outcome: 'ok' },
      { id: 10, seq: 6, outcome: 'ok' },
    ]);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 10 });
    expect(logged).toEqual([]);
  });

  it('a chunk SQLite refuses stays queued, in order, and goes in at the next try', () => {
    const { applier } = open();
    applier.take([1, 2, 3, 4, 5].map((id) => finished(id)));
    const other = openLedgerDb({ path: t!.db });
    other.pragma('busy_timeout = 0');
    other.prepare('BEGIN IMMEDIATE').run();
    db!.pragma('busy_timeout = 0');
    try {
      expect(applier.flush(false, 2)).toBe(false);
      expect([applier.queued, applier.flushed]).toEqual([5, 0]);
    } finally {
      other.prepare('ROLLBACK').run();
      other.close();
    }
    while (applier.queued > 0) expect(applier.flush(false, 2)).toBe(true);
    expect(rows().map((r) => [r.id, r.seq])).toEqual([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]]);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: 5 });
  });
});

describe('a queue SQLite refuses', () => {
  it('holds each row once: the values of the hub\'s lines, not the lines (and the hand-over chunks) they were sliced from as well; taken again, they go in chained', () => {
    const { applier } = open();
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = () => {
      for (let i = 0; i < 3; i++) gc();
      return process.memoryUsage().heapUsed;
    };
    const N = 20_000;
    // Hand-overs of 200 hub lines (100 calls begun and finished in them, 100 begun), each its own
    // strings, as the thread receives them; let go as the thread lets them go once taken.
    const handOver = (from: number) => {
      const lines: string[] = [];
      for (let id = from; id < from + 200; id++) lines.push(JSON.stringify(id % 2 === 0 ? finished(id) : finished(id).slice(0, BEGIN_COLS.length)));
      return joinChunks(lines).map((c) => ` ${c}`.slice(1));
    };
    const other = openLedgerDb({ path: t!.db });
    other.pragma('busy_timeout = 0');
    other.prepare('BEGIN IMMEDIATE').run();
    db!.pragma('busy_timeout = 0');
    let perRow: number;
    try {
      const before = heap();
      for (let from = 1; from <= N / 2; from += 200) applier.takeLines(splitChunks(handOver(from)));
      expect(applier.flush()).toBe(false); // refused whole
      // Taken while it refuses: held the same way from the start.
      for (let from = N / 2 + 1; from <= N; from += 200) applier.takeLines(splitChunks(handOver(from)));
      expect(applier.flush(false, 4096)).toBe(false);
      perRow = (heap() - before) / N;
      expect(applier.queued).toBe(N);
      expect(applier.linesHeld).toBe(0);
    } finally {
      other.prepare('ROLLBACK').run();
      other.close();
    }
    // 1,007 bytes a row with the lines kept (a ~250-byte line here), 427 without (the entry, its
    // array of values, the map of begins included).
    expect(perRow, `${Math.round(perRow)} bytes of heap a queued row`).toBeLessThan(650);
    while (applier.queued > 0) expect(applier.flush(false, 4096)).toBe(true);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: N / 2 }); // the finished rows; the begins are in flight
    expect(applier.lineDigests).toBe(0); // their digests from their values, as for a pending file's rows
    // SQLite takes rows again: the next hand-over's lines are kept for their digests, as usual.
    applier.takeLines(splitChunks(handOver(N + 2)));
    expect(applier.linesHeld).toBe(200);
    expect(applier.flush()).toBe(true);
    expect(applier.lineDigests).toBe(100);
    expect(verifyChain(db!)).toMatchObject({ ok: true, rows: N / 2 + 100 });
  });
});
