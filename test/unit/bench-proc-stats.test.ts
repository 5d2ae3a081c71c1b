/**
 * bench/lib/proc-stats.mjs reads /proc for bench/threads.mjs. Checked against this process
 * and a child it starts: each counter must move when, and only as far as, the thread does the
 * thing it counts.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { childPids, parseIo, parseSwitches, perCall, processCounters, threadCounters } from '../../bench/lib/proc-stats.mjs';

interface Counters {
  cpuUs: number;
  syscr: number;
  syscw: number;
  sleeps: number;
  preempted: number;
}
const main = (): Counters => threadCounters(process.pid) as Counters;

describe('bench/lib/proc-stats.mjs', () => {
  it('parses the io and status files by name, whatever their order', () => {
    expect(parseIo('rchar: 5\nsyscw: 7\nwchar: 9\nsyscr: 3\n')).toEqual({ syscr: 3, syscw: 7 });
    expect(parseSwitches('Name:\tnode\nnonvoluntary_ctxt_switches:\t4\nvoluntary_ctxt_switches:\t11\n')).toEqual({ sleeps: 11, preempted: 4 });
  });

  it("counts the event loop's own CPU, writes and sleeps", async () => {
    const a = main();
    const end = performance.now() + 30;
    while (performance.now() < end); // 30 ms on the CPU
    const b = main();
    expect(b.cpuUs - a.cpuUs).toBeGreaterThanOrEqual(20_000);

    const file = join(tmpdir(), `proc-stats-${process.pid}`);
    const fd = openSync(file, 'w');
    for (let i = 0; i < 50; i++) writeSync(fd, 'x');
    closeSync(fd);
    unlinkSync(file);
    const c = main();
    expect(c.syscw - b.syscw).toBeGreaterThanOrEqual(50);

    for (let i = 0; i < 5; i++) await sleep(5); // nothing else to do: the thread sleeps each time
    const d = main();
    expect(d.sleeps - c.sleeps).toBeGreaterThanOrEqual(5);
    expect(Number.isInteger(d.preempted)).toBe(true);
  });

  it("sums a process's threads, finds its children, and divides per call", async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 10_000)'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      expect(childPids(process.pid)).toContain(child.pid);
      // Every thread of the process: a worker's 60 ms on the CPU count, while the event loop
      // only waits for it. The worker is started first (its start-up is the event loop's work)
      // and read while it still runs (an ended thread leaves /proc).
      const worker = new Worker(
        `const { parentPort } = require('node:worker_threads');
         parentPort.once('message', () => {
           const end = performance.now() + 60; while (performance.now() < end);
           parentPort.postMessage('burnt');
         });
         parentPort.postMessage('ready');`,
        { eval: true },
      );
      await new Promise((resolve) => worker.once('message', resolve));
      const loopBefore = main();
      const wholeBefore = processCounters(process.pid) as Counters;
      worker.postMessage('burn');
      await new Promise((resolve) => worker.once('message', resolve));
      const loop = main().cpuUs - loopBefore.cpuUs;
      const whole = (processCounters(process.pid) as Counters).cpuUs - wholeBefore.cpuUs;
      await worker.terminate();
      expect(whole - loop).toBeGreaterThanOrEqual(50_000);
      expect(perCall({ cpuUs: 0, syscr: 10, syscw: 20, sleeps: 4, preempted: 2 }, { cpuUs: 300, syscr: 40, syscw: 20, sleeps: 10, preempted: 2 }, 3)).toEqual({
        cpuUs: 100,
        syscr: 10,
        syscw: 0,
        sleeps: 2,
        preempted: 0,
      });
    } finally {
      child.kill();
    }
  });
});
