import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';
import { closeAndRemove, begin, end, keyed, tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

function second(path: string): Database.Database {
  return new Database(path, { readonly: true });
}
function pendingLines(file: string): unknown[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => keyed(JSON.parse(l)));
}
/** After the end of this turn of the event loop (the pending file's group commit). */
const nextTurn = () => new Promise<void>((r) => setImmediate(r));
async function until<T>(get: () => T, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = get();
    if (ok(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 2));
  }
}
function rowOf(db: Database.Database, id: number): Record<string, unknown> | undefined {
  return db.prepare('SELECT * FROM audit WHERE id = ?').get(id) as Record<string, unknown> | undefined;
}

describe('ledger audit rows and group commit', () => {
  it('a lone surrogate in a text column (sent on purpose, or half an emoji a cut left) is stored as U+FFFD and the chain still verifies', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    // Cut at 4,096 characters for the message: the last emoji is split in two.
    const message = 'x' + '\u{1F600}'.repeat(2100);
    await ledger.record(begin({ requestId: 'id\ud800', hubName: 'tool\udc00name', clientInfo: { name: 'c\ud83d', version: '1' } }), end({ outcome: 'rpc_error', errorCode: -32000, errorMessage: message }));
    await ledger.record(begin({ requestId: 'plain' }), end());
    await ledger.whenCommitted();
    ledger.sync();
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
    const db = new Database(t.db, { readonly: true });
    try {
      const row = db.prepare("SELECT request_id, hub_name, client_name, error_message FROM audit WHERE request_id <> 'plain'").get() as Record<string, string>;
      expect(row).toMatchObject({ request_id: 'id\ufffd', hub_name: 'tool\ufffdname', client_name: 'c\ufffd' });
      expect(row.error_message.isWellFormed()).toBe(true);
      expect(row.error_message.endsWith('\ufffd')).toBe(true);
    } finally {
      db.close();
    }
  });

  it('an in-flight row waits in the hub for its finish: a quick call reaches SQLite finished, a slow one in flight once the hold is over', async () => {
    t = tempDir();
    // A hold long enough that a stalled, loaded machine does not end it before the checks below
    // (300 ms did once in CI: the slow row was in SQLite, rightly, by the time they ran).
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, beginHoldMs: 1500 });
    const other = second(t.db);
    const count = () => (other.prepare('SELECT count(*) AS n FROM audit').get() as { n: number }).n;
    const slow = await ledger.beginCommitted(begin({ requestId: 'slow' }));
    const quick = await ledger.beginCommitted(begin({ requestId: 'quick' }));
    await new Promise((r) => setTimeout(r, 40)); // forty hand-over periods
    expect(count()).toBe(0); // both held: nothing in SQLite yet
    await quick.finish(end());
    expect(await until(() => rowOf(other, quick.rowId)?.outcome, (o) => o === 'ok')).toBe('ok');
    expect(rowOf(other, slow.rowId)).toBeUndefined(); // still held
    const t0 = Date.now();
    expect(await until(() => rowOf(other, slow.rowId)?.outcome, (o) => o === 'in_flight', 5000)).toBe('in_flight');
    expect(Date.now() - t0).toBeLessThan(2500);
    await slow.finish(end({ outcome: 'timeout' }));
    expect(await until(() => rowOf(other, slow.rowId)?.outcome, (o) => o === 'timeout')).toBe('timeout');
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
    other.close();
  });

  it('a reader in the hub sees a held in-flight row at once', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, beginHoldMs: 3_600_000 });
    const h = await ledger.beginCommitted(begin({ requestId: 'held' }));
    expect(ledger.query({})).toEqual([expect.objectContaining({ id: h.rowId, outcome: 'in_flight' })]);
    await h.finish(end());
    expect(ledger.query({})).toEqual([expect.objectContaining({ id: h.rowId, outcome: 'ok', seq: 1 })]);
  });

  it('begin and finish resolve once their line is in the pending file; rows reach SQLite in a batch', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const file = `${t.db}-pending`;
    const other = second(t.db);
    const h = ledger.begin(begin({ requestId: 'r-1' }));
    // The first line of a turn is written at once; the next ones wait for the end of the turn.
    expect(pendingLines(file)).toEqual([{ s: expect.objectContaining({ id: h.rowId, request_id: 'r-1' }) }]);
    const h2 = ledger.begin(begin({ requestId: 'r-2' }));
    expect(pendingLines(file)).toHaveLength(1);
    let linesAtResolve: unknown[] = [];
    await ledger.whenCommitted().then(() => {
      linesAtResolve = pendingLines(file);
    });
    expect(linesAtResolve).toEqual([
      { s: expect.objectContaining({ id: h.rowId, request_id: 'r-1' }) },
      { s: expect.objectContaining({ id: h2.rowId, request_id: 'r-2' }) },
    ]);
    ledger.sync();
    expect(rowOf(other, h.rowId)?.outcome).toBe('in_flight');
    expect(pendingLines(file)).toEqual([]); // everything is in SQLite: the file starts over
    await h2.finish(end());
    ledger.sync();

    await h.finish(end({ outcome: 'tool_error', errorKind: 'tool', latencyMs: 42 })).then(() => {
      linesAtResolve = pendingLines(file);
    });
    expect(linesAtResolve).toEqual([{ s: expect.objectContaining({ id: h.rowId }), e: expect.objectContaining({ outcome: 'tool_error' }) }]);
    // Without sync(): the ingest timer moves it within milliseconds.
    const row = await until(() => rowOf(other, h.rowId), (r) => r?.outcome === 'tool_error');
    expect(row).toMatchObject({ outcome: 'tool_error', error_kind: 'tool', latency_ms: 42, request_id: 'r-1', seq: 2 });
    expect((row as { hash: string }).hash).toMatch(/^[0-9a-f]{64}$/);
    // The file is emptied when the thread's report of the commit reaches this thread.
    expect(await until(() => pendingLines(file), (lines) => lines.length === 0)).toEqual([]);
    other.close();
    await ledger.close();
    ledger = undefined;
    expect(existsSync(file)).toBe(false); // a clean close leaves no pending file
  });

  it('a call begun and finished within one batch becomes one finished row; record writes one in one step', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const other = second(t.db);
    const h = await ledger.beginCommitted(begin());
    await h.finish(end());
    const p = ledger.record(begin({ method: 'tools/list', hubName: undefined }), end({ outcome: 'denied', errorKind: 'policy', errorMessage: 'no' }));
    await p;
    ledger.sync();
    expect(rowOf(other, h.rowId)).toMatchObject({ outcome: 'ok', seq: 1 });
    const rows = other.prepare(`SELECT * FROM audit WHERE outcome = 'denied'`).all() as Record<string, unknown>[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ method: 'tools/list', error_message: 'no', seq: 2 });
    other.close();
  });

  it('concurrent writes share one commit', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    await ledger.whenCommitted(); // the startup purge of expired idempotency keys
    const before = ledger.commitCounters();
    const handles = Array.from({ length: 50 }, () => ledger!.begin(begin()));
    await ledger.whenCommitted();
    await Promise.all(handles.map((h) => h.finish(end())));
    const after = ledger.commitCounters();
    expect(after.writes - before.writes).toBe(100);
    // The begins' turn: the first line at once, the other 49 in one write at the end of the
    // turn. The finishes' turn, with 50 calls in flight: all 50 in one write at its end.
    expect(after.batches - before.batches).toBe(3);
    ledger.sync();
    // Begun and finished before the ingest: 50 finished rows in one transaction, never in flight.
    expect(ledger.query({ limit: 100 }).filter((r) => r.outcome === 'ok')).toHaveLength(50);
    expect(new Set(handles.map((h) => h.rowId)).size).toBe(50);
  });

  it('from 16 calls in flight, even the first line of a turn waits for the end of the turn; below, it is written at once', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, beginHoldMs: 3_600_000, ingestDelayMs: 3_600_000 });
    const file = `${t.db}-pending`;
    await ledger.whenCommitted(); // the startup purge of expired idempotency keys
    const handles = Array.from({ length: 14 }, () => ledger!.begin(begin()));
    await ledger.whenCommitted();
    // The fifteenth call: its begin is the first line of its turn, written at once.
    handles.push(ledger.begin(begin({ requestId: 'fifteenth' })));
    expect(pendingLines(file)).toHaveLength(15);
    await nextTurn(); // a line written at once resolves at once: its turn may not have ended
    // The sixteenth: its begin waits for the end of the turn, and shares its write.
    const before = ledger.commitCounters().batches;
    handles.push(ledger.begin(begin({ requestId: 'sixteenth' })));
    const seventeenth = ledger.begin(begin({ requestId: 'seventeenth' }));
    expect(pendingLines(file)).toHaveLength(15);
    await ledger.whenCommitted();
    expect(pendingLines(file).slice(15)).toEqual([{ s: expect.objectContaining({ request_id: 'sixteenth' }) }, { s: expect.objectContaining({ request_id: 'seventeenth' }) }]);
    expect(ledger.commitCounters().batches - before).toBe(1);
    // Two finished (15 in flight): the first finish of the next turn is written at once.
    await Promise.all([seventeenth.finish(end()), handles[0]!.finish(end())]);
    await nextTurn();
    void handles[1]!.finish(end());
    expect(pendingLines(file)).toHaveLength(20);
    await Promise.all(handles.map((h) => h.finish(end())));
  });

  it('finish keeps late facts, is idempotent, and fails for a closed ledger', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const h = ledger.begin(begin({ server: undefined, upstreamName: undefined, upstreamEra: undefined }));
    const p1 = h.finish(end({ server: 'mem', upstreamName: 'store', upstreamEra: '2026-07-28' }));
    const p2 = h.finish(end({ outcome: 'timeout' }));
    expect(p2).toBe(p1);
    await p1;
    const [row] = ledger.query({});
    expect(row).toMatchObject({ server: 'mem', upstreamName: 'store', upstreamEra: '2026-07-28', outcome: 'ok', clientName: 'test-client', clientVersion: '1.0' });
    const h2 = ledger.begin(begin());
    await ledger.close();
    await expect(h2.finish(end())).rejects.toThrow(/closed/);
    expect(() => ledger!.begin(begin())).toThrow(/closed/);
    ledger = undefined;
  });

  it('every column a call begins and finishes with reaches SQLite in its place, in one step or through an in-flight row', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true, beginHoldMs: 0 });
    const b = (requestId: string) =>
      begin({
        ts: 1_700_000_123_456,
        requestId,
        principal: 'p-principal',
        group: 'p-group',
        clientAddress: 'p-address',
        clientEra: 'p-era',
        clientInfo: { name: 'p-client', version: 'p-version' },
        method: 'p-method',
        hubName: 'p-hub-name',
        server: 'p-server',
        upstreamName: 'p-upstream',
        upstreamEra: 'p-upstream-era',
        idempotencyKey: 'p-key',
        argsHash: 'p-args-hash',
        requestBytes: 111,
        args: { a: 1 },
      });
    const e = end({ outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: -32001, errorMessage: 'p-message', latencyMs: 2.5, responseBytes: 222, result: { r: 2 } });
    const late = { server: 'q-server', upstreamName: 'q-upstream', upstreamEra: 'q-upstream-era' };
    // One step (begin and finish in one hand-over), and in two (the in-flight row in SQLite
    // first, then finished by an UPDATE), each with and without late facts.
    const oneStep = ledger.begin(b('one-step'));
    await oneStep.finish(e);
    const oneLate = ledger.begin(b('one-step-late'));
    await oneLate.finish({ ...e, ...late });
    const twoSteps = await ledger.beginCommitted(b('two-steps'));
    const twoLate = await ledger.beginCommitted(b('two-steps-late'));
    ledger.sync();
    expect(ledger.query({}).filter((r) => r.outcome === 'in_flight').map((r) => r.requestId).sort()).toEqual(['two-steps', 'two-steps-late']);
    await twoSteps.finish(e);
    await twoLate.finish({ ...e, ...late });
    const rows = ledger.query({});
    const facts = (requestId: string) => ({
      ts: 1_700_000_123_456,
      requestId,
      principal: 'p-principal',
      group: 'p-group',
      clientAddress: 'p-address',
      clientEra: 'p-era',
      clientName: 'p-client',
      clientVersion: 'p-version',
      method: 'p-method',
      hubName: 'p-hub-name',
      idempotencyKey: 'p-key',
      argsHash: 'p-args-hash',
      requestBytes: 111,
      argsJson: '{"a":1}',
      outcome: 'rpc_error',
      errorKind: 'jsonrpc',
      errorCode: -32001,
      errorMessage: 'p-message',
      latencyMs: 2.5,
      responseBytes: 222,
      resultJson: '{"r":2}',
    });
    const kept = { server: 'p-server', upstreamName: 'p-upstream', upstreamEra: 'p-upstream-era' };
    for (const id of ['one-step', 'two-steps']) expect(rows.find((r) => r.requestId === id)).toMatchObject({ ...facts(id), ...kept });
    for (const id of ['one-step-late', 'two-steps-late']) expect(rows.find((r) => r.requestId === id)).toMatchObject({ ...facts(id), ...late });
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 4 });
  });

  it('a row that fails to go into SQLite is logged and dropped alone; the rest of its batch goes in', async () => {
    t = tempDir();
    const logged: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void logged.push(line) });
    ledger = Ledger.open({ path: t.db, log });
    const good = ledger.begin(begin());
    ledger.sync();
    // Finishing a row that is no longer in flight (another writer changed it) fails that row only.
    const raw = new Database(t.db);
    raw.prepare(`UPDATE audit SET outcome = 'cancelled' WHERE id = ?`).run(good.rowId);
    raw.close();
    const other = ledger.begin(begin({ requestId: 'other' }));
    await Promise.all([good.finish(end()), other.finish(end())]);
    const rows = ledger.query({});
    expect(rows.find((r) => r.requestId === 'other')?.outcome).toBe('ok');
    expect(rows.find((r) => r.id === good.rowId)?.outcome).toBe('cancelled');
    // Logged by the ingest thread, through this logger: it arrives as a message.
    expect(await until(() => logged.join(''), (text) => /not in flight/.test(text))).toMatch(/not in flight/);
  });

  it('on reopen, rows left in flight become unknown and join the chain', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const a = await ledger.beginCommitted(begin({ requestId: 'dies' }));
    const b = await ledger.beginCommitted(begin({ requestId: 'done' }));
    await b.finish(end());
    await ledger.close();
    const logged: string[] = [];
    ledger = Ledger.open({ path: t.db, log: pino({ level: 'info' }, { write: (line: string) => void logged.push(line) }) });
    const rows = ledger.query({});
    expect(rows.find((r) => r.id === a.rowId)).toMatchObject({ outcome: 'unknown', seq: 2 });
    // The start names the rows it chained so: one inserted by hand as in flight would be among them.
    const said = logged.map((l) => JSON.parse(l) as { msg: string; rows?: number; ids?: number[] }).find((l) => l.msg.includes('now marked unknown'));
    expect(said).toMatchObject({ rows: 1, ids: [a.rowId] });
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
    // New ids continue after the old ones.
    expect(ledger.begin(begin()).rowId).toBeGreaterThan(b.rowId);
  });

  it('a SIGKILLed writer loses no row whose finish() had resolved', async () => {
    const dist = resolve('dist/src/ledger/ledger.js');
    expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
    t = tempDir();
    // A real child process: answered calls print their id after finish() resolves.
    const script = `
      const { Ledger } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const l = Ledger.open({ path: ${JSON.stringify(t.db)} });
      const b = (i) => ({ ts: Date.now(), requestId: String(i), principal: 'p', clientEra: 'e', method: 'tools/call', server: 's' });
      for (let i = 0; ; i++) {
        const h = await l.beginCommitted(b(i));
        const hanging = await l.beginCommitted(b('hang-' + i));
        await h.finish({ outcome: 'ok', latencyMs: 1 });
        process.stdout.write('answered ' + h.rowId + ' hanging ' + hanging.rowId + '\\n');
      }`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const answered: number[] = [];
    const hanging: number[] = [];
    await new Promise<void>((res, rej) => {
      child.on('error', rej);
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        for (const m of chunk.matchAll(/answered (\d+) hanging (\d+)/g)) {
          answered.push(Number(m[1]));
          hanging.push(Number(m[2]));
        }
        if (answered.length >= 200 && !child.killed) {
          child.kill('SIGKILL');
          res();
        }
      });
    });
    await new Promise((r) => child.once('exit', r));
    ledger = Ledger.open({ path: t.db });
    const byId = new Map(ledger.query({ limit: 100_000 }).map((r) => [r.id, r]));
    for (const id of answered) expect(byId.get(id)?.outcome).toBe('ok');
    for (const id of hanging) expect(byId.get(id)?.outcome).toBe('unknown');
    expect(ledger.verify().ok).toBe(true);
  });

  it('query filters, orders and pages', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const base = 1_800_000_000_000;
    for (let i = 0; i < 30; i++) {
      await ledger.record(
        begin({ ts: base + i * 1000, server: i % 2 ? 'a' : 'b', hubName: i % 3 ? 'x' : 'y', principal: i < 10 ? 'p1' : 'p2' }),
        end({ outcome: i % 5 ? 'ok' : 'rpc_error', errorCode: i % 5 ? null : -32602 }),
      );
    }
    const newest = ledger.query({ limit: 3 });
    expect(newest.map((r) => r.ts)).toEqual([base + 29000, base + 28000, base + 27000]);
    expect(ledger.query({ server: 'a', limit: 100 }).every((r) => r.server === 'a')).toBe(true);
    expect(ledger.query({ server: 'a', limit: 100 })).toHaveLength(15);
    expect(ledger.query({ tool: 'y', limit: 100 })).toHaveLength(10);
    expect(ledger.query({ principal: 'p1', limit: 100 })).toHaveLength(10);
    expect(ledger.query({ outcome: 'rpc_error', limit: 100 }).map((r) => r.errorCode)).toEqual(Array(6).fill(-32602));
    const window = ledger.query({ since: base + 5000, until: base + 10_000, limit: 100 });
    expect(window.map((r) => r.ts).sort()).toEqual([5, 6, 7, 8, 9].map((i) => base + i * 1000));
    const page1 = ledger.query({ afterId: 0, limit: 10 });
    const page2 = ledger.query({ afterId: page1.at(-1)!.id, limit: 10 });
    expect(page2[0].id).toBe(page1.at(-1)!.id + 1);
    expect(ledger.query({ afterSeq: 28, limit: 10 }).map((r) => r.seq)).toEqual([29, 30]);
  });

  it('stats: calls, errors and nearest-rank p50/p95 per server and tool', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    for (let i = 1; i <= 20; i++) {
      await ledger.record(begin({ server: 's', hubName: 't' }), end({ latencyMs: i, outcome: i <= 4 ? 'timeout' : i === 5 ? 'replayed' : 'ok' }));
    }
    await ledger.record(begin({ server: 'other', hubName: undefined, method: 'tools/list' }), end({ latencyMs: 3 }));
    ledger.begin(begin({ server: 's', hubName: 't' })); // in flight: not counted
    await ledger.whenCommitted();
    const stats = ledger.stats({});
    expect(stats).toEqual([
      { server: 'other', method: 'tools/list', name: null, calls: 1, errors: 0, errorRate: 0, p50Ms: 3, p95Ms: 3, outcomes: { ok: 1 } },
      { server: 's', method: 'tools/call', name: 't', calls: 20, errors: 4, errorRate: 0.2, p50Ms: 10, p95Ms: 19, outcomes: { timeout: 4, replayed: 1, ok: 15 } },
    ]);
  });

  it("stats' percentiles past 8192 calls of a tool: from a histogram, to 3 significant digits", async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    await ledger.whenCommitted();
    const raw = new Database(t.db);
    const ins = raw.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, server, outcome, latency_ms) VALUES (1, ?, 'p', 'e', 'tools/call', 't', 's', 'ok', ?)`);
    // 10000 calls of 0.1 .. 1000 ms: nearest-rank p50 is 500 ms, p95 950 ms.
    raw.transaction(() => {
      for (let i = 1; i <= 10_000; i++) ins.run(String(i), i / 10);
    })();
    raw.close();
    const [s] = ledger.stats({});
    expect(s).toMatchObject({ server: 's', name: 't', calls: 10_000 });
    expect(Math.abs(s.p50Ms! - 500)).toBeLessThanOrEqual(0.5);
    expect(Math.abs(s.p95Ms! - 950)).toBeLessThanOrEqual(0.95);
  });

  it('stats count calls, not input_required rounds, and a replayed error as an error (as /metrics does)', async () => {
    t = tempDir();
    const l = (ledger = Ledger.open({ path: t.db }));
    const row = (e: Partial<AuditEnd>) => l.record(begin({ server: 's', hubName: 'r' }), end({ latencyMs: 1, ...e }));
    await row({ outcome: 'input_required' });
    await row({ outcome: 'ok' }); // the round's retry, which got the call's answer
    await row({ outcome: 'tool_error', errorKind: 'tool' });
    await row({ outcome: 'replayed', errorKind: 'tool' }); // that error, replayed
    await row({ outcome: 'replayed' });
    await ledger.whenCommitted();
    expect(ledger.stats({})).toEqual([
      { server: 's', method: 'tools/call', name: 'r', calls: 4, errors: 2, errorRate: 0.5, p50Ms: 1, p95Ms: 1, outcomes: { ok: 1, tool_error: 1, replayed_error: 1, replayed: 1 } },
    ]);
  });

  it('stores no bodies unless asked; bad numbers and odd values do not break a row', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    await ledger.record(begin({ args: { a: 1 }, requestBytes: Number.NaN }), end({ result: { ok: true }, latencyMs: Number.POSITIVE_INFINITY }));
    const [row] = ledger.query({});
    expect(row).toMatchObject({ argsJson: null, resultJson: null, requestBytes: null, latencyMs: null, argsHash: null });
    // Values of the wrong type (the types say string) are stored as text, not a failed insert.
    const odd = { requestId: 7, principal: undefined, hubName: { x: 1 }, clientInfo: { name: 'n'.repeat(10_000) } } as unknown as Partial<AuditBegin>;
    await ledger.record(begin(odd), end({ errorMessage: 42 as unknown as string }));
    const [o] = ledger.query({ limit: 1 });
    expect(o).toMatchObject({ requestId: '7', principal: '', hubName: '{"x":1}', errorMessage: '42' });
    expect(o.clientName).toHaveLength(4096);
    expect(ledger.verify().ok).toBe(true);
  });
});
