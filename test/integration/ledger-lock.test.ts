/**
 * The ledger's writer lock (src/cli/ledger-lock.ts) between real processes: contenders are
 * node processes running the built lockLedger (test/fixtures/ledger/lock-contender.mjs),
 * released at one instant.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerBusyError, LedgerTakeoverStuckError, ledgerWriter, lockLedger } from '../../src/cli/ledger-lock.js';
import type { HubConfig } from '../../src/config/types.js';
import { runCli } from '../helpers/cli.js';
import { LineClient } from '../helpers/line-client.js';
import { spawnContender, type Contender } from '../helpers/lock-contender.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { processStart } from '../../src/process-alive.js';

const CONTENDER = join(ROOT, 'test/fixtures/ledger/lock-contender.mjs');
/** A PID namespace of its own, with its own /proc, as a container has (root only). */
const canUnshare = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

let running: Contender[] = [];
afterEach(async () => {
  await Promise.all(running.map((c) => c.end()));
  running = [];
});

/** `stall`: where the contender stalls (lock-contender.mjs: `jitter <ms>`, `die-in-takeover`). */
function contender(ledgerPath: string, index: number, stall: string[] = []): Contender {
  const c = spawnContender(CONTENDER, [ledgerPath, String(index), ...stall]);
  running.push(c);
  return c;
}

/** One contender per path given, each ready. */
async function contenders(paths: string[], stall: string[] = []): Promise<Contender[]> {
  const all = paths.map((p, i) => contender(p, i, stall));
  for (const c of all) expect(await c.next()).toBe('ready');
  return all;
}

/** One round: all ask for the lock, the i-th i × stepUs µs after the first; what each said. */
function contend(all: Contender[], stepUs = 0): Promise<string[]> {
  const at = Date.now() + 15;
  for (const c of all) c.go(at, stepUs);
  return Promise.all(all.map((c) => c.next()));
}

/** A pid no process has: one that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '']).pid!;
}

/** The lock a hub killed with SIGKILL leaves behind: its (dead) pid, written a while ago. */
function staleLock(file: string, pid: number): void {
  writeFileSync(file, JSON.stringify({ pid, command: 'switchyard start' }));
  const old = new Date(Date.now() - 10_000);
  utimesSync(file, old, old);
}

/** A fresh folder, by its real path: the lock file is beside the ledger's real path. */
const tempDir = (): string => realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-lock-')));

describe('ledger writer lock', () => {
  // Hubs started together after a crash all find the dead hub's lock. Only creating the lock
  // may decide who holds it: a process that judged it stale and then removed it could remove
  // the lock another had just taken in its place (the old code: two to four holders in most
  // rounds of four fresh processes; with these, two holders in 7 to 21 rounds of 200).
  it('a live holder is waited for waitMs on the monotonic clock: a wall clock stepped back an hour does not keep a starting hub waiting that hour', async () => {
    const db = join(tempDir(), 'ledger.db');
    const [holder] = await contenders([db]);
    expect(await contend([holder!])).toEqual(['locked']);
    // Only Date: the waits between looks are real timers.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const waiting = lockLedger({ ledger: { enabled: true, path: db } } as HubConfig, 'switchyard start', 300);
      vi.setSystemTime(Date.now() - 3_600_000);
      const t0 = performance.now();
      // 20 s: far from the hour, and from the 300 ms it waits, as a starved machine may need (3 s could run out).
      const said = await Promise.race([waiting.then(() => 'locked', (e: unknown) => e), new Promise((r) => setTimeout(() => r('still waiting'), 20_000))]);
      // Before, on the wall clock, it waited for the hour back to pass.
      expect(said).toBeInstanceOf(LedgerBusyError);
      expect(performance.now() - t0).toBeLessThan(20_000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a stale lock is taken over by exactly one of the processes starting together, every round', async () => {
    const db = join(tempDir(), 'ledger.db');
    const all = await contenders(Array(4).fill(db));
    const dead = deadPid();
    const holders: number[] = [];
    for (let round = 0; round < 200; round++) {
      staleLock(`${db}.lock`, dead); // last round's holder "died": the lock names a dead process
      const said = await contend(all, round % 50);
      const won = said.filter((s) => s === 'locked').length;
      holders.push(won);
      // The others are refused naming the winner (live), not the dead process.
      if (won === 1) expect(new Set(said.filter((s) => s !== 'locked'))).toEqual(new Set([`busy ${all[said.indexOf('locked')]!.pid}`]));
    }
    const rounds = holders.map((n, i) => [i, n]).filter(([, n]) => n !== 1);
    expect(rounds, 'rounds ([round, holders]) without exactly one holder').toEqual([]);
    await Promise.all(all.map((c) => c.end()));
    expect(existsSync(`${db}.lock`)).toBe(false); // the last winner let it go as it exited
  }, 120_000);

  // The takeover step (judging a dead hub's lock and removing it) is one process's at a time,
  // under an OS lock: one killed in it leaves nothing behind that blocks the others. Those that
  // wait for no live holder (waitMs 0) wait for the step a while (TAKEOVER_STEP_MS: its process
  // may be descheduled in it), then are refused, naming the process in it.
  it('a process in the takeover step keeps the others out until it is killed there, and then exactly one of them takes the lock', async () => {
    const db = join(tempDir(), 'ledger.db');
    staleLock(`${db}.lock`, deadPid());
    const [dying] = await contenders([db], ['die-in-takeover']);
    dying!.go(Date.now(), 0);
    expect(await dying!.next()).toBe('in takeover'); // it judged the lock stale and stopped before removing it
    const all = await contenders(Array(4).fill(db));
    const said = contend(all);
    // Nobody is refused at once: the step is waited for.
    expect(await Promise.race([said, new Promise((r) => setTimeout(() => r('nothing said'), 500))])).toBe('nothing said');
    expect(await said).toEqual(Array(4).fill(`busy ${dying!.pid}`));
    await dying!.kill();
    const after = await contend(all);
    expect(after.filter((s) => s === 'locked')).toHaveLength(1);
    expect(new Set(after.filter((s) => s !== 'locked'))).toEqual(new Set([`busy ${all[after.indexOf('locked')]!.pid}`]));
    // The file it locks stays, empty and owner-only as every file beside the ledger, with no -journal.
    expect([statSync(`${db}.takeover`).size, statSync(`${db}.takeover`).mode & 0o777, existsSync(`${db}.takeover-journal`)]).toEqual([0, 0o600, false]);
  }, 20_000);

  // A process stopped in the takeover step (SIGSTOP: a step of a few syscalls is long only so)
  // kept a hub starting on the ledger waiting until it was resumed or killed, whatever its wait
  // (stdio's --ledger-wait-ms): it is refused once its wait has run out, naming that process.
  it('a process stopped in the takeover step is waited for waitMs, then the hub starting is refused, naming it', async () => {
    const db = join(tempDir(), 'ledger.db');
    staleLock(`${db}.lock`, deadPid());
    const [dying] = await contenders([db], ['die-in-takeover']);
    dying!.go(Date.now(), 0);
    expect(await dying!.next()).toBe('in takeover');
    const t0 = performance.now();
    const waiting = lockLedger({ ledger: { enabled: true, path: db } } as HubConfig, 'switchyard stdio', 1_500);
    // 20 s: far from the 1.5 s it waits, as a starved machine may need. Before, it waited for good.
    const said = await Promise.race([waiting.then(() => 'locked', (e: unknown) => e), new Promise((r) => setTimeout(() => r('still waiting'), 20_000))]);
    expect(said).toBeInstanceOf(LedgerTakeoverStuckError);
    const err = said as LedgerTakeoverStuckError;
    expect(err.holder.pid).toBe(dying!.pid);
    expect(err.message).toContain(`the ledger ${db} is being taken over from a switchyard process that has gone by another switchyard process (pid ${dying!.pid})`);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1_500);
    expect(existsSync(`${db}.lock`)).toBe(true); // the dead hub's, still: nothing was taken
  }, 30_000);

  // The takeover step was guarded by a file, and one left by a process that died in the step was
  // removed by its path: two contenders that had both judged it dead removed it in turn, the
  // second removing the fresh one a third had just made in its place, and two judged (and
  // removed) the lock at once: two holders (CI: two of four). Each contender here may stall up to
  // 20 ms before each removal, as a descheduled process does: before, 13 rounds of 40 had two.
  it('contenders stalled between judging a file and removing it, over a takeover file a process left as it died, leave exactly one holder every round', async () => {
    const db = join(tempDir(), 'ledger.db');
    const all = await contenders(Array(4).fill(db), ['jitter', '20']);
    const dead = deadPid();
    const holders: number[] = [];
    for (let round = 0; round < 40; round++) {
      staleLock(`${db}.lock`, dead);
      // As builds before the takeover lock (takeoverLock) left it; this one leaves nothing.
      staleLock(`${db}.lock.takeover`, dead);
      const said = await contend(all, round % 20);
      const won = said.filter((s) => s === 'locked').length;
      holders.push(won);
      if (won === 1) expect(new Set(said.filter((s) => s !== 'locked'))).toEqual(new Set([`busy ${all[said.indexOf('locked')]!.pid}`]));
    }
    const rounds = holders.map((n, i) => [i, n]).filter(([, n]) => n !== 1);
    expect(rounds, 'rounds ([round, holders]) without exactly one holder').toEqual([]);
  }, 120_000);

  // A symlink named as ledger.path writes the file it points to: the lock is that file's.
  it("a ledger.path that is a symlink to another config's ledger file meets that ledger's lock", async () => {
    const a = join(tempDir(), 'ledger.db');
    const b = join(tempDir(), 'ledger.db');
    writeFileSync(a, ''); // the ledger of hub A, already there
    symlinkSync(a, b);
    for (const order of [[a, b], [b, a]]) {
      const [first, second] = await contenders(order);
      expect(await contend([first!])).toEqual(['locked']);
      expect(await contend([second!])).toEqual([`busy ${first!.pid}`]);
      // The CLI's look at who writes the ledger (its note on rows still pending) agrees.
      expect(ledgerWriter(b)?.pid).toBe(first!.pid);
      expect(ledgerWriter(a)?.pid).toBe(first!.pid);
      await Promise.all([first!.end(), second!.end()]);
      expect(ledgerWriter(b)).toBeUndefined();
    }
  }, 30_000);

  // Builds before the lock followed symlinks took it under the path they were given: a hub of
  // one running on the same config holds `<link>.lock`, which a newer hub must meet too.
  it.runIf(existsSync('/proc/self/cmdline'))("an older build's lock under a symlink's own name is met by a hub given that symlink", async () => {
    const a = join(tempDir(), 'ledger.db');
    const link = join(tempDir(), 'ledger.db');
    writeFileSync(a, '');
    symlinkSync(a, link);
    const olderHub = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)', 'start'], { stdio: 'ignore' });
    try {
      writeFileSync(`${link}.lock`, JSON.stringify({ pid: olderHub.pid, command: 'switchyard start' })); // as those builds wrote it
      const [c] = await contenders([link]);
      expect(await contend([c!])).toEqual([`busy ${olderHub.pid}`]);
      expect(existsSync(`${a}.lock`)).toBe(false); // nothing taken beside it
      expect(ledgerWriter(link)?.pid).toBe(olderHub.pid);
    } finally {
      olderHub.kill();
    }
  }, 30_000);

  it('a symlink to a ledger not created yet, or to the folder that will hold it, meets its lock too', async () => {
    const home = tempDir();
    const a = join(home, 'data', 'ledger.db'); // hub A's ledger, before its first start
    const b = join(tempDir(), 'ledger.db');
    symlinkSync(a, b); // dangling until A creates it (SQLite would create it through the link)
    const c = join(tempDir(), 'data');
    mkdirSync(join(home, 'data'));
    symlinkSync(join(home, 'data'), c); // config C's ledger folder is A's
    const [first, ...others] = await contenders([b, a, join(c, 'ledger.db')]);
    expect(await contend([first!])).toEqual(['locked']);
    expect(await contend(others)).toEqual([`busy ${first!.pid}`, `busy ${first!.pid}`]);
  }, 30_000);

  // One running hub for the two cases that meet its ledger under another name (a hub's start
  // is a second of CPU); the second stops it.
  describe('beside a running hub', () => {
    let running: Promise<HubProcess>;
    beforeAll(() => {
      running = startHub({ servers: {} });
    });
    afterAll(async () => {
      await (await running).stop();
    });

    it("switchyard start refuses a config whose ledger.path is a symlink to a running hub's ledger, naming both paths", async () => {
      const hub = await running;
      const dir = tempDir();
      symlinkSync(join(hub.dir, 'ledger.db'), join(dir, 'ledger.db'));
      writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ servers: {}, ledger: { path: './ledger.db' } }));
      const r = await runCli(['start', '--config', join(dir, 'hub.config.json'), '--port', '0']);
      expect(r.code).toBe(2);
      const named = `the ledger ${join(dir, 'ledger.db')} (${realpathSync(join(hub.dir, 'ledger.db'))})`;
      expect(r.stderr).toContain(`switchyard start: ${named} is in use by another switchyard process (pid ${hub.proc.pid}, switchyard start)`);
    }, 30_000);

    // A hard link is another name of the same file: its own lock file, and SQLite's own -wal and
    // -shm under that name, so two hubs would write one database unaware of each other.
    it("switchyard start and stdio refuse a ledger that has another name (a hard link to a running hub's ledger), and start once it is gone", async () => {
      const hub = await running;
      const dir = tempDir();
      const other = join(dir, 'ledger.db');
      try {
        linkSync(join(hub.dir, 'ledger.db'), other);
        writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ servers: {}, ledger: { path: './ledger.db' } }));
        for (const command of [['start', '--port', '0'], ['stdio']]) {
          const r = await runCli([command[0]!, '--config', join(dir, 'hub.config.json'), ...command.slice(1)]);
          expect(r.code, r.stderr).toBe(2);
          expect(r.stderr).toContain(`the ledger ${realpathSync(other)} has 2 names (hard links)`);
          // The lock it took to look is given back.
          expect(existsSync(`${realpathSync(other)}.lock`)).toBe(false);
        }
      } finally {
        await hub.stop();
      }
      // With one name again the ledger opens (the hub that wrote it has stopped).
      unlinkSync(join(hub.dir, 'ledger.db'));
      const [c] = await contenders([other]);
      expect(await contend([c!])).toEqual(['locked']);
    }, 30_000);
  });

  // A hub killed before a reboot (or a container's restart) leaves its pid in the lock, and the
  // pid may be another program's by the time a hub starts again: only the same process (the
  // pid and when it started, on Linux) still holds the lock.
  it.runIf(existsSync('/proc/self/stat'))('a lock naming a pid that another process has now is taken over; one naming the live holder is not', async () => {
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const hubDir = tempDir();
      const db = join(hubDir, 'ledger.db');
      const lock = `${db}.lock`;
      const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
      const stat = readFileSync(`/proc/${other.pid}/stat`, 'utf8');
      const ticks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      // The lock's own process, as the hub writes it: still its holder.
      writeFileSync(lock, JSON.stringify({ pid: other.pid, command: 'switchyard start', started: `${boot}:${ticks}` }));
      expect(ledgerWriter(db)?.pid).toBe(other.pid);
      // A lock of a build that did not write when its process started: its live pid is trusted
      // if that process runs the lock's command (a hub's arguments hold `start`), and not if it
      // is another program now (after a reboot, or a crash long ago): the newer hub starts.
      writeFileSync(lock, JSON.stringify({ pid: other.pid, command: 'switchyard start' }));
      expect(ledgerWriter(db)).toBeUndefined();
      const olderHub = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)', 'start'], { stdio: 'ignore' });
      try {
        writeFileSync(lock, JSON.stringify({ pid: olderHub.pid, command: 'switchyard start' }));
        expect(ledgerWriter(db)?.pid).toBe(olderHub.pid);
      } finally {
        olderHub.kill();
      }
      // The process that took the lock started at another time (or in another boot): gone.
      writeFileSync(lock, JSON.stringify({ pid: other.pid, command: 'switchyard start', started: `${boot}:${Number(ticks) - 1}` }));
      expect(ledgerWriter(db)).toBeUndefined();
      const hub = await startHub({ servers: {} }, { dir: hubDir });
      try {
        const held = JSON.parse(readFileSync(lock, 'utf8')) as { pid: number; started?: string };
        expect(held.pid).toBe(hub.proc.pid);
        expect(held.started).toMatch(new RegExp(`^${boot}:[0-9]+$`));
        expect(ledgerWriter(db)?.pid).toBe(hub.proc.pid);
      } finally {
        await hub.stop();
      }
    } finally {
      other.kill();
    }
  }, 30_000);

  // A client that went away while its `switchyard stdio` waited for the ledger (held by the
  // daemon, or a client's earlier probe) left it waiting out the full 10 s, then exit 2.
  it('switchyard stdio waiting for the ledger stops at once, 0, when its stdin ends with nothing sent; a request sent first is still served', async () => {
    const hub = await startHub({ servers: {} });
    try {
      // Five `switchyard stdio` processes of their own, each waiting for the hub's ledger, side by
      // side: their starts and waits overlap.
      await Promise.all([
        (async () => {
          const t0 = Date.now();
          // A wait of 120 s, so "at once" is told from it on a loaded machine too (the CLI's start alone took 6.5 s under load 17, and four more start beside it).
          const r = await runCli(['stdio', '--config', hub.configFile, '--ledger-wait-ms', '120000'], { env: { SWITCHYARD_LOG_LEVEL: 'info' } });
          expect(r.code, r.stderr).toBe(0);
          expect(Date.now() - t0).toBeLessThan(40_000);
          expect(r.stderr).toContain('stdin closed while waiting for the ledger');
          expect(r.stdout).toBe('');
        })(),
        (async () => {
          // Requests sent while it waits, stdin kept open, and the wait runs out: each is answered
          // (naming the lock) before the exit 2, and stdout holds nothing else.
          const busy = new LineClient(spawn(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'stdio', '--config', hub.configFile, '--ledger-wait-ms', '300'], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
          busy.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } }));
          busy.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
          busy.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'server/discover', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }));
          busy.send(JSON.stringify({ jsonrpc: '2.0', id: 'bad', method: 'ping', params: [1] }));
          expect(await busy.exited, busy.stderr).toBe(2);
          expect(busy.received.map((m) => [m.id, m.error?.code])).toEqual([['init', -32603], [7, -32603], ['bad', -32602]]);
          expect(busy.received[0]!.error.message).toContain('is in use by another switchyard process');
          expect(busy.nonProtocolLines).toEqual([]);
          expect(busy.stderr).toContain('switchyard stdio: the ledger');
        })(),
        (async () => {
          // A wait that is no number (NaN) never ran out: a usage error instead.
          const nan = await runCli(['stdio', '--config', hub.configFile, '--ledger-wait-ms', '10s']);
          expect([nan.code, nan.stderr.trim()]).toEqual([2, 'switchyard stdio: --ledger-wait-ms must be a number of milliseconds, 0 or more']);
        })(),
        (async () => {
          // A stop signal while those answers are read and written (the client writing on): the one exit, 2, its reason once.
          const late = new LineClient(spawn(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'stdio', '--config', hub.configFile, '--ledger-wait-ms', '300'], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
          late.proc.stdin!.on('error', () => undefined);
          let lateCode: number | null | undefined;
          void late.exited.then((c) => (lateCode = c));
          late.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } }));
          for (const until = Date.now() + 30_000; !late.stderr.includes('switchyard stdio: the ledger'); await new Promise((res) => setTimeout(res, 10))) {
            if (Date.now() > until) throw new Error(late.stderr);
            late.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
          }
          late.proc.kill('SIGTERM');
          for (let i = 0; lateCode === undefined && i < 100; i++) {
            late.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
            await new Promise((res) => setTimeout(res, 20));
          }
          expect(await late.exited, late.stderr).toBe(2);
          expect(late.stderr).not.toContain('stopped by SIGTERM');
          expect(late.received.map((m) => [m.id, m.error?.code])).toEqual([['init', -32603]]);
        })(),
        (async () => {
          // The same with a stop signal while it waits: answered, exit 0.
          const stopped = new LineClient(spawn(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'stdio', '--config', hub.configFile], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
          stopped.send(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } }));
          for (const until = Date.now() + 30_000; !stopped.stderr.includes('waiting up to 10 s'); await new Promise((res) => setTimeout(res, 20))) if (Date.now() > until) throw new Error(stopped.stderr);
          stopped.proc.kill('SIGTERM');
          expect(await stopped.exited, stopped.stderr).toBe(0);
          expect(stopped.received).toMatchObject([{ id: 'init', error: { code: -32603, message: expect.stringContaining('stopped by SIGTERM before it could serve') } }]);
          expect(stopped.nonProtocolLines).toEqual([]);
        })(),
      ]);
      // A request, then EOF: the client may still read the answer once the ledger is free.
      const p = spawn(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'stdio', '--config', hub.configFile], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } });
      let out = '';
      let err = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (err += d));
      const exited = new Promise<number | null>((res) => p.once('exit', res));
      p.stdin.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) + '\n');
      for (const until = Date.now() + 30_000; !err.includes('waiting up to 10 s'); await new Promise((res) => setTimeout(res, 20))) if (Date.now() > until) throw new Error(err);
      await hub.stop();
      expect(await exited, err).toBe(0);
      expect(JSON.parse(out.trim())).toMatchObject({ id: 1, result: {} });
    } finally {
      await hub.stop();
    }
  }, 60_000);

  // Exiting unserved (the wait ran out), it read stdin until it was quiet for 100 ms, then
  // answered what it had read: a line that came later (a write split in two, a client slow to
  // read stdout) was never read; a batch or a line that is no JSON got nothing, an over-long
  // line was buffered whole, and a character split across two reads came out garbled. Each
  // case runs a `switchyard stdio` of its own, side by side.
  it('switchyard stdio exiting unserved answers every frame its client sent as a stopped pipe does, until it exits', async () => {
    const dir = tempDir();
    // The lock names this (live) process: each stdio waits its --ledger-wait-ms, then exits 2.
    writeFileSync(join(dir, 'ledger.db.lock'), JSON.stringify({ pid: process.pid, command: 'switchyard start', started: processStart(process.pid) }));
    writeFileSync(join(dir, 'small.json'), JSON.stringify({ servers: {}, ledger: { path: join(dir, 'ledger.db') }, listen: { maxBodyBytes: 2000 } }));
    writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ servers: {}, ledger: { path: join(dir, 'ledger.db') } }));
    writeFileSync(join(dir, 'bad.json'), JSON.stringify({ servers: 5, ledger: { path: join(dir, 'ledger.db') } }));
    const request = (id: string): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' });
    const ranOut = async (c: LineClient): Promise<void> => {
      for (const until = Date.now() + 45_000; !c.stderr.includes('switchyard stdio: the ledger'); await new Promise((res) => setTimeout(res, 10))) if (Date.now() > until) throw new Error(c.stderr);
    };
    /** `talk` with a `switchyard stdio` of `config`, killed if still running at its end. */
    const stdio = async (config: string, args: string[], talk: (c: LineClient) => Promise<void>): Promise<void> => {
      const c = new LineClient(spawn(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'stdio', '--config', join(dir, config), '--ledger-wait-ms', '200', ...args], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
      c.proc.stdin!.on('error', () => undefined);
      try {
        await talk(c);
      } finally {
        c.kill();
      }
    };

    await Promise.all([
      stdio('small.json', [], async (a) => {
        // b3, cancelled later in the same batch, is owed no answer (it had one).
        a.send('[' + request('b1') + ',{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b2","method":"ping","params":[1]},' + request('b3') + ',{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b3"}}]');
        a.send('{oops');
        a.send('[]');
        a.send(JSON.stringify({ jsonrpc: '2.0', id: 'huge', method: 'tools/list', params: { pad: 'x'.repeat(3000) } }));
        // One request in two writes, cut inside the two bytes of its id's "ü": the first before the
        // wait runs out, the rest 300 ms after it did. (Written after it, a loaded machine saw the
        // stdin quiet for its 100 ms before the first write, and the process had gone.)
        const split = Buffer.from(request('ü-split') + '\n');
        const cut = split.indexOf(Buffer.from('ü')) + 1;
        a.proc.stdin!.write(split.subarray(0, cut));
        await ranOut(a);
        await new Promise((res) => setTimeout(res, 300));
        a.proc.stdin!.write(split.subarray(cut));
        expect(await a.exited, a.stderr).toBe(2);
        // The batch's answer is the one line that is no lone message: an array.
        expect(a.nonProtocolLines.map((l) => (JSON.parse(l) as { id: string; error: { code: number } }[]).map((m) => [m.id, m.error.code]))).toEqual([[['b1', -32603], ['b2', -32602]]]);
        expect(a.received.map((m) => [m.id, m.error?.code, m.error?.message.slice(0, 20)])).toEqual([
          [undefined, -32700, 'parse error: invalid'],
          [undefined, -32600, 'an empty batch'],
          // Never buffered whole: told so, to the id its start shows, as a serving pipe does.
          ['huge', -32600, 'message too large: t'],
          ['ü-split', -32603, 'switchyard stdio can'],
        ]);
      }),
      // A client slow to read stdout: its later request is read once it reads, and answered.
      stdio('hub.config.json', [], async (b) => {
        b.proc.stdout!.pause();
        b.send(JSON.stringify({ jsonrpc: '2.0', id: 'x'.repeat(1_000_000), method: 'tools/list' }));
        await ranOut(b);
        await new Promise((res) => setTimeout(res, 300));
        b.send(request('late'));
        await new Promise((res) => setTimeout(res, 300));
        b.proc.stdout!.resume();
        expect(await b.exited, b.stderr).toBe(2);
        expect(b.received.map((m) => [String(m.id).length, m.error?.code])).toEqual([
          [1_000_000, -32603],
          [4, -32603],
        ]);
        expect(b.nonProtocolLines).toEqual([]);
      }),
      // A client gone (its stdout closed): the answer's write fails (EPIPE), which ended the
      // process by an uncaught error, exit 1 and a stack on stderr, instead of its own exit 2.
      stdio('hub.config.json', [], async (gone) => {
        gone.proc.stdout!.destroy();
        gone.send(request('gone'));
        expect(await gone.exited, gone.stderr).toBe(2);
        expect(gone.stderr).not.toContain('EPIPE');
      }),
      // Exiting before the ledger is even asked for: a config with problems, a group it has not.
      // The client's requests got no answer, only the exit 2 (the hub not made was answered).
      ...(
        [
          ['bad.json', [], `${join(dir, 'bad.json')}: `],
          ['hub.config.json', ['--group', 'none'], `switchyard stdio: no tool group named "none" in ${join(dir, 'hub.config.json')} (it has no groups)`],
        ] as const
      ).map(([config, args, said]) =>
        stdio(config, [...args], async (c) => {
          c.send(request('early'));
          c.endInput();
          expect(await c.exited, c.stderr).toBe(2);
          expect(c.stderr).toContain(said);
          expect(c.received.map((m) => [m.id, m.error?.code])).toEqual([['early', -32603]]);
          expect(c.received[0]!.error.message).toContain(`switchyard stdio cannot serve: ${said.replace('switchyard stdio: ', '')}`);
        }),
      ),
    ]);
  }, 60_000);

  // Two containers on one volume (or a hub in a container next to one on the host): each saw
  // the other's pid as gone (pid 1 there is this namespace's init, with another start time),
  // took the lock over, and both wrote the ledger. The holder's OS lock is seen from there.
  it.runIf(canUnshare)('a hub in another PID namespace holds the ledger: a hub starting here is refused, naming it', async () => {
    const hub = await startHub({ servers: {} }, { wrap: ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child'] });
    try {
      // As a starting hub asks (lockLedger), here, outside that namespace.
      const [c] = await contenders([join(hub.dir, 'ledger.db')]);
      expect(await contend([c!])).toEqual(['busy 1']);
      expect(ledgerWriter(join(hub.dir, 'ledger.db'))).toEqual({ pid: 1, command: 'switchyard start' });
    } finally {
      // unshare ignores SIGTERM while it waits: the hub (its child, pid 1 in there) is told.
      const inner = readFileSync(`/proc/${hub.proc.pid}/task/${hub.proc.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
      const exited = new Promise((r) => hub.proc.once('exit', r));
      for (const pid of inner) process.kill(pid, 'SIGTERM');
      await exited;
    }
  }, 30_000);
});
