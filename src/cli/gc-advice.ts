import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * V8 runs the young generation's scavenges on helper threads in parallel and marks the old one
 * concurrently: on a machine of many cores that shortens pauses. On one of two cores the
 * helpers compete with the hub's own thread, its ledger thread and its upstreams: measured on
 * 2 cores (docs/BENCHMARKS.md, "V8's garbage collector on two cores"), a scavenge took twice as
 * long as on the hub's thread alone, the helpers cost 10–30 µs of CPU per call, and
 * `node --single-threaded-gc` served 4–20 % more calls at concurrency 64 (2–10 % at 8), with
 * the same latency at concurrency 1. V8 takes the flag only when the process starts (set later,
 * it crashes the next collection) and Node refuses it in NODE_OPTIONS, so the hub can advise it,
 * not set it; `npm start` passes it.
 */
export const SINGLE_THREADED_GC = '--single-threaded-gc';

/** Up to this many CPUs, the flag is worth running with. */
const FEW_CPUS = 2;

/** Flags that leave V8's collector on one thread (`--single-threaded` implies it), or say no to the advice. */
const DECIDED = new Set([SINGLE_THREADED_GC, '--single-threaded', '--no-single-threaded-gc']);

/** A line for the daemon's start-up log, or undefined when there is nothing to advise. */
export function gcAdvice(execArgv: readonly string[], cpus: number): string | undefined {
  if (cpus > FEW_CPUS) return undefined;
  // V8 takes `_` for `-` in its flags' names.
  if (execArgv.some((a) => DECIDED.has(a.replace(/_/g, '-')))) return undefined;
  return `this machine has ${cpus} CPU${cpus === 1 ? '' : 's'}: start the hub with \`node ${SINGLE_THREADED_GC}\` (as npm start does) for up to 20 % more throughput under load; see docs/BENCHMARKS.md`;
}

/**
 * The CPUs this process may use: the affinity mask (os.availableParallelism), and a container's
 * CPU quota, which the libuv of Node 20 does not count (`docker run --cpus=2` on a big host).
 */
export function usableCpus(read: (path: string) => string | undefined = readOrUndefined): number {
  const quota = cgroupCpus(read('/sys/fs/cgroup/cpu.max'), read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'), read('/sys/fs/cgroup/cpu/cpu.cfs_period_us'));
  return Math.max(1, Math.min(availableParallelism(), quota ?? Infinity));
}

/** CPUs a cgroup's quota allows (v2 `cpu.max`, else v1 quota and period), rounded up; undefined without one. */
export function cgroupCpus(v2: string | undefined, v1Quota: string | undefined, v1Period: string | undefined): number | undefined {
  const [q, p] = v2 !== undefined ? v2.trim().split(/\s+/) : [v1Quota?.trim(), v1Period?.trim()];
  const quota = Number(q);
  const period = Number(p);
  if (!(quota > 0) || !(period > 0)) return undefined; // "max", -1, absent or unreadable: no quota
  return Math.ceil(quota / period);
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
