/**
 * bench/lib/proc-stats.mjs reads /proc for bench/threads.mjs. Checked against this process, a
 * worker and a child it starts: each counter must move when its thread does what it counts,
 * and a process's sum must hold its other threads' work and survive a thread that ends.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { childPids, delta, parseIo, parseSwitches, perCall, processThreads, threadCounters } from '../../bench/lib/proc-stats.mjs';

interface Counters {
  cpuUs: number;
  syscr: number;
  syscw: number;
  sleeps: number;
  preempted: number;
}
const main = (): Counters => threadCounters(process.pid) as Counters;

/**
 * A worker that, when told to, spends 60 ms of its own thread's CPU; it says 'ready', then
 * 'burnt'. Its own, from /proc/thread-self: process.cpuUsage counts every thread, so GC and
 * compiler threads busy at the same time would end the burn early (a CI run saw 8 ms).
 * It listens with `on`, not `once`: a port with no listener left lets the worker end by itself
 * right after 'burnt', and its thread (with its 60 ms) could leave /proc before the reading
 * that should count it (two CI runs counted 11 ms; under load, most tries did).
 */
function burner(): Worker {
  return new Worker(
    `const { parentPort } = require('node:worker_threads');
     const { readFileSync } = require('node:fs');
     parentPort.on('message', () => {
       const cpu = () => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1000;
       const end = cpu() + 60_000; while (cpu() < end);
       parentPort.postMessage('burnt');
     });
     parentPort.postMessage('ready');`,
    { eval: true },
  );
}

const message = (w: Worker): Promise<unknown> => new Promise((resolve) => w.once('message', resolve));

/**
 * Spins until the process has spent `us` of CPU (process.cpuUsage, which counts every
 * thread: the others are idle here), not of wall time: a loaded machine may run the thread
 * for a fraction of a wall-clock window.
 */
function burnCpu(us: number): void {
  const cpu = (): number => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const end = cpu() + us;
  while (cpu() < end);
}

describe('bench/lib/proc-stats.mjs', () => {
  it('parses the io and status files by name, whatever their order', () => {
    expect(parseIo('rchar: 5\nsyscw: 7\nwchar: 9\nsyscr: 3\n')).toEqual({ syscr: 3, syscw: 7 });
    expect(parseSwitches('Name:\tnode\nnonvoluntary_ctxt_switches:\t4\nvoluntary_ctxt_switches:\t11\n')).toEqual({ sleeps: 11, preempted: 4 });
  });

  it("counts the event loop's own CPU, writes and sleeps", async () => {
    const a = main();
    burnCpu(30_000);
    const b = main();
    expect(b.cpuUs - a.cpuUs).toBeGreaterThanOrEqual(25_000);

    const file = join(tmpdir(), `proc-stats-${process.pid}`);
    const fd = openSync(file, 'w');
    for (let i = 0; i < 50; i++) writeSync(fd, 'x');
    closeSync(fd);
    unlinkSync(file);
    const c = main();
    expect(c.syscw - b.syscw).toBeGreaterThanOrEqual(50);

    for (let i = 0; i < 5; i++) await sleep(5); // nothing else to do: the thread sleeps each time
    const d = main();
    // Each wait blocks the thread (a voluntary switch), unless it was preempted on the way and
    // its timer had run out by then (seen once on a busy machine): count both.
    expect(d.sleeps - c.sleeps).toBeGreaterThanOrEqual(1);
    expect(d.sleeps - c.sleeps + (d.preempted - c.preempted)).toBeGreaterThanOrEqual(5);
    expect(Number.isInteger(d.preempted)).toBe(true);
  });

  it("sums a process's threads and finds its children", async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10_000)'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      expect(childPids(process.pid)).toContain(child.pid);
    } finally {
      child.kill();
    }
    // Every thread of the process: a worker's 60 ms of CPU count, while the event loop only
    // waits for it. The worker is started first (its start-up is the event loop's work).
    const worker = burner();
    await message(worker);
    const loopBefore = main();
    const before = processThreads(process.pid);
    worker.postMessage('burn');
    await message(worker);
    const loop = main().cpuUs - loopBefore.cpuUs;
    const whole = (delta(before, processThreads(process.pid)) as Counters).cpuUs;
    await worker.terminate();
    const others = whole - loop;
    expect(others).toBeGreaterThanOrEqual(45_000);
  });

  it('leaves out a thread that ended between two readings, and counts one that started from zero', async () => {
    const worker = burner();
    await message(worker);
    worker.postMessage('burn');
    await message(worker);
    const before = processThreads(process.pid);
    await worker.terminate(); // its 60 ms leave /proc with it
    const after = processThreads(process.pid);
    expect((delta(before, after) as Counters).cpuUs).toBeGreaterThanOrEqual(0);

    const c = (n: number): Counters => ({ cpuUs: n, syscr: n, syscw: n, sleeps: n, preempted: n });
    const d = delta(
      new Map([
        ['1', c(10)],
        ['2', c(50)],
      ]),
      new Map([
        ['1', c(14)],
        ['3', c(5)],
      ]),
    ) as Counters;
    expect(d).toEqual(c(9));
    expect(delta(c(3), c(7))).toEqual(c(4));
    expect(perCall({ cpuUs: 300, syscr: 30, syscw: 0, sleeps: 6, preempted: 3 }, 3)).toEqual({ cpuUs: 100, syscr: 10, syscw: 0, sleeps: 2, preempted: 1 });
  });
});
