// Promises made and promise jobs run per modern tools/call, by where in the hub they were made
// (docs/BENCHMARKS.md, the sixty-fourth session): an await of a settled value, an async function
// awaiting another, a reaction nobody needed, each shows as a job. The built hub (as `npm start`
// runs it) with the stdio echo, or with `--upstream http` the modern HTTP echo; `--warmup` calls,
// then `--calls` counted, one at a time on one keep-alive connection. async_hooks slows the hub
// many times over: counts only, no timings. `--method prompts/get` asks the stdio echo's prompt
// instead (Router.forward's path, as resources/read and completion/complete take); `--batch`
// sends each request as a JSON-RPC batch of one on a 2025-03-26 session (legacy, no _meta).
//
//   node bench/promise-jobs.mjs [--upstream stdio|http] [--ledger on|off] [--method tools/call|prompts/get] [--batch] [--warmup 1000] [--calls 200]
//   SWITCHYARD_BENCH_ROOT=/path/to/other/build node bench/promise-jobs.mjs ...   (A/B)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { numberOption, option } from './lib/args.mjs';
import { legacyRequest, modernRequest, openLegacySession } from './lib/mcp.mjs';
import { echoStdioCommand, startEchoHttp, startHub } from './lib/targets.mjs';

const upstream = option('upstream', 'stdio');
if (upstream !== 'stdio' && upstream !== 'http') throw new Error('--upstream is stdio or http');
const ledger = option('ledger', 'on') === 'on';
const method = option('method', 'tools/call');
if (method !== 'tools/call' && method !== 'prompts/get') throw new Error('--method is tools/call or prompts/get');
if (method === 'prompts/get' && upstream !== 'stdio') throw new Error('--method prompts/get asks the stdio echo (--upstream stdio)');
const batch = process.argv.includes('--batch');
const warmup = numberOption('warmup', 1000);
const calls = numberOption('calls', 200);
const dir = mkdtempSync(join(tmpdir(), 'switchyard-promise-jobs-'));
const out = join(dir, 'counts');

const echoHttp = upstream === 'http' ? await startEchoHttp() : undefined;
const hub = await startHub({
  servers: { echo: echoHttp ? { url: echoHttp.url } : echoStdioCommand(method === 'prompts/get' ? ['--prompts'] : []) },
  ledger,
  nodeArgs: ['--import', new URL('./lib/promise-jobs-preload.mjs', import.meta.url).pathname],
  env: { PROMISE_JOBS_OUT: out },
});
const request = batch
  ? legacyRequest({ port: hub.port, method, tool: 'echo__echo', ...(await openLegacySession(`http://127.0.0.1:${hub.port}/mcp`, '2025-03-26')), batch: true })
  : modernRequest({ port: hub.port, method, tool: 'echo__echo' });
const socket = net.connect(hub.port, '127.0.0.1');
socket.setNoDelay(true);
let buf = Buffer.alloc(0);
let waiting;
socket.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return;
  const length = Number(/content-length:\s*(\d+)/i.exec(buf.toString('latin1', 0, headEnd))?.[1]);
  const end = headEnd + 4 + length;
  if (buf.length < end) return;
  const body = buf.toString('utf8', headEnd + 4, end);
  buf = buf.subarray(end);
  const w = waiting;
  waiting = undefined;
  w(body);
});
let seq = 0;
const send = async () => {
  const bytes = Buffer.from(request.buf);
  bytes.write(`w0000n${String(++seq).padStart(10, '0')}`, request.idOffset, 'latin1');
  const body = await new Promise((resolve) => ((waiting = resolve), socket.write(bytes)));
  if (!body.includes('"result"') || !body.includes('hello')) throw new Error(`not the echo's answer: ${body.slice(0, 300)}`);
};
/** A signal, then time for the hub to take it (and, after the window, for the last call's after-turn work). */
const signal = async () => {
  await new Promise((r) => setTimeout(r, 300));
  process.kill(hub.pid, 'SIGUSR2');
  await new Promise((r) => setTimeout(r, 300));
};
try {
  for (let i = 0; i < warmup; i++) await send();
  await signal();
  for (let i = 0; i < calls; i++) await send();
  await signal();
} finally {
  socket.destroy();
  await hub.stop();
  await echoHttp?.stop();
}
const counts = JSON.parse(readFileSync(`${out}.0.json`, 'utf8'));
rmSync(dir, { recursive: true, force: true });
const perCall = (rows) => rows.reduce((s, [, n]) => s + n, 0) / calls;
console.log(`the hub, ledger ${ledger ? 'on' : 'off'}, ${upstream} echo, ${calls} ${method}${batch ? ' (batches of one)' : ''} after ${warmup}: per call ${perCall(counts.made).toFixed(2)} promises made, ${perCall(counts.jobs).toFixed(2)} promise jobs run`);
console.log('jobs a call, by the hub frames that made their promise (at least one every other call):');
for (const [where, n] of counts.jobs) if (n / calls >= 0.5) console.log(`  ${(n / calls).toFixed(2)}  ${where}`);
