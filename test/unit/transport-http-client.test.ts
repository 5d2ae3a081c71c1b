/** The Streamable HTTP client transport against a real loopback server. */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import type { Classified } from '../../src/protocol/jsonrpc.js';
import { CancelledError, TransportError } from '../../src/protocol/errors.js';
import { ExchangeAbort, HttpClient } from '../../src/transport/http-client.js';
import { deflateRawSync, gzipSync } from 'node:zlib';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { processState } from '../helpers/procs.js';

const servers: http.Server[] = [];
const clients: HttpClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function serve(h: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<string> {
  const s = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    h(req, res, body);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/mcp`;
}

function client(url: string, maxFrameBytes = 1 << 20): HttpClient {
  const c = new HttpClient({ url, headers: { Authorization: 'Bearer t0k' }, maxFrameBytes, log: silentLogger });
  clients.push(c);
  return c;
}

describe('HttpClient', () => {
  it('POSTs JSON with the required headers and reads a JSON answer', async () => {
    let seen: IncomingMessage | undefined;
    const url = await serve((req, res, body) => {
      seen = req;
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(body.replace('"ping"', '"pong"').replace('"method"', '"x"').replace('"params":{}', '"result":{}'));
    });
    const got: Classified[] = [];
    const a = await client(url).post('{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}', { headers: { 'mcp-method': 'ping' }, onMessage: (c) => got.push(c) });
    expect(a).toMatchObject({ status: 200, messages: 1 });
    expect(got[0]).toEqual({ kind: 'response', msg: { jsonrpc: '2.0', id: 1, x: 'pong', result: {} } });
    expect(seen!.headers).toMatchObject({
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      authorization: 'Bearer t0k',
      'mcp-method': 'ping',
      // No compressed answers asked for (transport/content-coding.ts).
      'accept-encoding': 'identity',
      // Firewalls in front of remote servers refuse a request without one.
      'user-agent': expect.stringMatching(/^switchyard\/\d+\.\d+\.\d+/),
    });
  });

  it('sends a configured User-Agent instead of its own', async () => {
    let seen: IncomingMessage | undefined;
    const url = await serve((req, res) => {
      seen = req;
      res.writeHead(202).end();
    });
    const c = new HttpClient({ url, headers: { 'User-Agent': 'corp-gateway/2' }, maxFrameBytes: 1 << 20, log: silentLogger });
    clients.push(c);
    await c.post('{}');
    expect(seen!.headers['user-agent']).toBe('corp-gateway/2');
  });

  it('reads an SSE answer carrying notifications and a request before the response', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: p\ndata:\n\n');
      res.write('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n\n');
      res.write('data: {"jsonrpc":"2.0","id":"s1","method":"roots/list"}\n\n');
      res.write('data: not json\n\n');
      res.end('id: 7\ndata: {"jsonrpc":"2.0","id":1,"result":{"ok":true}}\n\n');
    });
    const kinds: string[] = [];
    const a = await client(url).post('{}', { onMessage: (c) => kinds.push(c.kind) });
    expect(kinds).toEqual(['notification', 'request', 'response']);
    expect(a).toMatchObject({ status: 200, messages: 3, lastEventId: '7' });
  });

  it('reads an SSE answer whose lines end in a CR alone, the stream ending on the response\'s', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: p\rdata:\r\r: kept\r\r');
      res.write('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\r\r');
      res.end('data: {"jsonrpc":"2.0","id":1,"result":{"ok":true}}\r\r');
    });
    const kinds: string[] = [];
    const a = await client(url).post('{}', { onMessage: (c) => kinds.push(c.kind) });
    expect(kinds).toEqual(['notification', 'response']);
    expect(a).toMatchObject({ status: 200, messages: 2, lastEventId: 'p' });
  });

  it('reports 202 and a non-2xx body for the caller to read', async () => {
    const url = await serve((req, res, body) => {
      if (body.includes('note')) return void res.writeHead(202).end();
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request"}}');
    });
    const c = client(url);
    expect(await c.post('{"note":1}')).toMatchObject({ status: 202, messages: 0 });
    const bad = await c.post('{}');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body!)).toMatchObject({ error: { code: -32000 } });
  });

  it('truncates a huge error body and fails a 2xx answer over maxFrameBytes (JSON or an event), marked oversized', async () => {
    const big = `{"jsonrpc":"2.0","id":1,"result":{"x":"${'x'.repeat(5000)}"}}`;
    const url = await serve((_req, res, body) => {
      if (body === 'err') return void res.writeHead(500).end('e'.repeat(200_000));
      // Past one socket read: an event that comes whole in one chunk is parsed without being held.
      if (body === 'sse') return void res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`data: {"jsonrpc":"2.0","id":1,"result":{"x":"${'x'.repeat(300_000)}"}}\n\n`);
      // Within one socket read: one event a little past the limit, or one of many small data:
      // lines that add up past it (each its own line of the event's data), then the response.
      if (body === 'sse-one-read' || body === 'sse-lines') {
        const event = body === 'sse-one-read' ? `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"${'é'.repeat(2100)}"}}\n\n` : `${'data: {"x":1}\n'.repeat(600)}\n`;
        return void res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`${event}data: {"jsonrpc":"2.0","id":1,"result":{}}\n\n`);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(big);
    });
    const c = client(url, 4096);
    expect((await c.post('err')).body).toHaveLength(64 * 1024);
    await expect(c.post('ok')).rejects.toMatchObject({ name: 'TransportError', oversized: true, message: 'HTTP answer larger than 4096 bytes (maxFrameBytes)' });
    await expect(c.post('sse')).rejects.toMatchObject({ name: 'TransportError', oversized: true, message: 'event stream failed: SSE event larger than 4096 bytes (maxFrameBytes)' });
    for (const whole of ['sse-one-read', 'sse-lines']) {
      const got: Classified[] = [];
      await expect(c.post(whole, { onMessage: (m) => got.push(m) })).rejects.toMatchObject({ name: 'TransportError', oversized: true, message: 'event stream failed: SSE event larger than 4096 bytes (maxFrameBytes)' });
      // Nothing of the stream past it: not the response that came in the same read.
      expect(got).toEqual([]);
    }
  });

  it('decodes a raw deflate answer sent as deflate, and a gzipped error body, whose limit counts decoded bytes', async () => {
    const url = await serve((_req, res, body) => {
      if (body === 'err') return void res.writeHead(500, { 'content-encoding': 'gzip' }).end(gzipSync(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"${'e'.repeat(200_000)}"}}`));
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'deflate' }).end(deflateRawSync('{"jsonrpc":"2.0","id":1,"result":{"raw":true}}'));
    });
    const c = client(url);
    const got: Classified[] = [];
    await c.post('ok', { onMessage: (m) => got.push(m) });
    expect(got[0]).toMatchObject({ kind: 'response', msg: { id: 1, result: { raw: true } } });
    const err = await c.post('err');
    expect(err.body!.startsWith('{"jsonrpc":"2.0","id":null,"error":{"code":-32603')).toBe(true);
    expect(err.body).toHaveLength(64 * 1024);
  });

  it("reads a 2xx answer's Content-Type and Content-Encoding whatever their case; a Content-Type given twice counts when both name one media type", async () => {
    const json = '{"jsonrpc":"2.0","id":1,"result":{"ok":true}}';
    const url = await serve((_req, res, body) => {
      if (body === 'cased') return void res.writeHead(200, { 'Content-Type': 'Application/JSON; Charset=UTF-8', 'Content-Encoding': 'GZIP' }).end(gzipSync(json));
      // Twice, the same media type (a proxy adding its own): read as JSON, or as an event stream.
      if (body === 'two types') return void res.writeHead(200, [['Content-Type', 'application/json'], ['content-type', 'Application/JSON; charset=utf-8']]).end(json);
      if (body === 'two streams') return void res.writeHead(200, [['Content-Type', 'text/event-stream'], ['content-type', 'text/event-stream']]).end(`data: ${json}\n\n`);
      // Twice, two media types: neither is taken.
      if (body === 'two kinds') return void res.writeHead(200, [['Content-Type', 'application/json'], ['content-type', 'text/html']]).end(json);
      // The copies joined on one line (a proxy folding repeated fields): the same as two lines.
      if (body === 'joined') return void res.writeHead(200, { 'Content-Type': 'application/json, Application/JSON; charset=utf-8' }).end(json);
      if (body === 'joined streams') return void res.writeHead(200, { 'Content-Type': 'text/event-stream,text/event-stream' }).end(`data: ${json}\n\n`);
      if (body === 'joined kinds') return void res.writeHead(200, { 'Content-Type': 'application/json, text/html' }).end(json);
      if (body === 'quoted comma') return void res.writeHead(200, { 'Content-Type': 'application/json; profile="a,b"' }).end(json);
      res.writeHead(200, [['Content-Type', 'application/json'], ['Content-Encoding', 'gzip'], ['content-encoding', 'gzip']]).end(gzipSync(gzipSync(json)));
    });
    const c = client(url);
    const got: Classified[] = [];
    expect(await c.post('cased', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(got[0]).toMatchObject({ kind: 'response', msg: { id: 1, result: { ok: true } } });
    const twice = await c.post('two types', { onMessage: (m) => got.push(m) });
    expect(twice).toMatchObject({ status: 200, messages: 1 });
    expect(twice.body).toBeUndefined();
    expect(twice.headers['content-type']).toEqual(['application/json', 'Application/JSON; charset=utf-8']);
    expect(await c.post('two streams', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(got).toHaveLength(3);
    expect(got[2]).toMatchObject({ kind: 'response', msg: { id: 1, result: { ok: true } } });
    expect(await c.post('two kinds', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 0, body: json });
    expect(await c.post('joined', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(await c.post('joined streams', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(await c.post('quoted comma', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(got).toHaveLength(6);
    got.length = 3;
    expect(await c.post('joined kinds', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 0, body: json });
    await expect(c.post('two codings')).rejects.toMatchObject({ name: 'TransportError', message: expect.stringContaining('content coding "gzip,gzip"') });
    expect(got).toHaveLength(3);
  });

  it("gives an answer's headers as undici's header object: names in lower case, one given twice as an array", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(404, [
        ['Content-Type', 'application/json'],
        ['Mcp-Session-Id', 'abc'],
        ['X-Twice', '1'],
        ['x-twice', '2'],
        ['WWW-Authenticate', 'Bearer error="invalid_token"'],
        ['Retry-After', '3'],
      ]);
      res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
    });
    const a = await client(url).post('{}');
    expect(a.status).toBe(404);
    expect(a.headers).toMatchObject({
      'content-type': 'application/json',
      'mcp-session-id': 'abc',
      'x-twice': ['1', '2'],
      'www-authenticate': 'Bearer error="invalid_token"',
      'retry-after': '3',
    });
    expect(a.headers['transfer-encoding']).toBe('chunked');
  });

  it('reads a large compressed answer whose decoder falls behind the socket (the answer paused, then resumed)', async () => {
    // Incompressible text, sent in many writes: the decoder's buffer fills, and undici must wait for it.
    const text = randomBytes(3 << 20).toString('base64');
    const json = `{"jsonrpc":"2.0","id":1,"result":{"text":"${text}"}}`;
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      const z = gzipSync(json);
      for (let i = 0; i < z.length; i += 16384) res.write(z.subarray(i, i + 16384));
      res.end();
    });
    const got: Classified[] = [];
    const a = await client(url, 8 << 20).post('{}', { onMessage: (m) => got.push(m) });
    expect(a).toMatchObject({ status: 200, messages: 1 });
    expect((got[0] as unknown as { msg: { result: { text: string } } }).msg.result.text).toBe(text);
  });

  it('logs a skipped answer redacted before it is cut to 200 characters: a token across the cut shows no part of it', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${'x'.repeat(180)} Bearer abcdefghijklmnopqrstuvwxyz0123456789\n\nid: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n`);
    });
    const logged: { msg: string; snippet?: string }[] = [];
    const c = new HttpClient({ url, headers: {}, maxFrameBytes: 1 << 20, log: pino({ level: 'warn' }, { write: (l: string) => void logged.push(JSON.parse(l)) }) });
    clients.push(c);
    expect(await c.post('{}', { onMessage: () => undefined })).toMatchObject({ status: 200, messages: 1 });
    const snippet = logged.find((l) => l.msg === 'skipped an HTTP answer that is not JSON-RPC')?.snippet;
    expect(snippet).toMatch(/^x{180} Bearer \[redac/);
    expect(snippet).not.toContain('abcdefgh');
  });

  it('reuses keep-alive connections for sequential requests', async () => {
    const ports = new Set<number>();
    const url = await serve((req, res) => {
      ports.add(req.socket.remotePort!);
      res.writeHead(202).end();
    });
    const c = client(url);
    for (let i = 0; i < 20; i++) await c.post('{}');
    // The next request leaves while the pool still books the last one's connection as busy, so
    // sequential calls take turns on two connections; what matters is that they are reused.
    expect(ports.size).toBeLessThanOrEqual(2);
  });

  /**
   * A server that closes a kept-alive connection just as the next request comes on it, without
   * answering (a FIN, or a reset): what a server's idle timeout does when it fires as the client
   * sends. `fresh` drops a request on a new connection instead. Each request's body is recorded
   * with whether it was dropped.
   */
  async function dropping(how: 'fin' | 'rst', on: 'kept-alive' | 'fresh' = 'kept-alive'): Promise<{ url: string; seen: { body: string; dropped: boolean }[] }> {
    const seen: { body: string; dropped: boolean }[] = [];
    const served = new WeakMap<object, number>();
    let armed = true;
    const url = await serve((req, res, body) => {
      const n = served.get(req.socket) ?? 0;
      served.set(req.socket, n + 1);
      const drop = armed && (on === 'fresh' ? n === 0 : n > 0);
      seen.push({ body, dropped: drop });
      if (!drop) return void res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":1,"result":{"body":${JSON.stringify(body)}}}`);
      armed = false;
      if (how === 'rst') req.socket.resetAndDestroy();
      else req.socket.destroy();
    });
    return { url, seen };
  }

  /** Sequential requests until the server dropped one (sequential requests take turns on two connections: see above). */
  async function untilDropped(c: HttpClient, seen: { dropped: boolean }[], send: (i: number) => Promise<unknown>): Promise<unknown[]> {
    const out: unknown[] = [];
    for (let i = 0; i < 6 && !seen.some((s) => s.dropped); i++) out.push(await send(i).catch((e: unknown) => e));
    expect(seen.filter((s) => s.dropped)).toHaveLength(1);
    return out;
  }

  for (const how of ['fin', 'rst'] as const) {
    it(`a kept-alive connection the server closes (${how}) as a request comes: sent again if it may be, else failed as maybe delivered`, async () => {
      const { url, seen } = await dropping(how);
      const c = client(url);
      // Safe to send twice: every request is answered, the dropped one by its second sending.
      const answers = await untilDropped(c, seen, (i) => c.post(`{"i":${i}}`, { replay: true }));
      for (const a of answers) expect(a).toMatchObject({ status: 200, messages: 1 });
      const lost = seen.find((s) => s.dropped)!.body;
      expect(seen.filter((s) => s.body === lost).map((s) => s.dropped)).toEqual([true, false]);

      // Not safe to send twice (a tools/call that may have run): failed, sent once.
      const second = await dropping(how);
      const d = client(second.url);
      const results = await untilDropped(d, second.seen, (i) => d.post(`{"i":${i}}`));
      const err = results.at(-1);
      expect(err).toBeInstanceOf(TransportError);
      expect(err).toMatchObject({ notDelivered: false, message: expect.stringMatching(/^HTTP POST failed: (other side closed|ECONNRESET)/) });
      expect(second.seen.filter((s) => s.body === second.seen.find((x) => x.dropped)!.body)).toHaveLength(1);
    });
  }

  it('a GET or DELETE is sent again after a kept-alive connection was lost; a request whose new connection is lost is not', async () => {
    const { url, seen } = await dropping('fin');
    const c = client(url);
    const answers = await untilDropped(c, seen, (i) => (i % 2 === 0 ? c.get({ headers: { 'x-i': String(i) } }) : c.delete()));
    for (const a of answers) expect(a).toMatchObject({ status: 200 });

    // A new connection lost so is no idle one closed under the request: the server may have died of it.
    const fresh = await dropping('fin', 'fresh');
    const err = await client(fresh.url).post('{"first":1}', { replay: true }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'TransportError', message: 'HTTP POST failed: other side closed' });
    expect(fresh.seen).toEqual([{ body: '{"first":1}', dropped: true }]);
  });

  it('rejects with CancelledError on abort, mid-stream', async () => {
    let closed = false;
    const url = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"jsonrpc":"2.0","method":"m"}\n\n');
      req.socket.on('close', () => (closed = true));
    });
    const ctl = new AbortController();
    const p = client(url).post('{}', { signal: ctl.signal, onMessage: () => ctl.abort() });
    await expect(p).rejects.toMatchObject({ name: 'CancelledError' });
    await new Promise((r) => setTimeout(r, 100));
    expect(closed).toBe(true);
  });

  it('marks a connection that never completes (no RST: a host gone, a firewall that drops) as not delivered, at undici\'s connect timeout', async () => {
    // A listener whose process is stopped accepts nothing: once its accept queue is full, the
    // kernel drops further SYNs, and a connect waits until it times out.
    const child = spawn(process.execPath, ['-e', "const s=require('net').createServer().listen({port:0,host:'127.0.0.1',backlog:1},()=>{console.log(s.address().port);process.kill(process.pid,'SIGSTOP')})"], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
      await new Promise<void>((resolve) => {
        const check = (): void => void (processState(child.pid!) === 'T' ? resolve() : setTimeout(check, 10));
        check();
      });
      const fillers = Array.from({ length: 4 }, () => net.connect(port, '127.0.0.1').on('error', () => undefined));
      await Promise.all(fillers.slice(0, 2).map((f) => new Promise((r) => f.once('connect', r))));
      try {
        const err = await client(`http://127.0.0.1:${port}/mcp`).post('{}').catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'TransportError', notDelivered: true });
        expect((err as Error).message).toMatch(/^HTTP POST failed: Connect Timeout Error/);
      } finally {
        for (const f of fillers) f.destroy();
      }
    } finally {
      child.kill('SIGKILL');
    }
  }, 30_000);

  it('marks connection refused as not delivered, and a broken answer as delivered', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"jsonrpc"');
      res.destroy();
    });
    await expect(client(url).post('{}')).rejects.toMatchObject({ name: 'TransportError', notDelivered: false });
    const s = servers.pop()!;
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
    await expect(client(url).post('{}')).rejects.toMatchObject({ name: 'TransportError', notDelivered: true, message: 'HTTP POST failed: ECONNREFUSED' });
  });

  it('fails an event stream that breaks before its end, as delivered, after the events that came', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n\n');
      setTimeout(() => res.destroy(), 20);
    });
    const kinds: string[] = [];
    await expect(client(url).post('{}', { onMessage: (c) => kinds.push(c.kind) })).rejects.toMatchObject({ name: 'TransportError', notDelivered: false });
    expect(kinds).toEqual(['notification']);
  });

  it('a gzipped event stream cut right after its last bytes delivers the whole events its decoder still held, then fails as cut', async () => {
    const events =
      'id: e1\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n\n' +
      'id: e2\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n' +
      'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"half';
    // The gzip member without its trailer, and the connection closed with the chunked body unended.
    const z = gzipSync(events);
    const url = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }).flushHeaders();
      // One chunk of the body and the end of the connection together, so the cut is read with
      // the bytes, while the decoder (on the thread pool) still holds them.
      const body = z.subarray(0, z.length - 8);
      req.socket.end(Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n')]));
    });
    // The decoder's lag behind the socket is a race: a few rounds have it lose at least once.
    const c = client(url);
    for (let round = 0; round < 8; round++) {
      const kinds: string[] = [];
      const err = await c.post('{}', { onMessage: (m) => kinds.push(m.kind) }).catch((e: unknown) => e);
      expect(err, `round ${round}`).toMatchObject({ name: 'TransportError', lastEventId: 'e2', messages: 2 });
      // The incomplete last event is not delivered.
      expect(kinds, `round ${round}`).toEqual(['notification', 'response']);
    }
  });

  it('a compressed JSON answer cut before its end: taken when its body came whole (only the trailer lost), else a clear error as delivered', async () => {
    const json = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"whole"}]}}';
    const z = gzipSync(json);
    const url = await serve((req, res, body) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).flushHeaders();
      // The gzip member without its 8-byte trailer (or cut in the middle), then the connection closed with the chunked body unended.
      const part = body === 'trailer' ? z.subarray(0, z.length - 8) : z.subarray(0, 20);
      req.socket.end(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
    });
    const c = client(url);
    // The decoder's lag behind the socket is a race: a few rounds.
    for (let round = 0; round < 4; round++) {
      const got: Classified[] = [];
      const a = await c.post('trailer', { onMessage: (m) => got.push(m) });
      expect(a, `round ${round}`).toMatchObject({ status: 200, messages: 1 });
      expect(got[0]).toMatchObject({ kind: 'response', msg: { id: 1, result: { content: [{ text: 'whole' }] } } });
    }
    const err = await c.post('half').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect(err).toMatchObject({ status: 200, notDelivered: false });
    expect((err as Error).message).toMatch(/^HTTP POST failed: other side closed \(its answer, HTTP 200 gzip-compressed, was cut before its end: \d+ bytes decoded, no whole JSON-RPC message; the request was delivered\)$/);
  });

  it('an uncompressed JSON answer cut short of its Content-Length: taken when its body is whole, else a clear error', async () => {
    const json = '{"jsonrpc":"2.0","id":1,"result":{}}';
    const url = await serve((req, res, body) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(json.length + 10) }).flushHeaders();
      req.socket.end(body === 'whole' ? json : json.slice(0, 20));
    });
    const got: Classified[] = [];
    expect(await client(url).post('whole', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(got).toEqual([{ kind: 'response', msg: { jsonrpc: '2.0', id: 1, result: {} } }]);
    await expect(client(url).post('short')).rejects.toMatchObject({ name: 'TransportError', status: 200, notDelivered: false, message: expect.stringMatching(/was cut before its end: 20 bytes, no whole JSON-RPC message/) });
  });

  it("reads an answer whose headers are large (a proxy's cookies: 40 KiB), and fails one past 256 KiB saying so", async () => {
    const json = '{"jsonrpc":"2.0","id":1,"result":{}}';
    const url = await serve((_req, res, body) => {
      const cookies = Array.from({ length: body === 'huge' ? 80 : 10 }, (_, i) => `c${i}=${'v'.repeat(4000)}; Path=/`);
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': cookies }).end(json);
    });
    const c = client(url);
    const got: Classified[] = [];
    expect(await c.post('large', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 1 });
    expect(got).toHaveLength(1);
    await expect(c.post('huge')).rejects.toMatchObject({ name: 'TransportError', notDelivered: false, message: "HTTP POST failed: the answer's headers are larger than the 256 KiB the hub reads" });
  });

  it('reads a 2xx answer with no Content-Type at all as JSON when it is a JSON-RPC message (a hand-written server); another body stays no answer', async () => {
    const url = await serve((_req, res, body) => {
      // Node's http sets no Content-Type of its own.
      res.writeHead(200).end(body === 'page' ? '<html>sign in</html>' : '{"jsonrpc":"2.0","id":1,"result":{"bare":true}}');
    });
    const c = client(url);
    const got: Classified[] = [];
    const a = await c.post('rpc', { onMessage: (m) => got.push(m) });
    expect(a).toMatchObject({ status: 200, messages: 1 });
    expect(a.body).toBeUndefined();
    expect(got).toEqual([{ kind: 'response', msg: { jsonrpc: '2.0', id: 1, result: { bare: true } } }]);
    expect(await c.post('page', { onMessage: (m) => got.push(m) })).toMatchObject({ status: 200, messages: 0, body: '<html>sign in</html>' });
    expect(got).toHaveLength(1);
  });

  it('GET asks for an event stream; DELETE carries the caller headers', async () => {
    const seen: [string, string | undefined, string | undefined][] = [];
    const url = await serve((req, res) => {
      seen.push([req.method!, req.headers.accept, req.headers['mcp-session-id'] as string | undefined]);
      res.writeHead(405).end();
    });
    const c = client(url);
    expect((await c.get({ headers: { 'mcp-session-id': 's' } })).status).toBe(405);
    expect((await c.delete({ headers: { 'mcp-session-id': 's' } })).status).toBe(405);
    expect(seen).toEqual([
      ['GET', 'text/event-stream', 's'],
      ['DELETE', 'application/json, text/event-stream', 's'],
    ]);
  });

  it('ExchangeAbort sent again (OAuthHttp after a 401) is unheard until the new answer begins', async () => {
    let n = 0;
    let held: ServerResponse | undefined;
    const url = await serve((_req, res) => {
      if (++n === 1) return void res.writeHead(401).end();
      held = res;
    });
    const c = client(url);
    const abort = new ExchangeAbort();
    expect((await c.post('{"jsonrpc":"2.0","id":1,"method":"x"}', { abort })).status).toBe(401);
    expect([abort.heard, abort.resent]).toEqual([true, false]);
    const again = c.post('{"jsonrpc":"2.0","id":1,"method":"x"}', { abort });
    again.catch(() => undefined); // failed by the client's close should an expectation fail first
    for (const end = Date.now() + 5000; held === undefined && Date.now() < end; ) await new Promise((r) => setTimeout(r, 10));
    // The server has this one now, but the hub has heard nothing of it yet: a cancellation waits
    // (the whole wait: when the first went says nothing of this one).
    expect([abort.heard, abort.resent]).toEqual([false, true]);
    let told = false;
    abort.whenHeard(() => (told = true));
    held!.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
    expect((await again).status).toBe(200);
    expect([abort.heard, told]).toEqual([true, true]);
  });

  it('ExchangeAbort cuts an exchange short: mid-answer, and before it was sent', async () => {
    let closedByClient!: () => void;
    const gone = new Promise<void>((r) => (closedByClient = r));
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}\n\n');
      res.on('close', () => closedByClient()); // never answers: only the client can end it
    });
    const c = client(url);
    const abort = new ExchangeAbort();
    let seen = 0;
    let firstMessage!: () => void;
    // Cut once the answer is under way (its first event read), however long undici takes to load.
    const midAnswer = new Promise<void>((r) => (firstMessage = r));
    const p = c.post('{"jsonrpc":"2.0","id":1,"method":"slow"}', { abort, onMessage: () => void (seen++, firstMessage()) });
    await midAnswer;
    expect(seen).toBe(1);
    abort.abort();
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    await gone;

    const early = new ExchangeAbort();
    early.abort();
    await expect(c.post('{"jsonrpc":"2.0","id":2,"method":"x"}', { abort: early })).rejects.toBeInstanceOf(CancelledError);
  });
});
