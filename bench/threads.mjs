// CPU per call of each of the hub's threads (the event loop, the ledger's ingest thread, the
// rest), read from /proc/PID/task/*/schedstat around a run of the benchmark's load, in front
// of the stdio or the HTTP echo (docs/BENCHMARKS.md, "Holding in-flight rows for their finish"). The
// whole-process figure of `npm run bench` cannot tell the hub's thread, the bottleneck at
// concurrency 64, from the ledger's, which runs on the other core. A second line gives, per
// call, how often the event loop was preempted and slept, its read and write syscalls, and the
// CPU of the upstream echo and of this process (the load generator), which share the cores
// (docs/BENCHMARKS.md, twenty-fifth round). Linux only.
//
//   node bench/threads.mjs [--ledger on|off] [--upstream stdio|http] [--concurrency 64] [--measure-ms 3000] [--runs 2]
//   SWITCHYARD_BENCH_ROOT=/path/to/other/build node bench/threads.mjs ...   (A/B)
import { childPids, delta, perCall, processThreads } from './lib/proc-stats.mjs';
import { echoStdioCommand, startEchoHttp, startHub } from './lib/targets.mjs';
import { numberOption, option } from './lib/args.mjs';
import { runHttp } from './lib/load.mjs';
import { modernRequest } from './lib/mcp.mjs';

const ledger = option('ledger', 'on') === 'on';
const concurrency = numberOption('concurrency', 64);
const measureMs = numberOption('measure-ms', 3000);
const runs = numberOption('runs', 2);
const upstream = option('upstream', 'stdio');
if (upstream !== 'stdio' && upstream !== 'http') throw new Error('--upstream is stdio or http');
// In front of the HTTP echo (bench/echo-http.mjs, modern), which runs in a process of its own.
const echoHttp = upstream === 'http' ? await startEchoHttp() : undefined;

for (let run = 0; run < runs; run++) {
  const hub = await startHub({ servers: { echo: echoHttp ? { url: echoHttp.url } : echoStdioCommand() }, ledger });
  try {
    const request = modernRequest({ port: hub.port, method: 'tools/call', tool: 'echo__echo' });
    await runHttp({ port: hub.port, request, concurrency, warmupMs: 0, measureMs: 1500 }); // warm-up
    // The stdio echo is the hub's child; the HTTP echo runs beside it.
    const echoPid = echoHttp ? echoHttp.pid : childPids(hub.pid)[0];
    const before = processThreads(hub.pid);
    const echoBefore = processThreads(echoPid);
    const loadBefore = processThreads(process.pid);
    const r = await runHttp({ port: hub.port, request, concurrency, warmupMs: 0, measureMs });
    const after = processThreads(hub.pid);
    const calls = r.rps * (measureMs / 1000);
    const mainTid = String(hub.pid);
    const loop = perCall(delta(before.get(mainTid), after.get(mainTid)), calls);
    const echo = perCall(delta(echoBefore, processThreads(echoPid)), calls);
    const load = perCall(delta(loadBefore, processThreads(process.pid)), calls);
    // The busiest other thread is the ledger's (with the ledger on); the rest are libuv's and V8's.
    const others = [...after]
      .filter(([tid]) => tid !== mainTid)
      .map(([tid, c]) => (c.cpuUs - (before.get(tid)?.cpuUs ?? 0)) / calls)
      .sort((a, b) => b - a);
    const busiest = others[0] ?? 0;
    const rest = others.slice(1).reduce((sum, us) => sum + us, 0);
    console.log(
      `${upstream}, ledger ${ledger ? 'on' : 'off'} @${concurrency}: ${Math.round(r.rps)} req/s · µs per call: event loop ${loop.cpuUs.toFixed(1)}, ` +
        `busiest other thread ${busiest.toFixed(1)}, the rest ${rest.toFixed(1)}`,
    );
    console.log(
      `  per call: event loop preempted ${loop.preempted.toFixed(3)}×, slept ${loop.sleeps.toFixed(3)}×, ${loop.syscr.toFixed(2)} reads, ` +
        `${loop.syscw.toFixed(2)} writes · µs of CPU: ${upstream} echo ${echo.cpuUs.toFixed(1)}, load generator ${load.cpuUs.toFixed(1)}`,
    );
  } finally {
    await hub.stop();
  }
}
await echoHttp?.stop();
