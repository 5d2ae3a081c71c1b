#!/usr/bin/env node
// `npm run bench [-- --quick] [-- --only REGEX] [-- --no-peers] [-- --no-extras] [-- --write-docs]`
//   narrower runs: --conc 1,64  --methods tools/call  --measure-ms 3000
// `npm run bench -- --profile [--profile-target sy-stdio] [--profile-concurrency 64] [--profile-method tools/call]`
//
// Measures, in one run on this machine, the same two upstreams (bench/echo-stdio.mjs, legacy,
// and bench/echo-http.mjs, modern) reached directly, through the minimal forwarder
// (bench/forwarder.mjs, the practical ceiling), through Switchyard (ledger on and off) and
// through peer hubs from npm; then start-up, memory, aggregated lists, ledger cost and ledger
// queries. Prints a markdown report; numbers are printed, never asserted. See docs/BENCHMARKS.md.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { ensureBuilt } from './lib/build.mjs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { summarise, printSummary } from './lib/cpuprofile.mjs';
import { ledgerCommitBench } from './lib/ledger-commit.mjs';
import { ledgerQueryBench } from './lib/ledger-query.mjs';
import { runHttp, runStdio } from './lib/load.mjs';
import { legacyRequest, modernRequest, openLegacySession, rpc, stdioLine } from './lib/mcp.mjs';
import { ensurePeers } from './lib/peers.mjs';
import { cpuNs, descendants, rssOf } from './lib/procs.mjs';
import { BENCH, ROOT, echoStdioCommand, shippedNodeFlags, startEchoHttp, startForwarder, startHub, startMcpHub, startMcpProxy, startSupergateway } from './lib/targets.mjs';
import { runSse } from './lib/sse-load.mjs';

const USAGE = `Usage: npm run bench [-- options]

  --quick                    a smoke run (under 2 minutes; numbers printed, not asserted)
  --write-docs               rewrite the results section of docs/BENCHMARKS.md
  --only REGEX               only the targets whose key matches (sy-stdio, limit-http, ...)
  --conc 1,8,64              concurrencies          --methods tools/call,tools/list
  --measure-ms MS            per cell               --passes N (best of N)
  --target-warmup-ms MS      unmeasured load per target and method before its cells (full: 1500, quick: 0)
  --no-peers, --no-extras    skip the npm peers, or all the extras below
  --extras paired,ledger,... only these extras: paired (the hub against the forwarding limit in
                             alternating runs at 64), ledger, startup, aggregated, commit, query
  --paired-concurrency N     the paired runs' concurrency (64, the targets'; lower for a smoke run)
  --profile [--profile-target sy-stdio] [--profile-concurrency 64] [--profile-method tools/call] [--top 30]
  --report FILE.json         render a saved run again
  -h, --help                 this text
`;
// Strict: an unknown or misspelt option is refused rather than ignored (it used to start a
// full run of a quarter of an hour).
let parsed;
try {
  parsed = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: 'boolean' },
      'write-docs': { type: 'boolean' },
      only: { type: 'string' },
      conc: { type: 'string' },
      methods: { type: 'string' },
      'measure-ms': { type: 'string' },
      'target-warmup-ms': { type: 'string' },
      'paired-concurrency': { type: 'string' },
      passes: { type: 'string' },
      'no-peers': { type: 'boolean' },
      'no-extras': { type: 'boolean' },
      extras: { type: 'string' },
      profile: { type: 'boolean' },
      'profile-target': { type: 'string' },
      'profile-concurrency': { type: 'string' },
      'profile-method': { type: 'string' },
      top: { type: 'string' },
      report: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
} catch (err) {
  process.stderr.write(`bench: ${err.message}\n\n${USAGE}`);
  process.exit(2);
}
if (parsed.values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const flag = (f) => parsed.values[f.slice(2)] === true;
const opt = (f, d) => parsed.values[f.slice(2)] ?? d;
const QUICK = flag('--quick');
const ONLY = opt('--only') ? new RegExp(opt('--only')) : undefined;
const T = QUICK ? { warmupMs: 150, measureMs: 450 } : { warmupMs: 1000, measureMs: 4000 };
if (opt('--measure-ms')) T.measureMs = Number(opt('--measure-ms'));
/**
 * Unmeasured load on every target once it has started, before its first cell, per method (at
 * concurrency 8, then 1): the daemon the cells stand for has run for a while. Without it the
 * first cell (tools/call at concurrency 1) timed a process whose JIT was still compiling: the
 * hub's compiler threads took 40–80 µs per call there, and its CPU per call fell from 753 to
 * ~390 µs over the next four 2-second windows (HTTP, ledger on). A small process like the
 * forwarder warms in far fewer calls, so the cold first cell was not the same test for all.
 */
const TARGET_WARMUP_MS = Number(opt('--target-warmup-ms', QUICK ? '0' : '1500'));
const CONC = opt('--conc') ? opt('--conc').split(',').map(Number) : [1, 8, 64];
const METHODS = opt('--methods') ? opt('--methods').split(',') : ['tools/call', 'tools/list'];
const PASSES = Number(opt('--passes', QUICK ? '1' : '2'));
/**
 * The targets are judged at 64. A round counts only the requests that start and end inside its
 * window, so a window shorter than one request's wait at 64 (64 / req/s: 0.6 s at 100 req/s, as
 * on a loaded machine) counts none; a smoke run of short rounds needs fewer in flight.
 */
const PAIRED_CONC = Number(opt('--paired-concurrency', '64'));
if (!(Number.isInteger(PAIRED_CONC) && PAIRED_CONC > 0)) {
  process.stderr.write(`bench: --paired-concurrency takes a whole number above 0\n\n${USAGE}`);
  process.exit(2);
}
const EXTRAS = ['paired', 'ledger', 'startup', 'aggregated', 'commit', 'query'];
const CHOSEN_EXTRAS = flag('--no-extras') ? [] : opt('--extras') ? opt('--extras').split(',') : EXTRAS;
if (CHOSEN_EXTRAS.some((e) => !EXTRAS.includes(e))) {
  process.stderr.write(`bench: --extras takes ${EXTRAS.join(', ')}\n\n${USAGE}`);
  process.exit(2);
}
const extra = (name) => CHOSEN_EXTRAS.includes(name);
const log = (m) => process.stderr.write(`${m}\n`);
const startedAt = performance.now();

// ------------------------------------------------------------------------------ set-up

function ensureBuiltHere() {
  if (process.env.SWITCHYARD_BENCH_ROOT) return; // an A/B build, measured as it is
  ensureBuilt(ROOT, { log: (m) => log(`bench: ${m}`), onErrors: () => log('bench: tsc reported errors; measuring the JavaScript it emitted') });
}

function machine() {
  const cpus = os.cpus();
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model?.trim() ?? 'unknown',
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    hubNodeFlags: shippedNodeFlags(),
    hubNodeFlagsFrom: process.env.SWITCHYARD_BENCH_NODE_FLAGS !== undefined ? 'SWITCHYARD_BENCH_NODE_FLAGS' : 'npm start',
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

// ------------------------------------------------------------------------------ targets

const stdioEcho = echoStdioCommand();
const hubStdio = (ledger) => ({ servers: { echo: { command: stdioEcho.command, args: stdioEcho.args } }, ledger });
const hubHttp = (url, ledger) => ({ servers: { echo: { url } }, ledger });

/** Every target: `start()` resolves to { port, path, pid, stop } or, for stdio, { stdio: true }. */
const TARGETS = [
  { key: 'direct-http', label: 'direct: HTTP echo', group: 'direct', upstream: 'http', mode: 'modern', tool: 'echo', start: (u) => u },
  { key: 'direct-stdio', label: 'direct: stdio echo (in-process client)', group: 'direct', upstream: 'stdio', stdio: true, tool: 'echo' },
  { key: 'limit-stdio', label: 'forwarding limit: HTTP → stdio', group: 'limit', upstream: 'stdio', mode: 'modern', tool: 'echo', start: () => startForwarder(stdioEcho) },
  { key: 'limit-http', label: 'forwarding limit: HTTP → HTTP', group: 'limit', upstream: 'http', mode: 'modern', tool: 'echo', start: (u) => startForwarder(u) },
  { key: 'sy-stdio', label: 'Switchyard → stdio, ledger on', group: 'switchyard', upstream: 'stdio', mode: 'modern', tool: 'echo__echo', start: () => startHub(hubStdio(true)) },
  { key: 'sy-stdio-noledger', label: 'Switchyard → stdio, ledger off', group: 'switchyard', upstream: 'stdio', mode: 'modern', tool: 'echo__echo', start: () => startHub(hubStdio(false)) },
  { key: 'sy-stdio-legacy', label: 'Switchyard → stdio, legacy session, ledger on', group: 'switchyard', upstream: 'stdio', mode: 'legacy', tool: 'echo__echo', start: () => startHub(hubStdio(true)) },
  { key: 'sy-http', label: 'Switchyard → HTTP, ledger on', group: 'switchyard', upstream: 'http', mode: 'modern', tool: 'echo__echo', start: (u) => startHub(hubHttp(u.url, true)) },
  { key: 'sy-http-noledger', label: 'Switchyard → HTTP, ledger off', group: 'switchyard', upstream: 'http', mode: 'modern', tool: 'echo__echo', start: (u) => startHub(hubHttp(u.url, false)) },
  { key: 'mcp-proxy', label: 'mcp-proxy 6.7.19 → stdio (modern requests)', group: 'peer', peer: 'mcp-proxy', upstream: 'stdio', mode: 'modern', tool: 'echo', start: () => startMcpProxy(stdioEcho) },
  { key: 'mcp-proxy-legacy', label: 'mcp-proxy 6.7.19 → stdio (legacy session)', group: 'peer', peer: 'mcp-proxy', upstream: 'stdio', mode: 'legacy', tool: 'echo', start: () => startMcpProxy(stdioEcho) },
  { key: 'mcp-hub', label: 'mcp-hub 4.2.1 → stdio (HTTP+SSE session)', group: 'peer', peer: 'mcp-hub', upstream: 'stdio', mode: 'sse', tool: 'echo__echo', start: () => startMcpHub(stdioEcho) },
  { key: 'supergateway', label: 'supergateway 4.0.0 → stdio (stateful, legacy session)', group: 'peer', peer: 'supergateway', upstream: 'stdio', mode: 'legacy', tool: 'echo', start: () => startSupergateway(stdioEcho) },
];

function cmdlineOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function treeRss(pid) {
  return [pid, ...descendants(pid)].reduce((a, p) => a + rssOf(p), 0);
}

async function measureTarget(t, rows) {
  log(`bench: ${t.label}`);
  if (t.stdio) {
    // No target warm-up here: each cell spawns an echo of its own (the client is this process).
    for (const method of METHODS)
      for (const c of CONC) {
        const r = await runStdio({ ...stdioEcho, line: stdioLine(method, t.tool), concurrency: c, ...T });
        rows.push({ key: t.key, method, c, ...r });
      }
    return;
  }
  const echo = t.upstream === 'http' ? await startEchoHttp() : undefined;
  let target;
  try {
    if (t.key === 'direct-http') target = { ...echo, path: '/mcp', pid: echo.pid, stop: async () => {} };
    else {
      try {
        target = await t.start(echo);
      } catch (err) {
        log(`bench:   start failed, retrying once: ${String(err?.message ?? err).split('\n')[0]}`);
        await new Promise((r) => setTimeout(r, 1000));
        target = await t.start(echo);
      }
    }
    const url = `http://127.0.0.1:${target.port}${target.path}`;
    if (t.mode === 'sse') {
      const idleRss = rssOf(target.pid);
      const paramsFor = (method) => (method === 'tools/call' ? { name: t.tool, arguments: { text: 'hello' } } : {});
      await warmUp(t, (method, c, ms) => runSse({ port: target.port, path: target.path, method, params: paramsFor(method), concurrency: c, warmupMs: 0, measureMs: ms }));
      for (const method of METHODS)
        for (const c of CONC) {
          const r = await runSse({ port: target.port, path: target.path, method, params: paramsFor(method), concurrency: c, ...T, cpuProbe: () => cpuNs(target.pid) });
          rows.push({ key: t.key, method, c, ...r, rss: treeRss(target.pid), idleRss });
        }
      return;
    }
    const session = t.mode === 'legacy' ? await openLegacySession(url) : undefined;
    // One checked call each way first: a target that answers errors is reported, not timed.
    if (t.mode === 'modern') await rpc(url, 'tools/call', { name: t.tool, arguments: { text: 'check' } });
    const idleRss = rssOf(target.pid); // the front process alone, before any load
    const requestFor = (method) => (t.mode === 'legacy' ? legacyRequest({ port: target.port, path: target.path, method, tool: t.tool, ...session }) : modernRequest({ port: target.port, path: target.path, method, tool: t.tool }));
    await warmUp(t, (method, c, ms) => runHttp({ port: target.port, request: requestFor(method), concurrency: c, warmupMs: 0, measureMs: ms }));
    for (const method of METHODS)
      for (const c of CONC) {
        const r = await runHttp({ port: target.port, request: requestFor(method), concurrency: c, ...T, cpuProbe: () => cpuNs(target.pid) });
        rows.push({ key: t.key, method, c, ...r, rss: treeRss(target.pid), idleRss });
      }
  } catch (err) {
    rows.push({ key: t.key, failed: String(err?.message ?? err).split('\n')[0] });
    log(`bench:   failed: ${String(err?.message ?? err).split('\n')[0]}`);
  } finally {
    if (target && target !== echo) await target.stop();
    if (echo) await echo.stop();
  }
}

/** The target's unmeasured load (TARGET_WARMUP_MS per method, at 8 then 1); `run` sends it and reports `n` answered. */
async function warmUp(t, run) {
  if (TARGET_WARMUP_MS <= 0) return;
  let n = 0;
  for (const method of METHODS) for (const c of [8, 1]) n += (await run(method, c, TARGET_WARMUP_MS / 2)).n;
  log(`bench:   ${t.key} warmed up with ${n} requests (unmeasured)`);
}

/** Per (target, method, concurrency): the pass with the highest throughput, with the spread. */
function bestOf(rows) {
  const out = new Map();
  for (const r of rows) {
    const k = r.failed ? `${r.key}\0failed` : `${r.key}\0${r.method}\0${r.c}`;
    const prev = out.get(k);
    if (!prev) out.set(k, { ...r, passes: [r.rps] });
    else {
      const passes = [...prev.passes, r.rps];
      out.set(k, (r.rps ?? 0) > (prev.rps ?? 0) ? { ...r, passes } : { ...prev, passes });
    }
  }
  // A target that failed in one pass but was measured in another counts as measured.
  return [...out.values()].filter((r) => !r.failed || ![...out.values()].some((x) => x.key === r.key && !x.failed));
}

// ------------------------------------------------------------------------------ extras

async function startup(n) {
  const servers = {};
  for (let i = 0; i < n; i++) servers[`s${i}`] = { command: stdioEcho.command, args: stdioEcho.args };
  const hub = await startHub({ servers, ledger: true, readyTimeoutMs: 120_000 });
  await new Promise((r) => setTimeout(r, 300));
  const hubRss = rssOf(hub.pid);
  // Only the echo upstreams (the hub also keeps a small watchdog process).
  const kids = descendants(hub.pid).filter((p) => cmdlineOf(p).includes('echo-stdio'));
  const childRss = kids.reduce((a, p) => a + rssOf(p), 0) / Math.max(1, kids.length);
  await hub.stop();
  return { n, listeningMs: hub.listeningMs, readyMs: hub.readyMs, hubRss, children: kids.length, childRss };
}

async function fullList(url) {
  let cursor;
  let tools = 0;
  let pages = 0;
  do {
    const r = await rpc(url, 'tools/list', cursor === undefined ? {} : { cursor });
    tools += r.tools.length;
    pages++;
    cursor = r.nextCursor;
  } while (cursor !== undefined);
  return { tools, pages };
}

async function aggregated(nServers, nTools) {
  const servers = {};
  const cmd = echoStdioCommand(['--tools', String(nTools)]);
  for (let i = 0; i < nServers; i++) servers[`s${i}`] = { command: cmd.command, args: cmd.args };
  const hub = await startHub({ servers, ledger: true, readyTimeoutMs: 180_000 });
  const url = `http://127.0.0.1:${hub.port}/mcp`;
  try {
    const c0 = performance.now();
    const first = await fullList(url);
    const coldMs = performance.now() - c0;
    const full = [];
    for (let i = 0; i < (QUICK ? 5 : 20); i++) {
      const t0 = performance.now();
      await fullList(url);
      full.push(performance.now() - t0);
    }
    full.sort((a, b) => a - b);
    const page = await runHttp({ port: hub.port, request: modernRequest({ port: hub.port, method: 'tools/list' }), concurrency: 1, ...T });
    return { servers: nServers, toolsPerServer: nTools, readyMs: hub.readyMs, tools: first.tools, pages: first.pages, coldMs, fullP50: full[Math.floor(full.length / 2)], pageP50: page.p50, pageP99: page.p99, pageRps: page.rps, hubRss: rssOf(hub.pid) };
  } finally {
    await hub.stop();
  }
}

/**
 * Runs each live target in turn, `rounds` times, the order rotating each round, so that a drift
 * of the machine (its speed swings by up to 2× for a minute here) hits all of them alike: the
 * requests per second of each target, per round. Short runs, many rounds: a round's runs are
 * seconds apart, so a phase of the machine more often spans a whole round, and the median of
 * the within-round ratios drops the rounds it split.
 */
async function alternating(targets, rounds, concurrency) {
  const timing = QUICK ? T : { warmupMs: 300, measureMs: 2000 };
  // Unmeasured load first, even in a quick run: a cold target's first window may answer nothing.
  for (const t of Object.values(targets)) await runHttp({ ...t, concurrency, warmupMs: 0, measureMs: Math.max(TARGET_WARMUP_MS, T.warmupMs) });
  const keys = Object.keys(targets);
  const rps = Object.fromEntries(keys.map((k) => [k, []]));
  for (let i = 0; i < rounds; i++)
    for (let j = 0; j < keys.length; j++) {
      const k = keys[(i + j) % keys.length];
      const { port, request } = targets[k];
      rps[k].push((await runHttp({ port, request, concurrency, ...timing })).rps);
    }
  return rps;
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const range = (a) => [Math.min(...a), Math.max(...a)];

/**
 * Ledger on vs off at concurrency 32, alternating runs on two live hubs so drift hits both.
 * As for pairedLimit: seven rounds, each round's ratio taken within the round (three rounds of
 * 4-second runs with no warm-up gave 0.66× and 0.51× for builds whose ledger threads differed by
 * 3 µs a call, in two phases of the machine).
 */
async function ledgerCost() {
  const on = await startHub(hubStdio(true));
  const off = await startHub(hubStdio(false));
  const call = (h) => ({ port: h.port, request: modernRequest({ port: h.port, method: 'tools/call', tool: 'echo__echo' }) });
  try {
    const runs = await alternating({ on: call(on), off: call(off) }, QUICK ? 2 : 7, 32);
    const ratios = runs.on.map((x, i) => x / runs.off[i]);
    return { on: median(runs.on), off: median(runs.off), runs, ratio: median(ratios), ratioRange: range(ratios) };
  } finally {
    await on.stop();
    await off.stop();
  }
}

/**
 * The hub (ledger on and off) against the forwarding limit, tools/call at 64, per upstream
 * transport: all three live at once and run in turn, each round's ratios taken within the
 * round. The table's cells are minutes apart, so a phase of the machine can land on one
 * target's cells and not another's; these ratios are what the targets are judged by.
 */
async function pairedLimit() {
  const rounds = QUICK ? 1 : 7;
  const out = [];
  for (const upstream of ['stdio', 'http']) {
    const echo = upstream === 'http' ? await startEchoHttp() : undefined;
    const live = [];
    try {
      const start = async (p) => {
        const t = await p;
        live.push(t);
        return t;
      };
      // The three start at once, and stop at once below: neither is measured, and one after
      // another they took most of the run on a loaded machine (13 of 31 s starting, 6 stopping).
      // All of them are up before the first load either way. A start that failed is thrown once
      // every other start has ended, so that the finally below stops them all.
      const started = await Promise.allSettled([
        start(startForwarder(echo ?? stdioEcho)),
        start(startHub(echo ? hubHttp(echo.url, true) : hubStdio(true))),
        start(startHub(echo ? hubHttp(echo.url, false) : hubStdio(false))),
      ]);
      const failed = started.find((s) => s.status === 'rejected');
      if (failed) throw failed.reason;
      const [limit, on, off] = started.map((s) => s.value);
      const call = (t, tool) => ({ port: t.port, request: modernRequest({ port: t.port, path: t.path, method: 'tools/call', tool }) });
      const targets = { limit: call(limit, 'echo'), on: call(on, 'echo__echo'), off: call(off, 'echo__echo') };
      const rps = await alternating(targets, rounds, PAIRED_CONC);
      // A round whose forwarder answered nothing in its window has no ratio.
      const ratios = (k) => rps[k].map((r, i) => r / rps.limit[i]).filter(Number.isFinite);
      const [onR, offR] = [ratios('on'), ratios('off')];
      out.push({ upstream, concurrency: PAIRED_CONC, rounds, rps, ratioRounds: onR.length, on: median(onR), off: median(offR), onRange: range(onR), offRange: range(offR) });
    } finally {
      await Promise.all(live.map((t) => t.stop()));
      if (echo) await echo.stop();
    }
  }
  return out;
}

// ------------------------------------------------------------------------------ report

const fmtInt = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–');
const fmtMs = (n) => (Number.isFinite(n) ? (n < 10 ? n.toFixed(3) : n.toFixed(1)) : '–');
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '–');
const mb = (b) => `${(b / 2 ** 20).toFixed(1)} MB`;

function table(rows, results) {
  const byKey = (key, method, c) => results.find((r) => r.key === key && r.method === method && r.c === c && !r.failed);
  const peers = TARGETS.filter((t) => t.group === 'peer').map((t) => t.key);
  const out = [];
  out.push('| target | method | conc. | req/s | × limit | × best peer | p50 ms | p50 × limit | p50 × best peer | p99 ms | CPU µs/req | errors |');
  out.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const t of TARGETS) {
    const failed = results.find((r) => r.key === t.key && r.failed);
    if (failed) {
      out.push(`| ${t.label} | – | – | failed: ${failed.failed.replace(/\|/g, '/')} | | | | | | | | |`);
      continue;
    }
    for (const method of METHODS)
      for (const c of CONC) {
        const r = byKey(t.key, method, c);
        if (!r) continue;
        const limit = byKey(t.upstream === 'http' ? 'limit-http' : 'limit-stdio', method, c);
        const peerRows = peers.map((k) => byKey(k, method, c)).filter(Boolean);
        const bestRps = peerRows.length ? Math.max(...peerRows.map((p) => p.rps)) : NaN;
        const bestP50 = peerRows.length ? Math.min(...peerRows.map((p) => p.p50)) : NaN;
        out.push(
          `| ${t.label} | ${method} | ${c} | ${fmtInt(r.rps)} | ${ratio(r.rps, limit?.rps)} | ${ratio(r.rps, bestRps)} | ${fmtMs(r.p50)} | ${ratio(r.p50, limit?.p50)} | ${ratio(r.p50, bestP50)} | ${fmtMs(r.p99)} | ${r.cpuUs === undefined ? '–' : fmtInt(r.cpuUs)} | ${r.errors}${r.sample ? ` (${r.sample.slice(0, 60).replace(/\|/g, '/')})` : ''} |`,
        );
      }
  }
  rows.push(...out);
}

function targetsCheck(results, extras) {
  const get = (key, method, c) => results.find((r) => r.key === key && r.method === method && r.c === c && !r.failed);
  const lines = ['| target (issue 9) | measured | verdict |', '|---|---|---|'];
  const peerKeys = TARGETS.filter((t) => t.group === 'peer').map((t) => t.key);
  for (const [sy, limitKey] of [
    ['sy-stdio', 'limit-stdio'],
    ['sy-stdio-noledger', 'limit-stdio'],
    ['sy-http', 'limit-http'],
    ['sy-http-noledger', 'limit-http'],
  ]) {
    const s = get(sy, 'tools/call', 64);
    const l = get(limitKey, 'tools/call', 64);
    for (const pk of s && sy.startsWith('sy-stdio') ? peerKeys : []) {
      const p = get(pk, 'tools/call', 64);
      if (p) lines.push(`| ${sy} tools/call @64 ≥ 1.5× ${pk} | ${ratio(s.rps, p.rps)} | ${s.rps >= 1.5 * p.rps ? 'met' : 'MISSED'} |`);
    }
    if (s && l) lines.push(`| ${sy} tools/call @64 ≥ 0.8× ${limitKey} (table cells) | ${ratio(s.rps, l.rps)} | ${s.rps >= 0.8 * l.rps ? 'met' : 'MISSED'} |`);
    // The verdict that counts: the table's cells of two targets are minutes apart (pairedLimit).
    const paired = extras.paired?.find((x) => x.upstream === (sy.startsWith('sy-stdio') ? 'stdio' : 'http'));
    if (paired) {
      const [k, [lo, hi]] = sy.endsWith('noledger') ? [paired.off, paired.offRange] : [paired.on, paired.onRange];
      const n = paired.ratioRounds ?? paired.rounds;
      const c = paired.concurrency ?? 64;
      if (n === 0) lines.push(`| ${sy} tools/call @${c} ≥ 0.8× ${limitKey} (alternating runs) | the forwarding limit answered nothing in any round | not measured |`);
      else lines.push(`| ${sy} tools/call @${c} ≥ 0.8× ${limitKey} (alternating runs, median of ${n}) | ${k.toFixed(2)}× (${lo.toFixed(2)}–${hi.toFixed(2)}×) | ${k >= 0.8 ? 'met' : 'MISSED'} |`);
    }
    const s1 = get(sy, 'tools/call', 1);
    const l1 = get(limitKey, 'tools/call', 1);
    if (s1 && l1) {
      const added = s1.p50 - l1.p50;
      lines.push(`| ${sy} tools/call @1: added p50 over ${limitKey} < 0.2 ms | ${added.toFixed(3)} ms | ${added < 0.2 ? 'met' : 'MISSED'} |`);
    }
  }
  if (extras.ledger) {
    // Runs before the within-round ratio: the ratio of the medians.
    const l = extras.ledger;
    const cost = 1 - (l.ratio ?? l.on / l.off);
    const spread = l.ratioRange ? ` (${(100 * (1 - l.ratioRange[1])).toFixed(1)}–${(100 * (1 - l.ratioRange[0])).toFixed(1)}%)` : '';
    lines.push(`| ledger on vs off @32: cost ≤ 10%${l.ratio ? ` (alternating runs, median of ${l.runs.on.length})` : ''} | ${(100 * cost).toFixed(1)}%${spread} | ${cost <= 0.1 ? 'met' : 'MISSED'} |`);
  }
  if (extras.ledgerQuery?.queries) {
    const worst = Math.max(...extras.ledgerQuery.queries.map((q) => q.ms));
    lines.push(`| ledger query over ${fmtInt(extras.ledgerQuery.rows)} rows < 100 ms | worst ${worst.toFixed(2)} ms | ${worst < 100 ? 'met' : 'MISSED'} |`);
  }
  return lines;
}

function perUpstream(rssN, rss1, n) {
  const per = (rssN - rss1) / (n - 1);
  return per < 0.1 * 2 ** 20 ? 'no measurable hub memory per extra upstream (under 0.1 MB; V8 heap noise is larger)' : `${mb(per)} of hub memory per extra upstream`;
}

function report(m, results, extras, peerStatus, run) {
  const L = [];
  L.push(
    `Run: ${run.at} · ${run.quick ? 'quick' : 'full'} mode (${run.timing.targetWarmupMs ? `each target first warmed up unmeasured for ${run.timing.targetWarmupMs} ms per method, then ` : ''}warm-up ${run.timing.warmupMs} ms, measured ${run.timing.measureMs} ms per cell, best of ${run.passes} pass${run.passes > 1 ? 'es' : ''}) · ${m.cores} cores (${m.cpu}), ${m.memGiB} GiB, Node ${m.node}, ${m.os} · the hub runs with ${m.hubNodeFlags?.length ? m.hubNodeFlags.map((f) => `\`${f}\``).join(' ') : 'no Node flags'} (${m.hubNodeFlagsFrom === 'npm start' ? 'as `npm start`' : 'SWITCHYARD_BENCH_NODE_FLAGS'}) · load average before ${m.loadBefore.join(' / ')}, after ${m.loadAfter.join(' / ')}`,
  );
  L.push('');
  L.push(`Peers: ${Object.entries(peerStatus.installed).map(([n, v]) => `${n}@${v}`).join(', ') || 'none'}${Object.keys(peerStatus.failed).length ? ` · not measured: ${Object.entries(peerStatus.failed).map(([n, why]) => `${n} (${why})`).join('; ')}` : ''}`);
  L.push('');
  L.push('### Throughput and latency');
  L.push('');
  L.push('"× limit" compares with the forwarding limit on the same upstream transport (HTTP → stdio for stdio rows, HTTP → HTTP for HTTP rows); "× best peer" with the best peer in the same cell. Throughput ratios: higher is better; p50 ratios: lower is better.');
  L.push('');
  table(L, results);
  L.push('');
  L.push('### Targets');
  L.push('');
  L.push(...targetsCheck(results, extras));
  L.push('');
  if (extras.paired || extras.startup || extras.aggregated || extras.ledger || extras.ledgerQuery) L.push('### Alternating runs, start-up, memory, aggregation, ledger', '');
  if (extras.startup) {
    const s = extras.startup;
    const one = results.find((r) => r.key === 'sy-stdio' && r.idleRss);
    L.push(`- Start-up with ${s.n} stdio upstreams: listening after ${fmtInt(s.listeningMs)} ms, all ${s.n} ready (per /healthz) after ${fmtInt(s.readyMs)} ms.`);
    L.push(
      `- Memory (RSS): the hub process with ${s.n} upstreams ${mb(s.hubRss)}${one ? `, with 1 upstream ${mb(one.idleRss)}: ${perUpstream(s.hubRss, one.idleRss, s.n)}` : ''}; each echo upstream process ${mb(s.childRss)} (${s.children} measured).`,
    );
  }
  if (extras.aggregated) {
    const a = extras.aggregated;
    L.push(
      `- Aggregated tools/list over ${a.servers} upstreams × ${a.toolsPerServer} tools (${fmtInt(a.tools)} tools, ${a.pages} pages of ≤1000): all ready after ${fmtInt(a.readyMs)} ms; first full list right after that ${fmtMs(a.coldMs)} ms (the hub lists each server as it gets ready; this list waits for what is left of that); cached full list p50 ${fmtMs(a.fullP50)} ms; cached first page p50 ${fmtMs(a.pageP50)} ms (p99 ${fmtMs(a.pageP99)} ms, ${fmtInt(a.pageRps)} pages/s at concurrency 1); hub RSS ${mb(a.hubRss)}.`,
    );
  }
  if (extras.paired) {
    for (const p of extras.paired) {
      const rounds = p.rps.limit.map((l, i) => `${fmtInt(l)} / ${fmtInt(p.rps.on[i])} / ${fmtInt(p.rps.off[i])}`).join('; ');
      const within = (p.ratioRounds ?? p.rounds) > 0 ? ` Within a round: ledger on ${p.on.toFixed(2)}× the limit, off ${p.off.toFixed(2)}× (medians).` : '';
      L.push(`- The hub against the forwarding limit in front of ${p.upstream === 'http' ? 'HTTP' : 'stdio'}, tools/call at ${p.concurrency ?? 64}, the three live at once and run in turn (limit / ledger on / ledger off, req/s per round): ${rounds}.${within}`);
    }
  }
  if (extras.ledger) {
    const l = extras.ledger;
    const rounds = l.runs.on.map((x, i) => `${fmtInt(x)} / ${fmtInt(l.runs.off[i])}`).join('; ');
    const within = l.ratio ? ` Within a round: on/off ${l.ratio.toFixed(2)}× (median; ${l.ratioRange[0].toFixed(2)}–${l.ratioRange[1].toFixed(2)}×).` : ` On/off = ${ratio(l.on, l.off)}.`;
    L.push(`- Ledger at concurrency 32 (tools/call, stdio echo), the two hubs live at once and run in turn (on / off, req/s per round): ${rounds}; medians ${fmtInt(l.on)} / ${fmtInt(l.off)}.${within}`);
  }
  if (extras.commit) {
    L.push(
      `- Ledger group commit alone (in-process, \`bench/lib/ledger-commit.mjs\`; one call = the in-flight row committed, then the finished row committed, to the pending file; every row also moved into SQLite inside the window): ${extras.commit.map((c) => `concurrency ${c.concurrency}: ${fmtInt(c.perSec)} calls/s, ${fmtInt(c.cpuUsPerPair)} µs CPU per call, ${c.writesPerCommit.toFixed(1)} rows per write of the pending file`).join('; ')}.`,
    );
  }
  if (extras.ledgerQuery) {
    const q = extras.ledgerQuery;
    if (q.error) L.push(`- Ledger query: failed: ${q.error}`);
    else {
      L.push(`- Ledger query over ${fmtInt(q.rows)} rows (filled in ${fmtInt(q.fillMs)} ms; median of 5, warm): ${q.queries.map((x) => `${x.label} → ${x.rows} rows in ${x.ms.toFixed(2)} ms`).join('; ')}. The whole \`switchyard ledger query --server s7 --since 1h --json\` process: ${fmtInt(q.cliMs)} ms.`);
    }
  }
  L.push('');
  L.push(`Benchmark wall time: ${run.wallS} s.`);
  return L.join('\n');
}

// ------------------------------------------------------------------------------ profile

async function profile() {
  const key = opt('--profile-target', 'sy-stdio');
  const t = TARGETS.find((x) => x.key === key);
  if (!t || t.group !== 'switchyard') throw new Error(`--profile-target must be one of ${TARGETS.filter((x) => x.group === 'switchyard').map((x) => x.key).join(', ')}`);
  const dir = mkdtempSync(join(os.tmpdir(), 'switchyard-prof-'));
  const echo = t.upstream === 'http' ? await startEchoHttp() : undefined;
  const cfg = t.upstream === 'http' ? hubHttp(echo.url, !key.includes('noledger')) : hubStdio(!key.includes('noledger'));
  const t0 = performance.now();
  const hub = await startHub({ ...cfg, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir] });
  const fromMs = performance.now() - t0 + 500;
  const c = Number(opt('--profile-concurrency', '64'));
  const method = opt('--profile-method', 'tools/call');
  const r = await runHttp({ port: hub.port, request: modernRequest({ port: hub.port, method, tool: t.tool }), concurrency: c, warmupMs: 500, measureMs: QUICK ? 2000 : 8000 });
  const toMs = performance.now() - t0;
  log(`bench: profiled ${t.label}, ${method} @${c}: ${fmtInt(r.rps)} req/s, p50 ${fmtMs(r.p50)} ms (profiling slows it down)`);
  await hub.stop();
  if (echo) await echo.stop();
  // One file per thread, named CPU.<date>.<time>.<pid>.<thread id>.<n>: the hub's is thread 0,
  // the ledger's (when the ledger is on) thread 1.
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const thread = (f) => Number(f.split('.').at(-3));
  const file = files.find((f) => thread(f) === 0) ?? files[0];
  if (!file) throw new Error('no .cpuprofile written');
  const keep = join(BENCH, 'results', `${key}.cpuprofile`);
  mkdirSync(join(BENCH, 'results'), { recursive: true });
  writeFileSync(keep, readFileSync(join(dir, file)));
  const ledgerFile = files.find((f) => thread(f) > 0);
  const keepLedger = join(BENCH, 'results', `${key}.ledger-thread.cpuprofile`);
  if (ledgerFile) writeFileSync(keepLedger, readFileSync(join(dir, ledgerFile)));
  rmSync(dir, { recursive: true, force: true });
  const top = Number(opt('--top', '30'));
  printSummary(summarise(keep, { top, root: `${ROOT}/`, fromMs, toMs }));
  log(`bench: profile kept in ${keep}`);
  if (!ledgerFile) return;
  // The thread starts a little after the process, so this window is late by that much.
  process.stdout.write('\nThe ledger\'s ingest thread ("(idle)" is its time waiting for batches):\n\n');
  printSummary(summarise(keepLedger, { top, root: `${ROOT}/`, fromMs, toMs }));
  log(`bench: the ledger thread's profile kept in ${keepLedger}`);
}

// ------------------------------------------------------------------------------ main

async function main() {
  if (opt('--report')) return rerender(opt('--report'));
  ensureBuiltHere();
  if (flag('--profile')) return profile();
  const peerStatus = flag('--no-peers') ? { installed: {}, failed: {} } : ensurePeers(log);
  const m = machine();
  m.loadBefore = os.loadavg().map((x) => +x.toFixed(2));
  const chosen = TARGETS.filter((t) => !(ONLY && !ONLY.test(t.key)) && !(t.group === 'peer' && !peerStatus.installed[t.peer]));
  // Several passes (targets in alternating order), best of them per cell: on a shared machine a
  // neighbour's burst hits one pass, not all of them.
  const all = [];
  for (let pass = 0; pass < PASSES; pass++) {
    if (PASSES > 1) log(`bench: pass ${pass + 1} of ${PASSES}`);
    for (const t of pass % 2 ? [...chosen].reverse() : chosen) await measureTarget(t, all);
  }
  const results = bestOf(all);
  const extras = {};
  if (extra('paired')) {
    log(`bench: the hub against the forwarding limit at ${PAIRED_CONC}, alternating`);
    extras.paired = await pairedLimit();
  }
  if (extra('ledger')) {
    log('bench: ledger on vs off at concurrency 32');
    extras.ledger = await ledgerCost();
  }
  if (extra('startup')) {
    log('bench: start-up with 50 stdio upstreams');
    extras.startup = await startup(50);
  }
  if (extra('aggregated')) {
    log('bench: aggregated tools/list over 100 upstreams × 50 tools');
    extras.aggregated = await aggregated(100, 50);
  }
  if (extra('commit')) {
    log('bench: ledger group commit alone');
    extras.commit = [await ledgerCommitBench({ pairs: QUICK ? 1000 : 3000, concurrency: 1 }), await ledgerCommitBench({ pairs: QUICK ? 3000 : 10_000, concurrency: 32 })];
  }
  if (extra('query')) {
    log('bench: ledger query');
    extras.ledgerQuery = await ledgerQueryBench(QUICK ? 200_000 : 1_000_000);
  }
  m.loadAfter = os.loadavg().map((x) => +x.toFixed(2));
  const run = { at: new Date().toISOString(), quick: QUICK, timing: { ...T, targetWarmupMs: TARGET_WARMUP_MS }, passes: PASSES, wallS: Math.round((performance.now() - startedAt) / 1000) };
  const md = report(m, results, extras, peerStatus, run);
  process.stdout.write(md + '\n');
  mkdirSync(join(BENCH, 'results'), { recursive: true });
  // A narrowed or otherwise changed run (the options below) never replaces a full one.
  const partial = ['--only', '--conc', '--methods', '--measure-ms', '--no-peers', '--no-extras', '--extras', '--passes', '--target-warmup-ms', '--paired-concurrency'].some((f) => parsed.values[f.slice(2)] !== undefined);
  const name = partial ? 'partial' : QUICK ? 'quick' : 'latest';
  writeFileSync(join(BENCH, 'results', `${name}.md`), md + '\n');
  writeFileSync(join(BENCH, 'results', `${name}.json`), JSON.stringify({ machine: m, run, peers: peerStatus, results, extras }, null, 2) + '\n');
  if (partial && flag('--write-docs')) log('bench: a narrowed run does not update docs/BENCHMARKS.md');
  else writeDocs(md);
}

/** `--report FILE`: render a saved run again (e.g. after the report's layout changed). */
function rerender(file) {
  const saved = JSON.parse(readFileSync(file, 'utf8'));
  const run = saved.run ?? { at: '(unknown)', quick: saved.quick, timing: saved.timing, passes: 1, wallS: '?' };
  const md = report(saved.machine, saved.results, saved.extras, saved.peers, run);
  process.stdout.write(md + '\n');
  writeDocs(md);
}

function writeDocs(md) {
  if (flag('--write-docs')) {
    const doc = join(ROOT, 'docs/BENCHMARKS.md');
    const text = readFileSync(doc, 'utf8');
    const a = '<!-- bench:results:start -->';
    const b = '<!-- bench:results:end -->';
    if (text.includes(a) && text.includes(b)) {
      writeFileSync(doc, text.slice(0, text.indexOf(a) + a.length) + '\n' + md + '\n' + text.slice(text.indexOf(b)));
      log('bench: docs/BENCHMARKS.md updated');
    } else log('bench: docs/BENCHMARKS.md has no results markers; not updated');
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    log(`bench: ${err?.stack ?? err}`);
    process.exit(1);
  },
);
