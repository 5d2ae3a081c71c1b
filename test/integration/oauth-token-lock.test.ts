/**
 * The refresh lock of a login's token file (src/upstream/oauth-token-lock.ts) between real
 * processes: contenders are node processes running the built lockTokenFile
 * (test/fixtures/oauth/token-lock-contender.mjs), released at one instant.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnContender, type Contender } from '../helpers/lock-contender.js';
import { ROOT } from '../helpers/hub-process.js';
import { lockTokenFile, TAKEOVER_STEP_MS } from '../../src/upstream/oauth-token-lock.js';

const CONTENDER = join(ROOT, 'test/fixtures/oauth/token-lock-contender.mjs');
/** Holds the OS lock of the file it is given until its stdin closes (says "held" once it does). */
const OS_LOCK_HOLDER = join(ROOT, 'test/fixtures/ledger/os-lock-holder.mjs');

let running: Contender[] = [];
afterEach(async () => {
  await Promise.all(running.map((c) => c.end()));
  running = [];
});

/** Four contenders over `file`, each ready. */
async function contenders(file: string): Promise<Contender[]> {
  const all = [0, 1, 2, 3].map((i) => contender(file, i, ['jitter', '20']));
  for (const c of all) expect(await c.next()).toBe('ready');
  return all;
}

/** One round: all let go of what they hold and ask, the i-th i × stepUs µs after the first; how many hold the lock after it. */
async function contend(file: string, all: Contender[], stepUs: number): Promise<number> {
  const at = Date.now() + 15;
  for (const c of all) c.go(at, stepUs);
  const said = await Promise.all(all.map((c) => c.next()));
  const won = said.filter((s) => s === 'locked').length;
  // The one that says it holds it is the one the lock names.
  if (won === 1) expect((JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number }).pid).toBe(all[said.indexOf('locked')]!.pid);
  return won;
}

function contender(file: string, index: number, stall: string[]): Contender {
  const c = spawnContender(CONTENDER, [file, String(index), ...stall]);
  running.push(c);
  return c;
}

describe('refresh lock of a token file', () => {
  // A refresh judged a dead holder's lock stale, checked it was still that lock (inode, mtime,
  // text) and then removed it by its path: another that had judged it too removed it first, a
  // third (or the first again) created its own, and the removal took that fresh lock in place of
  // the dead one's. Two processes then held the lock and spent one rotating refresh token at once
  // (an authorization server then revokes the whole token family). Each contender here may stall
  // up to 20 ms before each removal beside the token file, as a descheduled process does. A round
  // with no holder is as wrong (all of them gave up on a takeover step: the case after the next).
  it("contenders stalled between judging a dead holder's lock and removing it leave exactly one holder every round", async () => {
    const file = join(realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-token-lock-'))), 'u.json');
    const all = await contenders(file);
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    const holders: number[] = [];
    for (let round = 0; round < 40; round++) {
      // Last round's holder "died": its lock names a process that is gone, last touched long ago.
      writeFileSync(`${file}.lock`, JSON.stringify({ pid: dead, host: hostname() }));
      const old = new Date(Date.now() - 60_000);
      utimesSync(`${file}.lock`, old, old);
      holders.push(await contend(file, all, round % 20));
    }
    const rounds = holders.map((n, i) => [i, n]).filter(([, n]) => n !== 1);
    expect(rounds, 'rounds ([round, holders]) without exactly one holder').toEqual([]);
  }, 120_000);

  // Where no OS lock can be taken on <token file>.takeover (a file system without POSIX locks;
  // here a folder stands in its place, which SQLite cannot lock either), the takeover was "as no
  // lock at all": the dead holder's lock stayed, and each process, finding it stale, refreshed
  // without a lock, every one of them at once, for good.
  it("where no OS lock can be taken beside the token file, a dead holder's lock is taken over by one process, which the next one finds holding it", async () => {
    const file = join(realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-token-lock-'))), 'u.json');
    mkdirSync(`${file}.takeover`);
    const [a, b] = [contender(file, 0, []), contender(file, 1, [])];
    for (const c of [a, b]) expect(await c.next()).toBe('ready');
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: dead, host: hostname() }));
    a.go(Date.now() + 15, 0);
    expect(await a.next()).toBe('locked');
    expect((JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number }).pid, 'the lock names the process that says it holds it').toBe(a.pid);
    b.go(Date.now() + 15, 0);
    expect(await b.next(), 'a second process while the first holds it').toBe('busy');
  }, 30_000);

  // A process that asked without a wait (waitMs 0, as a refresh, a login and a logout first ask)
  // and met <token file>.takeover held gave up at once, as if a live holder kept the lock. But
  // the process in that step may be a holder releasing a lock that is no longer its own, which
  // leaves the dead holder's lock where it is; and two processes trying that OS lock at the same
  // instant can both fail with neither holding it (SQLite's SHARED, RESERVED and PENDING locks
  // along the way to EXCLUSIVE). Every process then gave up with nobody holding the lock (round
  // 37 of 40 of the case above, once, in CI); a refresh finding a crashed logout's lock so failed
  // saying that logout was removing the login. The step, a few syscalls, is waited for.
  it("one asking without a wait that finds another process in the takeover step waits for it, then takes the dead holder's lock over", async () => {
    const file = join(realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-token-lock-'))), 'u.json');
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: dead, host: hostname(), doing: 'logout' }));
    const step = spawnContender(OS_LOCK_HOLDER, [`${file}.takeover`]);
    running.push(step);
    expect(await step.next()).toBe('held');
    // Its first try runs within the call, synchronously: it meets the step.
    const asked = lockTokenFile(file, 0);
    await step.end();
    const release = await asked;
    expect(release, 'the lock once the step is over').toBeTypeOf('function');
    expect((JSON.parse(readFileSync(`${file}.lock`, 'utf8')) as { pid: number }).pid).toBe(process.pid);
    release!();
  }, 30_000);

  it('one asking without a wait that finds a process stopped in the takeover step gives up after TAKEOVER_STEP_MS, not at once and not never', async () => {
    const file = join(realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-token-lock-'))), 'u.json');
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: dead, host: hostname() }));
    const step = spawnContender(OS_LOCK_HOLDER, [`${file}.takeover`]);
    running.push(step);
    expect(await step.next()).toBe('held');
    const since = performance.now();
    expect(await lockTokenFile(file, 0)).toBeUndefined();
    const waited = performance.now() - since;
    expect(waited).toBeGreaterThanOrEqual(TAKEOVER_STEP_MS - 1);
    expect(waited).toBeLessThan(TAKEOVER_STEP_MS + 5_000);
  }, 30_000);

  // A live holder's lock is taken over when untouched for LOCK_STALE_MS (a holder hung, a wall
  // clock stepped forward). Its release read the lock, found it its own and removed it by its
  // path: taken over between the two, the new holder's lock was removed in its place, and a third
  // process took the lock beside it.
  it('a holder letting go of its lock as others take it over (untouched for long) leaves exactly one holder every round', async () => {
    const file = join(realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-token-lock-'))), 'u.json');
    const all = await contenders(file);
    const holders: number[] = [];
    for (let round = 0; round < 40; round++) {
      // Last round's holder is alive and lets go of it as the round starts; its lock looks untouched for a minute.
      if (round > 0) {
        const old = new Date(Date.now() - 60_000);
        utimesSync(`${file}.lock`, old, old);
      }
      holders.push(await contend(file, all, round % 20));
    }
    const rounds = holders.map((n, i) => [i, n]).filter(([, n]) => n !== 1);
    expect(rounds, 'rounds ([round, holders]) without exactly one holder').toEqual([]);
  }, 120_000);
});
