// Counters of a thread or a process from /proc (Linux only), for bench/threads.mjs: CPU time,
// read and write syscalls, and how often the thread left its core, by choice (it slept: an
// idle event loop, a blocking call) or not (preempted by another task on that core). The CPU
// figure alone cannot tell a thread that works more per call from one that keeps being pushed
// off its core; the switches can (docs/BENCHMARKS.md, twenty-fifth round).
import { readdirSync, readFileSync } from 'node:fs';

/** `syscr` and `syscw` of a /proc/…/io file. */
export function parseIo(text) {
  const out = { syscr: 0, syscw: 0 };
  for (const line of text.split('\n')) {
    const [key, value] = line.split(': ');
    if (key === 'syscr' || key === 'syscw') out[key] = Number(value);
  }
  return out;
}

/** Voluntary switches (sleeps) and involuntary ones (preemptions) of a /proc/…/status file. */
export function parseSwitches(text) {
  const count = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { sleeps: count('voluntary_ctxt_switches'), preempted: count('nonvoluntary_ctxt_switches') };
}

/** One thread's counters; CPU in microseconds (schedstat's first field, in ns). */
export function threadCounters(pid, tid = pid) {
  const dir = `/proc/${pid}/task/${tid}`;
  const cpuUs = Number(readFileSync(`${dir}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  return { cpuUs, ...parseIo(readFileSync(`${dir}/io`, 'utf8')), ...parseSwitches(readFileSync(`${dir}/status`, 'utf8')) };
}

const ZERO = { cpuUs: 0, syscr: 0, syscw: 0, sleeps: 0, preempted: 0 };

/** Each thread's counters, by thread id. */
export function processThreads(pid) {
  const out = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(tid, threadCounters(pid, tid));
    } catch {
      // ended between the listing and the read
    }
  }
  return out;
}

/**
 * What was counted between two readings: of one thread (threadCounters), or of a process
 * (processThreads), summed over the threads of the second reading. A thread that started in
 * between counts from zero; one that ended in between is left out, since its last counts went
 * with it (summing the two readings' totals instead would subtract all it ever counted).
 */
export function delta(before, after) {
  if (!(after instanceof Map)) return sub(before, after);
  const sum = { ...ZERO };
  for (const [tid, a] of after) {
    const d = sub(before.get(tid) ?? ZERO, a);
    for (const k of Object.keys(sum)) sum[k] += d[k];
  }
  return sum;
}

/** Counters divided by `calls`. */
export function perCall(counters, calls) {
  const out = {};
  for (const k of Object.keys(ZERO)) out[k] = counters[k] / calls;
  return out;
}

function sub(before, after) {
  const out = {};
  for (const k of Object.keys(ZERO)) out[k] = after[k] - before[k];
  return out;
}

/** Pids of the processes whose parent is `ppid`. */
export function childPids(ppid) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command name (2nd field) may hold spaces and parentheses: fields resume after its last ')'.
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (parent === ppid) out.push(Number(name));
    } catch {
      // ended meanwhile
    }
  }
  return out;
}
