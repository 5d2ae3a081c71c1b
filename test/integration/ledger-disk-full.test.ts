/**
 * The disk fills up under a running hub. A soft `ulimit -f` caps every file the hub writes
 * (its ledger files and its stderr, redirected to a file), so writes fail with EFBIG as they
 * would with ENOSPC, without root; `prlimit` lifts the cap again while the hub runs. Calls
 * must be refused with an error that names the ledger, promptly; the hub must keep answering
 * (neither a crash nor a hang when its log cannot be written), serve again once there is room,
 * and stop on SIGTERM; a refused call's idempotency key is free for its retry; and in the end
 * every answered call has its row, and a refused one says it was refused.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, ROOT } from '../helpers/hub-process.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { metricValue, scrape } from '../helpers/prometheus.js';
import { fixture, health, inFlight, legacySession, modernCall, outcomes, SDK1, sleep, textOf, waitForReady } from './ledger-helpers.js';
import { freePortInRange } from '../helpers/port-range.js';

/** The cap, in KiB: above a fresh ledger's WAL (~57 KiB), reached after a few hundred calls. */
const FILE_CAP_KIB = 160;

/** The hub last started, killed after the tests whatever they did. */
let lastHub: ChildProcess | undefined;
afterAll(() => {
  lastHub?.kill('SIGKILL');
});

function exited(p: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (p.exitCode !== null || p.signalCode !== null ? resolve(p.exitCode) : p.once('exit', (code) => resolve(code))));
}

/**
 * A hub over one SDK v1 server in a fresh folder, its stderr appended to `hub.log` there;
 * `prepare(log)` readies that file and gives the shell's words before `exec` (a `ulimit`).
 */
async function startHubIn(prefix: string, prepare: (log: string) => string): Promise<{ dir: string; db: string; url: string; proc: ChildProcess }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const db = join(dir, 'data', 'ledger.db');
  // Outside the ephemeral range (TEST_PORTS): no listen(0) or outgoing connection elsewhere on
  // the machine takes it between this look and the hub's listen.
  const port = await freePortInRange();
  const configFile = join(dir, 'hub.config.json');
  writeFileSync(configFile, JSON.stringify({ listen: { host: '127.0.0.1', port }, ledger: { path: db }, servers: { f: fixture(SDK1, dir) } }));
  const log = join(dir, 'hub.log');
  const before = prepare(log);
  const child = spawn('bash', ['-c', `${before}exec "$@" 2>>"${log}"`, 'hub', process.execPath, BIN, 'start', '--config', configFile], { cwd: ROOT, stdio: 'ignore' });
  lastHub = child;
  const url = `http://127.0.0.1:${port}/mcp`;
  const deadline = Date.now() + 15_000;
  while (!(await health(url).catch(() => undefined)) && Date.now() < deadline) await sleep(50);
  await waitForReady(url, ['f']);
  return { dir, db, url, proc: child };
}

describe('a full disk under a running hub', () => {
  it('refuses calls naming the ledger, keeps serving, serves again once there is room, and loses no answered call', async () => {
    // stderr goes to a capped file that is nearly full already: the start-up lines fill it.
    const { dir, db, url, proc } = await startHubIn('switchyard-disk-full-', (log) => {
      writeFileSync(log, `${'-'.repeat(FILE_CAP_KIB * 1024 - 512 - 1)}\n`);
      return `ulimit -S -f ${FILE_CAP_KIB}; `;
    });
    const log = join(dir, 'hub.log');

    const answered: string[] = [];
    let refusal: { code?: number; message?: string } | undefined;
    for (let i = 0; i < 5000 && !refusal; i++) {
      const id = `c${i}`;
      // A hub that hangs fails here at once rather than at the test's timeout.
      const a = await modernCall(url, id, 'tools/call', { name: 'f__echo', arguments: { text: `${id} ${'x'.repeat(100)}` } }, { signal: AbortSignal.timeout(5_000) });
      if (a.body?.result) answered.push(id);
      else refusal = a.body?.error as typeof refusal;
    }
    expect(answered.length).toBeGreaterThan(20);
    expect(refusal).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write \(EFBIG\)/) });

    // Still answering promptly, and alive. Refused while the pending file is full; once the
    // ledger's thread has moved a batch into SQLite and emptied that file (if the database
    // itself still had room), a call may fit again: either is right, a hang is not.
    for (let i = 0; i < 5; i++) {
      const t0 = Date.now();
      const a = await modernCall(url, `after${i}`, 'tools/call', { name: 'f__echo', arguments: { text: 'late' } });
      if (a.body?.result) answered.push(`after${i}`);
      else expect(a.body?.error, JSON.stringify(a.body)).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write/) });
      expect(Date.now() - t0).toBeLessThan(5_000);
    }
    expect((await health(url)).servers).toMatchObject([{ id: 'f', state: 'ready' }]);
    expect(statSync(log).size).toBe(FILE_CAP_KIB * 1024); // its log is full as well
    const keyed = { name: 'f__echo', arguments: { text: 'keyed' } };
    const key = { headers: { 'idempotency-key': 'while-full' } };
    const first = await modernCall(url, 'keyed-1', 'tools/call', keyed, key);
    // Refused, as a rule; answered only if the file had room again (see above).
    const keyRefused = first.body?.result === undefined;
    if (keyRefused) expect(first.body?.error).toMatchObject({ code: -32603 });
    else answered.push('keyed-1');

    // Room again: the hub serves without a restart, and the refused key is free for its retry.
    execFileSync('prlimit', ['--pid', String(proc.pid), '--fsize=unlimited:']);
    let back = false;
    for (let i = 0; i < 100 && !back; i++) {
      const id = `back${i}`;
      const a = await modernCall(url, id, 'tools/call', { name: 'f__echo', arguments: { text: id } });
      if (a.body?.result) {
        answered.push(id);
        back = true;
      } else await sleep(100);
    }
    expect(back).toBe(true);
    // Were the key still claimed by the refused call, this retry would wait for it (an
    // answered one is replayed).
    const retried = await modernCall(url, 'keyed-2', 'tools/call', keyed, { ...key, signal: AbortSignal.timeout(5_000) }).catch((err: Error) => ({ body: { result: undefined, error: err.message } }));
    expect(retried.body?.result, JSON.stringify(retried.body)).toBeDefined();
    if (keyRefused) answered.push('keyed-2'); // else a replay, whose row is `replayed`

    proc.kill('SIGTERM');
    const code = await Promise.race([exited(proc), sleep(10_000).then(() => 'hung' as const)]);
    expect(code).toBe(0);

    // With room again (the next start applies what the pending file holds): every answered
    // call has its finished row, and the chain verifies.
    const ledger = Ledger.open({ path: db, backgroundCheckpoint: false });
    try {
      const ok = new Set(ledger.query({ outcome: 'ok', limit: 100_000 }).map((row) => row.requestId));
      expect(answered.filter((id) => !ok.has(id))).toEqual([]);
      expect(ledger.query({ outcome: 'in_flight', limit: 10 })).toEqual([]);
      const refused = ledger.query({ limit: 100_000 }).find((row) => row.requestId === 'keyed-1');
      // Its refusal is its row's end when that end found room; when it did not (the disk was
      // still full), the row begun for it was left in flight and the start made it `unknown`.
      if (keyRefused && refused?.outcome !== 'unknown') expect(refused).toMatchObject({ outcome: 'rpc_error', errorCode: -32603, errorMessage: expect.stringMatching(/audit ledger cannot write/) });
      if (keyRefused) expect(refused, 'the refused call has its row').toBeDefined();
      expect(ledger.verify()).toMatchObject({ ok: true });
    } finally {
      await ledger.close();
    }
  }, 90_000);

  it('answers a call that ran before the disk filled, keeps answering lists, initialize and ping while it is full, and stops on SIGTERM promptly while it is full again, leaving no pending file that holds only a torn write', async () => {
    const { db, url, proc } = await startHubIn('switchyard-disk-full-ran-', () => '');

    // The call is forwarded (its row committed), then every file the hub writes is full.
    const running = modernCall(url, 'ran-1', 'tools/call', { name: 'f__slow', arguments: { ms: 1500 } });
    // A read in flight, answered or failing: each told its own outcome, not that it never ran.
    const reading = modernCall(url, 'read-1', 'resources/read', { uri: 'sdk1://item/slow-1500' });
    const failing = modernCall(url, 'read-2', 'resources/read', { uri: 'sdk1://item/fail-1500' });
    // ...and one that times out once the disk is full: told its own outcome too, not that it never ran.
    const timing = modernCall(url, 'ran-2', 'tools/call', { name: 'f__slow', arguments: { ms: 3000 } }, { meta: { 'dev.switchyard/timeoutMs': 1200 } });
    // The disk fills once all four are forwarded (their rows committed): a fixed wait was too
    // short on a loaded machine, and a call not yet begun is rightly refused.
    await expect.poll(() => inFlight(db, ['ran-1', 'read-1', 'read-2', 'ran-2']), { timeout: 10_000, interval: 20 }).toBe(4);
    execFileSync('prlimit', ['--pid', String(proc.pid), '--fsize=1:']);
    const ran = await running;
    expect(ran.body?.error, JSON.stringify(ran.body)).toBeUndefined();
    expect(textOf(ran.body?.result)).toBe('slept 1500');
    const timedOut = await timing;
    expect(timedOut.body?.error, JSON.stringify(timedOut.body)).toBeUndefined();
    expect(timedOut.body?.result?.isError).toBe(true);
    expect(textOf(timedOut.body?.result)).toMatch(/f__slow failed: .*(did not finish|timed out)/);

    const read = await reading;
    expect(read.body?.result?.contents, JSON.stringify(read.body)).toEqual([expect.objectContaining({ text: 'item slow-1500' })]);
    const failed = await failing;
    expect(failed.body?.error?.message, JSON.stringify(failed.body)).toMatch(/item fail-1500 failed late/);
    // Everything but calls keeps working: a list, a legacy session's initialize and ping.
    const listed = await modernCall(url, 'list-full', 'tools/list');
    expect(listed.status).toBe(200);
    expect((listed.body?.result?.tools as unknown[] | undefined)?.length).toBeGreaterThan(0);
    const session = await legacySession(url);
    const pong = await session.call('ping-full', 'ping');
    expect(pong.body).toMatchObject({ id: 'ping-full', result: {} });
    // A new call is refused before it runs.
    const refused = await modernCall(url, 'refused-1', 'tools/call', { name: 'f__echo', arguments: { text: 'no room' } });
    expect(refused.body?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write .*does not run calls it cannot record/) });
    // So is a read or a prompt, forwarded as calls are (Router.forward): its row first, or not sent.
    const unread = await modernCall(url, 'refused-read', 'resources/read', { uri: 'sdk1://static/hello' });
    expect(unread.body?.result, JSON.stringify(unread.body)).toBeUndefined();
    expect(unread.body?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write/) });
    const unasked = await modernCall(url, 'refused-prompt', 'prompts/get', { name: 'f__greet', arguments: { name: 'full' } });
    expect(unasked.body?.result, JSON.stringify(unasked.body)).toBeUndefined();
    expect(unasked.body?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write/) });
    // A load balancer or a monitor sees it: it answered 200 "ok" while every call was refused.
    const refusing = await fetch(new URL('/healthz', url));
    expect(refusing.status).toBe(503);
    expect(await refusing.json()).toMatchObject({ status: 'refusing', reason: expect.stringMatching(/audit ledger cannot write/) });
    expect(metricValue(await scrape(url), 'switchyard_ledger_write_failures_total')).toBeGreaterThan(0);

    execFileSync('prlimit', ['--pid', String(proc.pid), '--fsize=unlimited:']);
    // The next write that succeeds makes it "ok" again.
    let n = 0;
    await expect.poll(async () => (await modernCall(url, `room-${n++}`, 'tools/call', { name: 'f__echo', arguments: { text: 'room' } })).body?.result !== undefined, { timeout: 10_000, interval: 100 }).toBe(true);
    expect((await fetch(new URL('/healthz', url))).status).toBe(200);
    // The refused read and prompt end their rows as refused, as the refused call does (its line
    // kept for the ledger's thread while the files had no room): not left in flight, `unknown`
    // only after the next start.
    const refusedRows = ['refused-1', 'refused-read', 'refused-prompt'];
    await expect.poll(() => outcomes(db, refusedRows), { timeout: 10_000, interval: 50 }).toEqual(Object.fromEntries(refusedRows.map((id) => [id, 'rpc_error -32603'])));

    // Stopped while every write failed, the hub waited the ledger's full 10 s for SQLite (retried
    // each second, refused each time) and left the pending file holding the 1 byte of a torn
    // write. (This hub, once all it wrote is in SQLite, is as one started afresh: a hub start
    // fewer than a case of its own.)
    await expect.poll(() => pendingBytes(dirname(db)), { timeout: 10_000, interval: 20 }).toBe(0);
    execFileSync('prlimit', ['--pid', String(proc.pid), '--fsize=1:']);
    const full = await modernCall(url, 'full-1', 'tools/call', { name: 'f__echo', arguments: { text: 'no room' } });
    expect(full.body?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write/) });
    const t0 = Date.now();
    proc.kill('SIGTERM');
    expect(await Promise.race([exited(proc), sleep(15_000).then(() => 'hung' as const)])).toBe(0);
    expect(Date.now() - t0).toBeLessThan(7_000);
    expect(readdirSync(dirname(db)).filter((f) => f.includes('-pending'))).toEqual([]);

    const ledger = Ledger.open({ path: db, backgroundCheckpoint: false });
    try {
      // Its row: finished if the line made it, else left in flight and unknown after this start.
      const row = ledger.query({ limit: 100_000 }).find((r) => r.requestId === 'ran-1');
      expect(['ok', 'unknown']).toContain(row?.outcome);
      expect(ledger.verify()).toMatchObject({ ok: true });
    } finally {
      await ledger.close();
    }
  }, 90_000);
});

/** The bytes the ledger's pending files hold (none once all is in SQLite and they are emptied). */
function pendingBytes(dataDir: string): number {
  return readdirSync(dataDir)
    .filter((f) => f.includes('-pending'))
    .reduce((sum, f) => {
      try {
        return sum + statSync(join(dataDir, f)).size;
      } catch {
        return sum; // removed meanwhile
      }
    }, 0);
}
