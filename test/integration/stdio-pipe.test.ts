/**
 * `switchyard stdio` at the edges of its pipe, driven over real pipes on the real built binary:
 * a client answer that breaks JSON-RPC, a client that stops reading stdout, stopping (EOF,
 * SIGTERM, a second signal) with calls in flight, and ids shared by the two eras on one pipe.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { runCli } from '../helpers/cli.js';
import { queryRows, waitForRows } from './ledger-helpers.js';
import { SAME_REQUEST_MS } from '../../src/cli/serve-signals.js';
import { MODERN_FIXTURE } from '../fixtures/translation/peers.js';

type Json = Record<string, any>;

const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A config in a fresh folder (its ledger there too); returns the folder. */
function configDir(prefix: string, config: Json): { dir: string; file: string; ledger: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'hub.config.json');
  const ledger = join(dir, 'ledger.db');
  writeFileSync(file, JSON.stringify({ ledger: { path: ledger }, ...config }));
  return { dir, file, ledger };
}

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';
const twoServers = (dir: string): Json => ({ legacy: nodeServer(SDK1, [], { COUNTER_FILE: join(dir, 'counter.json') }), modern: nodeServer(SDK2, [], { COUNTER_FILE: join(dir, 'counter.json') }) });

/** `switchyard stdio` over the legacy and modern fixture servers, with `config` added. */
function twoServerHub(prefix: string, config: Json = {}, logLevel = 'warn', env: Record<string, string> = {}): { c: LineClient; ledger: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const { file, ledger } = configDir(prefix, { servers: twoServers(dir), ...config });
  return { c: stdioHub(file, logLevel, env), ledger };
}

const call = (id: string | number, name: string, args: Json): Json => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: META } });

/** Until the hub logs its stop or its drain at stdin EOF (log level info): stdin EOF or a signal was taken. */
async function stopBegun(c: LineClient): Promise<void> {
  const begun = () => c.stderr.includes('stdio hub stopping') || c.stderr.includes('stdin closed: what is in flight may answer');
  for (const until = Date.now() + 10_000; !begun(); await sleep(20)) if (Date.now() > until) throw new Error(`not stopping: ${c.stderr.slice(-1000)}`);
}

/**
 * An exit "at once" (a second signal, or a SIGTERM ending a drain) on a starved machine: a fixed
 * 2-3 s could run out there. The exits it tells apart come 20 s or more later, or with another code.
 */
const STOP_AT_ONCE_MS = 10_000;

/** Resolves with the exit code, or 'running' if the process has not exited within `ms`. */
const exitWithin = (c: LineClient, ms: number): Promise<number | null | 'running'> => Promise.race([c.exited, sleep(ms).then(() => 'running' as const)]);

function stdioHub(file: string, logLevel = 'warn', env: Record<string, string> = {}): LineClient {
  const proc = spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: logLevel, ...env } });
  // Lines a stopped hub never read: EPIPE once it exits.
  proc.stdin.on('error', () => undefined);
  return new LineClient(proc);
}

async function initialize(c: LineClient, capabilities: Json = {}): Promise<void> {
  await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'pipe', version: '1' } } }, 30_000);
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
}

// Each test runs a hub of its own and mostly waits (a 6.5 s call, a drain, an upstream's close,
// signals apart): they run at once, each given 60 s (five hubs starting together on a loaded
// 2-vCPU machine took up to 48 s).
describe('`switchyard stdio` stopping with calls in flight (listen.drainTimeoutMs 30000)', () => {
  const DRAIN = { listen: { drainTimeoutMs: 30_000 } };

  it.concurrent('at stdin EOF answers a call that runs past the old fixed 5 s, then exits 0', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-eof-drain-', DRAIN);
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.send(JSON.stringify(call('long', 'modern__slow', { ms: 6_500 })));
      // At once: read before the EOF (one pipe, in order), so in flight when the drain begins,
      // and started after t0, so it runs 6.5 s past the EOF (waiting to see it running could
      // leave less than the 5 s it must outlast on a loaded machine).
      const t0 = Date.now();
      c.endInput();
      expect(await exitWithin(c, 20_000)).toBe(0);
      expect(Date.now() - t0).toBeGreaterThan(5_500);
      expect(c.received.find((m) => m.id === 'long')?.result?.content?.[0]?.text).toBe('slept 6500');
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome])).toEqual([['long', 'ok']]);
    } finally {
      c.kill();
    }
  }, 60_000);

  it.concurrent('on SIGTERM refuses new requests with an answer, lets the call in flight answer, then exits 0; a second signal exits at once with 1', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-sigterm-drain-', DRAIN, 'info');
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      // Long enough to be still running when the request sent after the stop began is read, on a loaded machine.
      c.send(JSON.stringify(call('long', 'modern__slow', { ms: 4_000 })));
      // In flight (forwarded) before the signal: a fixed 300 ms could see it read after the stop, refused.
      await waitForRows(ledger, { 'request-id': 'long' }, (rows) => rows.some((r) => r.outcome === 'in_flight'), 20_000);
      c.proc.kill('SIGTERM');
      await stopBegun(c);
      // Still reading stdin: a new request is answered, refused.
      const late = await c.request(call('late', 'modern__echo', { text: 'late' }));
      expect(JSON.stringify(late)).toContain('shutting down');
      expect(await exitWithin(c, 20_000)).toBe(0);
      expect(c.received.find((m) => m.id === 'long')?.result?.content?.[0]?.text).toBe('slept 4000');
      const rows = await queryRows(ledger, { method: 'tools/call' });
      expect(rows.find((r) => r.requestId === 'long')?.outcome).toBe('ok');
      expect(rows.find((r) => r.requestId === 'late')?.outcome).toBe('unavailable');
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }

    const { c: second, ledger: secondLedger } = twoServerHub('switchyard-stdio-second-signal-', DRAIN, 'info');
    try {
      await second.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      second.send(JSON.stringify(call('long', 'modern__slow', { ms: 20_000 })));
      await waitForRows(secondLedger, { 'request-id': 'long' }, (rows) => rows.some((r) => r.outcome === 'in_flight'), 20_000);
      second.proc.kill('SIGTERM');
      // Past the time within which the same signal again is the same request (a Ctrl-C under npm),
      // counted from when the hub took the first (its log line), not from when it was sent.
      await stopBegun(second);
      await sleep(SAME_REQUEST_MS + 200);
      expect(second.proc.exitCode).toBeNull(); // draining
      second.proc.kill('SIGTERM');
      // At once: the drain would run on for the 20 s call (STOP_AT_ONCE_MS is far below it).
      expect(await exitWithin(second, STOP_AT_ONCE_MS)).toBe(1);
      expect(second.stderr).toContain('second stop signal');
    } finally {
      second.kill();
    }
  }, 60_000);

  // The official SDK's stdio client closes stdin, waits 2 s, sends SIGTERM and SIGKILLs 2 s
  // later: the signal went on waiting for the EOF drain, the SIGKILL left the row in_flight.
  // A list then still waiting on a server's slow list, and a call, a prompt, a read or a
  // completion found only by such a list, did not end at the stop: the hub ran on until the drain time was out, neither
  // answered (nor the client's SIGKILL 2 s later, its rows in flight).
  it.concurrent('at stdin EOF then SIGTERM (the SDK client\'s close) ends the call and the list still draining at once: answered -32603, their rows unavailable, exit 0', async () => {
    const slowList = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { LIST_DELAY_MS: '30000', LIST_DELAY_KINDS: 'prompts/list,resources/list', PROMPTS: '1' });
    const { file, ledger } = configDir('switchyard-stdio-eof-sigterm-', { servers: { modern: nodeServer(SDK2), slowlist: slowList }, ...DRAIN });
    const c = stdioHub(file, 'info');
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      // Read before the EOF (one pipe, in order): in flight when the drain begins.
      c.send(JSON.stringify(call('long', 'modern__slow', { ms: 20_000 })));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'list', method: 'tools/list', params: { _meta: META } }));
      // So a prompt and a resource, found only by those lists.
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'prompt', method: 'prompts/get', params: { name: 'slowlist__greet', arguments: { who: 'x' }, _meta: META } }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'read', method: 'resources/read', params: { uri: 'mut://doc', _meta: META } }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'complete', method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'slowlist__greet' }, argument: { name: 'who', value: 'a' }, _meta: META } }));
      c.endInput();
      await stopBegun(c);
      expect(c.proc.exitCode).toBeNull(); // draining
      c.proc.kill('SIGTERM');
      // At once: the drain would run on for the 20 s call and the 30 s lists.
      expect(await exitWithin(c, STOP_AT_ONCE_MS)).toBe(0);
      // Answered all the same while stdout is open (a client that closed stdin may still read it).
      expect(c.received.find((m) => m.id === 'long')?.error).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down') });
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome])).toEqual([['long', 'unavailable']]);
      for (const [id, method] of [['list', 'tools/list'], ['prompt', 'prompts/get'], ['read', 'resources/read'], ['complete', 'completion/complete']]) {
        expect(c.received.filter((m) => m.id === id), JSON.stringify(c.received)).toEqual([{ jsonrpc: '2.0', id, error: expect.objectContaining({ code: -32603, message: expect.stringContaining('the hub is shutting down') }) }]);
        expect((await queryRows(ledger, { method })).map((r) => [r.requestId, r.outcome])).toEqual([[id, 'unavailable']]);
      }
    } finally {
      c.kill();
    }
  }, 60_000);

  // The drain over, the hub closes its upstreams (one that ignores EOF and SIGTERM takes
  // seconds): a request sent meanwhile was left unread, the client waiting for its answer.
  it.concurrent('a request sent while a SIGTERM\'s stop closes the upstreams is answered, refused, before the exit', async () => {
    const { file, ledger } = configDir('switchyard-stdio-sigterm-closing-', { servers: { stubborn: nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_STUBBORN: '1' }) } });
    const c = stdioHub(file, 'info');
    try {
      await c.request(call('e', 'stubborn__echo', { text: 'hi' }), 30_000);
      c.proc.kill('SIGTERM');
      // Nothing in flight: the drain ends as it begins, and the upstream is being closed.
      await stopBegun(c);
      // A malformed request too (params no object): answered with its error, as before the stop.
      c.send(JSON.stringify(call('late', 'stubborn__echo', { text: 'late' })) + '\n' + JSON.stringify({ jsonrpc: '2.0', id: 'late-legacy', method: 'ping' }) + '\n' + JSON.stringify({ jsonrpc: '2.0', id: 'late-bad', method: 'ping', params: [1] }) + '\n[]\n' +
        // A batch member its client cancels later in the batch: no answer (it had -32603), recorded cancelled.
        JSON.stringify([
          { jsonrpc: '2.0', id: 'late-b1', method: 'ping' },
          { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'late-b1', reason: 'b1 not needed' } },
          { jsonrpc: '2.0', id: 'late-b2', method: 'ping' },
        ]));
      expect(await exitWithin(c, 15_000)).toBe(0);
      expect(c.received.filter((m) => typeof m.id === 'string' && m.id.startsWith('late')).map((m) => [m.id, m.error?.message])).toEqual([
        ['late', expect.stringContaining('shutting down')],
        ['late-legacy', expect.stringContaining('shutting down')],
        ['late-bad', 'Invalid params: params must be an object (MCP takes parameters by name, not by position)'],
      ]);
      // An empty array is one invalid message (JSON-RPC), answered as such when stopped too.
      expect(c.received.filter((m) => m.id === undefined).map((m) => [m.error?.code, m.error?.message])).toEqual([[-32600, 'an empty batch']]);
      expect(c.nonProtocolLines.map((l) => (JSON.parse(l) as { id: string; error: { code: number } }[]).map((m) => [m.id, m.error.code]))).toEqual([[['late-b2', -32603]]]);
      expect((await queryRows(ledger, { method: 'ping' })).filter((r) => String(r.requestId).startsWith('late-b')).map((r) => [r.requestId, r.outcome, r.errorMessage]).sort()).toEqual([
        ['late-b1', 'cancelled', 'b1 not needed'],
        ['late-b2', 'unavailable', expect.stringContaining('shutting down')],
        // Params no object: its row names its method too.
        ['late-bad', 'rpc_error', 'Invalid params: params must be an object (MCP takes parameters by name, not by position)'],
      ]);
      // Each in its era (a modern one was recorded legacy: stdio has no version header).
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome, r.clientEra])).toEqual([
        ['e', 'ok', MODERN],
        ['late', 'unavailable', MODERN],
      ]);
    } finally {
      c.kill();
    }
  }, 60_000);

  // Its upstream closing after stdin EOF (one that ignores EOF and SIGTERM takes seconds), the
  // client's SIGTERM was taken as a second stop signal: exit 1 at once, the upstream orphaned.
  it.concurrent('a SIGTERM while the stop begun at stdin EOF closes its upstreams is no second signal: exit 0 once they are closed', async () => {
    const { file } = configDir('switchyard-stdio-eof-closing-', { servers: { stubborn: nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_STUBBORN: '1' }) } });
    const c = stdioHub(file, 'info');
    try {
      await c.request(call('e', 'stubborn__echo', { text: 'hi' }), 30_000);
      c.endInput();
      // Nothing in flight: the stop goes straight on to closing the upstream (seconds for this one).
      await stopBegun(c);
      expect(c.proc.exitCode).toBeNull(); // closing the upstream
      c.proc.kill('SIGTERM');
      expect(await exitWithin(c, 15_000)).toBe(0);
    } finally {
      c.kill();
    }
  }, 60_000);
});

// Every test here runs a hub of its own and cleans up in its own finally, so those of a block
// can run side by side: three at a time on this file's worker (the floods load two cores).
vi.setConfig({ maxConcurrency: 3 });

/** A flood's 16 MiB (or a 1 MB answer) through the hub, with two other hubs' floods beside it: 10 s was too short on a loaded machine. */
const FLOOD_MS = 30_000;

describe.concurrent('a client of `switchyard stdio` that stops reading stdout', () => {
  it('has its stdin left unread until stdout drains (no work piles up), and is served again once it reads', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-backpressure-');
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.proc.stdout!.pause();
      // An answer far larger than the pipe and the reader's buffers: stdout stays full.
      c.send(JSON.stringify(call('big', 'modern__echo', { text: 'x'.repeat(1_000_000) })));
      await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.requestId === 'big' && x.outcome === 'ok'), FLOOD_MS);
      for (let i = 0; i < 20; i++) c.send(JSON.stringify(call(`after-${i}`, 'modern__echo', { text: `a${i}` })));
      await sleep(2_000);
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => r.requestId)).toEqual(['big']);
      c.proc.stdout!.resume();
      await c.next((m) => m.id === 'after-19', 15_000);
      expect(c.received.filter((m) => typeof m.id === 'string' && (m.id === 'big' || m.id.startsWith('after-')) && m.result)).toHaveLength(21);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);

  it("is not buffered for without bound when an upstream floods a call's log lines: past 8 MiB they are left out, the answer is not", async () => {
    const FLOOD = 2_000; // 2,000 log lines of ~8 KiB: 16 MiB, twice the bound
    const { file, ledger } = configDir('switchyard-stdio-log-flood-', { servers: { f: nodeServer('test/fixtures/quirks/flood.mjs') } });
    const c = stdioHub(file);
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.proc.stdout!.pause();
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'flood', method: 'tools/call', params: { name: 'f__flood', arguments: { n: FLOOD, log: true }, _meta: { ...META, 'io.modelcontextprotocol/logLevel': 'info' } } }));
      // Answered upstream: every line of the flood has reached the hub before it.
      await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.requestId === 'flood' && x.outcome === 'ok'), FLOOD_MS);
      c.proc.stdout!.resume();
      expect((await c.next((m) => m.id === 'flood', 15_000)).result?.content).toEqual([{ type: 'text', text: `sent ${FLOOD}` }]);
      const lines = c.received.filter((m) => m.method === 'notifications/message').length;
      expect(lines).toBeGreaterThan(0);
      expect(lines).toBeLessThan(FLOOD * 0.75);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);

  it('is not buffered for without bound when an upstream floods resources/updated: past 8 MiB the latest is held and sent once it reads', async () => {
    const FLOOD = 2_000; // 2,000 updates of an ~8 KiB URI: 16 MiB, twice the bound
    const uri = 'flood://' + 'x'.repeat(8000 - 'flood://'.length); // as flood.mjs's
    const { file, ledger } = configDir('switchyard-stdio-update-flood-', { servers: { f: nodeServer('test/fixtures/quirks/flood.mjs') } });
    const c = stdioHub(file);
    try {
      await initialize(c);
      expect((await c.request({ jsonrpc: '2.0', id: 's', method: 'resources/subscribe', params: { uri } })).result).toEqual({});
      c.proc.stdout!.pause();
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'flood', method: 'tools/call', params: { name: 'f__flood', arguments: { n: FLOOD } } }));
      await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.requestId === 'flood' && x.outcome === 'ok'), FLOOD_MS);
      c.proc.stdout!.resume();
      await c.next((m) => m.id === 'flood', 15_000);
      const isUpdate = (m: Json) => m.method === 'notifications/resources/updated' && m.params?.uri === uri;
      // The one held back comes once the client has read what was waiting: after the answer.
      const answer = c.received.findIndex((m) => m.id === 'flood');
      await c.next((m) => isUpdate(m) && c.received.indexOf(m) > answer, 15_000);
      const updates = c.received.filter(isUpdate).length;
      expect(updates).toBeLessThan(FLOOD * 0.75);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);

  it('stopped while far behind, never sends a held change notification after the listen stream it belongs to ended', async () => {
    const FLOOD = 2_000;
    const uri = 'flood://' + 'x'.repeat(8000 - 'flood://'.length);
    const { file, ledger } = configDir('switchyard-stdio-held-after-end-', { servers: { f: nodeServer('test/fixtures/quirks/flood.mjs') } });
    // What it holds is read once the client reads again: on a loaded machine (load ~10) the
    // default 3 s for that ran out first, the listen stream's answer still unsent at the exit.
    const c = stdioHub(file, 'warn', { SWITCHYARD_STDOUT_FLUSH_MS: '20000' });
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'L', method: 'subscriptions/listen', params: { _meta: META, notifications: { resourceSubscriptions: [uri] } } }));
      await c.next((m) => m.method === 'notifications/subscriptions/acknowledged', 15_000);
      c.proc.stdout!.pause();
      c.send(JSON.stringify(call('flood', 'f__flood', { n: FLOOD })));
      await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.requestId === 'flood' && x.outcome === 'ok'), FLOOD_MS);
      // The stop ends the listen stream gracefully (its response) while the latest update is held.
      c.proc.kill('SIGTERM');
      await sleep(500);
      c.proc.stdout!.resume();
      expect(await exitWithin(c, 15_000)).toBe(0);
      const end = c.received.findIndex((m) => m.id === 'L');
      expect(c.received[end]?.result?.resultType).toBe('complete');
      const isUpdate = (m: Json) => m.method === 'notifications/resources/updated';
      expect(c.received.filter(isUpdate).length).toBeGreaterThan(0);
      expect(c.received.slice(end + 1).filter(isUpdate)).toEqual([]);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);

  // Its stdin left unread while stdout was full, a request the client wrote before the stop
  // was never read: the stop went deaf before the ledger closed, and the exit left it with no answer.
  it('stopped while its stdin is left unread, answers and records the requests already written once it reads', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-unread-at-stop-', {}, 'info', { SWITCHYARD_STDOUT_FLUSH_MS: '20000' });
    try {
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.proc.stdout!.pause();
      c.send(JSON.stringify(call('big', 'modern__echo', { text: 'x'.repeat(1_000_000) })));
      await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.requestId === 'big' && x.outcome === 'ok'), FLOOD_MS);
      c.send(JSON.stringify(call('late', 'modern__echo', { text: 'late' })) + '\n' + JSON.stringify({ jsonrpc: '2.0', id: 'late-ping', method: 'ping' }));
      // A line begun (no newline yet) is no request read: not when stdin closes after reading stopped either.
      c.proc.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id: 'partial', method: 'ping' }));
      c.proc.kill('SIGTERM');
      // Until the ledger has closed (its last line): the exit waits on stdout alone.
      for (const until = Date.now() + 15_000; !/stdio hub stopping[\s\S]*chain head/.test(c.stderr); await sleep(20)) if (Date.now() > until) throw new Error(`ledger not closed: ${c.stderr.slice(-1500)}`);
      // Its EOF then completed the line: answered, its row lost ('audit row not written'). Nothing
      // says the EOF was taken, so a moment for it before the client reads.
      c.endInput();
      await sleep(500);
      c.proc.stdout!.resume();
      expect(await exitWithin(c, 15_000)).toBe(0);
      expect(c.received.filter((m) => typeof m.id === 'string' && m.id.startsWith('late')).map((m) => [m.id, m.error?.message])).toEqual([
        ['late', expect.stringContaining('shutting down')],
        ['late-ping', expect.stringContaining('shutting down')],
      ]);
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome])).toEqual([['big', 'ok'], ['late', 'unavailable']]);
      expect(c.received.filter((m) => m.id === 'partial')).toEqual([]);
      expect(c.stderr).not.toContain('audit row not written');
    } finally {
      c.kill();
    }
  }, 60_000);

  it('still exits on SIGTERM (0, the unsent answers given up after a few seconds), and at once on a second one', async () => {
    // Two hubs of their own, at once. The unsent answers are given up after
    // SWITCHYARD_STDOUT_FLUSH_MS (3 s by default): 500 ms for the one signalled once; 20 s for the
    // other, so its second signal finds it still waiting however loaded the machine (with 3 s it
    // could have given up first), and only that signal can end it within STOP_AT_ONCE_MS.
    await Promise.all([1, 2].map(async (signals) => {
      const { c, ledger } = twoServerHub('switchyard-stdio-unread-stop-', {}, 'info', { SWITCHYARD_STDOUT_FLUSH_MS: signals === 1 ? '500' : '20000' });
      try {
        await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
        c.proc.stdout!.pause();
        for (let i = 0; i < 5; i++) c.send(JSON.stringify(call(i, 'modern__echo', { text: 'x'.repeat(500_000) })));
        // Answered upstream (the answer of the first already fills stdout: the others wait unread in stdin).
        await waitForRows(ledger, { method: 'tools/call' }, (r) => r.some((x) => x.outcome === 'ok'), 20_000);
        c.proc.kill('SIGTERM');
        if (signals === 2) {
          await stopBegun(c);
          await sleep(SAME_REQUEST_MS + 200);
          c.proc.kill('SIGTERM');
          expect(await exitWithin(c, STOP_AT_ONCE_MS)).toBe(1);
        } else {
          expect(await exitWithin(c, 12_000)).toBe(0);
          expect(c.stderr).toContain('stdout not read by the client: exiting with answers unsent');
        }
      } finally {
        c.kill();
      }
    }));
  }, 60_000);
});

// Alone, between two groups that run at once (vitest runs consecutive concurrent describes as
// one group): its answers are timed.
describe('a legacy stdio client answering a question with a response that is not well formed', () => {
  const INPUT_TIMEOUT_MS = 8_000;

  it('fails the question at once with the problem (never inputTimeoutMs): a response is never answered, a line with no method, result or error is refused -32600', async () => {
    const { file } = configDir('switchyard-stdio-bad-answer-', { policy: { inputTimeoutMs: INPUT_TIMEOUT_MS }, listen: { maxBodyBytes: 8192 }, servers: { tl: nodeServer('test/fixtures/translation/legacy-server.mjs') } });
    const c = stdioHub(file);
    try {
      await initialize(c, { elicitation: {} });
      let n = 0;
      // Each with the id of the question it answers; `…` the rest of the line after that id.
      const answers = ['"jsonrpc":"2.0","result":null', '"jsonrpc":"2.0","result":"str"', '"jsonrpc":"2.0","result":[1]', '"jsonrpc":"2.0","error":"no"'];
      // No message at all, yet it names the question: only an answer could (it waited out
      // inputTimeoutMs). Being no message, it is refused -32600 too.
      const methodless = ['"jsonrpc":"2.0"', '"result":{"action":"accept","content":{"name":"n"}}'];
      for (const answer of [...answers, ...methodless]) {
        const id = ++n;
        c.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who: `bad-${id}` } } }));
        const ask = await c.next((m) => m.method === 'elicitation/create' && m.params?.message?.includes(`bad-${id}`), 20_000);
        const t0 = Date.now();
        c.send(`{"id":${JSON.stringify(ask.id)},${answer}}`);
        const final = await c.next((m) => m.id === id && m.method === undefined, 20_000);
        expect(Date.now() - t0, answer).toBeLessThan(INPUT_TIMEOUT_MS / 2);
        expect(final.result?.isError, JSON.stringify(final)).toBe(true);
        expect(JSON.stringify(final.result)).toContain('the client answered elicitation/create with an invalid response');
        const told = c.received.filter((m) => m.id === ask.id && m.method === undefined);
        // JSON-RPC never answers a response.
        if (answers.includes(answer)) expect(told, answer).toEqual([]);
        else expect(told.map((m) => m.error?.code), answer).toEqual([-32600]);
      }
      expect(JSON.stringify(c.received.find((m) => m.id === 5))).toContain('invalid response: it has neither a result nor an error');
      expect(JSON.stringify(c.received.find((m) => m.id === 6))).toContain('invalid response: jsonrpc must be');
      // An answer longer than a line may be (listen.maxBodyBytes), skipped unread and answered
      // nothing (a response is owed none), its id first or last (as the SDK v1 client writes it): the question
      // fails at once, as over HTTP (413). It waited out inputTimeoutMs.
      const big = { action: 'accept', content: { name: 'x'.repeat(10_000) } };
      for (const idLast of [false, true]) {
        const id = ++n;
        c.send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who: `big-${id}` } } }));
        const ask = await c.next((m) => m.method === 'elicitation/create' && m.params?.message?.includes(`big-${id}`), 20_000);
        const t0 = Date.now();
        c.send(JSON.stringify(idLast ? { result: big, jsonrpc: '2.0', id: ask.id } : { jsonrpc: '2.0', id: ask.id, result: big }));
        const final = await c.next((m) => m.id === id && m.method === undefined, 20_000);
        expect(Date.now() - t0, `id last: ${idLast}`).toBeLessThan(INPUT_TIMEOUT_MS / 2);
        expect(JSON.stringify(final.result)).toContain('the client answered elicitation/create with an invalid response: it was a line larger than the hub takes (listen.maxBodyBytes, 8192 bytes)');
      }
      // To nothing: dropped, not answered either.
      c.send('{"jsonrpc":"2.0","id":"sy-999","result":null}');
      c.send('{"jsonrpc":"2.0","result":"x"}');
      const pong = await c.request({ jsonrpc: '2.0', id: 'ping', method: 'ping' });
      expect(pong.result).toEqual({});
      expect(c.received.filter((m) => m.error !== undefined).map((m) => [m.error.code, m.id])).toEqual([...methodless.map((_, i) => [-32600, c.received.find((q) => q.params?.message?.includes(`bad-${answers.length + i + 1}`))!.id])]);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});

// A client starting over on the pipe it has: the requests its first session still had in flight
// were never answered (their answers dropped), so it waited for them until its own timeout.
describe('an initialize again on one `switchyard stdio` pipe', () => {
  it("answers what the old session still owes with an error, before the new initialize's answer; the new session may use the same ids", async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-reinit-');
    try {
      await initialize(c);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 20_000 }, _meta: { progressToken: 'p1' } } }));
      // Running upstream.
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'p1', 30_000);
      const again = await c.request({ jsonrpc: '2.0', id: 'init2', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'again', version: '1' } } });
      expect(again.result.protocolVersion).toBe('2025-11-25');
      const owed = c.received.findIndex((m) => m.id === 1 && m.method === undefined);
      expect(owed, 'the old call answered').toBeGreaterThanOrEqual(0);
      expect(owed).toBeLessThan(c.received.indexOf(again));
      expect(c.received[owed]!.error).toEqual({ code: -32603, message: expect.stringContaining('the client sent initialize again on this pipe') });
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      // The same id in the new session: exactly one answer for each.
      const answered = c.next((m) => m.id === 1 && m.result !== undefined, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'new' } } }));
      expect((await answered).result.content[0].text).toBe('echo:new');
      const rows = await waitForRows(ledger, { tool: 'legacy__slow' }, (r) => r.some((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => [r.requestId, r.outcome])).toEqual([[1, 'cancelled']]);
      expect(c.received.filter((m) => m.id === 1 && m.method === undefined)).toHaveLength(2);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});

// From here on each test runs a `switchyard stdio` of its own and mostly waits (slow calls, a
// drain, a server's restart): these describes run at once, as one group.
describe.concurrent('one id in flight in both eras on one `switchyard stdio` pipe', () => {
  it.concurrent('a cancellation ends only the call of its own era; the other is answered', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-cross-era-');
    try {
      await initialize(c);
      const legacyCall = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 1_500 } } });
      // A modern cancellation of 5: the modern 5 ends, the legacy 5 answers.
      c.send(JSON.stringify(call(5, 'modern__slow', { ms: 1_500 })));
      c.send(JSON.stringify(legacyCall(5)));
      await sleep(400);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5, _meta: META } }));
      // A legacy cancellation of 6: the legacy 6 ends, the modern 6 answers.
      c.send(JSON.stringify(call(6, 'modern__slow', { ms: 1_500 })));
      c.send(JSON.stringify(legacyCall(6)));
      await sleep(400);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 6 } }));
      // Without _meta, and only a modern 7 in flight: that one ends (a modern client need not claim its era on a notification).
      c.send(JSON.stringify(call(7, 'modern__slow', { ms: 1_500 })));
      await sleep(400);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } }));
      await c.next((m) => m.id === 5, 10_000);
      await c.next((m) => m.id === 6, 10_000);
      await sleep(1_500);
      const five = c.received.filter((m) => m.id === 5);
      const six = c.received.filter((m) => m.id === 6);
      // The legacy answer has no resultType; the modern one does.
      expect(five).toEqual([{ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'slept 1500' }] } }]);
      expect(six).toHaveLength(1);
      expect(six[0]!.result).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'slept 1500' }] });
      expect(c.received.filter((m) => m.id === 7)).toEqual([]);
      const rows = await waitForRows(ledger, { method: 'tools/call' }, (r) => r.length === 5);
      // A row is ok only for an answer that was written.
      expect(rows.map((r) => [r.requestId, r.clientEra, r.outcome]).sort()).toEqual([
        [5, '2025-11-25', 'ok'],
        [5, '2026-07-28', 'cancelled'],
        [6, '2025-11-25', 'cancelled'],
        [6, '2026-07-28', 'ok'],
        [7, '2026-07-28', 'cancelled'],
      ]);
    } finally {
      c.kill();
    }
  }, 40_000);

  // Cut at the drain deadline, a call still running was cancelled with its row but never
  // answered (over HTTP the closing upstreams fail it with an answer): its client, its stdin
  // still open, waited for an answer that never came.
  it.concurrent('a request refused as a duplicate id leaves the original as it was: a SIGTERM\'s drain deadline ends it, answered -32603 (the hub is shutting down), as the legacy call then still running', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-dup-stop-', { listen: { drainTimeoutMs: 300 } }, 'info');
    try {
      await initialize(c);
      await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } }, 30_000);
      c.send(JSON.stringify(call('dup', 'modern__slow', { ms: 20_000 })));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'old', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 20_000 } } }));
      await sleep(300);
      const refused = await c.request(call('dup', 'modern__echo', { text: 'second' }));
      expect(refused.error?.message).toContain('already in flight');
      // stdin stays open: the client waits for its answers.
      c.proc.kill('SIGTERM');
      const [dup, old] = await Promise.all([c.next((m) => m.id === 'dup' && m !== refused, 10_000), c.next((m) => m.id === 'old', 10_000)]);
      for (const m of [dup, old]) expect(m.error, JSON.stringify(m)).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down') });
      expect(await exitWithin(c, 15_000)).toBe(0);
      expect(c.received.filter((m) => m.id === 'dup')).toEqual([refused, dup]);
      expect(c.nonProtocolLines).toEqual([]);
      const rows = await queryRows(ledger, { method: 'tools/call' });
      expect(rows.map((r) => [r.requestId, r.clientEra, r.outcome]).sort()).toEqual([
        ['dup', '2026-07-28', 'rpc_error'],
        ['dup', '2026-07-28', 'unavailable'],
        ['old', '2025-11-25', 'unavailable'],
      ]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe.concurrent('a legacy resources/subscribe of `switchyard stdio` waiting for its server back when a SIGTERM\'s drain time runs out', () => {
  // Answered the stop's -32603, its row said `cancelled`, as if its client had cancelled it.
  it('is answered -32603 and recorded unavailable', async () => {
    const late = { command: process.execPath, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), join(ROOT, 'test/fixtures/catalog/mutable-server.mjs')], env: { START_DELAY_MS: '1000', ERA: 'modern', DOC_URI: 'late://doc' } };
    const { file, ledger } = configDir('switchyard-stdio-subscribe-stop-', { listen: { drainTimeoutMs: 300 }, servers: { late } });
    const c = stdioHub(file, 'debug');
    try {
      await initialize(c);
      await c.request({ jsonrpc: '2.0', id: 'list', method: 'resources/list' }, 20_000);
      const pid = c.stderr.split('\n').filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json).at(-1)?.pid as number;
      expect(pid).toBeGreaterThan(0);
      process.kill(pid, 'SIGKILL');
      const down = () => c.stderr.split('\n').some((l) => l.includes('"msg":"upstream state"') && /"state":"(restarting|starting)"/.test(l) && l.includes('"time"') && c.stderr.indexOf(l) > c.stderr.indexOf(`"pid":${pid}`));
      for (const until = Date.now() + 10_000; !down(); await sleep(20)) if (Date.now() > until) throw new Error('the server never went down');
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'sub', method: 'resources/subscribe', params: { uri: 'late://doc' } }));
      // Its wait (the server is back over 1 s after its restart) leaves no trace to poll for: read, it waits.
      await sleep(300);
      c.proc.kill('SIGTERM');
      expect(await exitWithin(c, 15_000)).toBe(0);
      // Ended running (not refused as read after the signal).
      expect(c.received.filter((m) => m.id === 'sub').map((m) => m.error)).toEqual([{ code: -32603, message: expect.stringContaining('still running when it stopped') }]);
      expect((await queryRows(ledger, { 'request-id': 'sub' })).map((r) => r.outcome)).toEqual(['unavailable']);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe.concurrent('`switchyard stdio` whose client closed its stdout (EPIPE) with calls in flight', () => {
  // Recorded unavailable "the hub is shutting down": nobody was told anything, the client was gone.
  it('records them cancelled (the client went away), in both eras, and exits', async () => {
    const { c, ledger } = twoServerHub('switchyard-stdio-epipe-');
    try {
      await initialize(c);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'old', method: 'tools/call', params: { name: 'modern__slow', arguments: { ms: 20_000 } } }));
      c.send(JSON.stringify(call('new', 'modern__slow', { ms: 20_000 })));
      await sleep(300);
      c.proc.stdout!.destroy();
      // Its answer is the next line written: EPIPE.
      c.send(JSON.stringify(call('echo', 'modern__echo', { text: 'x' })));
      expect(await exitWithin(c, 15_000)).not.toBe('running');
      // Those two ended (the echo's row is not waited for: the hub may find stdout closed, and
      // exit, before it reads the echo, as a loaded machine showed).
      const rows = await waitForRows(ledger, { method: 'tools/call' }, (r) => ['old', 'new'].every((id) => r.some((x) => x.requestId === id && x.outcome !== 'in_flight')), 20_000);
      const of = (id: string) => rows.find((r) => r.requestId === id);
      for (const id of ['old', 'new']) expect([of(id)?.outcome, of(id)?.errorMessage], id).toEqual(['cancelled', expect.stringContaining('the client went away')]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe.concurrent('a legacy client of `switchyard stdio` asked a question when a SIGTERM\'s drain time runs out', () => {
  // Answered the stop's -32603, its row said rpc_error 'session closed': the question's end, not the call's.
  // Its idempotency key is left unknown (call-tool.ts: the stop is no answer of the client's):
  // a retry with it on the next hub is refused with what to do, and the ledger shows both.
  it('has its call answered -32603 (the hub is shutting down) and recorded unavailable; a retry of its key is refused saying what to do', async () => {
    const { file, ledger } = configDir('switchyard-stdio-asked-stop-', { listen: { drainTimeoutMs: 300 }, servers: { ms: nodeServer(MODERN_FIXTURE) } });
    const keyed = (id: string): Json => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'ms__elicit_form', arguments: {}, _meta: { 'dev.switchyard/idempotency-key': 'k-asked' } } });
    const c = stdioHub(file);
    try {
      await initialize(c, { elicitation: {} });
      c.send(JSON.stringify(keyed('q')));
      await c.next((m) => m.method === 'elicitation/create', 20_000);
      c.proc.kill('SIGTERM');
      expect(await exitWithin(c, 15_000)).toBe(0);
      expect(c.received.filter((m) => m.id === 'q').map((m) => m.error)).toEqual([{ code: -32603, message: expect.stringContaining('the hub is shutting down') }]);
      expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome, r.errorMessage])).toEqual([['q', 'unavailable', expect.stringContaining('the hub is shutting down')]]);
    } finally {
      c.kill();
    }
    const again = stdioHub(file);
    try {
      await initialize(again, { elicitation: {} });
      const r = await again.request(keyed('q2'), 20_000);
      expect(r.result, JSON.stringify(r)).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/idempotency key "k-asked" .* outcome is unknown.*check the effect, then use a new key/) }] });
      again.endInput();
      expect(await exitWithin(again, 15_000)).toBe(0);
    } finally {
      again.kill();
    }
    expect((await queryRows(ledger, { method: 'tools/call' })).map((r) => [r.requestId, r.outcome, r.idempotencyKey])).toEqual([
      ['q', 'unavailable', 'k-asked'],
      ['q2', 'denied', 'k-asked'],
    ]);
    // Its state before any retry tells it: `ledger query` shows the row, not whether the key is free.
    const keys = await runCli(['ledger', 'keys', '--config', file]);
    expect(keys.code, keys.stderr).toBe(0);
    const line = keys.stdout.split('\n').find((l) => l.includes('k-asked'));
    expect(line).toMatch(/local\s+-\s+k-asked\s+ms__elicit_form\s+unknown\s+.*is refused: the call may have run; check its effect, then use a new key/);
  }, 40_000);
});

describe.concurrent('a modern client of `switchyard stdio` whose retry waits on a parked call when a SIGTERM\'s drain time runs out', () => {
  // The retry was answered the stop's -32603, but its row (which carries the call's end) said
  // `cancelled`: the parked call's end was recorded as a cancellation, not the stop that ended it.
  it('has the retry answered -32603 and recorded unavailable', async () => {
    const { file, ledger } = configDir('switchyard-stdio-parked-stop-', { listen: { drainTimeoutMs: 300 }, servers: { tl: nodeServer('test/fixtures/translation/legacy-server.mjs') } });
    const c = stdioHub(file, 'debug');
    let pid: number | undefined;
    try {
      const meta = { ...META, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
      const first = await c.request({ jsonrpc: '2.0', id: 'r1', method: 'tools/call', params: { name: 'tl__three_rounds', arguments: {}, _meta: meta } }, 30_000);
      expect(first.result?.resultType, JSON.stringify(first)).toBe('input_required');
      const key = Object.keys(first.result.inputRequests)[0]!;
      pid = c.stderr.split('\n').filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json).find((l) => l.server === 'tl')?.pid;
      expect(pid).toBeGreaterThan(0);
      // The upstream hears the answer but does not go on: the retry waits on the parked call.
      process.kill(pid!, 'SIGSTOP');
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'r2', method: 'tools/call', params: { name: 'tl__three_rounds', arguments: {}, requestState: first.result.requestState, inputResponses: { [key]: { action: 'accept', content: { answer: 'a' } } }, _meta: meta } }));
      await waitForRows(ledger, { 'request-id': 'r2' }, (rows) => rows.some((r) => r.outcome === 'in_flight'), 20_000);
      c.proc.kill('SIGTERM');
      await c.next((m) => m.id === 'r2', 15_000);
      // Let it go on, to hear its stdin close and exit at once (not at the hub's SIGKILL).
      process.kill(pid!, 'SIGCONT');
      expect(await exitWithin(c, 15_000)).toBe(0);
      expect(c.received.filter((m) => m.id === 'r2').map((m) => m.error)).toEqual([{ code: -32603, message: expect.stringContaining('the hub is shutting down') }]);
      const rows = await queryRows(ledger, { method: 'tools/call' });
      expect(rows.map((r) => [r.requestId, r.outcome]).sort()).toEqual([['r1', 'input_required'], ['r2', 'unavailable']]);
    } finally {
      if (pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      c.kill();
    }
  }, 40_000);
});

describe.concurrent('calls of `switchyard stdio` waiting in the hub when a SIGTERM\'s drain time runs out', () => {
  // Each was answered the stop's -32603, but its row said `cancelled`, as if its client had
  // cancelled it: a keyed call waiting for the first call with its key, and a legacy client's
  // call waiting for its user's confirmation (policy.confirm), never forwarded.
  it('are answered -32603 and recorded unavailable: one waiting for its key\'s first call, one for its confirmation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stdio-waits-stop-'));
    const { file, ledger } = configDir('switchyard-stdio-waits-stop-', { listen: { drainTimeoutMs: 300 }, policy: { confirm: ['legacy__counter_bump'] }, servers: twoServers(dir) });
    const c = stdioHub(file);
    try {
      await initialize(c, { elicitation: {} });
      const keyed = (id: string): Json => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 20_000 }, _meta: { ...META, 'dev.switchyard/idempotency-key': 'k-stop' } } });
      c.send(JSON.stringify(keyed('first')));
      await waitForRows(ledger, { 'request-id': 'first' }, (rows) => rows.some((r) => r.outcome === 'in_flight'), 20_000);
      c.send(JSON.stringify(keyed('second')));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'confirm', method: 'tools/call', params: { name: 'legacy__counter_bump', arguments: { label: 'x' } } }));
      await c.next((m) => m.method === 'elicitation/create', 20_000);
      await waitForRows(ledger, { 'request-id': 'second' }, (rows) => rows.some((r) => r.outcome === 'in_flight'), 20_000);
      c.proc.kill('SIGTERM');
      expect(await exitWithin(c, 15_000)).toBe(0);
      for (const id of ['second', 'confirm']) {
        expect(c.received.filter((m) => m.id === id).map((m) => m.error), id).toEqual([{ code: -32603, message: expect.stringContaining('the hub is shutting down') }]);
        expect((await queryRows(ledger, { 'request-id': id })).map((r) => r.outcome), id).toEqual(['unavailable']);
      }
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe.concurrent('a modern request on `switchyard stdio` claiming a version that is no string', () => {
  // A version that is no string is no version: the `_meta` field is malformed (-32602, as the SDK
  // v2 server's stdio answers it, and as the hub's HTTP edge does); it was -32022 'unsupported
  // protocol version: 2026'. A string it does not serve is still -32022, data.requested as sent.
  it('is -32602 naming the _meta key; a string version it does not serve is -32022', async () => {
    const { c } = twoServerHub('sy-pipe-version-');
    try {
      for (const [id, v, shown] of [[1, 2026, '2026'], [2, { v: 1 }, '{"v":1}'], [4, null, 'null']] as const) {
        const r = await c.request({ jsonrpc: '2.0', id, method: 'tools/list', params: { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': v } } });
        expect(r.error, JSON.stringify(v)).toEqual({ code: -32602, message: `invalid _meta io.modelcontextprotocol/protocolVersion: a version string, not ${shown}` });
      }
      const r = await c.request({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': '1999-01-01' } } });
      expect(r.error).toMatchObject({ code: -32022, data: { supported: [MODERN], requested: '1999-01-01' } });
    } finally {
      c.kill();
    }
  });
});

describe.concurrent('malformed messages on `switchyard stdio` (a wrong jsonrpc, an id of a bad type)', () => {
  // Their rows said 2025-11-25 whatever their `_meta` claimed: the era rule had neither their
  // method nor their params. They name the era a well-formed message's row would (eraOfRequest).
  it("are recorded in the era their method and _meta claim say, as a well-formed request's row is", async () => {
    const { c, ledger } = twoServerHub('sy-pipe-malformed-era-');
    try {
      const lines = [
        { jsonrpc: '1.0', id: 'wrong-jsonrpc-modern', method: 'tools/list', params: { _meta: META } },
        { jsonrpc: '1.0', id: 'wrong-jsonrpc-legacy', method: 'tools/list', params: {} },
        // An initialize is modern only with a modern claim, as eraOfRequest has it.
        { jsonrpc: '1.0', id: 'wrong-jsonrpc-init', method: 'initialize', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } } },
        { jsonrpc: '2.0', id: 1.5, method: 'tools/list', params: { _meta: META } },
      ];
      for (const l of lines) c.send(JSON.stringify(l));
      await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping', params: { _meta: META } });
      const rows = await waitForRows(ledger, { method: '(invalid)' }, (r) => r.length >= 4, 20_000);
      expect(rows.map((r) => [r.requestId, r.clientEra]).sort()).toEqual([
        ['', MODERN],
        ['wrong-jsonrpc-init', '2025-11-25'],
        ['wrong-jsonrpc-legacy', '2025-11-25'],
        ['wrong-jsonrpc-modern', MODERN],
      ]);
    } finally {
      c.kill();
    }
  });
});

describe.concurrent('malformed messages on `switchyard stdio` refused at the rate limit', () => {
  // The gate had no request to read an era from, so the denied row said 2025-11-25 for any.
  it("are recorded denied in the era their method and _meta claim say", async () => {
    const { c, ledger } = twoServerHub('sy-pipe-malformed-limit-', { policy: { rateLimit: { perPrincipal: { burst: 1, perSecond: 0.001 } } } });
    try {
      await c.request({ jsonrpc: '2.0', id: 'first', method: 'ping', params: { _meta: META } });
      c.send(JSON.stringify({ jsonrpc: '1.0', id: 'limited-modern', method: 'tools/list', params: { _meta: META } }));
      c.send(JSON.stringify({ jsonrpc: '1.0', id: 'limited-legacy', method: 'tools/list', params: {} }));
      // Answered under the ids they came with, as their own answers would be, and recorded under them.
      for (const id of ['limited-modern', 'limited-legacy']) expect((await c.next((m) => m.id === id, 20_000)).error?.message).toMatch(/^Too Many Requests/);
      const rows = await waitForRows(ledger, { method: '(invalid)' }, (r) => r.length >= 2, 20_000);
      expect(rows.map((r) => [r.requestId, r.outcome, r.clientEra]).sort()).toEqual([
        ['limited-legacy', 'denied', '2025-11-25'],
        ['limited-modern', 'denied', MODERN],
      ]);
    } finally {
      c.kill();
    }
  });
});

describe.concurrent('messages of `switchyard stdio` naming a request by a value that is no id', () => {
  // {"toString": 1} has no primitive: String() of it threw where the hub looked the id up, logged
  // as a handler failure; a cancellation without a requestId named the request whose id is "undefined".
  it('are dropped, not failed, and cancel nothing: a cancellation without requestId, or a response with an object id; a notification by position is not answered', async () => {
    const { c, ledger } = twoServerHub('sy-pipe-odd-ids-');
    try {
      // In flight once its first progress comes.
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'undefined', method: 'tools/call', params: { name: 'modern__slow', arguments: { ms: 1500 }, _meta: { ...META, progressToken: 'p' } } }));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'p', 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { _meta: META } }));
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: { toString: 1 }, _meta: META } }));
      const slow = await c.next((m) => m.id === 'undefined', 20_000);
      expect(slow.result?.content).toEqual([{ type: 'text', text: 'slept 1500' }]);
      await initialize(c);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: { toString: 1 }, result: {} }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: { valueOf: 1, toString: 1 }, error: { code: 1, message: 'x' } }));
      // Notifications with params by position: valid JSON-RPC, never answered (their params no MCP method takes).
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized', params: [] }));
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: ['after'] }));
      expect((await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' })).result).toEqual({});
      expect(c.stderr).not.toContain('handler failed');
      expect(c.nonProtocolLines).toEqual([]);
      // Responses and notifications are never answered.
      expect(c.received.filter((m) => m.error !== undefined)).toEqual([]);
      expect((await waitForRows(ledger, { 'request-id': 'undefined' }))[0]).toMatchObject({ outcome: 'ok' });
    } finally {
      c.kill();
    }
  }, 60_000);
});
