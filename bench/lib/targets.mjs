// What the benchmark measures: every target starts, answers on 127.0.0.1, and stops with
// everything it spawned. A target says how it wants to be talked to (modern requests, or a
// legacy session opened once) and the hub-visible name of the echo tool.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, startProcess } from './procs.mjs';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BENCH = join(ROOT, 'bench');
export const PEERS = join(BENCH, '.peers');
/** SWITCHYARD_BENCH_ROOT: measure another build (a folder with dist/, migrations/, package.json) for A/B runs. */
export const HUB_ROOT = process.env.SWITCHYARD_BENCH_ROOT ? resolve(process.env.SWITCHYARD_BENCH_ROOT) : ROOT;
const HUB_BIN = join(HUB_ROOT, 'dist/src/cli/main.js');
const ECHO_STDIO = join(BENCH, 'echo-stdio.mjs');
const ECHO_HTTP = join(BENCH, 'echo-http.mjs');
const LOOPBACK = join(BENCH, 'lib/loopback-only.mjs');

export const echoStdioCommand = (extra = []) => ({ command: process.execPath, args: [ECHO_STDIO, ...extra] });

export async function startEchoHttp(extra = []) {
  const p = await startProcess('echo-http', process.execPath, [ECHO_HTTP, '--port', '0', ...extra], { ready: /LISTENING (\d+)/ });
  const port = Number(p.match[1]);
  return { port, url: `http://127.0.0.1:${port}/mcp`, pid: p.pid, stop: p.stop };
}

/** The forwarding limit; `wrapper`, `nodeArgs` and `readyTimeoutMs` as startHub's, `cwd` its working folder (bench/callgrind.mjs). */
export async function startForwarder(upstream, { wrapper = [], nodeArgs = [], readyTimeoutMs = 30_000, cwd } = {}) {
  const args = upstream.url ? ['--http', upstream.url] : ['--', upstream.command, ...upstream.args];
  const [command, ...rest] = [...wrapper, process.execPath, ...nodeArgs, join(BENCH, 'forwarder.mjs'), '--port', '0', ...args];
  const p = await startProcess('forwarder', command, rest, { cwd, ready: /LISTENING (\d+)/, timeoutMs: readyTimeoutMs });
  return { port: Number(p.match[1]), path: '/mcp', pid: p.pid, stop: p.stop };
}

/**
 * The Node flags the hub runs with as shipped: those `npm start` passes (package.json's start
 * script, of the build measured: an A/B against an older build compares its flags too, unless
 * both run with SWITCHYARD_BENCH_NODE_FLAGS), or SWITCHYARD_BENCH_NODE_FLAGS when set ('' for
 * none, to measure without them).
 */
export function shippedNodeFlags(root = HUB_ROOT, env = process.env) {
  if (env.SWITCHYARD_BENCH_NODE_FLAGS !== undefined) return env.SWITCHYARD_BENCH_NODE_FLAGS.split(/\s+/).filter(Boolean);
  const start = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts?.start ?? '';
  const words = start.trim().split(/\s+/);
  // `exec node …`: the shell npm runs the script in becomes the hub (package.json).
  if (words[0] === 'exec') words.shift();
  if (words[0] !== 'node') return [];
  const script = words.findIndex((w) => w.endsWith('cli/main.js'));
  const flags = words.slice(1, script < 0 ? 1 : script);
  // A flag whose value is a word of its own (`-r x`) could not be told from the script's place.
  if (flags.some((f) => !f.startsWith('--'))) throw new Error(`package.json's start script: write its Node flags as --flag or --flag=value: ${start}`);
  return flags;
}

/**
 * The built hub (`switchyard start`) with a fresh temp config and ledger; resolves once
 * /healthz shows every server ready. It runs with shippedNodeFlags(); `nodeArgs` go after
 * them, before the script (e.g. --cpu-prof); `wrapper` before node.
 */
export async function startHub({ servers, ledger = true, nodeArgs = [], env = {}, readyTimeoutMs = 60_000, extraConfig = {}, wrapper = [] }) {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
  const configFile = join(dir, 'hub.config.json');
  writeFileSync(configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, ledger: { path: join(dir, 'data', 'ledger.db'), enabled: ledger }, servers, ...extraConfig }, null, 2));
  const t0 = performance.now();
  const nodeCommand = [process.execPath, ...shippedNodeFlags(), ...nodeArgs, HUB_BIN, 'start', '--config', configFile, '--port', '0'];
  // `wrapper`: a program the hub runs under (valgrind, for bench/callgrind.mjs), its pid the hub's.
  const [command, ...args] = [...wrapper, ...nodeCommand];
  const p = await startProcess('switchyard', command, args, {
    cwd: dir,
    env,
    ready: /"url":"http:\/\/127\.0\.0\.1:(\d+)\/mcp"/,
    timeoutMs: readyTimeoutMs,
  });
  const port = Number(p.match[1]);
  const listeningMs = performance.now() - t0;
  const want = Object.keys(servers).length;
  const deadline = Date.now() + readyTimeoutMs;
  let health;
  for (;;) {
    health = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.json()).catch(() => undefined);
    if (health && health.servers.filter((s) => s.state === 'ready').length === want) break;
    if (Date.now() > deadline) {
      await p.stop();
      throw new Error(`hub upstreams not ready: ${JSON.stringify(health)}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const readyMs = performance.now() - t0;
  return {
    port,
    path: '/mcp',
    pid: p.pid,
    listeningMs,
    readyMs,
    health,
    stop: async () => {
      await p.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `mcp-proxy` (stdio → Streamable HTTP) with its defaults, on the stream endpoint only. */
export async function startMcpProxy(upstream) {
  const port = await freePort();
  const bin = join(PEERS, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs');
  const p = await startProcess('mcp-proxy', process.execPath, ['--import', LOOPBACK, bin, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', upstream.command, ...upstream.args], {
    ready: /starting server on port|listening/i,
  });
  await waitForPort(port);
  return { port, path: '/mcp', pid: p.pid, stop: p.stop };
}

/**
 * `supergateway` stdio → Streamable HTTP. Stateful (one child per session; its stateless mode
 * spawns a child per request), logging off (its default logs every message).
 */
export async function startSupergateway(upstream) {
  const port = await freePort();
  const bin = join(PEERS, 'node_modules/supergateway/dist/index.js');
  const cmd = [upstream.command, ...upstream.args].map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(' ');
  const p = await startProcess(
    'supergateway',
    process.execPath,
    ['--import', LOOPBACK, bin, '--stdio', cmd, '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--logLevel', 'none'],
    {},
  );
  await waitForPort(port);
  return { port, path: '/mcp', pid: p.pid, stop: p.stop };
}

/**
 * `mcp-hub` (an aggregating hub with a REST API; its MCP endpoint is the HTTP+SSE transport of
 * 2024-11-05 at GET /mcp + POST /messages). HOME and the XDG folders point into a temp folder
 * (it keeps state, logs and caches there), its marketplace cache is pre-seeded as fresh so it
 * does not try to fetch a registry from the network, and it binds 127.0.0.1 via the preload.
 */
export async function startMcpHub(upstream) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-mcphub-'));
  const cacheDir = join(dir, 'data', 'mcp-hub', 'cache');
  mkdirSync(cacheDir, { recursive: true });
  writeFileSync(join(cacheDir, 'registry.json'), JSON.stringify({ registry: { servers: [{ id: 'offline' }] }, lastFetchedAt: Date.now(), serverDocumentation: {} }));
  const config = join(dir, 'mcp-servers.json');
  writeFileSync(config, JSON.stringify({ mcpServers: { echo: { command: upstream.command, args: upstream.args } } }));
  const bin = join(PEERS, 'node_modules/mcp-hub/dist/cli.js');
  const p = await startProcess('mcp-hub', process.execPath, ['--import', LOOPBACK, bin, '--port', String(port), '--config', config], {
    cwd: dir,
    env: { HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_STATE_HOME: join(dir, 'state'), XDG_CONFIG_HOME: join(dir, 'config') },
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const h = await fetch(`http://127.0.0.1:${port}/api/health`).then((r) => r.json(), () => undefined);
    if (h?.servers?.some((s) => s.status === 'connected')) break;
    if (Date.now() > deadline) {
      await p.stop();
      throw new Error('mcp-hub did not connect its upstream');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    path: '/mcp',
    pid: p.pid,
    sse: true,
    stop: async () => {
      await p.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitForPort(port, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/`, { method: 'GET' }).then(
      () => true,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
