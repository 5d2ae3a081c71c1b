/**
 * A call's objects die young. Under load, what V8's scavenges find alive is the calls in
 * flight; a call lives a few milliseconds, scavenges come tens of milliseconds apart, so next
 * to nothing should survive two scavenges and be promoted to the old generation. Objects that
 * outlive scavenges for no reason have been found on the call path three times (AbortSignals,
 * closures, object spreads: docs/BENCHMARKS.md, "Young-generation GC"); each cost the hub 5-20 %
 * of its thread in GC pauses. This runs the real hub under `--trace-gc-nvp` and reads what its
 * scavenges promoted: the builds with object spreads on the path promoted 0.19-1.1 MB per
 * scavenge at every start, this one ~0.
 */
import { describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { runHttp } from '../../bench/lib/load.mjs';
import { modernRequest } from '../../bench/lib/mcp.mjs';

/** Bytes promoted by each scavenge (gc=s) in `nvp`, V8's --trace-gc-nvp lines. */
function scavenges(nvp: string): number[] {
  return [...nvp.matchAll(/\bgc=s\b.*?\bpromoted=(\d+)/g)].map((m) => Number(m[1]));
}

/** One start of the hub under load: the mean bytes promoted per scavenge while measured. */
async function promotedPerScavenge(): Promise<{ mean: number; n: number }> {
  const hub: HubProcess = await startHub(
    { servers: { echo: nodeServer('bench/echo-stdio.mjs') }, ledger: { enabled: false } },
    { nodeArgs: ['--single-threaded-gc', '--trace-gc-nvp'], env: { SWITCHYARD_LOG_LEVEL: 'info' } },
  );
  try {
    const request = modernRequest({ port: hub.port, method: 'tools/call', tool: 'echo__echo' });
    // No CPU probe (runHttp's cpuProbe): what is read is the hub's GC trace.
    await runHttp({ port: hub.port, request, concurrency: 16, warmupMs: 0, measureMs: 1500, cpuProbe: undefined }); // warm-up: JIT, caches
    const warm = hub.stdout().length;
    // Enough scavenges to judge by: the machine's speed (and what else runs on it) decides how
    // long that takes, so the load goes on in rounds until there are five, for 15 s at most.
    let promoted: number[] = [];
    for (let round = 0; round < 6 && promoted.length < 5; round++) {
      const r = await runHttp({ port: hub.port, request, concurrency: 16, warmupMs: 0, measureMs: 2500, cpuProbe: undefined });
      expect(r.errors).toBe(0);
      promoted = scavenges(hub.stdout().slice(warm));
    }
    expect(promoted.length).toBeGreaterThanOrEqual(5);
    return { mean: promoted.reduce((a, b) => a + b, 0) / promoted.length, n: promoted.length };
  } finally {
    await hub.stop();
  }
}

describe('young-generation GC under load', () => {
  it('tools/call at concurrency 16: scavenges promote next to nothing', async () => {
    // A start of the hub now and then still lands in a mode that promotes whole calls (cause
    // open: docs/BENCHMARKS.md, the eighteenth round); what the path itself keeps alive shows in
    // every start. So: up to six starts, one under the bar. The mode's share of starts varies
    // with the machine's phase: about one in ten once, half to five in six of them on a day
    // when three starts all landed in it in two CI runs in a row (the build before that day's
    // changes too: 3 of 6 starts, then 3 runs of three starts, one all in it).
    const seen: string[] = [];
    for (let start = 0; start < 6; start++) {
      const { mean, n } = await promotedPerScavenge();
      seen.push(`${Math.round(mean)} B over ${n} scavenges`);
      if (mean < 32 * 1024) return;
    }
    expect.fail(`every start promoted 32 KB or more per scavenge: ${seen.join('; ')}`);
  }, 150_000);
});
