// Does a call cost the hub more when more upstream servers are configured? (issue #9; users
// configure 10–100, the other benchmarks one.) Starts one built hub per count in --counts, each
// with that many stdio echo upstreams (s0 … s{N-1}; ledger as shipped unless --ledger off), all
// live at once, and drives `tools/call` to one server of each (the last configured, so that a
// scan stopping at its server passes every other) at --concurrency. The hubs take turns, round
// after round (1, 100, 1, 100, …): the machine is shared, and a slow phase then hits every count
// alike. Reports the event loop's CPU µs per call (/proc/PID/task/PID/schedstat, as
// bench/threads.mjs) per round and the medians, and what its event loop spends with no calls
// (µs per second), measured after each window. Linux only.
//
//   node bench/servers.mjs [--counts 1,100] [--rounds 5] [--ledger on|off] [--concurrency 64] [--measure-ms 3000] [--idle-ms 1000]
//   SWITCHYARD_BENCH_ROOT=/path/to/other/build node bench/servers.mjs ...   (A/B)
import { delta, perCall, processThreads } from './lib/proc-stats.mjs';
import { echoStdioCommand, startHub } from './lib/targets.mjs';
import { numberOption, option } from './lib/args.mjs';
import { runHttp } from './lib/load.mjs';
import { modernRequest } from './lib/mcp.mjs';

const counts = option('counts', '1,100')
  .split(',')
  .map((s) => Number(s));
if (counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error('--counts takes whole numbers ≥ 1, comma-separated');
const ledger = option('ledger', 'on') === 'on';
const concurrency = numberOption('concurrency', 64);
const measureMs = numberOption('measure-ms', 3000);
const rounds = numberOption('rounds', 5);
const idleMs = numberOption('idle-ms', 1000);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const hubs = [];
try {
  for (const n of counts) {
    const servers = {};
    for (let i = 0; i < n; i++) servers[`s${i}`] = echoStdioCommand();
    const hub = await startHub({ servers, ledger, readyTimeoutMs: 120_000 });
    const request = modernRequest({ port: hub.port, method: 'tools/call', tool: `s${n - 1}__echo` });
    hubs.push({ n, hub, request, loop: [], rps: [], idle: [] });
    // Warm-up: the first calls build the list and compile the path.
    const w = await runHttp({ port: hub.port, request, concurrency, warmupMs: 0, measureMs: 1500 });
    if (w.errors) throw new Error(`${n} servers: ${w.errors} errors in the warm-up`);
    console.log(`${n} servers: ready after ${Math.round(hub.readyMs)} ms`);
  }
  for (let round = 0; round < rounds; round++) {
    // Alternate the order too, so that neither count always runs first in a round.
    const order = round % 2 ? [...hubs].reverse() : hubs;
    const line = [];
    for (const h of order) {
      const mainTid = String(h.hub.pid);
      const before = processThreads(h.hub.pid);
      const r = await runHttp({ port: h.hub.port, request: h.request, concurrency, warmupMs: 0, measureMs });
      const after = processThreads(h.hub.pid);
      if (r.errors) throw new Error(`${h.n} servers: ${r.errors} errors`);
      const calls = r.rps * (measureMs / 1000);
      const loop = perCall(delta(before.get(mainTid), after.get(mainTid)), calls);
      // The same hub with no calls, as long: what its event loop does anyway (timers, pings of
      // its servers) would otherwise count as per-call work, the more so the fewer calls a
      // slow phase of the machine lets through.
      const idleBefore = processThreads(h.hub.pid).get(mainTid);
      await new Promise((resolve) => setTimeout(resolve, idleMs));
      const idleUsPerS = (delta(idleBefore, processThreads(h.hub.pid).get(mainTid)).cpuUs * 1000) / idleMs;
      h.loop.push(loop.cpuUs);
      h.rps.push(r.rps);
      h.idle.push(idleUsPerS);
      line.push(`${h.n}: ${loop.cpuUs.toFixed(1)} µs (${Math.round(r.rps)} req/s; idle ${idleUsPerS.toFixed(0)} µs/s)`);
    }
    console.log(`round ${round + 1}: ${line.join(' · ')}`);
  }
  const base = median(hubs[0].loop);
  console.log(
    `medians, event loop µs per call, ledger ${ledger ? 'on' : 'off'} @${concurrency}: ` +
      hubs
        .map((h) => `${h.n} servers ${median(h.loop).toFixed(1)} (${((median(h.loop) / base - 1) * 100).toFixed(1)} %, ${Math.round(median(h.rps))} req/s, idle ${median(h.idle).toFixed(0)} µs/s)`)
        .join(' · '),
  );
} finally {
  for (const h of hubs) await h.hub.stop();
}
