#!/usr/bin/env node
// Catalog benchmark: one hub over 100 modern upstreams × 50 tools (bench/catalog-upstreams.mjs,
// one process, HTTP), measured in-process on the built hub (dist/), ledger on:
//   - first: from "all upstreams ready" to the first complete aggregated list (every upstream listed, pins stored;
//     the hub lists each server as it gets ready, so this waits for what is left of that)
//   - cached: p50/p99 of the hub's own tools/list work (router + catalog + ledger row), first page and the full list
//   - the same first page over HTTP (keep-alive, JSON serialisation and the wire included)
//   - hub RSS
// node bench/catalog.mjs [--servers 100] [--tools 50] [--iterations 2000]
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { numberOption } from './lib/args.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { Hub } = await import(join(ROOT, 'dist/src/hub.js'));
const { parseConfig } = await import(join(ROOT, 'dist/src/config/load.js'));
const { silentLogger } = await import(join(ROOT, 'dist/src/log.js'));

const SERVERS = numberOption('servers', 100);
const TOOLS = numberOption('tools', 50);
const ITER = numberOption('iterations', 2000);

const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))];
const ms = (n) => (n < 10 ? n.toFixed(3) : n.toFixed(1));

const up = spawn(process.execPath, [join(ROOT, 'bench/catalog-upstreams.mjs'), '--servers', String(SERVERS), '--tools', String(TOOLS)], { stdio: ['pipe', 'pipe', 'inherit'] });
const port = await new Promise((res, rej) => {
  let out = '';
  up.stdout.on('data', (d) => {
    out += d;
    const m = /LISTENING (\d+)/.exec(out);
    if (m) res(Number(m[1]));
  });
  up.once('exit', (c) => rej(new Error(`upstreams exited ${c}`)));
});

const dir = mkdtempSync(join(tmpdir(), 'switchyard-catalog-bench-'));
const servers = {};
for (let i = 0; i < SERVERS; i++) servers[`s${i}`] = { url: `http://127.0.0.1:${port}/s/${i}/mcp`, era: '2026-07-28' };
const config = parseConfig({ ledger: { path: join(dir, 'ledger.db') }, servers }, join(dir, 'hub.config.json'));
const rss0 = process.memoryUsage().rss;
const hub = Hub.create(config, silentLogger);
const t0 = performance.now();
hub.startUpstreams();
while ([...hub.handles.values()].some((h) => h.upstream.state !== 'ready')) await new Promise((r) => setTimeout(r, 5));
const readyMs = performance.now() - t0;

let id = 0;
const ctx = () => ({ requestId: ++id, principal: 'anonymous', clientEra: '2026-07-28', clientCapabilities: {}, signal: new AbortController().signal });
async function full() {
  let cursor;
  let n = 0;
  let pages = 0;
  do {
    const r = await hub.handle('tools/list', cursor === undefined ? {} : { cursor }, ctx());
    n += r.tools.length;
    pages++;
    cursor = r.nextCursor;
  } while (cursor !== undefined);
  return { n, pages };
}

const c0 = performance.now();
const first = await full();
const coldMs = performance.now() - c0;

for (let i = 0; i < 200; i++) await hub.handle('tools/list', {}, ctx()); // warm-up
const page = [];
for (let i = 0; i < ITER; i++) {
  const s = performance.now();
  await hub.handle('tools/list', {}, ctx());
  page.push(performance.now() - s);
}
const fulls = [];
for (let i = 0; i < Math.max(50, ITER / 20); i++) {
  const s = performance.now();
  await full();
  fulls.push(performance.now() - s);
}
const agg = [];
for (let i = 0; i < ITER; i++) {
  const s = performance.now();
  await hub.catalog.aggregate('tools');
  agg.push(performance.now() - s);
}

// Over HTTP: a modern client's first page, keep-alive.
const addr = await hub.listen('127.0.0.1', 0);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const body = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/list',
  params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } },
});
const headers = { 'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list', 'content-length': Buffer.byteLength(body) };
const post = () =>
  new Promise((res, rej) => {
    const r = http.request({ host: '127.0.0.1', port: addr.port, path: '/mcp', method: 'POST', agent, headers }, (resp) => {
      let n = 0;
      resp.on('data', (d) => (n += d.length));
      resp.on('end', () => res(n));
    });
    r.on('error', rej);
    r.end(body);
  });
for (let i = 0; i < 50; i++) await post();
const wire = [];
let bytes = 0;
for (let i = 0; i < Math.max(200, ITER / 5); i++) {
  const s = performance.now();
  bytes = await post();
  wire.push(performance.now() - s);
}
const stats = await fetch(`http://127.0.0.1:${port}/s/0/mcp`, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'bench/stats' }) }).then((r) => r.json());
const rss = process.memoryUsage().rss;

const report = {
  servers: SERVERS,
  toolsPerServer: TOOLS,
  tools: first.n,
  pages: first.pages,
  readyMs,
  coldFirstFullListMs: coldMs,
  cachedFirstPage: { p50: pct(page, 0.5), p99: pct(page, 0.99) },
  cachedFullList: { p50: pct(fulls, 0.5), p99: pct(fulls, 0.99) },
  cachedAggregate: { p50: pct(agg, 0.5), p99: pct(agg, 0.99) },
  httpFirstPage: { p50: pct(wire, 0.5), p99: pct(wire, 0.99), bytes },
  upstreamListCalls: stats.result.listCalls,
  rssMb: { before: rss0 / 2 ** 20, after: rss / 2 ** 20 },
};
console.log(JSON.stringify(report, null, 2));
console.log(
  `\n- ${SERVERS} modern upstreams × ${TOOLS} tools = ${first.n} tools (${first.pages} pages): all ready in ${ms(readyMs)} ms; first full list right after that ${ms(coldMs)} ms;` +
    ` cached tools/list first page p50 ${ms(report.cachedFirstPage.p50)} ms (p99 ${ms(report.cachedFirstPage.p99)}), full list p50 ${ms(report.cachedFullList.p50)} ms,` +
    ` catalog aggregate alone p50 ${ms(report.cachedAggregate.p50)} ms; over HTTP first page p50 ${ms(report.httpFirstPage.p50)} ms (${(bytes / 1024).toFixed(0)} KiB);` +
    ` upstream tools/list calls ${report.upstreamListCalls} (one per upstream); process RSS ${report.rssMb.after.toFixed(0)} MB (${report.rssMb.before.toFixed(0)} MB before the hub).`,
);
await hub.stop(0);
up.stdin.end();
up.kill();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
