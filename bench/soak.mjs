#!/usr/bin/env node
// Soak: steady load through the real hub across 10 upstreams while upstreams are killed at
// random, for `--minutes N` (default 10). Passes when the hub never crashed, every call got a
// JSON-RPC answer (a result, a tool error or a protocol error: never silence, a 5xx or a
// dropped connection), the hub's RSS grew less than 10 % from the end of the warm-up to the
// end, and afterwards SIGTERM exits 0, `ledger verify` passes and no process is left behind.
//
//   node bench/soak.mjs [--minutes 10] [--workers 16] [--kill-every 4] [--json out.json] [--keep]
//
// The run's folder (the hub's config and ledger) is removed after a pass and kept, its path
// printed, after a failure or with --keep.
//
// Upstreams: 4 raw legacy stdio echo servers, 2 SDK v1 stdio servers (legacy), 1 SDK v2 stdio
// server (modern), 2 raw modern HTTP echo servers and 1 SDK v1 HTTP server (legacy sessions).
// A killed stdio server is restarted by the hub; a killed HTTP server is restarted by this
// script on the same port 1-3 s later (the hub's circuit breaker and session renewal see to
// the rest). Everything listens on 127.0.0.1 only.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { numberOption, option } from './lib/args.mjs';
import { descendants, freePort, rssOf, startProcess } from './lib/procs.mjs';
import { shippedNodeFlags } from './lib/targets.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'dist/src/cli/main.js');
const MINUTES = numberOption('minutes', 10);
const WORKERS = numberOption('workers', 16);
const KILL_EVERY_S = numberOption('kill-every', 4);
const JSON_OUT = option('json');
const DURATION_MS = MINUTES * 60_000;
const WARMUP_MS = Math.max(30_000, DURATION_MS * 0.15);
const WINDOW_MS = Math.min(60_000, DURATION_MS * 0.2);
const CALL_TIMEOUT_MS = 30_000;
const log = (m) => process.stderr.write(`[soak ${((performance.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${m}\n`);
const t0 = performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

if (!existsSync(BIN)) {
  process.stderr.write('dist/ is missing: run `npx tsc -p .` first\n');
  process.exit(2);
}

// ------------------------------------------------------------------------------ upstreams

const dir = mkdtempSync(join(tmpdir(), 'switchyard-soak-'));
const node = process.execPath;
const sdk1 = join(ROOT, 'test/fixtures/servers/sdk1-server.mjs');
const sdk2 = join(ROOT, 'test/fixtures/servers/sdk2-modern-server.mjs');
/** stdio upstreams carry a marker argument so their pids can be found among the hub's children. */
const stdio = {
  s0: [join(ROOT, 'bench/echo-stdio.mjs'), '--name', 'soak-s0'],
  s1: [join(ROOT, 'bench/echo-stdio.mjs'), '--name', 'soak-s1'],
  s2: [join(ROOT, 'bench/echo-stdio.mjs'), '--name', 'soak-s2'],
  s3: [join(ROOT, 'bench/echo-stdio.mjs'), '--name', 'soak-s3'],
  s4: [sdk1, '--soak-id', 'soak-s4'],
  s5: [sdk1, '--soak-id', 'soak-s5'],
  s6: [sdk2, '--soak-id', 'soak-s6'],
};
const httpKinds = { h7: 'echo', h8: 'echo', h9: 'sdk1' };
const http = {};

async function startHttp(id, port) {
  const args = httpKinds[id] === 'echo' ? [join(ROOT, 'bench/echo-http.mjs'), '--port', String(port)] : [sdk1, '--http', String(port)];
  const t = await startProcess(`upstream ${id}`, node, args, { env: { COUNTER_FILE: join(dir, `${id}.json`) }, ready: /LISTENING (\d+)/ });
  http[id] = { port, proc: t };
}

const servers = {};
for (const [id, args] of Object.entries(stdio)) servers[id] = { command: node, args, env: { COUNTER_FILE: join(dir, `${id}.json`) }, timeoutMs: 10_000 };
for (const id of Object.keys(httpKinds)) {
  await startHttp(id, await freePort());
  servers[id] = { url: `http://127.0.0.1:${http[id].port}/mcp`, timeoutMs: 10_000, circuitBreaker: { failures: 5, cooldownMs: 1000 } };
}
const IDS = Object.keys(servers);

// ------------------------------------------------------------------------------ the hub

const configFile = join(dir, 'hub.config.json');
writeFileSync(configFile, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers }, null, 2));
const hubPort = await freePort();
// With the Node flags `npm start` passes (of the build it runs, ROOT): the soak measures the hub as shipped.
const hub = await startProcess('hub', node, [...shippedNodeFlags(ROOT), BIN, 'start', '--config', configFile, '--port', String(hubPort), '--no-watch'], {
  env: { SWITCHYARD_LOG_LEVEL: 'info' },
  ready: /switchyard listening/,
});
const URL_ = `http://127.0.0.1:${hubPort}/mcp`;
let hubExit;
void hub.exited.then((e) => (hubExit = e));

async function health() {
  return (await fetch(`http://127.0.0.1:${hubPort}/healthz`)).json();
}
for (let i = 0; i < 300; i++) {
  const h = await health();
  if (h.servers.every((s) => s.state === 'ready')) break;
  await sleep(100);
}
log(`hub pid ${hub.pid} on ${URL_}; ${IDS.length} upstreams ready; ${WORKERS} workers for ${MINUTES} min, a kill every ~${KILL_EVERY_S} s`);

// ------------------------------------------------------------------------------ load

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'switchyard-soak', version: '1.0.0' },
};
const stats = { sent: 0, ok: 0, toolError: 0, rpcError: 0, unanswered: 0, byError: {} };
const unansweredSamples = [];
let stop = false;
let seq = 0;

function pickCall() {
  const id = IDS[Math.floor(Math.random() * IDS.length)];
  // SDK servers also get slower calls, so kills land on calls in flight.
  if ((id === 's4' || id === 's5' || id === 'h9') && Math.random() < 0.2) return { name: `${id}__slow`, arguments: { ms: 200 } };
  return { name: `${id}__echo`, arguments: { text: `soak-${seq}` } };
}

function lastMessage(ct, text) {
  if (!ct.includes('text/event-stream')) return JSON.parse(text);
  let last;
  for (const ev of text.split(/\n\n/)) {
    const data = ev.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
    if (data) {
      const m = JSON.parse(data);
      if ('result' in m || 'error' in m) last = m;
    }
  }
  return last;
}

async function worker() {
  while (!stop) {
    const params = pickCall();
    const id = `c${++seq}`;
    stats.sent++;
    try {
      const res = await fetch(URL_, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': params.name,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: META } }),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      const text = await res.text();
      const m = res.status < 500 ? lastMessage(res.headers.get('content-type') ?? '', text) : undefined;
      if (!m || m.id !== id) throw new Error(`HTTP ${res.status} without its answer: ${text.slice(0, 200)}`);
      if (m.error) {
        stats.rpcError++;
        const k = `rpc ${m.error.code}: ${String(m.error.message).replace(/\d+/g, 'N').slice(0, 60)}`;
        stats.byError[k] = (stats.byError[k] ?? 0) + 1;
      } else if (m.result?.isError) {
        stats.toolError++;
        const k = `tool: ${String(m.result.content?.[0]?.text ?? '').replace(/"[a-z0-9]+__[a-z]+"/g, '"X"').replace(/\d+/g, 'N').slice(0, 70)}`;
        stats.byError[k] = (stats.byError[k] ?? 0) + 1;
      } else stats.ok++;
    } catch (err) {
      stats.unanswered++;
      if (unansweredSamples.length < 10) unansweredSamples.push(`${params.name}: ${err.message}`);
      if (hubExit) return;
    }
  }
}

// ------------------------------------------------------------------------------ chaos

const kills = { stdio: 0, http: 0 };

function stdioPidOf(id) {
  for (const pid of descendants(hub.pid)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (cmd.includes(stdio[id][stdio[id].length - 1]) && cmd.includes(stdio[id][0])) return pid;
    } catch {
      // gone
    }
  }
  return undefined;
}

async function chaos() {
  while (!stop) {
    await sleep(KILL_EVERY_S * 1000 * (0.5 + Math.random()));
    if (stop) return;
    const id = IDS[Math.floor(Math.random() * IDS.length)];
    if (id in stdio) {
      const pid = stdioPidOf(id);
      if (pid === undefined) continue; // restarting right now
      try {
        process.kill(pid, 'SIGKILL');
        kills.stdio++;
      } catch {
        // already gone
      }
    } else {
      const h = http[id];
      try {
        process.kill(h.proc.pid, 'SIGKILL');
        kills.http++;
      } catch {
        continue;
      }
      await h.proc.exited;
      await h.proc.stop();
      await sleep(1000 + Math.random() * 2000);
      if (!stop) await startHttp(id, h.port).catch((err) => log(`could not restart ${id}: ${err.message}`));
    }
  }
}

// ------------------------------------------------------------------------------ memory

const rss = [];
const sampler = setInterval(() => rss.push({ t: performance.now() - t0, bytes: rssOf(hub.pid) }), 2000);
const progress = setInterval(() => {
  const mb = (rssOf(hub.pid) / 1048576).toFixed(1);
  log(`sent ${stats.sent} ok ${stats.ok} toolError ${stats.toolError} rpcError ${stats.rpcError} unanswered ${stats.unanswered}; kills ${kills.stdio}+${kills.http}; rss ${mb} MB`);
}, 30_000);

const loadStart = performance.now() - t0;
const chaosDone = chaos();
const workers = Array.from({ length: WORKERS }, () => worker());
await sleep(DURATION_MS);
stop = true;
await Promise.all(workers);
await chaosDone;
clearInterval(sampler);
clearInterval(progress);
const loadEnd = performance.now() - t0;

// ------------------------------------------------------------------------------ verdict

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const baseFrom = loadStart + WARMUP_MS;
const baseline = mean(rss.filter((s) => s.t >= baseFrom && s.t < baseFrom + WINDOW_MS && s.bytes > 0).map((s) => s.bytes));
const final = mean(rss.filter((s) => s.t >= loadEnd - WINDOW_MS && s.bytes > 0).map((s) => s.bytes));
const growth = baseline > 0 ? final / baseline - 1 : NaN;
const crashed = hubExit !== undefined;
const h = crashed ? undefined : await health();
const tree = descendants(hub.pid);
let stopCode = null;
if (!crashed) {
  process.kill(hub.pid, 'SIGTERM');
  const e = await hub.exited;
  stopCode = e.code;
}
await sleep(1500);
const orphans = tree.filter((pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
});
let verify = 'not run';
try {
  verify = execFileSync(node, [BIN, 'ledger', 'verify', '--db', join(dir, 'ledger.db')], { encoding: 'utf8' }).trim();
} catch (err) {
  verify = `FAILED: ${(err.stdout ?? '') + (err.stderr ?? '')}`.trim();
}
for (const x of Object.values(http)) await x.proc.stop();

const result = {
  minutes: MINUTES,
  workers: WORKERS,
  upstreams: IDS.length,
  calls: stats.sent,
  callsPerSecond: Math.round(stats.sent / ((loadEnd - loadStart) / 1000)),
  ok: stats.ok,
  toolErrors: stats.toolError,
  rpcErrors: stats.rpcError,
  unanswered: stats.unanswered,
  unansweredSamples,
  errorKinds: Object.fromEntries(Object.entries(stats.byError).sort((a, b) => b[1] - a[1]).slice(0, 12)),
  kills,
  restarts: h ? Object.fromEntries(h.servers.map((s) => [s.id, s.restarts])) : null,
  hubCrashed: crashed,
  rssBaselineMB: +(baseline / 1048576).toFixed(1),
  rssFinalMB: +(final / 1048576).toFixed(1),
  rssGrowthPct: +(growth * 100).toFixed(1),
  sigtermExit: stopCode,
  orphans,
  ledgerVerify: verify.split('\n')[0],
};
const pass = !crashed && stats.unanswered === 0 && growth < 0.1 && stopCode === 0 && orphans.length === 0 && !verify.startsWith('FAILED');
result.pass = pass;
process.stdout.write(JSON.stringify(result, null, 2) + '\n');
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(result, null, 2) + '\n');
log(pass ? 'PASS' : 'FAIL');
if (pass && !process.argv.includes('--keep')) rmSync(dir, { recursive: true, force: true });
else log(`the hub's config and ledger are kept in ${dir}`);
process.exit(pass ? 0 : 1);
