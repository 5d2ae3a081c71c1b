import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { PendingFiles } from '../../src/ledger/pending-files.js';
import { PendingLog } from '../../src/ledger/pending-log.js';
import { monotonicNow } from '../../src/monotonic.js';
import { BEGIN_COLS, FIN_COLS } from '../../src/ledger/audit-apply.js';
import { closeAndRemove, begin, end, keyed, line, tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

const pendingOf = (db: string) => `${db}-pending`;
/** Each row's request id and outcome, sorted. */
const outcomes = (l: Ledger) => l.query({}).map((r) => [r.requestId, r.outcome]).sort();
const size = (f: string) => (existsSync(f) ? statSync(f).size : 0);

/** A hand-over of batch n as the ledger makes it: the files switch if they may. */
function handedOver(files: PendingFiles, n: number, holds = false): boolean {
  if (files.switchable(holds) === undefined) return false;
  files.switched(n);
  return true;
}

async function waitUntil(ok: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Runs a script in a child process that SIGKILLs itself at the end (no close, no ingest). */
async function diesAfter(db: string, body: string, options = 'ingestDelayMs: 3_600_000'): Promise<string> {
  const dist = resolve('dist/src/ledger/ledger.js');
  expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
  const script = `
    const { Ledger } = await import(${JSON.stringify(pathToFileURL(dist).href)});
    // By default rows stay in the pending file: the ingest would run an hour from now.
    const l = Ledger.open({ path: ${JSON.stringify(db)}, ${options}, backgroundCheckpoint: false });
    const b = (id) => ({ ts: 1, requestId: id, principal: 'p', clientEra: 'e', method: 'tools/call', server: 's' });
    ${body}
    process.kill(process.pid, 'SIGKILL');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  const signal = await new Promise((r) => child.once('exit', (_code, sig) => r(sig)));
  expect(signal).toBe('SIGKILL');
  return out;
}

describe('ledger pending file', () => {
  it('after a write the full disk cut short, the next line starts on a line of its own, and a start reads past the torn one', async () => {
    t = tempDir();
    const file = pendingOf(t.db);
    const dist = resolve('dist/src/ledger/pending-log.js');
    // A child whose files are capped at 1 KiB (as a full disk would be): it appends 300-byte
    // lines until one fails partway, then, once the parent lifts the cap, three more.
    const script = `
      const { PendingLog } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const log = new PendingLog(${JSON.stringify(file)});
      const line = (id) => JSON.stringify({ s: { id, pad: 'x'.repeat(280) } });
      let ok = 0;
      for (let id = 1; ; id++) {
        try { await log.append(line(id)); ok = id; } catch { break; }
      }
      process.stdout.write('FULL ' + ok + '\\n');
      process.stdin.once('data', async () => {
        for (const id of [101, 102, 103]) await log.append(line(id));
        process.stdout.write('DONE\\n');
      });`;
    const child = spawn('bash', ['-c', 'ulimit -S -f 1; exec "$@"', 'child', process.execPath, '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const saw = (what: RegExp) =>
      new Promise<RegExpExecArray>((r, reject) => {
        const check = () => {
          const m = what.exec(out);
          if (m) r(m);
        };
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          check();
        });
        child.once('exit', (code) => reject(new Error(`child exited (${code}): ${out}`)));
        check();
      });
    const full = await saw(/FULL (\d+)\n/);
    const written = Number(full[1]);
    expect(written).toBe(3); // 3 × 300 bytes fit under 1,024; the 4th was cut short
    expect(size(file)).toBe(1024);
    execFileSync('prlimit', ['--pid', String(child.pid), '--fsize=unlimited:']);
    child.stdin.write('go\n');
    await saw(/DONE\n/);
    child.kill('SIGKILL');
    const ids = PendingLog.read(file).map((r) => (r as { s: { id: number } }).s.id);
    expect(ids).toEqual([1, 2, 3, 101, 102, 103]);
  });

  it('rows a SIGKILLed hub left only in the pending file are applied at the next start', async () => {
    t = tempDir();
    await diesAfter(
      t.db,
      `const done = l.begin(b('done')); await l.whenCommitted(); await done.finish({ outcome: 'ok', latencyMs: 3 });
       await l.record(b('denied'), { outcome: 'denied', errorKind: 'policy', latencyMs: 0 });
       await l.beginCommitted(b('hanging'));`,
    );
    expect(size(pendingOf(t.db))).toBeGreaterThan(0); // nothing reached SQLite before the kill
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    const rows = new Map(ledger.query({}).map((r) => [r.requestId, r]));
    expect(rows.get('done')).toMatchObject({ outcome: 'ok', latencyMs: 3 });
    expect(rows.get('denied')).toMatchObject({ outcome: 'denied', errorKind: 'policy' });
    expect(rows.get('hanging')).toMatchObject({ outcome: 'unknown' });
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 3 });
    expect(size(pendingOf(t.db))).toBe(0);
  });

  it('a call in SQLite as in flight whose finish is only in the pending file is finished, not unknown', async () => {
    t = tempDir();
    const out = await diesAfter(
      t.db,
      `const h = l.begin(b('slow')); l.sync(); await h.finish({ outcome: 'tool_error', errorKind: 'tool', latencyMs: 9 });
       process.stdout.write(String(h.rowId));`,
    );
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({})).toEqual([expect.objectContaining({ id: Number(out), outcome: 'tool_error', latencyMs: 9, seq: 1 })]);
    expect(ledger.verify().ok).toBe(true);
  });

  it('lines already in SQLite (a kill between the commit and emptying the file) are not applied twice', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 3_600_000, backgroundCheckpoint: false });
    const a = ledger.begin(begin({ requestId: 'a' }));
    await ledger.whenCommitted();
    await a.finish(end());
    await ledger.record(begin({ requestId: 'b' }), end({ outcome: 'denied' }));
    const flying = await ledger.beginCommitted(begin({ requestId: 'c' }));
    const saved = `${t.dir}/saved-pending`;
    copyFileSync(pendingOf(t.db), saved);
    ledger.sync(); // all three in SQLite, the file emptied
    await flying.finish(end({ outcome: 'timeout' }));
    await ledger.close();
    ledger = undefined;
    // As if the file had not been emptied: every line is in SQLite already.
    copyFileSync(saved, pendingOf(t.db));
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(outcomes(ledger)).toEqual([
      ['a', 'ok'],
      ['b', 'denied'],
      ['c', 'timeout'],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 3 });
  });

  it('a begin held back for its finish is written again to the file that follows, so emptying the first never loses it', async () => {
    t = tempDir();
    const [first, second] = PendingFiles.paths(t.db);
    // Hand-overs every millisecond, begins held for an hour, files switched at every hand-over:
    // 'held' stays in the hub while 'other' goes to SQLite and the file both were written to is
    // emptied.
    const out = await diesAfter(
      t.db,
      `await l.beginCommitted(b('held'));
       await l.record(b('other'), { outcome: 'ok', latencyMs: 1 });
       const fs = await import('node:fs');
       while (fs.statSync(${JSON.stringify(first)}).size > 0) await new Promise((r) => setTimeout(r, 2));
       process.stdout.write(fs.readFileSync(${JSON.stringify(second)}, 'utf8'));`,
      'ingestDelayMs: 1, beginHoldMs: 3_600_000, pendingSwitch: {}',
    );
    expect(size(first)).toBe(0);
    expect(out.split('\n').filter(Boolean).map((l) => keyed(JSON.parse(l)))).toEqual([{ g: 1 }, { s: expect.objectContaining({ request_id: 'held' }) }]);
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(outcomes(ledger)).toEqual([
      ['held', 'unknown'],
      ['other', 'ok'],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
  });

  it('a held begin is in the file that follows before its batch goes: a hub killed as the thread empties the first one keeps it', async () => {
    t = tempDir();
    const [first] = PendingFiles.paths(t.db);
    const files = pathToFileURL(resolve('dist/src/ledger/pending-files.js')).href;
    // The hub is held up where it writes held begins again (a busy core, a preemption): it
    // waits there until the thread has emptied the first file (at most 3 s), then is killed.
    await diesAfter(
      t.db,
      `const { PendingFiles } = await import(${JSON.stringify(files)});
       const fs = await import('node:fs');
       PendingFiles.prototype.rewrite = function () {
         const until = Date.now() + 3000;
         while (fs.statSync(${JSON.stringify(first)}).size > 0 && Date.now() < until) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
         process.kill(process.pid, 'SIGKILL');
       };
       await l.beginCommitted(b('held'));
       await l.record(b('other'), { outcome: 'ok', latencyMs: 1 });
       await new Promise((r) => setTimeout(r, 10_000));`,
      'ingestDelayMs: 1, beginHoldMs: 3_600_000, pendingSwitch: {}',
    );
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(outcomes(ledger)).toEqual([
      ['held', 'unknown'],
      ['other', 'ok'],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
  });

  it('a start that finds a held begin in both files (written again after a switch) applies it once, with its finish', async () => {
    t = tempDir();
    const [first, second] = PendingFiles.paths(t.db);
    const start = (id: number, requestId: string) => ({ id, ts: 1, request_id: requestId, principal: 'p', client_era: 'e', method: 'tools/call', server: 's' });
    const fin = { outcome: 'ok', latency_ms: 7, server: 's' };
    writeFileSync(first, [line(start(1, 'held')), line(start(2, 'other'), fin)].join('\n') + '\n');
    writeFileSync(second, ['{"g":1}', line(start(1, 'held')), line(start(1, 'held'), fin)].join('\n') + '\n');
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => [r.requestId, r.outcome, r.latencyMs]).sort()).toEqual([
      ['held', 'ok', 7],
      ['other', 'ok', 7],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
  });

  it('a held begin the next file refuses (disk full) goes to SQLite at once instead', async () => {
    t = tempDir();
    const [, second] = PendingFiles.paths(t.db);
    symlinkSync('/dev/full', second); // refuses every write with ENOSPC
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, beginHoldMs: 3_600_000, pendingSwitch: {}, backgroundCheckpoint: false });
    const held = await ledger.beginCommitted(begin({ requestId: 'held' }));
    await ledger.record(begin({ requestId: 'other' }), end());
    const reader = new Database(t.db, { readonly: true });
    const outcome = () => (reader.prepare('SELECT outcome FROM audit WHERE id = ?').get(held.rowId) as { outcome: string } | undefined)?.outcome;
    const deadline = Date.now() + 2000;
    while (outcome() === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    expect(outcome()).toBe('in_flight');
    reader.close();
  });

  it('a torn last line (a write cut short) is dropped; the lines before it are applied', async () => {
    t = tempDir();
    await diesAfter(t.db, `await l.record(b('whole'), { outcome: 'ok', latencyMs: 1 });`);
    appendFileSync(pendingOf(t.db), '{"s":{"id":99,"ts":1,"requ');
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => r.requestId)).toEqual(['whole']);
    expect(ledger.verify().ok).toBe(true);
    expect(readFileSync(pendingOf(t.db), 'utf8')).toBe('');
  });
  it('a pending file that cannot be written fails its writers with a JSON-RPC error naming the cause, and emptying it never throws', async () => {
    t = tempDir();
    // /dev/full refuses every write with ENOSPC, like a full disk, and cannot be truncated.
    const path = join(t.dir, 'full-pending');
    symlinkSync('/dev/full', path);
    const log = new PendingLog(path);
    const first = log.append('{"s":1}'); // written at once
    const second = log.append('{"s":2}'); // joins the end-of-turn write
    await expect(first).rejects.toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write \(ENOSPC\)/) });
    await expect(log.whenWritten()).rejects.toMatchObject({ code: -32603 });
    await expect(second).rejects.toMatchObject({ code: -32603, message: expect.stringMatching(/ENOSPC/) });
    expect(log.truncate()).toBe(false);
    expect(log.counters).toEqual({ batches: 0, writes: 0 });
    // When it failed is on the monotonic clock: /healthz shows the failure for 10 s after it
    // (Hub.health). On the wall clock, one stepped an hour ahead hid it at once, and one stepped
    // back showed it (refusing) an hour after the disk had room again.
    const at = log.status.failing?.at;
    expect(at).toBeGreaterThan(monotonicNow() - 60_000);
    expect(at).toBeLessThanOrEqual(monotonicNow());
    log.close(false);
  });

  it('writes in turns: lines after a hand-over go to the other file, which is led by its generation; the first is emptied once its batch is in', async () => {
    t = tempDir();
    const files = new PendingFiles(t.db);
    const [first, second] = PendingFiles.paths(t.db);
    await files.append('{"s":{"id":1}}');
    handedOver(files, 1);
    await files.append('{"s":{"id":2}}');
    handedOver(files, 2); // the first file still waits for batch 1: no turn yet
    await files.append('{"s":{"id":3}}');
    expect(readFileSync(first, 'utf8')).toBe('{"s":{"id":1}}\n');
    expect(readFileSync(second, 'utf8')).toBe('{"g":1}\n{"s":{"id":2}}\n{"s":{"id":3}}\n');
    expect(files.committed(1)).toBe(true);
    expect(size(first)).toBe(0);
    handedOver(files, 3);
    await files.append('{"s":{"id":4}}');
    expect(readFileSync(first, 'utf8')).toBe('{"g":2}\n{"s":{"id":4}}\n');
    // Both hold lines, the first the newer ones: a start reads them oldest first.
    expect(PendingFiles.read(t.db)).toEqual([{ g: 1 }, { s: { id: 2 } }, { s: { id: 3 } }, { g: 2 }, { s: { id: 4 } }]);
    files.close(false);
  });

  it('the ingest thread empties the file a committed batch came from; the hub\'s thread does not truncate', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, backgroundCheckpoint: false });
    const [first, second] = PendingFiles.paths(t.db);
    const truncate = vi.spyOn(PendingLog.prototype, 'truncate');
    try {
      // Rows in several hand-overs, so the files take turns and each is emptied in its turn.
      for (let i = 0; i < 6; i++) {
        await ledger.record(begin({ requestId: `r${i}` }), end());
        await new Promise((r) => setTimeout(r, 15));
      }
      await waitUntil(() => size(first) === 0 && size(second) === 0, 10_000);
      expect(truncate).not.toHaveBeenCalled();
      expect(ledger.commitCounters().batchesUnapplied).toBe(0);
    } finally {
      truncate.mockRestore();
    }
    expect(outcomes(ledger)).toEqual(Array.from({ length: 6 }, (_, i) => [`r${i}`, 'ok']));
  });

  it('rows wait longer for the ingest thread while several calls are in flight (bigger batches), not while one is', async () => {
    t = tempDir();
    // Delays far apart, so that a loaded machine's stall (a few hundred ms, seen in CI) cannot
    // make one look like the other.
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 5, ingestDelayBusyMs: 1500, beginHoldMs: 3_600_000, backgroundCheckpoint: false });
    // Another process's view: a reader of the file, which sees a row only once the thread committed it.
    const reader = new Database(t.db, { readonly: true });
    const inSqlite = (id: string) => (reader.prepare('SELECT count(*) AS n FROM audit WHERE request_id = ?').get(id) as { n: number }).n > 0;
    try {
      // The thread's start (loading SQLite in it; a second and more under load) is no delay of a row's.
      await ledger.record(begin({ requestId: 'first' }), end());
      await waitUntil(() => inSqlite('first'), 10_000);
      // One call: its row is handed over after 5 ms.
      const t0 = Date.now();
      await ledger.record(begin({ requestId: 'alone' }), end());
      await waitUntil(() => inSqlite('alone'), 3000);
      expect(Date.now() - t0).toBeLessThan(1000);
      // Four calls in flight: a finished row waits for the busy delay.
      const calls = [1, 2, 3, 4].map((i) => ledger!.begin(begin({ requestId: `busy${i}` })));
      await ledger.whenCommitted();
      await new Promise((r) => setTimeout(r, 50)); // the timer the begins set has passed
      await ledger.record(begin({ requestId: 'among' }), end());
      await new Promise((r) => setTimeout(r, 250));
      expect(inSqlite('among')).toBe(false);
      await waitUntil(() => inSqlite('among'), 5000);
      await Promise.all(calls.map((h) => h.finish(end())));
    } finally {
      reader.close();
    }
  });

  it('a quiet hub whose last hand-over could not switch files still has both emptied once all is committed', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, backgroundCheckpoint: false });
    const [first, second] = PendingFiles.paths(t.db);
    // SQLite held by another connection: the thread's first commit waits, so the second
    // hand-over finds the first file not yet emptied and cannot switch.
    const blocker = new Database(t.db);
    blocker.exec('BEGIN IMMEDIATE');
    await ledger.record(begin({ requestId: 'a' }), end());
    await new Promise((r) => setTimeout(r, 20));
    await ledger.record(begin({ requestId: 'b' }), end());
    await new Promise((r) => setTimeout(r, 20));
    expect(size(first)).toBeGreaterThan(0);
    expect(size(second)).toBeGreaterThan(0);
    blocker.exec('COMMIT');
    blocker.close();
    await waitUntil(() => size(first) === 0 && size(second) === 0, 10_000);
    expect(outcomes(ledger)).toEqual([
      ['a', 'ok'],
      ['b', 'ok'],
    ]);
  });

  it('a file the thread cannot empty by its path (renamed away) the hub empties through its own descriptor', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, backgroundCheckpoint: false });
    const [first] = PendingFiles.paths(t.db);
    const moved = `${first}.moved`;
    await ledger.record(begin({ requestId: 'a' }), end());
    // The hub writes through its descriptor, so the row is in the renamed file until emptied.
    renameSync(first, moved);
    expect(size(moved)).toBeGreaterThan(0);
    await waitUntil(() => size(moved) === 0, 10_000);
    expect(outcomes(ledger)).toEqual([['a', 'ok']]);
  });

  it('a hand-over that holds begins back switches files only once the file is big or old enough; one that holds none, whenever it can', async () => {
    t = tempDir();
    const files = new PendingFiles(t.db, { switchBytes: 200, switchAfterMs: 80 });
    const [first, second] = PendingFiles.paths(t.db);
    await files.append('{"s":{"id":1}}');
    expect(handedOver(files, 1, true)).toBe(false); // 15 bytes, just written
    await files.append(JSON.stringify({ s: { id: 2, pad: 'x'.repeat(200) } }));
    expect(handedOver(files, 2, true)).toBe(true); // big enough
    expect(files.committed(2)).toBe(true);
    expect(size(first)).toBe(0);
    await files.append('{"s":{"id":3}}');
    expect(handedOver(files, 3, true)).toBe(false);
    await new Promise((r) => setTimeout(r, 100));
    expect(handedOver(files, 3, true)).toBe(true); // old enough
    expect(files.committed(3)).toBe(true);
    expect(size(second)).toBe(0);
    await files.append('{"s":{"id":4}}');
    expect(handedOver(files, 4, false)).toBe(true); // nothing held: at once
    files.close(false);
  });

  it('while begins are held and the file is small and young, hand-overs go on in the same file and write nothing again', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 1, beginHoldMs: 3_600_000, pendingSwitch: { switchBytes: 1 << 20, switchAfterMs: 3_600_000 }, backgroundCheckpoint: false });
    const [first, second] = PendingFiles.paths(t.db);
    const held = await ledger.beginCommitted(begin({ requestId: 'held' }));
    for (let i = 0; i < 3; i++) {
      await ledger.record(begin({ requestId: `r${i}` }), end());
      await waitUntil(() => ledger!.commitCounters().batchesUnapplied === 0, 10_000);
    }
    expect(size(second)).toBe(0);
    const lines = readFileSync(first, 'utf8').split('\n').filter(Boolean);
    expect(lines.filter((l) => l.includes('"held"'))).toHaveLength(1); // written once
    await held.finish(end());
    expect(outcomes(ledger)).toEqual([['held', 'ok'], ['r0', 'ok'], ['r1', 'ok'], ['r2', 'ok']]);
  });

  it('a start that finds rows in both pending files applies the older file first', async () => {
    t = tempDir();
    const [first, second] = PendingFiles.paths(t.db);
    const row = (id: number, requestId: string) =>
      line({ id, ts: 1, request_id: requestId, principal: 'p', client_era: 'e', method: 'tools/call', server: 's' }, { outcome: 'ok', latency_ms: 1, server: 's' });
    // The second file was begun first (generation 1), then writing turned back to the first.
    writeFileSync(second, `{"g":1}\n${row(1, 'older')}\n`);
    writeFileSync(first, `{"g":2}\n${row(2, 'newer')}\n`);
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => [r.requestId, r.seq]).sort()).toEqual([
      ['newer', 2],
      ['older', 1],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 2 });
    expect([size(first), size(second)]).toEqual([0, 0]);
  });

  it('lines are positional (the values of a begin, then of its finish); keyed lines an older hub left behind are applied alike', async () => {
    t = tempDir();
    const [first, second] = PendingFiles.paths(t.db);
    // Files of a hub before the positional format: the columns by name, begin `s`, finish `e`.
    const s = (id: number, requestId: string) => ({ id, ts: 1, request_id: requestId, principal: 'p', client_era: 'e', method: 'tools/call', server: 's', args_hash: 'h' });
    // A finish that leaves a late fact out keeps the begin's (upstream_name here). Lines of JSON
    // that are no row (null, a number, an array of another length) are skipped.
    writeFileSync(
      second,
      ['{"g":1}', JSON.stringify({ s: { ...s(1, 'old-done'), upstream_name: 'u' } }), 'null', '42', '[7,1]', JSON.stringify({ s: s(2, 'old-open') }), JSON.stringify({ s: { ...s(1, 'old-done'), upstream_name: 'u' }, e: { outcome: 'ok', latency_ms: 3, server: 't' } })].join('\n') + '\n',
    );
    writeFileSync(first, `{"g":2}\n${line(s(3, 'new-done'), { outcome: 'tool_error', latency_ms: 4, server: 's' })}\n`);
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => [r.requestId, r.outcome, r.latencyMs, r.server, r.upstreamName, r.argsHash]).sort()).toEqual([
      ['new-done', 'tool_error', 4, 's', null, 'h'],
      ['old-done', 'ok', 3, 't', 'u', 'h'],
      ['old-open', 'unknown', null, 's', null, 'h'],
    ]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 3 });

    // What this hub writes: a begin is an array of BEGIN_COLS' values; a finished row goes on with FIN_COLS'.
    const h = await ledger.beginCommitted(begin({ requestId: 'now' }));
    await h.finish(end({ outcome: 'timeout' }));
    const written = readFileSync(pendingOf(t.db), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as unknown);
    expect(written.map((r) => (Array.isArray(r) ? r.length : r))).toEqual([BEGIN_COLS.length, BEGIN_COLS.length + FIN_COLS.length]);
    expect(written.map(keyed)).toEqual([
      { s: expect.objectContaining({ id: h.rowId, request_id: 'now', server: 'fs' }) },
      { s: expect.objectContaining({ id: h.rowId, request_id: 'now' }), e: expect.objectContaining({ outcome: 'timeout', server: 'fs', upstream_name: 'read' }) },
    ]);
  });
  it('lines written before tool_group or the trace columns (shorter by those) are applied without them; this hub writes the group a call came through', async () => {
    t = tempDir();
    // A hub before migration 0013 wrote a begin's values without tool_group and the trace
    // columns (the last of them), one before 0015 without the trace columns.
    const older = (upTo: string) => (s: Record<string, unknown>, e?: Record<string, unknown>): string => {
      const v = JSON.parse(line(s, e)) as unknown[];
      return JSON.stringify([...v.slice(0, BEGIN_COLS.indexOf(upTo as never)), ...v.slice(BEGIN_COLS.length)]);
    };
    const before = older('tool_group');
    const beforeTrace = older('trace_id');
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const s = (id: number, requestId: string) => ({ id, ts: 1, request_id: requestId, principal: 'p', client_era: 'e', method: 'tools/call', server: 's' });
    const lines = [
      before(s(1, 'old-done')),
      before(s(1, 'old-done'), { outcome: 'ok', latency_ms: 3, server: 's' }),
      before(s(2, 'old-open')),
      beforeTrace({ ...s(4, 'group-done'), tool_group: 'small' }, { outcome: 'ok', latency_ms: 5, server: 's' }),
      line({ ...s(3, 'new-done'), tool_group: 'small', trace_id: trace, span_id: '00f067aa0ba902b7' }, { outcome: 'ok', latency_ms: 4, server: 's' }),
    ];
    const [GROUP, TRACE] = [BEGIN_COLS.indexOf('tool_group'), BEGIN_COLS.indexOf('trace_id')];
    expect(lines.map((l) => (JSON.parse(l) as unknown[]).length)).toEqual([GROUP, GROUP + FIN_COLS.length, GROUP, TRACE + FIN_COLS.length, BEGIN_COLS.length + FIN_COLS.length]);
    writeFileSync(pendingOf(t.db), lines.join('\n') + '\n');
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => [r.requestId, r.outcome, r.latencyMs, r.group, r.traceId, r.spanId]).sort()).toEqual([
      ['group-done', 'ok', 5, 'small', null, null],
      ['new-done', 'ok', 4, 'small', trace, '00f067aa0ba902b7'],
      ['old-done', 'ok', 3, null, null, null],
      ['old-open', 'unknown', null, null, null, null],
    ]);
    expect(ledger.query({ traceId: trace }).map((r) => r.requestId)).toEqual(['new-done']);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 4 });
    // The group rides the in-flight row and its finish, through the ingest thread.
    const h = await ledger.beginCommitted(begin({ requestId: 'live', group: 'small' }));
    expect(ledger.query({ requestId: 'live' }).map((r) => [r.outcome, r.group])).toEqual([['in_flight', 'small']]);
    await h.finish(end());
    await ledger.record(begin({ requestId: 'live-all' }), end());
    expect(ledger.query({ group: 'small' }).map((r) => [r.requestId, r.outcome]).sort()).toEqual([
      ['group-done', 'ok'],
      ['live', 'ok'],
      ['new-done', 'ok'],
    ]);
    expect(ledger.query({ requestId: 'live-all' }).map((r) => r.group)).toEqual([null]);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 6 });
  });
});
