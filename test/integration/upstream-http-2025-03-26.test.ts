/**
 * A hand-written 2025-03-26 Streamable HTTP server (raw node:http, in this process on port 0)
 * and what such servers do that SDK servers do not: a 4xx body that is a batch array holding the
 * answer (that revision allowed batches, digest §1.1), a notification answered `200 {}` or
 * `200 null` instead of 202, and a `ping` on the `initialize` answer stream before the response
 * (a server may ping at any time, digest §2.1).
 */
import http, { type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger, type Logger } from '../../src/log.js';
import { RpcError } from '../../src/protocol/errors.js';
import { createUpstream, type HttpUpstream } from '../../src/upstream/index.js';
import { captureLogger, waitFor } from './upstream-helpers.js';

interface Seen {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Msg {
  jsonrpc: '2.0';
  id?: string | number | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: unknown;
}

const SERVER_PING_ID = 'srv-ping-1';

/** What the server does, set per test. */
interface Behaviour {
  /** The body of a 200 (application/json) to a notification or a response; 202 without one if undefined. */
  noticeBody?: string;
  /** Send a ping on the initialize answer stream and answer initialize only once it is answered. */
  pingFirst?: boolean;
  /** A tools/call's answer (status and body) in place of the usual result. */
  callAnswer?: (id: string | number, session: string) => { status: number; body: string } | undefined;
}

const servers: http.Server[] = [];
const open: HttpUpstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((u) => u.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

const json = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body);
};

async function rawServer(b: Behaviour): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const sessions = new Set<string>();
  let n = 0;
  let pong: ((m: Msg) => void) | undefined;
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: req.method!, headers: req.headers, body });
    if (req.method === 'GET') return void res.writeHead(405).end();
    if (req.method === 'DELETE') return void res.writeHead(200).end();
    const m = JSON.parse(body) as Msg;
    const sid = req.headers['mcp-session-id'] as string | undefined;
    if (m.method === 'initialize') {
      const session = `s-${++n}`;
      sessions.add(session);
      const result = { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'raw-2025-03-26', version: '1' } };
      if (!b.pingFirst) return json(res, 200, JSON.stringify({ jsonrpc: '2.0', id: m.id, result }), { 'mcp-session-id': session });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': session });
      res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: SERVER_PING_ID, method: 'ping' })}\n\n`);
      const answered = await new Promise<Msg>((r) => (pong = r));
      if (answered.id === SERVER_PING_ID && 'result' in answered) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: m.id, result })}\n\n`);
      return void res.end();
    }
    if (sid === undefined || !sessions.has(sid)) return json(res, 400, JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: No valid session ID provided' } }));
    if (m.method === undefined || m.id === undefined) {
      if (m.method === undefined) pong?.(m);
      return b.noticeBody === undefined ? void res.writeHead(202).end() : json(res, 200, b.noticeBody);
    }
    if (m.method === 'tools/call') {
      const special = b.callAnswer?.(m.id!, sid);
      if (special) return json(res, special.status, special.body);
      return json(res, 200, JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'ran' }] } }));
    }
    return json(res, 200, JSON.stringify({ jsonrpc: '2.0', id: m.id, result: {} }));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen };
}

async function started(url: string, log: Logger = silentLogger): Promise<HttpUpstream> {
  const u = createUpstream({ id: 'raw', url, era: 'auto', timeoutMs: 3000, probeTimeoutMs: 2000, maxFrameBytes: 1 << 20 }, log, { backoff: { baseMs: 50 } }) as HttpUpstream;
  open.push(u);
  await u.start();
  return u;
}

const posts = (seen: Seen[]) => seen.filter((s) => s.method === 'POST').map((s) => ({ headers: s.headers, msg: JSON.parse(s.body) as Msg }));

describe('a 2025-03-26 server answering a POST 4xx with a batch array', () => {
  it("the member naming the call is the call's answer: its own JSON-RPC error, not a bare HTTP 400", async () => {
    const { url } = await rawServer({
      callAnswer: (id) => ({
        status: 400,
        body: JSON.stringify([
          { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } },
          { jsonrpc: '2.0', id, error: { code: -32602, message: 'Invalid params: text is required' } },
        ]),
      }),
    });
    const u = await started(url);
    const err = await u.request('tools/call', { name: 'echo', arguments: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ code: -32602, message: 'Invalid params: text is required' });
  });

  it("an id-less 'No valid session ID' member is the session refused: a new session, and the call sent again there", async () => {
    const forgotten = new Set<string>(['s-1']);
    const { url, seen } = await rawServer({
      callAnswer: (_id, session) =>
        forgotten.has(session)
          ? {
              status: 400,
              // Beside a log message: longer than a plain-text refusal is read for.
              body: JSON.stringify([
                { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'warning', logger: 'sessions', data: `request for session ${session}, which this process does not hold (restarted since)` } },
                { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: No valid session ID provided' } },
              ]),
            }
          : undefined,
    });
    const u = await started(url);
    expect(u.sessionId).toBe('s-1');
    const r = await u.request('tools/call', { name: 'echo', arguments: {} });
    expect((r.content as { text: string }[])[0].text).toBe('ran');
    expect(u.sessionId).toBe('s-2');
    expect(posts(seen).filter((p) => p.msg.method === 'tools/call').map((p) => p.headers['mcp-session-id'])).toEqual(['s-1', 's-2']);
  });
});

describe('a 2025-03-26 server answering a notification 200 with a JSON body', () => {
  it.each(['{}', 'null'])('`200 %s` is no warning, at any notification', async (noticeBody) => {
    const { log, records } = captureLogger();
    const { url, seen } = await rawServer({ noticeBody });
    const u = await started(url, log);
    u.notify('notifications/roots/list_changed');
    await waitFor(() => seen.some((s) => s.body.includes('roots/list_changed')), 5000, 'the notification');
    // notifications/initialized, then the list_changed: both bodies were read, and neither warned of.
    const ignored = () => records.filter((r) => r.msg === 'ignored a body that is not JSON-RPC in a 2xx answer to a POST that expects none');
    await waitFor(() => ignored().length === 2, 5000, 'both answers read');
    expect(records.filter((r) => (r.level as number) >= 40).map((r) => r.msg)).toEqual([]);
  });
});

describe('a 2025-03-26 server pinging before its initialize response', () => {
  it('is answered at once, on the session the initialize answer opens: the handshake completes', async () => {
    const { url, seen } = await rawServer({ pingFirst: true });
    const u = await started(url);
    expect(u.state).toBe('ready');
    const pong = posts(seen).find((p) => p.msg.id === SERVER_PING_ID);
    expect(pong?.msg).toEqual({ jsonrpc: '2.0', id: SERVER_PING_ID, result: {} });
    expect(pong?.headers['mcp-session-id']).toBe(u.sessionId);
  });
});
