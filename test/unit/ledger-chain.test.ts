import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { LedgerChainError, LedgerReader } from '../../src/ledger/reader.js';
import { parseWitness, rowDigest, type Witness } from '../../src/ledger/chain.js';
import { closeAndRemove, begin, end, tempDir, until } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

const BASE = 1_800_000_000_000;

/** n finished rows, ts BASE + i*1000, finalized in order (seq i+1). */
async function filled(n: number): Promise<Ledger> {
  t = tempDir();
  ledger = Ledger.open({ path: t.db });
  for (let i = 0; i < n; i++) {
    const h = ledger.begin(begin({ ts: BASE + i * 1000, requestId: `r${i}` }));
    await h.finish(end({ latencyMs: i + 0.25 }));
  }
  ledger.sync(); // into SQLite, where the raw SQL below changes rows
  return ledger;
}

function sql(path: string, text: string, ...params: unknown[]): void {
  const db = new Database(path);
  db.prepare(text).run(...params);
  db.close();
}

/** The stored chain links, read on a connection of their own. */
function links(path: string): Witness[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT seq, hash FROM audit WHERE seq IS NOT NULL ORDER BY seq').all() as Witness[];
  } finally {
    db.close();
  }
}

const linkAt = (path: string, seq: number): Witness => links(path).find((w) => w.seq === seq)!;

function idOfSeq(l: Ledger, seq: number): number {
  return l.query({ limit: 1000 }).find((r) => r.seq === seq)!.id;
}

describe('ledger hash chain', () => {
  it('verifies an untouched ledger, including in-flight rows left out of the chain', async () => {
    const l = await filled(20);
    l.begin(begin());
    await l.whenCommitted();
    expect(l.verify()).toEqual({ ok: true, rows: 20, anchorSeq: 0, headSeq: 20, headHash: linkAt(t.db, 20).hash, witnesses: 0, inFlight: { rows: 1, firstId: expect.any(Number), lastId: expect.any(Number) } });
  });

  it('names the row whose outcome was changed by raw SQL', async () => {
    const l = await filled(10);
    const id = idOfSeq(l, 4);
    sql(t.db, `UPDATE audit SET outcome = 'ok' WHERE id = ?`, id); // was ok already: a no-op must pass
    expect(l.verify().ok).toBe(true);
    sql(t.db, `UPDATE audit SET outcome = 'tool_error' WHERE id = ?`, id);
    expect(l.verify()).toEqual({ ok: false, rowId: id, seq: 4, reason: expect.stringMatching(/hash mismatch/) });
  });

  it('detects an error turned into success, with the spec example UPDATE', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    await ledger.record(begin(), end());
    await ledger.record(begin(), end({ outcome: 'rpc_error', errorCode: -32603 }));
    await ledger.record(begin(), end());
    const id = ledger.query({ outcome: 'rpc_error' })[0].id;
    sql(t.db, `UPDATE audit SET outcome='ok' WHERE id=?`, id);
    expect(ledger.verify()).toMatchObject({ ok: false, rowId: id, seq: 2 });
  });

  it('detects a deleted middle row, a deleted last row and a row taken out of the chain', async () => {
    let l = await filled(10);
    sql(t.db, 'DELETE FROM audit WHERE seq = 5');
    expect(l.verify()).toEqual({ ok: false, rowId: idOfSeq(l, 6), seq: 6, reason: expect.stringMatching(/expected seq 5, found 6/) });
    await l.close();
    t.cleanup();

    l = await filled(10);
    sql(t.db, 'DELETE FROM audit WHERE seq = 10');
    expect(l.verify()).toMatchObject({ ok: false, seq: 9, reason: expect.stringMatching(/head is seq 10/) });
    await l.close();
    t.cleanup();

    l = await filled(3);
    const id = idOfSeq(l, 3);
    sql(t.db, `UPDATE chain_state SET head_seq = 2, head_hash = (SELECT hash FROM audit WHERE seq = 2)`);
    sql(t.db, `UPDATE audit SET seq = NULL, hash = NULL WHERE id = ?`, id);
    expect(l.verify()).toMatchObject({ ok: false, rowId: id, seq: null, reason: expect.stringMatching(/not in the chain/) });
  });

  // The head check must not come first: the walk stops short of the head because of the
  // tampered row, and the report named the intact row before it.
  it('names the last row when its seq was made a text or taken out, not the intact row before it', async () => {
    const l = await filled(12);
    const id = idOfSeq(l, 12);
    sql(t.db, `UPDATE audit SET seq = '13x' WHERE seq = 12`);
    expect(l.verify()).toEqual({ ok: false, rowId: id, seq: null, reason: "row has seq '13x', which is no chain position (inserted or edited by hand)" });
    sql(t.db, `UPDATE audit SET seq = NULL WHERE id = ?`, id);
    expect(l.verify()).toEqual({ ok: false, rowId: id, seq: null, reason: 'finalized row is not in the chain (outcome changed?)' });
  });

  // The same mid-chain: the gap the row leaves was reported at the intact row after it, as
  // rows deleted, though none was and the row taken out was there to name.
  it('names a middle row whose seq was taken out or made no chain position, not the next one as a deletion', async () => {
    const l = await filled(10);
    const id = idOfSeq(l, 6);
    for (const [seq, reason] of [
      [null, 'finalized row is not in the chain (outcome changed?)'],
      [9_007_199_254_740_993n, 'row has seq 9007199254740993, which is no chain position (inserted or edited by hand)'],
      ['6x', "row has seq '6x', which is no chain position (inserted or edited by hand)"],
    ] as const) {
      sql(t.db, `UPDATE audit SET seq = ? WHERE id = ?`, seq, id);
      expect(l.verify(), String(seq)).toEqual({ ok: false, rowId: id, seq: null, reason });
    }
    // A row deleted there is still told as one.
    sql(t.db, `DELETE FROM audit WHERE id = ?`, id);
    expect(l.verify()).toEqual({ ok: false, rowId: idOfSeq(l, 7), seq: 7, reason: 'chain broken before this row: expected seq 6, found 7 (rows deleted?)' });
  });

  // The walk reads the seqs a chain position can be; a row inserted by hand with any other
  // (a text, a blob, a number of 2^53 or more: SQLite stores what it is given) must not pass.
  it('detects an inserted finished row whose seq no chain position can be, with a witness too', async () => {
    const l = await filled(5);
    const witness = linkAt(t.db, 5);
    const copy = `INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, server, upstream_name, outcome, latency_ms, idempotency_key, seq, hash)
      SELECT ts, 'forged', principal, client_era, method, hub_name, server, upstream_name, outcome, latency_ms, 'forged-key', ?, 'x' FROM audit WHERE seq = 1`;
    const odd: [unknown, string][] = [
      ['x', "'x'"],
      [9_007_199_254_740_993n, '9007199254740993'],
      [2 ** 53, '9007199254740992'],
      [1e300, '1.0e+300'],
      [Buffer.from('07', 'hex'), "X'07'"],
    ];
    for (const [seq, shown] of odd) {
      sql(t.db, copy, seq);
      const id = l.query({ limit: 1000 }).find((r) => r.requestId === 'forged')!.id;
      const failed = { ok: false, rowId: id, seq: null, reason: `row has seq ${shown}, which is no chain position (inserted or edited by hand)` };
      expect(l.verify(), shown).toEqual(failed);
      expect(l.verify([witness]), shown).toEqual(failed);
      sql(t.db, `DELETE FROM audit WHERE id = ?`, id);
    }
    expect(l.verify([witness])).toMatchObject({ ok: true, rows: 5, witnesses: 1 });
  });

  it('prune drops a prefix, moves the anchor, and verify still passes', async () => {
    const l = await filled(12);
    expect(l.prune(BASE + 5000)).toBe(5);
    expect(l.verify()).toMatchObject({ ok: true, rows: 7, anchorSeq: 5, headSeq: 12 });
    expect(l.query({ limit: 100 }).map((r) => r.seq).sort((a, b) => a! - b!)).toEqual([6, 7, 8, 9, 10, 11, 12]);
    // New rows chain on; a second prune continues from the anchor.
    await l.record(begin({ ts: BASE + 100_000 }), end());
    expect(l.prune(BASE + 8000)).toBe(3);
    expect(l.verify()).toMatchObject({ ok: true, rows: 5, anchorSeq: 8 });
    // Deleting the first row after the anchor is still caught.
    sql(t.db, 'DELETE FROM audit WHERE seq = 9');
    expect(l.verify()).toMatchObject({ ok: false, seq: 10 });
  });

  it('prune keeps old rows finalized after a newer one, and keeps in-flight rows', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const slow = ledger.begin(begin({ ts: BASE })); // starts first, finishes last
    ledger.sync(); // in SQLite while in flight, so it is chained when it finishes
    await ledger.record(begin({ ts: BASE + 1000 }), end());
    await ledger.record(begin({ ts: BASE + 50_000 }), end());
    await slow.finish(end());
    const flying = ledger.begin(begin({ ts: BASE + 10 }));
    await ledger.whenCommitted();
    // Only seq 1 (ts+1000) is a prefix of rows older than the cutoff; seq 3 (ts+0) waits.
    expect(ledger.prune(BASE + 40_000)).toBe(1);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2, anchorSeq: 1 });
    expect(ledger.query({ limit: 10 }).map((r) => r.id)).toContain(flying.rowId);
    expect(ledger.prune(BASE + 100_000)).toBe(2);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 0, anchorSeq: 3, headSeq: 3 });
  });

  it('detects a head whose hash alone was altered, and a row moved to or before the anchor', async () => {
    let l = await filled(4);
    sql(t.db, `UPDATE chain_state SET head_hash = ? WHERE id = 1`, 'f'.repeat(64));
    expect(l.verify()).toMatchObject({ ok: false, seq: 4, reason: expect.stringMatching(/head is seq 4/) });
    await l.close();
    t.cleanup();

    l = await filled(8);
    expect(l.prune(BASE + 3000)).toBe(3);
    const id = idOfSeq(l, 6);
    sql(t.db, 'UPDATE audit SET seq = 3 WHERE id = ?', id);
    expect(l.verify()).toMatchObject({ ok: false, rowId: id, seq: 3, reason: 'row has seq 3 at or before the chain anchor 3' });
  });

  it('refuses to prune past rows taken off the end of the chain', async () => {
    const l = await filled(6);
    sql(t.db, 'DELETE FROM audit WHERE seq >= 5');
    expect(() => l.prune(BASE + 100_000)).toThrowError(/chain ends at seq 4, expected to reach 6/);
    expect(l.query({ limit: 100 })).toHaveLength(4);
  });

  it('refuses to prune rows whose chain does not verify', async () => {
    const l = await filled(6);
    sql(t.db, `UPDATE audit SET principal = 'mallory' WHERE seq = 2`);
    expect(() => l.prune(BASE + 100_000)).toThrowError(LedgerChainError);
    expect(l.query({ limit: 100 })).toHaveLength(6);
  });

  it('prunes in chunks while another connection reads', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    for (let i = 0; i < 12_000; i++) ledger.record(begin({ ts: BASE + i }), end());
    await ledger.whenCommitted();
    await ledger.close();
    const writer = LedgerReader.open({ path: t.db, writable: true });
    expect(writer.prune(BASE + 11_000)).toBe(11_000);
    writer.close();
    const reader = LedgerReader.open({ path: t.db });
    expect(reader.verify()).toMatchObject({ ok: true, rows: 1000, anchorSeq: 11_000 });
    reader.close();
  });
});

/**
 * What someone who can write the file can do: change a row, then recompute every hash after it
 * and the head, as the hub would have. Only a witness kept elsewhere shows it.
 */
function rewriteFrom(path: string, seq: number, change: string): void {
  const db = new Database(path);
  db.transaction(() => {
    db.prepare(change).run();
    let prev = (db.prepare('SELECT hash FROM audit WHERE seq = ?').get(seq - 1) as { hash: string } | undefined)?.hash ?? '0'.repeat(64);
    const rows = db.prepare('SELECT * FROM audit WHERE seq >= ? ORDER BY seq').all(seq) as Record<string, unknown>[];
    for (const row of rows) {
      prev = rowDigest(prev, { ...row, hash: null });
      db.prepare('UPDATE audit SET hash = ? WHERE id = ?').run(prev, row.id);
    }
    db.prepare('UPDATE chain_state SET head_hash = ? WHERE id = 1').run(prev);
  })();
  db.close();
}

function headOf(l: Ledger): Witness {
  const r = l.verify();
  if (!r.ok) throw new Error(r.reason);
  return { seq: r.headSeq, hash: r.headHash };
}

describe('witnesses: heads kept outside the file', () => {
  it('a rewritten chain verifies on its own, and fails against a witness taken before the rewrite', async () => {
    const l = await filled(10);
    const before = headOf(l);
    expect(before.seq).toBe(10);
    const early = linkAt(t.db, 6);
    expect(l.verify([before, early])).toMatchObject({ ok: true, rows: 10, witnesses: 2 });

    rewriteFrom(t.db, 4, `UPDATE audit SET outcome = 'tool_error' WHERE seq = 4`);
    // The limit of an unkeyed chain whose head is in the same file:
    expect(l.verify()).toMatchObject({ ok: true, rows: 10 });
    expect(headOf(l).hash).not.toBe(before.hash);
    // The first witnessed row after the edit names it.
    expect(l.verify([before, early])).toEqual({
      ok: false,
      rowId: idOfSeq(l, 6),
      seq: 6,
      reason: expect.stringMatching(/^the chain was rewritten: the row at seq 6 has hash [0-9a-f]{16}… where the witness holds [0-9a-f]{16}…$/),
    });
    expect(l.verify([before])).toMatchObject({ ok: false, seq: 10, reason: expect.stringMatching(/rewritten/) });
  });

  it('an edit after the newest witness is not its business; rows taken off the end past it are', async () => {
    const l = await filled(10);
    const w = linkAt(t.db, 5);
    rewriteFrom(t.db, 8, `UPDATE audit SET outcome = 'tool_error' WHERE seq = 8`);
    expect(l.verify([w])).toMatchObject({ ok: true, witnesses: 1 });
    // Rows 5..10 deleted and the head set back to row 4: the chain verifies, the witness does not.
    sql(t.db, 'DELETE FROM audit WHERE seq >= 5');
    sql(t.db, `UPDATE chain_state SET head_seq = 4, head_hash = (SELECT hash FROM audit WHERE seq = 4)`);
    expect(l.verify()).toMatchObject({ ok: true, headSeq: 4 });
    expect(l.verify([w])).toEqual({
      ok: false,
      rowId: null,
      seq: 5,
      reason: "the chain ends at seq 4, before the witness's seq 5: rows were removed from its end, or it was rewritten",
    });
  });

  it('after a prune, a witness at the anchor is checked against it and one before it cannot be checked', async () => {
    const l = await filled(12);
    const hashes = links(t.db);
    expect(l.prune(BASE + 5000)).toBe(5);
    expect(l.verify([hashes[4]!])).toMatchObject({ ok: true, anchorSeq: 5, witnesses: 1 }); // seq 5, now the anchor
    expect(l.verify([{ seq: 5, hash: hashes[5]!.hash }])).toMatchObject({ ok: false, rowId: null, seq: 5, reason: expect.stringMatching(/rewritten/) });
    expect(l.verify([hashes[2]!])).toMatchObject({ ok: false, rowId: null, seq: 3, reason: expect.stringMatching(/was pruned: the chain now starts after seq 5/) });
    expect(l.verify([hashes[11]!])).toMatchObject({ ok: true, headSeq: 12 });
  });

  it('a running hub whose chain end is cut by hand (head set back to match) logs it at its next batch, with the witness that shows it', async () => {
    t = tempDir();
    const logged: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(line) });
    const moved = (): { headInFile: string; headWritten: string; msg: string }[] =>
      logged.map((l) => JSON.parse(l) as { headInFile?: string; headWritten: string; msg: string }).flatMap((l) => (l.headInFile === undefined ? [] : [l as { headInFile: string; headWritten: string; msg: string }]));
    const l = Ledger.open({ path: t.db, log });
    ledger = l;
    for (let i = 0; i < 5; i++) await l.record(begin({ ts: BASE + i }), end());
    l.sync();
    await l.record(begin({ ts: BASE + 5 }), end()); // batches go on as usual: nothing said
    l.sync();
    expect(moved()).toEqual([]);
    const written = linkAt(t.db, 6);
    // The last two rows deleted and the head set to the row before them: verify alone passes.
    const raw = new Database(t.db);
    raw.prepare('DELETE FROM audit WHERE seq >= 5').run();
    const four = linkAt(t.db, 4);
    raw.prepare('UPDATE chain_state SET head_seq = ?, head_hash = ? WHERE id = 1').run(four.seq, four.hash);
    raw.close();
    await l.record(begin({ ts: BASE + 6 }), end());
    l.sync();
    const seen = await until(moved, (m) => m.length === 1, 5_000);
    expect(seen[0]).toMatchObject({ headInFile: `4:${four.hash}`, headWritten: `6:${written.hash}` });
    expect(seen[0]!.msg).toContain(`switchyard ledger verify --witness 6:${written.hash}`);
    expect(l.verify()).toMatchObject({ ok: true, headSeq: 5 });
    expect(l.verify([written])).toMatchObject({ ok: false, seq: 6 });
    await l.record(begin({ ts: BASE + 7 }), end()); // once: the hub goes on from the head in the file
    l.sync();
    await new Promise((r) => setTimeout(r, 50));
    expect(moved()).toHaveLength(1);
  });

  it('a start finds the chain cut or grown at its ends by hand and logs it; a whole chain, pruned or not, says nothing', async () => {
    t = tempDir();
    const logged: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(line) });
    const said = (): string[] => logged.map((l) => JSON.parse(l) as { chain?: string }).flatMap((l) => (l.chain === undefined ? [] : [l.chain]));
    const reopen = async (): Promise<void> => {
      await Ledger.open({ path: t.db, log }).close();
    };
    const l = Ledger.open({ path: t.db, log });
    for (let i = 0; i < 6; i++) await l.record(begin({ ts: BASE + i }), end());
    l.prune(BASE + 2); // seq 1, 2 go: the anchor moves
    await l.close();
    await reopen();
    expect(said()).toEqual([]);
    const raw = new Database(t.db);
    raw.prepare('DELETE FROM audit WHERE seq = 6').run(); // the end cut, the head left
    raw.close();
    await reopen();
    expect(said()).toEqual(['no row holds its head, seq 6 (rows deleted from its end?)']);
    expect(logged.find((l) => l.includes('"chain"'))).toContain('changed outside the hub');
    const again = new Database(t.db);
    const five = linkAt(t.db, 5);
    again.prepare('UPDATE chain_state SET head_seq = 5, head_hash = ? WHERE id = 1').run(five.hash); // …and the head set back: only a witness shows that
    again.prepare('DELETE FROM audit WHERE seq = 3').run(); // the start cut, the anchor left
    again.close();
    await reopen();
    expect(said().at(-1)).toBe('no row holds its first seq, 3, after the anchor (rows deleted from its start?)');
  });

  it('the hub logs the head at open, when it moved (every headLogMs) and at close, in the form --witness takes', async () => {
    t = tempDir();
    const logged: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void logged.push(line) });
    const heads = (): string[] =>
      logged.map((l) => JSON.parse(l) as { chainHead?: string }).flatMap((l) => (l.chainHead === undefined ? [] : [l.chainHead]));
    const l = Ledger.open({ path: t.db, log, headLogMs: 20 });
    ledger = l;
    expect(heads()).toEqual([`0:${'0'.repeat(64)}`]);
    for (let i = 0; i < 5; i++) await l.record(begin({ ts: BASE + i }), end());
    l.sync();
    const moved = await until(heads, (h) => h.length === 2, 5_000);
    const w = parseWitness(moved[1]!)!;
    expect(w.seq).toBe(5);
    expect(l.verify([w])).toMatchObject({ ok: true, headSeq: 5, headHash: w.hash, witnesses: 1 });
    await new Promise((r) => setTimeout(r, 100));
    expect(heads()).toHaveLength(2); // not again while it stays
    await l.record(begin({ ts: BASE + 10 }), end());
    await l.close();
    const last = parseWitness(heads().at(-1)!)!;
    expect(last.seq).toBe(6);
    expect(heads()).toHaveLength(3);

    rewriteFrom(t.db, 2, `UPDATE audit SET outcome = 'tool_error' WHERE seq = 2`);
    const reader = LedgerReader.open({ path: t.db });
    expect(reader.verify()).toMatchObject({ ok: true });
    expect(reader.verify([w, last])).toMatchObject({ ok: false, seq: 5, reason: expect.stringMatching(/rewritten/) });
    reader.close();
  });

  it('reads a witness only in the form verify prints', () => {
    const h = 'aB'.repeat(32);
    expect(parseWitness(`12:${h}`)).toEqual({ seq: 12, hash: h.toLowerCase() });
    expect(parseWitness(` 0:${h}\n`)).toEqual({ seq: 0, hash: h.toLowerCase() });
    for (const bad of [`12:${h}0`, `12:${h.slice(1)}`, `-1:${h}`, `01:${h}`, `1.5:${h}`, `x:${h}`, `12 ${h}`, `99999999999999999:${h}`, '']) {
      expect(parseWitness(bad), bad).toBeNull();
    }
  });
});

describe('chain links computed from the written values', () => {
  it('verify agrees with every kind of value a row can hold (fast-check)', async () => {
    const fc = (await import('fast-check')).default;
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true });
    const l = ledger;
    const opt = <T>(a: import('fast-check').Arbitrary<T>) => fc.option(a, { nil: undefined });
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          requestId: fc.oneof(fc.string(), fc.integer().map(String)),
          principal: fc.string(),
          clientAddress: opt(fc.string()),
          clientInfo: opt(fc.record({ name: opt(fc.string()), version: opt(fc.string()) })),
          method: fc.string({ minLength: 1 }),
          hubName: opt(fc.string()),
          server: opt(fc.string()),
          requestBytes: opt(fc.oneof(fc.nat(), fc.double({ noNaN: true }))),
          args: opt(fc.jsonValue()),
        }),
        fc.record({
          outcome: fc.constantFrom('ok', 'tool_error', 'rpc_error', 'timeout', 'cancelled', 'denied', 'unavailable', 'replayed', 'unknown'),
          errorCode: opt(fc.integer({ min: -33000, max: 0 })),
          errorMessage: opt(fc.string()),
          latencyMs: fc.oneof(fc.nat(), fc.double({ min: 0, max: 1e6, noNaN: true })),
          responseBytes: opt(fc.nat()),
          server: opt(fc.string()),
          result: opt(fc.jsonValue()),
        }),
        fc.boolean(),
        async (b, e, oneShot) => {
          const started = begin({ ...b, ts: BASE });
          const ended = { ...e, outcome: e.outcome as never };
          if (oneShot) await l.record(started, ended);
          else await l.begin(started).finish(ended);
        },
      ),
      { numRuns: 150 },
    );
    expect(l.verify()).toMatchObject({ ok: true });
    expect(new LedgerReader(new Database(t.db, { readonly: true })).verify()).toMatchObject({ ok: true, rows: 150 });
  });
});
