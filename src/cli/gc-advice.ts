/**
 * V8 runs the young generation's scavenges on helper threads in parallel and marks the old one
 * concurrently: on a machine of many cores that shortens pauses. On one of two cores the
 * helpers compete with the hub's own thread, its ledger thread and its upstreams: measured on
 * 2 cores (docs/BENCHMARKS.md, "V8's garbage collector on two cores"), a scavenge took twice as
 * long as on the hub's thread alone, the helpers cost 10–30 µs of CPU per call, and
 * `node --single-threaded-gc` served 5–20 % more calls at concurrency 8 and 64, with the same
 * latency at concurrency 1. V8 takes the flag only when the process starts (set later, it
 * crashes the next collection), so the hub can advise it, not set it; `npm start` passes it.
 */
export const SINGLE_THREADED_GC = '--single-threaded-gc';

/** Up to this many CPUs, the flag is worth running with. */
const FEW_CPUS = 2;

/** A line for the daemon's start-up log, or undefined when there is nothing to advise. */
export function gcAdvice(execArgv: readonly string[], cpus: number): string | undefined {
  if (cpus > FEW_CPUS || execArgv.includes(SINGLE_THREADED_GC)) return undefined;
  return `this machine has ${cpus} CPU${cpus === 1 ? '' : 's'}: start the hub with \`node ${SINGLE_THREADED_GC}\` (as npm start does) for 5-20 % more throughput; see docs/BENCHMARKS.md`;
}
