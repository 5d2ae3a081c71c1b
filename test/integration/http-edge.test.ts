/**
 * The hub's HTTP listener has two readers: its own fast path for plain JSON-RPC POSTs to /mcp,
 * and node:http for everything else. Against the real built hub and a real SDK upstream: a
 * request gets the same answer whichever reader takes it; one keep-alive connection can move
 * from the fast path to node:http mid-stream (pipelined bytes included) and keep working;
 * non-ASCII answers are framed right; every call has its ledger row.
 */
import { existsSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { rawClient, rawRequest, type RawResponse } from '../helpers/raw-http.js';
import { runCli } from '../helpers/cli.js';
import { modernBody, modernHeaders, waitForReady } from '../helpers/wire.js';
import { queryRows, SDK2 } from './ledger-helpers.js';

const PATH = '/mcp';

function head(method: string, name: string | undefined, extra: Record<string, string>, port: number): string {
  const h = { host: `127.0.0.1:${port}`, ...modernHeaders(method, name), ...extra };
  return `POST ${PATH} HTTP/1.1\r\n${Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}`;
}

/** A modern tools/call as raw bytes, with a Content-Length (the fast path) or chunked (node:http). */
function call(port: number, id: string, text: string, framing: 'length' | 'chunked' = 'length'): string {
  const body = JSON.stringify(modernBody(id, 'tools/call', { name: 'm__echo', arguments: { text } }));
  const bytes = Buffer.byteLength(body);
  if (framing === 'length') return `${head('tools/call', 'm__echo', { 'content-length': String(bytes) }, port)}\r\n${body}`;
  const half = Buffer.from(body).subarray(0, 20);
  const rest = Buffer.from(body).subarray(20);
  return `${head('tools/call', 'm__echo', { 'transfer-encoding': 'chunked' }, port)}\r\n${half.length.toString(16)}\r\n${half.toString()}\r\n${rest.length.toString(16)}\r\n${rest.toString()}\r\n0\r\n\r\n`;
}

/** A modern tools/call of m__slow (sleeps `ms`), chunked: node:http reads it. */
function slowCall(port: number, id: string, ms: number): string {
  const body = JSON.stringify(modernBody(id, 'tools/call', { name: 'm__slow', arguments: { ms } }));
  return `${head('tools/call', 'm__slow', { 'transfer-encoding': 'chunked' }, port)}\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
}

/**
 * "At once", against the request timeout (66 s by default) a broken reader would wait out: far
 * below it, yet well above what a starved 2-vCPU machine takes to answer (2 s was not, at times).
 */
const AT_ONCE_MS = 20_000;

const resultText = (r: RawResponse) => (JSON.parse(r.body) as { result: { content: { text: string }[] } }).result.content[0]!.text;

describe('the HTTP listener: fast path and node:http', () => {
  let hub: HubProcess;

  beforeAll(async () => {
    hub = await startHub({ servers: { m: nodeServer(SDK2) } });
    await waitForReady(hub.url, ['m']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  it('answers the same request the same way whichever reader takes it', async () => {
    const fast = rawClient(hub.port);
    fast.send(call(hub.port, 'same-1', 'héllo ✓ 🚀'));
    const slow = rawClient(hub.port);
    slow.send(call(hub.port, 'same-1', 'héllo ✓ 🚀', 'chunked'));
    const [a] = await fast.waitFor(1);
    const [b] = await slow.waitFor(1);
    for (const r of [a!, b!]) {
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers.connection).toBe('keep-alive');
      expect(r.headers['keep-alive']).toBe('timeout=65');
      // The length counts UTF-8 bytes: the body parses whole.
      expect(resultText(r)).toBe('echo:héllo ✓ 🚀');
    }
    expect(a!.body).toBe(b!.body);
    fast.socket.destroy();
    slow.socket.destroy();
  });

  it('answers a head whose lines end in bare LFs at once (400 from node:http), not after the request timeout', async () => {
    const t0 = Date.now();
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect(hub.port, '127.0.0.1', () => s.write(`POST ${PATH} HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: 2\n\n{}`));
      let got = '';
      s.on('data', (d) => {
        got += d.toString('latin1');
        if (got.includes('\r\n\r\n')) s.destroy();
      });
      s.on('close', () => resolve(got));
      s.on('error', reject);
      setTimeout(() => s.destroy(), AT_ONCE_MS);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    expect(Date.now() - t0).toBeLessThan(AT_ONCE_MS);
  });

  it('keeps one connection working across the move to node:http, pipelined bytes included', async () => {
    const c = rawClient(hub.port);
    c.send(call(hub.port, 'move-1', 'one'));
    await c.waitFor(1);
    // One write: a GET for node:http, then two POSTs that node:http must read as well.
    c.send(`GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${hub.port}\r\n\r\n${call(hub.port, 'move-3', 'three')}${call(hub.port, 'move-4', 'four', 'chunked')}`);
    const rs = await c.waitFor(4);
    expect(resultText(rs[0]!)).toBe('echo:one');
    expect(JSON.parse(rs[1]!.body)).toMatchObject({ status: 'ok' });
    expect(resultText(rs[2]!)).toBe('echo:three');
    expect(resultText(rs[3]!)).toBe('echo:four');
    c.socket.destroy();
    const rows = await queryRows(join(hub.dir, 'ledger.db'), { tool: 'm__echo' });
    const ids = rows.map((r) => r.requestId);
    for (const id of ['move-1', 'move-3', 'move-4']) expect(ids).toContain(id);
  });

  it('takes a request in absolute form (as through a proxy), judging the host it names, not its Host field (RFC 9112 §3.2.2)', async () => {
    const send = async (target: string, host: string) => {
      const c = rawClient(hub.port);
      const body = JSON.stringify(modernBody(`abs-${host}`, 'tools/list'));
      const h = { host, ...modernHeaders('tools/list'), 'content-length': String(Buffer.byteLength(body)) };
      c.send(`POST ${target} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`);
      const [r] = await c.waitFor(1);
      c.socket.destroy();
      return r!;
    };
    const served = await send(`http://127.0.0.1:${hub.port}/mcp?x=1`, 'proxy.example.com');
    expect(served.status, served.body).toBe(200);
    expect((JSON.parse(served.body) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
    // A rebinding attempt in the target is refused, whatever the Host field says.
    expect((await send(`HTTP://evil.example.com:${hub.port}/mcp`, `127.0.0.1:${hub.port}`)).status).toBe(403);
  });

  it('refuses a Host it does not serve on the fast path, as on node:http', async () => {
    const c = rawClient(hub.port);
    const body = JSON.stringify(modernBody('evil-1', 'tools/list'));
    c.send(`POST ${PATH} HTTP/1.1\r\nhost: evil.example.com\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    const [r] = await c.waitFor(1);
    expect(r!.status).toBe(403);
    c.socket.destroy();
  });

  it('drops an upload its client abandons mid-body quietly on both readers, without an error line per client', async () => {
    for (const framing of ['length', 'chunked'] as const) {
      for (let i = 0; i < 3; i++) {
        const whole = call(hub.port, `gone-${framing}-${i}`, 'never finished', framing);
        const c = rawClient(hub.port);
        c.send(whole.slice(0, whole.length - 12));
        await new Promise((r) => setTimeout(r, 20));
        c.socket.destroy();
      }
    }
    // The hub saw those connections close before it answers this one, and logs at once.
    const after = rawClient(hub.port);
    after.send(call(hub.port, 'after-gone', 'here'));
    expect(resultText((await after.waitFor(1))[0]!)).toBe('echo:here');
    after.socket.destroy();
    await new Promise((r) => setTimeout(r, 200));
    expect(hub.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
  });

  it('runs the pipelined calls of a connection node:http reads one at a time, as the fast path does', async () => {
    // node:http hands over every request it parses at once: one connection could fill a
    // server's whole queue, and other clients' calls were refused "busy".
    const c = rawClient(hub.port);
    c.send(slowCall(hub.port, 'turn-1', 200) + slowCall(hub.port, 'turn-2', 200) + slowCall(hub.port, 'turn-3', 200));
    const rs = await c.waitFor(3);
    expect(rs.map((r) => (JSON.parse(r.body.split('data: ').pop()!) as { id: string }).id)).toEqual(['turn-1', 'turn-2', 'turn-3']);
    c.socket.destroy();
    // Each call's row begins when the hub takes it: one 200 ms call after the other (they began together).
    const rows = await queryRows(join(hub.dir, 'ledger.db'), { tool: 'm__slow' });
    const began = ['turn-1', 'turn-2', 'turn-3'].map((id) => Date.parse(rows.find((r) => r.requestId === id)!.ts));
    expect(began[1]! - began[0]!).toBeGreaterThanOrEqual(190);
    expect(began[2]! - began[1]!).toBeGreaterThanOrEqual(190);
  });

  it('refuses at once, with 429 and a row, what waits past the bound on one node:http connection, and answers the rest', async () => {
    const c = rawClient(hub.port);
    let bytes = slowCall(hub.port, 'bound-0', 300);
    for (let i = 1; i <= 40; i++) bytes += call(hub.port, `bound-${i}`, String(i), 'chunked');
    c.send(bytes);
    const rs = await c.waitFor(41, 10_000);
    expect(rs.slice(1, 33).map((r) => resultText(r))).toEqual(Array.from({ length: 32 }, (_, i) => `echo:${i + 1}`));
    for (const r of rs.slice(33)) {
      expect(r.status).toBe(429);
      expect(r.headers['retry-after']).toBe('1');
      expect(r.body).toMatch(/more than 32 requests wait on this connection/);
    }
    c.socket.destroy();
    const rows = await queryRows(join(hub.dir, 'ledger.db'), { outcome: 'denied' });
    expect(rows.filter((r) => r.errorCode === 429 && r.method === 'tools/call')).toHaveLength(8);
  });

  it('answers a Connection: close request node:http reads, and ignores what was pipelined after it, as the fast path does', async () => {
    for (const framing of ['length', 'chunked'] as const) {
      const c = rawClient(hub.port);
      // RFC 9112 §9.6: the close request is answered, then the connection closes; nothing after it is processed.
      const closing = call(hub.port, `close-${framing}`, 'last', framing).replace('\r\n', '\r\nconnection: close\r\n');
      c.send(closing + call(hub.port, `after-close-${framing}`, 'never'));
      await c.waitClosed();
      const rs = c.responses();
      expect(rs.map((r) => r.status)).toEqual([200]);
      expect(rs[0]!.headers.connection).toBe('close');
      expect(resultText(rs[0]!)).toBe('echo:last');
    }
  });

  it('answers at once when what follows a request cannot begin one (a body longer than its Content-Length said), not after the request timeout', async () => {
    const c = rawClient(hub.port);
    const whole = call(hub.port, 'too-long', 'x');
    c.send(whole.replace(/content-length: \d+/, 'content-length: 10'));
    await c.waitClosed(AT_ONCE_MS); // the request timeout here is 66 s
    expect(c.responses().map((r) => r.status)).toEqual([400, 400]);
    expect(JSON.parse(c.responses()[0]!.body)).toMatchObject({ error: { code: -32700 } });
  });

  it('answers a request node:http reads before it refuses what follows it, on both readers', async () => {
    for (const framing of ['length', 'chunked'] as const) {
      const c = rawClient(hub.port);
      // A request, then bytes that cannot begin one: the call ran, so its answer comes first, then the 400.
      c.send(`${call(hub.port, `before-junk-${framing}`, 'kept', framing)}"junk": no request}`);
      await c.waitClosed(AT_ONCE_MS);
      expect(c.responses().map((r) => r.status)).toEqual([200, 400]);
      expect(resultText(c.responses()[0]!)).toBe('echo:kept');
    }
  });

  it('answers a malformed head with node:http’s error and stays up', async () => {
    const c = rawClient(hub.port);
    c.send(`POST ${PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}`);
    await c.waitClosed();
    expect(c.responses()[0]?.status).toBe(400);
    const again = rawClient(hub.port);
    again.send(call(hub.port, 'after-bad', 'still here'));
    expect(resultText((await again.waitFor(1))[0]!)).toBe('echo:still here');
    again.socket.destroy();
  });
});

describe('listen.requestTimeoutMs: a request trickled in is cut off on both readers', () => {
  let hub: HubProcess;

  beforeAll(async () => {
    hub = await startHub({ listen: { requestTimeoutMs: 1000 }, servers: { m: nodeServer(SDK2) } });
    await waitForReady(hub.url, ['m']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  /** Sends `bytes` and nothing more; resolves with what came back and when the hub closed the connection. */
  function stall(bytes: string): Promise<{ ms: number; got: string }> {
    return new Promise((resolve, reject) => {
      const t0 = Date.now();
      const socket = connect(hub.port, '127.0.0.1', () => socket.write(bytes));
      let got = '';
      socket.setEncoding('utf8').on('data', (d: string) => (got += d));
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`still open after 10 s; got ${JSON.stringify(got)}`));
      }, 10_000);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve({ ms: Date.now() - t0, got });
      });
    });
  }

  it('closes a fast-path request whose body stops coming', async () => {
    const partial = `${head('tools/call', 'm__echo', { 'content-length': '500' }, hub.port)}\r\n{"jsonrpc":"2.0",`;
    const r = await stall(partial);
    expect(r.ms).toBeGreaterThanOrEqual(900);
  });

  it('closes a node:http request (chunked) whose body stops coming, with 408, not after node:http\'s 300 s', async () => {
    const partial = `${head('tools/call', 'm__echo', { 'transfer-encoding': 'chunked' }, hub.port)}\r\n10\r\n{"jsonrpc":"2.0"\r\n`; // one whole 16-byte chunk, then nothing
    const r = await stall(partial);
    expect(r.ms, r.got).toBeGreaterThanOrEqual(900);
    expect(r.got).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('listen.requestTimeoutMs is kept to within a tenth, whenever the request began', () => {
  const LIMIT = 2000;
  let hub: HubProcess;

  beforeAll(async () => {
    hub = await startHub({ listen: { requestTimeoutMs: LIMIT }, servers: { m: nodeServer(SDK2) } });
    await waitForReady(hub.url, ['m']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  /** Sends `bytes` and nothing more; resolves with the ms until the hub closed the connection. */
  function stall(bytes: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const t0 = Date.now();
      const socket = connect(hub.port, '127.0.0.1', () => socket.write(bytes));
      socket.on('data', () => undefined);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('still open after 10 s'));
      }, 10_000);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(Date.now() - t0);
      });
    });
  }

  it('cuts trickled requests on both readers between the limit and 1.5 times it, begun at any point of the check interval', async () => {
    const fast = `${head('tools/call', 'm__echo', { 'content-length': '500' }, hub.port)}\r\n{"jsonrpc":"2.0",`;
    const slow = `${head('tools/call', 'm__echo', { 'transfer-encoding': 'chunked' }, hub.port)}\r\n10\r\n{"jsonrpc":"2.0"\r\n`;
    // Begun a quarter of the limit apart: with a check as long as the limit, one of them waits
    // for nearly two limits.
    const runs: Promise<number>[] = [];
    for (let i = 0; i < 4; i++) {
      runs.push(stall(fast), stall(slow));
      await new Promise((r) => setTimeout(r, LIMIT / 4));
    }
    const ms = await Promise.all(runs);
    for (const m of ms) expect(m).toBeGreaterThanOrEqual(LIMIT - 100);
    expect(Math.max(...ms)).toBeLessThan(LIMIT * 1.5);
  }, 30_000);
});

/** A GET over a unix socket: its status and body. */
const getOverSocket = (socketPath: string, path: string) => rawRequest({ socketPath }, path, 'GET', { host: 'localhost' });

describe('listen.maxConnections', () => {
  it('answers a connection past the cap 503 and closes it as it arrives (logged once), and takes new ones once others close; the admin socket (listen.admin.path) still serves the CLI meanwhile', async () => {
    // A relative admin path is relative to the config file's folder (the CLI reads it from there too).
    const hub = await startHub({ listen: { maxConnections: 3, admin: { path: 'admin.sock' } }, servers: {} });
    const socketPath = join(hub.dir, 'admin.sock');
    try {
      expect(statSync(socketPath).mode & 0o777).toBe(0o600);
      const open = (): Promise<{ socket: ReturnType<typeof connect>; closed: Promise<void> }> =>
        new Promise((resolve, reject) => {
          const socket = connect(hub.port, '127.0.0.1', () => resolve({ socket, closed: new Promise((r) => socket.once('close', () => r())) }));
          socket.once('error', reject);
        });
      const held = [await open(), await open(), await open()];
      // Each held connection is in (its request answered).
      for (const h of held) {
        h.socket.write(`GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${hub.port}\r\n\r\n`);
        await new Promise((r) => h.socket.once('data', r));
      }
      const extra = await open();
      let told = '';
      extra.socket.on('data', (d: Buffer) => (told += d.toString()));
      // Answered and closed by the hub as it arrived, without waiting for a request.
      await Promise.race([extra.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the connection past the cap was not closed')), 5_000))]);
      expect(told).toMatch(/^HTTP\/1\.1 503 /);
      await expect.poll(() => hub.logs.some((l) => l.includes('a client connection was refused (503) as it arrived: 3 are open (listen.maxConnections)'))).toBe(true);
      // Node's fetch (the official SDK clients') is told to try again: a connection closed
      // unanswered left its request waiting until the client's own timeout.
      const refused = await fetch(`http://127.0.0.1:${hub.port}/mcp`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(5_000) }).catch((e: unknown) => e);
      expect(refused instanceof Response ? [refused.status, refused.headers.get('retry-after')] : refused).toEqual([503, '1']);
      // The MCP listener is full; the operator's CLI finds the admin socket in the config and is served there.
      const servers = await runCli(['servers', '--config', hub.configFile, '--json']);
      expect([servers.code, servers.stderr, servers.stdout]).toEqual([0, '', '[]\n']);
      const reload = await runCli(['reload', '--config', hub.configFile]);
      expect([reload.code, reload.stderr]).toEqual([0, '']);
      expect(reload.stdout).toMatch(/^reloaded/);
      // /healthz too; the MCP endpoint is not there (a flood cannot move over to it).
      expect(await getOverSocket(socketPath, '/healthz')).toMatchObject({ status: 200 });
      expect((await getOverSocket(socketPath, '/mcp')).status).toBe(404);
      held[0]!.socket.destroy();
      await held[0]!.closed;
      await expect.poll(async () => (await fetch(`http://127.0.0.1:${hub.port}/healthz`).catch(() => undefined))?.status, { timeout: 5_000 }).toBe(200);
      for (const h of held) h.socket.destroy();
    } finally {
      expect(await hub.stop()).toBe(0);
    }
    // The socket file goes with the hub.
    expect(existsSync(socketPath)).toBe(false);
  });
});
