/**
 * Remote Streamable HTTP upstreams that misbehave, each a raw `node:http` server in this process
 * on port 0, driven through the hub's own HttpUpstream: requests sent on the `initialize`
 * answer stream before the handshake is over, event streams that never end or grow one event
 * past maxFrameBytes, and servers that accept a connection and then answer nothing, stall
 * mid-body or trickle. Each case: a defined end within the call's limit, and no socket left open.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/log.js';
import { createUpstream, type HttpUpstream } from '../../src/upstream/index.js';
import type { Upstream, UpstreamSpec } from '../../src/upstream/types.js';
import { waitFor } from './upstream-helpers.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => unknown;

interface Seen {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Listening {
  url: string;
  seen: Seen[];
  server: http.Server;
  /** Connections the server holds open now. */
  sockets: Set<Socket>;
}

const servers: http.Server[] = [];
const open: Upstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((u) => u.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

/** A loopback server on port 0 that records every request and the connections it holds. */
async function listen(handler: Handler): Promise<Listening> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: req.method!, headers: req.headers, body });
    await handler(req, res, body);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, server, sockets };
}

function spec(url: string, extra: Partial<UpstreamSpec> = {}): UpstreamSpec {
  return { id: 'web', url, era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 2000, maxFrameBytes: 1 << 20, healthCheckMs: 0, ...extra };
}

function make(s: UpstreamSpec): HttpUpstream {
  const u = createUpstream(s, silentLogger, { backoff: { baseMs: 50 } }) as HttpUpstream;
  open.push(u);
  return u;
}

type Msg = { jsonrpc: '2.0'; id?: string | number; method?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { code: number; message: string } };

const INIT_RESULT = { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '0' } };
const sse = (m: Msg): string => `data: ${JSON.stringify(m)}\n\n`;

/**
 * A sessionful legacy server; `call` answers tools/call (the rest is the plain handshake, 202
 * to notifications and answers, 405 to GET). `early` sends those requests on the initialize
 * answer stream, and answers initialize once each is answered (or after 3 s).
 */
function legacyServer(call: (msg: Msg, req: IncomingMessage, res: ServerResponse) => unknown, early: Msg[] = [], sid: () => string = () => 's-1') {
  const answers: { msg: Msg; session: string | undefined }[] = [];
  /** The notifications it was sent, by method. */
  const notices: string[] = [];
  /** How initialize was answered at last: once its requests were answered, or when the server gave up on them. */
  const initialize: { answered?: 'after the answers' | 'unanswered' } = {};
  let waiting: (() => void) | undefined;
  const handler: Handler = (req, res, body) => {
    if (req.method === 'GET') return void res.writeHead(405, { allow: 'POST, DELETE' }).end();
    if (req.method === 'DELETE') return void res.writeHead(200).end();
    const msg = JSON.parse(body) as Msg;
    if (msg.method === undefined) {
      // An answer to one of the server's requests.
      answers.push({ msg, session: req.headers['mcp-session-id'] as string | undefined });
      if (answers.length >= early.length) waiting?.();
      return void res.writeHead(202).end();
    }
    if (msg.id === undefined) {
      notices.push(msg.method);
      return void res.writeHead(202).end();
    }
    if (msg.method === 'initialize') {
      if (early.length === 0) return void res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': sid() }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: INIT_RESULT }));
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': sid() });
      for (const m of early) res.write(sse(m));
      const answer = (how: 'after the answers' | 'unanswered') => (): void => {
        waiting = undefined;
        initialize.answered = how;
        res.end(sse({ jsonrpc: '2.0', id: msg.id, result: INIT_RESULT }));
      };
      waiting = answer('after the answers');
      const given = waiting;
      setTimeout(() => waiting === given && answer('unanswered')(), 3000);
      return;
    }
    if (msg.method === 'tools/call') return call(msg, req, res);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } }));
  };
  return { handler, answers, initialize, notices };
}

const callResult = (msg: Msg, text: string): string => JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text }] } });

describe('legacy: requests on the initialize answer stream, before the handshake is over', () => {
  // Before notifications/initialized a server should send only ping and logging (digest §2.1);
  // one that asks anyway waits for the answer, and unanswered it held the hub's handshake (and
  // its own) until a timeout. No call is there to ask it for: each gets an error at once, on
  // the session the initialize answer opens.
  it('roots/list, elicitation/create and sampling/createMessage each get an error, on the new session, and the handshake goes on', async () => {
    const early: Msg[] = [
      { jsonrpc: '2.0', id: 'early-roots', method: 'roots/list' },
      { jsonrpc: '2.0', id: 'early-elicit', method: 'elicitation/create', params: { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: {} } } },
      { jsonrpc: '2.0', id: 'early-sample', method: 'sampling/createMessage', params: { messages: [], maxTokens: 10 } },
      { jsonrpc: '2.0', id: 'early-ping', method: 'ping' },
    ];
    const s = legacyServer((msg, _req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(callResult(msg, 'ok')), early);
    const { url } = await listen(s.handler);
    const u = make(spec(url));
    await u.start();
    // Answered, not given up on after the server's 3 s of waiting for them.
    expect(s.initialize.answered).toBe('after the answers');
    expect(s.answers.map((a) => a.session)).toEqual(['s-1', 's-1', 's-1', 's-1']);
    const byId = new Map(s.answers.map((a) => [a.msg.id, a.msg]));
    expect(byId.get('early-ping')).toEqual({ jsonrpc: '2.0', id: 'early-ping', result: {} });
    for (const [id, method] of [
      ['early-roots', 'roots/list'],
      ['early-elicit', 'elicitation/create'],
      ['early-sample', 'sampling/createMessage'],
    ]) {
      const m = byId.get(id)!;
      expect(m.result).toBeUndefined();
      expect(m.error).toEqual({ code: -32603, message: `${method} sent before the session was initialized: until notifications/initialized a server may send only ping and logging, and no call of the hub's is there to ask it for` });
    }
    expect(u.state).toBe('ready');
    expect(u.sessionId).toBe('s-1');
    // Its roots/list went unanswered by any client: the first that can be asked is, and the
    // server is told its roots changed (README, "Era translation"), as after one asked outside any call.
    expect(u.rootsChanged('p', async () => ({ roots: [] }), true)).toBe(true);
    await waitFor(() => s.notices.includes('notifications/roots/list_changed'), 3000, 'roots/list_changed');
  });
});

/** A call handler that keeps the socket of each tools/call it takes, to see it closed. */
function heldSockets(): { sockets: Socket[]; closed: (i: number) => Promise<void> } {
  const sockets: Socket[] = [];
  return {
    sockets,
    closed: (i) => {
      const s = sockets[i]!;
      return s.destroyed ? Promise.resolve() : new Promise((r) => s.once('close', () => r()));
    },
  };
}

describe('legacy: a call whose answer stream never ends', () => {
  it('streams progress without end: the call ends at maxTotalTimeoutMs (progress does not extend it), its stream closed, the server told', async () => {
    const held = heldSockets();
    let sent = 0;
    const s = legacyServer((msg, req, res) => {
      held.sockets.push(req.socket);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const token = (msg.params?._meta as { progressToken?: unknown } | undefined)?.progressToken;
      const t = setInterval(() => {
        if (res.destroyed) return clearInterval(t);
        res.write(sse({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token as string, progress: ++sent } }));
      }, 5);
    });
    const { url } = await listen(s.handler);
    const u = make(spec(url, { timeoutMs: 300, maxTotalTimeoutMs: 1200 }));
    await u.start();
    let seen = 0;
    const t0 = performance.now();
    await expect(u.request('tools/call', { name: 'endless' }, { askProgress: true, onProgress: () => seen++ })).rejects.toMatchObject({
      name: 'TimeoutError',
      message: 'server "web" did not finish within its limit of 1200 ms (progress does not extend it)',
    });
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(1150);
    expect(took).toBeLessThan(3000);
    // Every progress came through as it arrived (each kept the idle timeout alive), none kept.
    expect(seen).toBeGreaterThan(20);
    await held.closed(0);
    await waitFor(() => s.notices.includes('notifications/cancelled'), 3000, 'the cancellation');
  });

  it('streams log lines without end (no progress): the call ends at timeoutMs, its stream closed', async () => {
    const held = heldSockets();
    const s = legacyServer((_msg, req, res) => {
      held.sockets.push(req.socket);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const t = setInterval(() => {
        if (res.destroyed) return clearInterval(t);
        res.write(sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'still here' } }));
      }, 5);
    });
    const { url } = await listen(s.handler);
    const u = make(spec(url, { timeoutMs: 400 }));
    await u.start();
    let logs = 0;
    const t0 = performance.now();
    await expect(u.request('tools/call', { name: 'chatty' }, { onLog: () => logs++ })).rejects.toMatchObject({ name: 'TimeoutError', message: 'server "web" did not answer within 400 ms' });
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(logs).toBeGreaterThan(10);
    await held.closed(0);
  });
});

describe('a server that takes the request and then answers nothing, stalls mid-answer, or trickles it', () => {
  // The hub times calls itself (undici's header and body timeouts are off: a long call or an
  // idle stream is no fault): each case ends at the call's timeoutMs, its socket closed.
  for (const kind of ['no status line', 'headers, then a stalled JSON body', 'a JSON body one byte every 100 ms', 'an event stream of keep-alive comments']) {
    it(`${kind}: the call ends at its timeoutMs with a timeout, its socket closed`, async () => {
      const held = heldSockets();
      const answer = callResult({ jsonrpc: '2.0', id: 0 }, 'never whole');
      const s = legacyServer((_msg, req, res) => {
        held.sockets.push(req.socket);
        if (kind === 'no status line') return;
        if (kind === 'an event stream of keep-alive comments') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write(': keep-alive\n\n')), 50);
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(answer.length) });
        if (kind === 'headers, then a stalled JSON body') return void res.write(answer.slice(0, 10));
        let i = 0;
        const t = setInterval(() => (res.destroyed || i >= answer.length ? clearInterval(t) : res.write(answer[i++])), 100);
      });
      const { url } = await listen(s.handler);
      const u = make(spec(url, { timeoutMs: 500 }));
      await u.start();
      const t0 = performance.now();
      await expect(u.request('tools/call', { name: 'x' })).rejects.toMatchObject({ name: 'TimeoutError', message: 'server "web" did not answer within 500 ms' });
      const took = performance.now() - t0;
      expect(took).toBeGreaterThanOrEqual(450);
      expect(took).toBeLessThan(2000);
      await held.closed(0);
      // A legacy server is told (a timeout is no cancellation of itself in 2025-11-25).
      await waitFor(() => s.notices.includes('notifications/cancelled'), 3000, 'the cancellation');
    });
  }

  it('accepts the connection and never answers the handshake: start fails at timeoutMs, saying so, its socket closed', async () => {
    const sockets: Socket[] = [];
    const server = http.createServer(() => undefined);
    server.on('connection', (s: Socket) => sockets.push(s));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    const u = make(spec(url, { timeoutMs: 500 }));
    const t0 = performance.now();
    await expect(u.start()).rejects.toThrow('initialize: no answer within 500 ms');
    expect(performance.now() - t0).toBeLessThan(2000);
    const first = sockets[0]!;
    if (!first.destroyed) await new Promise((r) => first.once('close', r));
  });
});

describe('legacy: a call whose answer stream is cut after event ids', () => {
  /**
   * A server whose call stream sends progress 1 (event c-1) and a log line (c-2), then is cut;
   * a GET with Last-Event-ID c-2 gets what came after (progress 2, c-3) and the response,
   * unless the server was restarted meanwhile (`restarted`: every old session 404).
   */
  function cutServer() {
    const gets: (string | undefined)[] = [];
    const getTimes: number[] = [];
    const calls: string[] = [];
    /** inclusive: the GET replays from the event it names (c-2 again), not after it. */
    /** busy: the first resuming GETs are answered this status with Retry-After: 1. */
    const state: { session: string; restartOnCut?: boolean; inclusive?: boolean; busy?: { status: number; left: number }; pending?: { msg: Msg; token: string } } = { session: 's-1' };
    const s = legacyServer(
      (msg, req, res) => {
        calls.push(String(req.headers['mcp-session-id']));
        if (req.headers['mcp-session-id'] !== state.session) return void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        if ((msg.params?.arguments as { after?: boolean } | undefined)?.after) return void res.writeHead(200, { 'content-type': 'application/json' }).end(callResult(msg, 'after the restart'));
        const token = String((msg.params?._meta as { progressToken?: unknown } | undefined)?.progressToken);
        state.pending = { msg, token };
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(`id: c-1\nretry: 50\n${sse({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1 } })}`);
        res.write(`id: c-2\n${sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'once' } })}`);
        setTimeout(() => {
          // Restarted: every connection cut, the old session gone (404), the next one s-2.
          if (state.restartOnCut) state.session = 's-2';
          req.socket.destroy();
        }, 30);
      },
      [],
      () => state.session,
    );
    const handler: Handler = (req, res, body) => {
      if (req.method !== 'GET' || req.headers['last-event-id'] === undefined) return s.handler(req, res, body);
      gets.push(req.headers['last-event-id'] as string);
      getTimes.push(performance.now());
      if (req.headers['mcp-session-id'] !== state.session) return void res.writeHead(404).end();
      if (state.busy && state.busy.left-- > 0) return void res.writeHead(state.busy.status, { 'retry-after': '1' }).end();
      const p = state.pending!;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (state.inclusive) res.write(`id: c-2\n${sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'once' } })}`);
      res.end(`id: c-3\n${sse({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: p.token, progress: 2 } })}id: c-4\ndata: ${callResult(p.msg, 'resumed')}\n\n`);
    };
    return { ...s, handler, gets, getTimes, calls, state };
  }

  for (const inclusive of [false, true])
  it(`resumes it with the last event id: what came before is not delivered again${inclusive ? ' (the server replaying from that event, not after it)' : ''}, the call is sent once`, async () => {
    const s = cutServer();
    s.state.inclusive = inclusive;
    const { url } = await listen(s.handler);
    const u = make(spec(url));
    await u.start();
    const progress: number[] = [];
    const logs: unknown[] = [];
    const r = await u.request('tools/call', { name: 'cut' }, { askProgress: true, onProgress: (p) => progress.push(p.progress), onLog: (l) => logs.push(l.data) });
    expect((r.content as { text: string }[])[0]!.text).toBe('resumed');
    expect(progress).toEqual([1, 2]);
    expect(logs).toEqual(['once']);
    expect(s.gets).toEqual(['c-2']);
    expect(s.calls).toEqual(['s-1']);
  });

  it('the resumption is answered 503 (or 429) with Retry-After: 1: asked again after that second, and answered', async () => {
    for (const status of [503, 429]) {
      const s = cutServer();
      s.state.busy = { status, left: 1 };
      const { url } = await listen(s.handler);
      const u = make(spec(url));
      await u.start();
      const r = await u.request('tools/call', { name: 'cut' });
      expect((r.content as { text: string }[])[0]!.text).toBe('resumed');
      expect(s.gets).toEqual(['c-2', 'c-2']);
      expect(s.getTimes[1]! - s.getTimes[0]!).toBeGreaterThanOrEqual(950);
      expect(s.calls).toEqual(['s-1']);
    }
  });

  it('the server restarted meanwhile (the session 404s): the call fails saying so, not sent again; the next call opens a new session and runs once', async () => {
    const s = cutServer();
    const { url } = await listen(s.handler);
    const u = make(spec(url, { healthCheckMs: 0 }));
    await u.start();
    s.state.restartOnCut = true;
    await expect(u.request('tools/call', { name: 'cut' }, { retry: { maxAttempts: 3, budgetMs: 5000 } })).rejects.toThrow(
      'the answer stream ended before the response and could not be resumed: the session is gone (404)',
    );
    expect(s.calls).toEqual(['s-1']);
    const r = await u.request('tools/call', { name: 'cut', arguments: { after: true } });
    expect((r.content as { text: string }[])[0]!.text).toBe('after the restart');
    // Sent on the old session, met the 404, and sent once more on the new one.
    expect(s.calls).toEqual(['s-1', 's-1', 's-2']);
  });
});

describe('modern: an SDK v2 server behind a rate limiter', () => {
  it('a write answered 429 with Retry-After: 1 (refused before it reached the server) is sent again after that second and runs once', async () => {
    let runs = 0;
    const mcp = createMcpHandler(
      () => {
        const server = new McpServer({ name: 'v2-limited', version: '2.4.0' }, { capabilities: { tools: {} } });
        server.registerTool('write', { inputSchema: z.object({ row: z.number() }) }, async ({ row }) => {
          runs++;
          return { content: [{ type: 'text', text: `wrote ${row}` }] };
        });
        return server;
      },
      { legacy: 'reject' },
    );
    /** When each tools/call reached the limiter, and what it answered. */
    const calls: { at: number; status: number }[] = [];
    const { url } = await listen(async (req, res, body) => {
      if (body.includes('"tools/call"') && calls.push({ at: performance.now(), status: calls.length === 0 ? 429 : 200 }) === 1) {
        return void res.writeHead(429, { 'retry-after': '1', 'content-type': 'text/plain' }).end('slow down');
      }
      const headers = new Headers();
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
      const response = await mcp.fetch(new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === 'POST' ? body : undefined }));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    });
    const u = make(spec(url, { era: 'auto' }));
    await u.start();
    expect(u.era).toBe('2026-07-28');
    const r = await u.request('tools/call', { name: 'write', arguments: { row: 7 } }, { retry: { maxAttempts: 3, budgetMs: 5000, idempotent: false } });
    expect((r.content as { text: string }[])[0]!.text).toBe('wrote 7');
    expect(runs).toBe(1);
    expect(calls.map((c) => c.status)).toEqual([429, 200]);
    expect(calls[1]!.at - calls[0]!.at).toBeGreaterThanOrEqual(950);
    expect(u.circuit).toBe('closed');
  });
});

describe('legacy: a server restarted that is not back at once', () => {
  // A 404 to a request naming a session is the session gone, found before anything ran (the
  // server looks the session up first): the call never ran. Its renewal failing (the server
  // still starting) left it one that may have run: not sent again, its key unknown.
  it('a call whose session 404s while the new initialize fails once: sent again (it never ran) once the session is renewed, and runs once', async () => {
    let session = 's-1';
    let refuseInit = false;
    const ran: string[] = [];
    const s = legacyServer(
      (msg, req, res) => {
        if (req.headers['mcp-session-id'] !== session) return void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        ran.push(session);
        res.writeHead(200, { 'content-type': 'application/json' }).end(callResult(msg, `ran on ${session}`));
      },
      [],
      () => session,
    );
    const { url } = await listen((req, res, body) => {
      if (refuseInit && body.includes('"initialize"')) {
        refuseInit = false;
        return void res.writeHead(503, { 'content-type': 'text/plain' }).end('starting');
      }
      return s.handler(req, res, body);
    });
    const u = make(spec(url));
    await u.start();
    // Restarted: the old session is gone, the first initialize is refused while it starts.
    session = 's-2';
    refuseInit = true;
    const r = await u.request('tools/call', { name: 'write' }, { retry: { maxAttempts: 3, budgetMs: 5000, idempotent: false } });
    expect((r.content as { text: string }[])[0]!.text).toBe('ran on s-2');
    expect(ran).toEqual(['s-2']);
  });
});

describe('legacy: a server that says the session is gone again right after it was renewed', () => {
  it('fails the call as one that never ran (its 404 is no answer of the call: not relayed as the call\'s JSON-RPC error)', async () => {
    let inits = 0;
    const s = legacyServer(
      (_msg, _req, res) => void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } })),
      [],
      () => `s-${++inits}`,
    );
    const { url } = await listen(s.handler);
    const u = make(spec(url));
    await u.start();
    const err = await u.request('tools/call', { name: 'write' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ name: 'TransportError', notDelivered: true, message: 'the server refused the session again right after it was renewed (HTTP 404), so the request did not run' });
    expect(inits).toBe(2);
  });
});
