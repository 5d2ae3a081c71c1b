/**
 * Remote Streamable HTTP upstreams that misbehave, each a raw `node:http` server in this process
 * on port 0, driven through the hub's own HttpUpstream: requests sent on the `initialize`
 * answer stream before the handshake is over, event streams that never end or grow one event
 * past maxFrameBytes, and servers that accept a connection and then answer nothing, stall
 * mid-body or trickle. Each case: a defined end within the call's limit, and no socket left open.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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
function legacyServer(call: (msg: Msg, req: IncomingMessage, res: ServerResponse) => unknown, early: Msg[] = []) {
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
      if (early.length === 0) return void res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: INIT_RESULT }));
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 's-1' });
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
