/**
 * Streamable HTTP upstreams over loopback: a sessionful SDK v1 server (legacy), an SDK v2
 * `createMcpHandler` that refuses the legacy era (modern), and tiny raw servers for the probe
 * outcomes that say nothing about the era. All servers run in this process on port 0.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { silentLogger } from '../../src/log.js';
import { LEGACY, MODERN } from '../../src/protocol/era.js';
import { CancelledError, RpcError, TransportError } from '../../src/protocol/errors.js';
import type { ProgressInfo } from '../../src/protocol/types.js';
import { createUpstream, type HttpUpstream } from '../../src/upstream/index.js';
import type { Upstream, UpstreamSpec, UpstreamState } from '../../src/upstream/types.js';
import { captureLogger, tmpDir, waitFor } from './upstream-helpers.js';
import { holdLoopAfterPoll } from '../helpers/hold-loop.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => unknown;

interface Seen {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
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

/** A loopback server on port 0 that records every request. */
async function listen(handler: Handler): Promise<{ url: string; seen: Seen[]; server: http.Server }> {
  const seen: Seen[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: req.method!, headers: req.headers, body });
    await handler(req, res, body);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, server };
}

function spec(url: string, extra: Partial<UpstreamSpec> = {}): UpstreamSpec {
  return { id: 'web', url, era: 'auto', timeoutMs: 5000, probeTimeoutMs: 2000, maxFrameBytes: 1 << 20, ...extra };
}

function make(s: UpstreamSpec): HttpUpstream {
  const u = createUpstream(s, silentLogger, { backoff: { baseMs: 50 } }) as HttpUpstream;
  open.push(u);
  return u;
}

const text = (r: Record<string, unknown>): string => (r.content as { text: string }[])[0].text;
const rpcBodies = (seen: Seen[]): { id?: unknown; method?: string; params?: Record<string, unknown> }[] =>
  seen.filter((s) => s.method === 'POST').map((s) => JSON.parse(s.body) as { method?: string });

describe('legacy: sessionful SDK v1 Streamable HTTP server', () => {
  let sessions: Map<string, { transport: StreamableHTTPServerTransport; server: McpServerV1 }>;
  let aborted: string[];
  /** Answer an unknown session's request with its own id, as a Switchyard hub does. */
  let goneWithId: boolean;
  /** Answer an unknown session 400, as servers built on SDK v1's older examples do: an id-less -32000 to a POST, plain text to a GET. */
  let goneAs400: boolean;
  /** Set: a notifications/initialized POST is held until the test lets it go on (release), or cuts it (req). */
  let holdInitialized: ((release: () => void, req: IncomingMessage) => void) | undefined;
  /** Set: a notifications/roots/list_changed POST is never answered. */
  let holdRootsChanged: boolean;
  /** GET streams open now, by session (answered and not yet closed). */
  let openGets: Map<string, number>;
  /** Set: an initialize POST is held (its session not yet made) until the test lets it go on. */
  let holdInitialize: ((release: () => void) => void) | undefined;
  /** The server forgets a session (its transport closed, its streams ended): the next request on it meets a 404. */
  const forget = async (sid: string): Promise<void> => {
    const gone = sessions.get(sid)!;
    sessions.delete(sid);
    await gone.transport.close();
  };
  let url: string;
  let seen: Seen[];

  function v1Server(): McpServerV1 {
    const s = new McpServerV1({ name: 'v1-http', version: '1.32.2' }, { capabilities: { logging: {} } });
    s.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }, extra) => ({
      content: [{ type: 'text', text }],
      structuredContent: { meta: extra._meta ?? null },
    }));
    s.registerTool('slow', { inputSchema: { steps: z.number() } }, async ({ steps }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
        await new Promise((r) => setTimeout(r, 30));
      }
      await new Promise<void>((resolve) => {
        if (extra.signal.aborted) return resolve();
        extra.signal.addEventListener('abort', () => {
          aborted.push(String(extra.requestId));
          resolve();
        });
        setTimeout(resolve, steps === 0 ? 5000 : 0);
      });
      return { content: [{ type: 'text', text: 'slow done' }] };
    });
    s.registerTool('elicit', { inputSchema: {} }, async (_args, extra) => {
      const answer = await extra.sendRequest(
        { method: 'elicitation/create', params: { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } } },
        ElicitResultSchema,
      );
      return { content: [{ type: 'text', text: JSON.stringify(answer) }] };
    });
    s.registerTool('log', { inputSchema: {} }, async (_args, extra) => {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'from v1' } });
      return { content: [{ type: 'text', text: 'logged' }] };
    });
    return s;
  }

  beforeEach(async () => {
    sessions = new Map();
    aborted = [];
    goneWithId = false;
    goneAs400 = false;
    holdInitialized = undefined;
    holdInitialize = undefined;
    holdRootsChanged = false;
    openGets = new Map();
    ({ url, seen } = await listen(async (req, res, body) => {
      const sid = req.headers['mcp-session-id'] as string | undefined;
      const parsed = body ? JSON.parse(body) : undefined;
      const known = sid ? sessions.get(sid) : undefined;
      if (known && req.method === 'GET') {
        openGets.set(sid!, (openGets.get(sid!) ?? 0) + 1);
        res.on('close', () => openGets.set(sid!, openGets.get(sid!)! - 1));
      }
      if (known && parsed?.method === 'notifications/roots/list_changed' && holdRootsChanged) return; // never answered
      if (known && holdInitialized && parsed?.method === 'notifications/initialized') return holdInitialized(() => void known.transport.handleRequest(req, res, parsed), req);
      if (known) return known.transport.handleRequest(req, res, parsed);
      if (sid && goneAs400 && req.method === 'GET') {
        res.writeHead(400, { 'content-type': 'text/plain' });
        return res.end('Invalid or missing session ID');
      }
      if (sid && goneAs400) {
        res.writeHead(400, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null }));
      }
      if (sid) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: goneWithId ? (parsed?.id ?? null) : null }));
      }
      if (req.method === 'POST' && isInitializeRequest(parsed)) {
        if (holdInitialize) await new Promise<void>((r) => holdInitialize!(r));
        const server = v1Server();
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
        });
        await server.connect(transport);
        return transport.handleRequest(req, res, parsed);
      }
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' }, id: null }));
    }));
  });

  it('is detected as legacy from 400 -32000, then initialized with a session', async () => {
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(u.protocolVersion).toBe('2025-11-25');
    expect(u.serverInfo).toMatchObject({ name: 'v1-http', version: '1.32.2' });
    expect(u.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const probe = seen[0];
    expect(probe.headers['mcp-protocol-version']).toBe(MODERN);
    expect(probe.headers['mcp-method']).toBe('server/discover');
    expect(probe.headers.accept).toBe('application/json, text/event-stream');
    expect(probe.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen[1].body).method).toBe('initialize');
    expect(seen[1].headers['mcp-session-id']).toBeUndefined();
  });

  it('sends the session id and protocol version on every later request', async () => {
    const u = make(spec(url, { headers: { 'X-Api-Key': 'k-123' } }));
    await u.start();
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'hi' } }, { meta: { traceparent: 't' } });
    expect(text(r)).toBe('hi');
    expect(r.structuredContent).toEqual({ meta: { traceparent: 't' } });
    const call = seen.find((s) => s.body.includes('"tools/call"'))!;
    expect(call.headers['mcp-session-id']).toBe(u.sessionId);
    expect(call.headers['mcp-protocol-version']).toBe('2025-11-25');
    expect(call.headers['x-api-key']).toBe('k-123');
    expect(call.headers['mcp-method']).toBeUndefined();
  });

  it('routes progress and a server request that arrive on the POST stream to their call', async () => {
    const u = make(spec(url));
    await u.start();
    const progress: ProgressInfo[] = [];
    const other = u.request('tools/call', { name: 'slow', arguments: { steps: 2 } }, { onServerRequest: async () => ({ action: 'decline' }) });
    const [r, r2] = await Promise.all([
      u.request('tools/call', { name: 'slow', arguments: { steps: 3 } }, { onProgress: (p) => progress.push(p) }),
      u.request('tools/call', { name: 'elicit', arguments: {} }, { onServerRequest: async (req) => ({ action: 'accept', content: { name: `Ada (${req.method})` } }) }),
    ]);
    await other;
    expect(text(r)).toBe('slow done');
    expect(progress).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
      { progress: 3, total: 3 },
    ]);
    // Two calls with handlers were in flight: the POST stream still says which one it is for.
    expect(JSON.parse(text(r2))).toEqual({ action: 'accept', content: { name: 'Ada (elicitation/create)' } });
    const answer = seen.find((s) => s.body.includes('"Ada (elicitation/create)"'))!;
    expect(answer.headers['mcp-session-id']).toBe(u.sessionId);
  });

  it('routes a log that arrives on the POST stream to its call', async () => {
    const u = make(spec(url));
    await u.start();
    const logs: unknown[] = [];
    const busy = u.request('tools/call', { name: 'slow', arguments: { steps: 2 } });
    await u.request('tools/call', { name: 'log', arguments: {} }, { onLog: (p) => logs.push(p) });
    await busy;
    expect(logs).toEqual([{ level: 'info', data: 'from v1' }]);
  });

  it('cancels with notifications/cancelled, which aborts the handler upstream', async () => {
    const u = make(spec(url));
    await u.start();
    const ctl = new AbortController();
    const p = u.request('tools/call', { name: 'slow', arguments: { steps: 0 } }, { signal: ctl.signal });
    await waitFor(() => seen.some((s) => s.body.includes('"slow"')), 2000, 'call sent');
    ctl.abort();
    await expect(p).rejects.toMatchObject({ name: 'CancelledError' });
    await waitFor(() => aborted.length === 1, 2000, 'handler aborted');
    const call = rpcBodies(seen).find((b) => b.method === 'tools/call')!;
    const cancel = rpcBodies(seen).find((b) => b.method === 'notifications/cancelled')!;
    expect(cancel.params).toEqual({ requestId: call.id, reason: 'request cancelled' });
  });

  it('receives notifications on the GET stream', async () => {
    const u = make(spec(url));
    await u.start();
    await waitFor(() => seen.some((s) => s.method === 'GET'), 2000, 'GET stream');
    const events: unknown[] = [];
    u.on('notification', (n) => events.push(n));
    await new Promise((r) => setTimeout(r, 100));
    sessions.get(u.sessionId!)!.server.sendToolListChanged();
    await waitFor(() => events.length === 1, 2000, 'list_changed');
    expect(events).toEqual([{ method: 'notifications/tools/list_changed', params: {} }]);
    expect(seen.find((s) => s.method === 'GET')!.headers.accept).toBe('text/event-stream');
  });

  it('renews an expired session once and retries the request that met the 404', async () => {
    const u = make(spec(url));
    await u.start();
    const first = u.sessionId!;
    const states: [UpstreamState, string | undefined][] = [];
    u.on('state', (s: UpstreamState, d?: string) => states.push([s, d]));
    await forget(first);
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'again' } });
    expect(text(r)).toBe('again');
    expect(u.sessionId).not.toBe(first);
    expect(states).toEqual([['ready', 'session renewed']]);
    const calls = seen.filter((s) => s.body.includes('"tools/call"'));
    expect(calls.map((c) => c.headers['mcp-session-id'])).toEqual([first, u.sessionId]);
    expect(rpcBodies(seen).filter((b) => b.method === 'initialize')).toHaveLength(2);
  });

  /** The sessions a DELETE ended, by id. */
  const deleted = (): (string | undefined)[] => seen.filter((s) => s.method === 'DELETE').map((s) => s.headers['mcp-session-id'] as string | undefined);
  /** An upstream started on a session (`first`) that the server then forgets. */
  const startedThenForgotten = async (): Promise<{ u: HttpUpstream; first: string }> => {
    const u = make(spec(url));
    await u.start();
    const first = u.sessionId!;
    await forget(first);
    return { u, first };
  };
  /** Closed, `u` ends `first` (not known gone: a 400 said it, not a 404) and the session that replaced it: a close waits for every DELETE sent. */
  const closeEndsBoth = async (u: HttpUpstream, first: string): Promise<void> => {
    const renewed = u.sessionId!;
    await u.close();
    expect(deleted().sort()).toEqual([first, renewed].sort());
  };

  it('renews a session whose 404 names the request (a Switchyard hub behind this one answers so)', async () => {
    goneWithId = true;
    const { u, first } = await startedThenForgotten();
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'back' } });
    expect(text(r)).toBe('back');
    expect(u.sessionId).not.toBe(first);
    expect(rpcBodies(seen).filter((b) => b.method === 'initialize')).toHaveLength(2);
  });

  it('renews a session the server says with a 400 it does not hold (SDK v1\'s older examples), and sends the call that met it once more', async () => {
    goneAs400 = true;
    const { u, first } = await startedThenForgotten();
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'after a restart' } });
    expect(text(r)).toBe('after a restart');
    expect(u.sessionId).not.toBe(first);
    const calls = seen.filter((s) => s.body.includes('"tools/call"'));
    expect(calls.map((c) => c.headers['mcp-session-id'])).toEqual([first, u.sessionId]);
    expect(rpcBodies(seen).filter((b) => b.method === 'initialize')).toHaveLength(2);
    // A 400 may come of a server that holds the session still (a proxy dropped the header): the
    // replaced session is ended, best effort.
    await closeEndsBoth(u, first);
  });

  it('does not end a session a 404 said is gone: only the renewed one is ended, at the close', async () => {
    const { u } = await startedThenForgotten();
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { text: 'x' } }))).toBe('x');
    const renewed = u.sessionId!;
    await u.close();
    expect(deleted()).toEqual([renewed]);
  });

  it('renews, with no call made, a session whose GET stream the server answers 400 "Invalid or missing session ID"', async () => {
    goneAs400 = true;
    const u = make(spec(url));
    await u.start();
    const first = u.sessionId!;
    await waitFor(() => seen.some((s) => s.method === 'GET' && s.headers['mcp-session-id'] === first), 5000, 'the GET stream');
    await forget(first); // ends the GET stream: reopened, it meets the 400
    await waitFor(() => u.sessionId !== undefined && u.sessionId !== first, 10_000, 'a new session');
    await waitFor(() => seen.some((s) => s.method === 'GET' && s.headers['mcp-session-id'] === u.sessionId), 5000, 'the new session\'s GET stream');
    expect(rpcBodies(seen).filter((b) => b.method === 'initialize')).toHaveLength(2);
    // Not known gone (a 400, not a 404): the replaced session is ended too, best effort.
    await closeEndsBoth(u, first);
  });

  it('closed while it renews the session, it stays stopped: the new session is ended, no stream left open on it', async () => {
    const u = make(spec(url));
    await u.start();
    const first = u.sessionId!;
    const states: UpstreamState[] = [];
    u.on('state', (s: UpstreamState) => states.push(s));
    await forget(first);
    let release: (() => void) | undefined;
    holdInitialized = (r) => (release = r);
    const call = u.request('tools/call', { name: 'echo', arguments: { text: 'x' } }).catch((e: Error) => e);
    await waitFor(() => release !== undefined, 5000, 'the renewal at notifications/initialized');
    const closing = u.close();
    // Taken while the hub ends the old session (its DELETE): the renewal goes on from there.
    release!();
    await closing;
    expect(await call).toBeInstanceOf(Error);
    const renewed = [...sessions.keys()].find((k) => k !== first)!;
    // Not `ready` again after `stopped`, and nothing opened on (or left of) the new session.
    await waitFor(() => seen.some((s) => s.method === 'DELETE' && s.headers['mcp-session-id'] === renewed), 3000, 'the new session ended');
    expect(states).toEqual(['stopped']);
    expect(u.state).toBe('stopped');
    expect(u.sessionId).toBeUndefined();
    // Its GET stream opens before notifications/initialized (a server may ask at once): closed with the handshake.
    await waitFor(() => (openGets.get(renewed) ?? 0) === 0, 3000, "the new session's GET stream closed");
  });

  it('closed during its first handshake (initialize, or notifications/initialized, unanswered), it ends the session that handshake opened', async () => {
    for (const step of ['initialize', 'notifications/initialized'] as const) {
      let release: (() => void) | undefined;
      if (step === 'initialize') holdInitialize = (r) => (release = r);
      else holdInitialized = (r) => (release = r);
      const before = new Set(sessions.keys());
      const u = make(spec(url, { era: LEGACY }));
      const started = u.start().catch((e: Error) => e);
      await waitFor(() => release !== undefined, 5000, `the handshake at ${step}`);
      const closing = u.close();
      release!();
      await closing;
      expect(await started).toBeInstanceOf(Error);
      // The session made (at initialize's answer, after the close or before it) is ended, once.
      const made = [...sessions.keys()].filter((k) => !before.has(k));
      expect(made).toHaveLength(1);
      expect(deleted().filter((d) => d === made[0]), step).toEqual([made[0]]);
      expect(u.state).toBe('stopped');
      // Opened before notifications/initialized (a server may ask at once), it is closed with the handshake.
      await waitFor(() => (openGets.get(made[0]) ?? 0) === 0, 3000, `the GET stream of the session made at ${step} closed`);
      holdInitialize = holdInitialized = undefined;
    }
  });

  it('a renewal whose notifications/initialized fails ends the session it opened (and the next renewal works)', async () => {
    const { u } = await startedThenForgotten();
    holdInitialized = (_release, req) => req.socket.destroy();
    const err = await u.request('tools/call', { name: 'echo', arguments: { text: 'x' } }).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/could not be renewed/);
    const failed = [...sessions.keys()];
    expect(failed).toHaveLength(1);
    await waitFor(() => deleted().includes(failed[0]), 3000, 'the failed renewal\'s session ended');
    holdInitialized = undefined;
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { text: 'again' } }))).toBe('again');
    expect(deleted()).not.toContain(u.sessionId);
  });

  it('a notification said while the session renews, the renewal then ended by a close: dropped quietly, not sent', async () => {
    const { log, records } = captureLogger();
    const u = createUpstream(spec(url), log, { backoff: { baseMs: 50 } }) as HttpUpstream;
    open.push(u);
    await u.start();
    const first = u.sessionId!;
    await forget(first);
    let release: (() => void) | undefined;
    holdInitialized = (r) => (release = r);
    const call = u.request('tools/call', { name: 'echo', arguments: { text: 'x' } }).catch((e: Error) => e);
    await waitFor(() => release !== undefined, 5000, 'the renewal at notifications/initialized');
    u.notify('notifications/roots/list_changed');
    const closing = u.close();
    release!();
    await closing;
    await call;
    await new Promise((r) => setImmediate(r));
    expect(records.filter((r) => (r.level as number) >= 40).map((r) => r.msg)).not.toContain('notification failed');
    expect(rpcBodies(seen).some((b) => b.method === 'notifications/roots/list_changed')).toBe(false);
  });

  it('a notification still unanswered when the upstream closes: no warning (the close cut it)', async () => {
    const { log, records } = captureLogger();
    const u = createUpstream(spec(url), log, { backoff: { baseMs: 50 } }) as HttpUpstream;
    open.push(u);
    await u.start();
    holdRootsChanged = true;
    u.notify('notifications/roots/list_changed');
    await waitFor(() => rpcBodies(seen).some((b) => b.method === 'notifications/roots/list_changed'), 5000, 'the notification at the server');
    await u.close();
    const givenUp = ['notification dropped: the upstream closed before it was taken', 'notification failed'];
    await waitFor(() => records.some((r) => givenUp.includes(r.msg as string)), 5000, 'the notification given up');
    expect(records.filter((r) => givenUp.includes(r.msg as string)).map((r) => [r.level, r.msg])).toEqual([[20, givenUp[0]]]);
  });

  it('closed while it renews a session its GET stream found gone: no warning that the session could not be renewed', async () => {
    const { log, records } = captureLogger();
    const u = createUpstream(spec(url), log, { backoff: { baseMs: 50 } }) as HttpUpstream;
    open.push(u);
    await u.start();
    const first = u.sessionId!;
    await waitFor(() => seen.some((s) => s.method === 'GET' && s.headers['mcp-session-id'] === first), 5000, 'the GET stream');
    let release: (() => void) | undefined;
    holdInitialized = (r) => (release = r);
    await forget(first); // ends the GET stream: reopened, it meets the 404
    await waitFor(() => release !== undefined, 10_000, 'the renewal at notifications/initialized');
    const closing = u.close();
    release!();
    await closing;
    await waitFor(() => records.some((r) => String(r.msg).includes('could not be renewed') || r.msg === 'session renewal ended by the close'), 5000, 'the renewal over');
    expect(records.filter((r) => (r.level as number) >= 40).map((r) => r.msg)).toEqual([]);
  });

  it("a server's question still open at the client when the upstream closes: no warning for the answer that cannot go", async () => {
    const { log, records } = captureLogger();
    const u = createUpstream(spec(url), log, { backoff: { baseMs: 50 } }) as HttpUpstream;
    open.push(u);
    await u.start();
    let asked = false;
    const call = u
      .request('tools/call', { name: 'elicit', arguments: {} }, { onServerRequest: (_req, withdrawn) => ((asked = true), new Promise((_r, reject) => withdrawn!.addEventListener('abort', () => reject(new CancelledError())))) })
      .catch((e: Error) => e);
    await waitFor(() => asked, 5000, 'the question at the client');
    await u.close();
    expect(await call).toBeInstanceOf(Error);
    const givenUp = ['answer to the upstream request dropped: the upstream closed', 'could not answer the upstream request'];
    await waitFor(() => records.some((r) => givenUp.includes(r.msg as string)), 5000, 'the answer given up');
    expect(records.filter((r) => (r.level as number) >= 40).map((r) => r.msg)).toEqual([]);
  });

  it('ends the session with DELETE on close', async () => {
    const u = make(spec(url));
    await u.start();
    const sid = u.sessionId;
    await u.close();
    const del = seen.find((s) => s.method === 'DELETE')!;
    expect(del.headers['mcp-session-id']).toBe(sid);
    expect(u.state).toBe('stopped');
  });
});

/** Serves a web-standard fetch handler on node:http (what @modelcontextprotocol/node would do). */
async function serveFetch(fetchHandler: (r: Request) => Promise<Response>): Promise<{ url: string; seen: Seen[] }> {
  return listen(fetchAdapter(fetchHandler));
}

/** A web-standard fetch handler (SDK v2's createMcpHandler) as a node:http one. */
function fetchAdapter(fetchHandler: (r: Request) => Promise<Response>): Handler {
  return async (req, res, body) => {
    const ctl = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) ctl.abort();
    });
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    const response = await fetchHandler(
      new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === 'POST' ? body : undefined, signal: ctl.signal }),
    );
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return void res.end();
    const reader = response.body.getReader();
    ctl.signal.addEventListener('abort', () => void reader.cancel().catch(() => undefined));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
      }
    } catch {
      // the client went away
    }
    res.end();
  };
}

describe('modern: SDK v2 createMcpHandler with legacy rejected', () => {
  let url: string;
  let seen: Seen[];
  let aborted: number;

  beforeEach(async () => {
    aborted = 0;
    const handler = createMcpHandler(
      () => {
        const s = new McpServer({ name: 'v2-http', version: '2.4.0' }, { capabilities: { tools: {}, resources: {}, prompts: {}, logging: {} } });
        s.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }, ctx) => ({
          content: [{ type: 'text', text }],
          structuredContent: { envelope: ctx.mcpReq.envelope ?? null, meta: ctx.mcpReq._meta ?? null },
        }));
        s.registerTool('regional', { inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }), n: z.number() }) }, async (a) => ({
          content: [{ type: 'text', text: `${a.region}/${a.n}` }],
        }));
        s.registerTool('slow', { inputSchema: z.object({ steps: z.number() }) }, async ({ steps }, ctx) => {
          const token = ctx.mcpReq._meta?.progressToken;
          for (let i = 1; i <= steps; i++) {
            if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
            await new Promise((r) => setTimeout(r, 30));
          }
          await new Promise<void>((resolve) => {
            ctx.mcpReq.signal.addEventListener('abort', () => {
              aborted++;
              resolve();
            });
            setTimeout(resolve, steps === 0 ? 5000 : 0);
          });
          return { content: [{ type: 'text', text: 'slow done' }] };
        });
        s.registerTool('log', { inputSchema: z.object({}) }, async (_a, ctx) => {
          await ctx.mcpReq.log('info', 'from v2');
          return { content: [{ type: 'text', text: 'logged' }] };
        });
        s.registerResource('menu', 'test://cafe/menu', { mimeType: 'text/plain' }, async (uri) => ({
          contents: [{ uri: uri.href, text: 'espresso' }],
        }));
        s.registerPrompt('café', { description: 'a name that is not ASCII' }, () => ({
          messages: [{ role: 'user', content: { type: 'text', text: 'un café' } }],
        }));
        return s;
      },
      { legacy: 'reject' },
    );
    ({ url, seen } = await serveFetch(handler.fetch));
  });

  it('is detected as modern from its DiscoverResult', async () => {
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(MODERN);
    expect(u.protocolVersion).toBe(MODERN);
    expect(u.serverInfo).toEqual({ name: 'v2-http', version: '2.4.0' });
    expect(u.capabilities).toMatchObject({ tools: {}, resources: {} });
    expect(u.sessionId).toBeUndefined();
    expect(seen).toHaveLength(1);
    expect(seen.some((s) => s.method === 'GET')).toBe(false);
  });

  it('sends the envelope and the mirrored headers the server validates', async () => {
    const u = make(spec(url));
    await u.start();
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'hi' } }, { clientCapabilities: { elicitation: { form: {} } }, meta: { traceparent: 't' } });
    expect(r).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'hi' }] });
    expect((r.structuredContent as { envelope: Record<string, unknown> }).envelope).toMatchObject({
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
      'io.modelcontextprotocol/clientInfo': { name: 'switchyard' },
    });
    const call = seen.find((s) => s.body.includes('"tools/call"'))!;
    expect(call.headers).toMatchObject({ 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
    expect(call.headers['mcp-session-id']).toBeUndefined();
  });

  it('sends the URI as Mcp-Name for resources/read, and a non-ASCII name with the Base64 sentinel', async () => {
    const u = make(spec(url));
    await u.start();
    const r = await u.request('resources/read', { uri: 'test://cafe/menu' });
    expect(r).toMatchObject({ contents: [{ text: 'espresso' }] });
    expect(seen.find((s) => s.body.includes('"resources/read"'))!.headers['mcp-name']).toBe('test://cafe/menu');
    const p = await u.request('prompts/get', { name: 'café' });
    expect(p).toMatchObject({ messages: [{ content: { text: 'un café' } }] });
    const get = seen.find((s) => s.body.includes('"prompts/get"'))!;
    expect(get.headers['mcp-name']).toBe(`=?base64?${Buffer.from('café').toString('base64')}?=`);
  });

  it('mirrors x-mcp-header arguments as Mcp-Param-* once it has seen tools/list', async () => {
    const u = make(spec(url));
    await u.start();
    // Without the declaration the server refuses the call: the header is required.
    await expect(u.request('tools/call', { name: 'regional', arguments: { region: 'eu-west', n: 1 } })).rejects.toMatchObject({ code: -32020 });
    await u.request('tools/list', {});
    const r = await u.request('tools/call', { name: 'regional', arguments: { region: 'eu-west', n: 1 } });
    expect(text(r)).toBe('eu-west/1');
    const r2 = await u.request('tools/call', { name: 'regional', arguments: { region: ' Zürich ', n: 2 } });
    expect(text(r2)).toBe(' Zürich /2');
    const sent = seen.filter((s) => s.body.includes('"regional"')).map((s) => s.headers['mcp-param-region']);
    expect(sent).toEqual([undefined, 'eu-west', `=?base64?${Buffer.from(' Zürich ').toString('base64')}?=`]);
  });

  it('routes progress from the answer stream and rejects unknown methods with the RpcError from the 404 body', async () => {
    const u = make(spec(url));
    await u.start();
    const progress: ProgressInfo[] = [];
    const r = await u.request('tools/call', { name: 'slow', arguments: { steps: 3 } }, { onProgress: (p) => progress.push(p) });
    expect(text(r)).toBe('slow done');
    expect(progress.map((p) => p.progress)).toEqual([1, 2, 3]);
    const err = await u.request('completion/complete', { ref: { type: 'ref/prompt', name: 'café' }, argument: { name: 'a', value: '' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ code: -32601 });
  });

  it('a resource URI too long for the headers Node reads (Mcp-Name repeats it): the 431 says why, and it is not sent again', async () => {
    // Node's parser refuses it before any handler: counted where it answers 431 itself.
    let refused = 0;
    servers.at(-1)!.on('clientError', (_err, socket) => {
      refused++;
      socket.end('HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n');
    });
    const u = make(spec(url));
    await u.start();
    const err = await u.request('resources/read', { uri: `test://cafe/${'a'.repeat(20_000)}` }, { retry: { maxAttempts: 3, budgetMs: 5000 } }).catch((e: unknown) => e);
    expect(refused).toBe(1);
    expect(err).toBeInstanceOf(TransportError);
    expect(err).toMatchObject({ status: 431, message: expect.stringMatching(/^HTTP 431: the upstream refused the request's headers as too large \(a 2026-07-28 request repeats its tool name or resource URI in Mcp-Name/) });
  });

  it("one caller's requests refused for their size (431) do not open the circuit for every caller", async () => {
    const u = make(spec(url, { circuitBreaker: { failures: 2, cooldownMs: 60_000 } }));
    await u.start();
    for (let i = 0; i < 3; i++) await expect(u.request('resources/read', { uri: `test://cafe/${'a'.repeat(20_000)}` })).rejects.toMatchObject({ status: 431 });
    expect(u.circuit).toBe('closed');
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { text: 'still served' } }))).toBe('still served');
  });

  it('routes a requested log to its call', async () => {
    const u = make(spec(url));
    await u.start();
    const logs: unknown[] = [];
    await u.request('tools/call', { name: 'log', arguments: {} }, { logLevel: 'info', onLog: (p) => logs.push(p) });
    expect(logs).toEqual([expect.objectContaining({ level: 'info', data: 'from v2' })]);
  });

  it('cancels by closing the answer stream, never with a notification', async () => {
    const u = make(spec(url));
    await u.start();
    const ctl = new AbortController();
    const p = u.request('tools/call', { name: 'slow', arguments: { steps: 0 } }, { signal: ctl.signal });
    await waitFor(() => seen.some((s) => s.body.includes('"slow"')), 2000, 'call sent');
    await new Promise((r) => setTimeout(r, 50));
    ctl.abort('stop');
    await expect(p).rejects.toMatchObject({ name: 'CancelledError', message: 'stop' });
    await waitFor(() => aborted === 1, 2000, 'handler aborted');
    expect(seen.some((s) => s.body.includes('notifications/cancelled'))).toBe(false);
    const t = await u.request('tools/call', { name: 'slow', arguments: { steps: 0 } }, { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(t).toMatchObject({ name: 'TimeoutError' });
    await waitFor(() => aborted === 2, 2000, 'handler aborted on timeout');
  });
});

/** A minimal sessionless legacy server: lenient about headers, answers discover in-band. */
function rawLegacy(req: IncomingMessage, res: ServerResponse, body: string): void {
  if (req.method !== 'POST') {
    res.writeHead(405).end();
    return;
  }
  const msg = JSON.parse(body) as { id?: number; method?: string; params?: Record<string, unknown> };
  if (msg.id === undefined) {
    res.writeHead(202).end();
    return;
  }
  const reply = (x: Record<string, unknown>): void => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, ...x }));
  };
  if (msg.method === 'initialize') {
    return reply({ result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '0' } } });
  }
  if (msg.method === 'tools/call') return reply({ result: { content: [{ type: 'text', text: 'raw ok' }] } });
  reply({ error: { code: -32601, message: 'Method not found' } });
}

describe('legacy: a 2025-03-26 server that answers in batches', () => {
  it('takes the response inside a JSON array (and its initialize answer so), routing the progress and log beside it to the call', async () => {
    let runs = 0;
    const { url } = await listen((req, res, body) => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const msg = JSON.parse(body) as { id?: number; method?: string; params?: { _meta?: { progressToken?: unknown } } };
      if (msg.id === undefined) return void res.writeHead(202).end();
      const batch = (...m: Record<string, unknown>[]): void => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(m.map((x) => ({ jsonrpc: '2.0', ...x }))));
      if (msg.method === 'initialize') return batch({ id: msg.id, result: { protocolVersion: '2025-03-26', capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'batcher', version: '0' } } });
      if (msg.method === 'tools/call') {
        runs++;
        return batch(
          { method: 'notifications/progress', params: { progressToken: msg.params!._meta!.progressToken, progress: 1, total: 1 } },
          { method: 'notifications/message', params: { level: 'info', data: 'ran' } },
          { id: msg.id, result: { content: [{ type: 'text', text: 'batched ok' }] } },
        );
      }
      batch({ id: msg.id, error: { code: -32601, message: 'Method not found' } });
    });
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(u.protocolVersion).toBe('2025-03-26');
    const progress: ProgressInfo[] = [];
    const logs: unknown[] = [];
    const r = await u.request('tools/call', { name: 'x', arguments: {} }, { onProgress: (p) => progress.push(p), onLog: (l) => logs.push(l) });
    expect(text(r)).toBe('batched ok');
    expect(runs).toBe(1);
    expect(progress).toEqual([{ progress: 1, total: 1 }]);
    expect(logs).toEqual([{ level: 'info', data: 'ran' }]);
  });
});

describe('modern: a log line after the answer on a call\'s stream', () => {
  it("is not lost: a legacy session's call (its lines session-wide) is told; a modern call's, its request over, goes to the hub's log", async () => {
    const { url } = await listen((req, res, body) => {
      const msg = JSON.parse(body) as { id?: number; method?: string };
      if (msg.method === 'server/discover')
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { resultType: 'complete', supportedVersions: [MODERN], capabilities: { tools: {}, logging: {} } } }));
      // The response, then a line about the call, then the end: a server that logs as it cleans up.
      const event = (m: Record<string, unknown>): string => `data: ${JSON.stringify({ jsonrpc: '2.0', ...m })}\n\n`;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(event({ id: msg.id, result: { resultType: 'complete', content: [{ type: 'text', text: 'done' }] } }));
      const token = (JSON.parse(body) as { params?: { _meta?: { progressToken?: unknown } } }).params?._meta?.progressToken;
      const lateProgress = token === undefined ? '' : event({ method: 'notifications/progress', params: { progressToken: token, progress: 2 } });
      setTimeout(() => res.end(lateProgress + event({ method: 'notifications/message', params: { level: 'warning', data: 'cleanup failed, token=sk-live-abcdefghijklmnopqrstuvwxyz' } })), 30);
    });
    const { log, records } = captureLogger();
    const u = createUpstream(spec(url), log, { backoff: { baseMs: 50 } }) as HttpUpstream;
    open.push(u);
    await u.start();
    expect(u.era).toBe(MODERN);
    const legacyLogs: Record<string, unknown>[] = [];
    expect(text(await u.request('tools/call', { name: 'x', arguments: {} }, { logLevel: 'info', onLog: (l) => legacyLogs.push(l), logScope: 'session-1' }))).toBe('done');
    await waitFor(() => legacyLogs.length > 0, 3000, 'the late line relayed');
    expect(legacyLogs).toEqual([{ level: 'warning', data: expect.stringContaining('cleanup failed') }]);
    expect(JSON.stringify(legacyLogs)).not.toContain('abcdefghijklmnopqrstuvwxyz');
    const modernLogs: unknown[] = [];
    const progress: unknown[] = [];
    expect(text(await u.request('tools/call', { name: 'x', arguments: {} }, { logLevel: 'info', onLog: (l) => modernLogs.push(l), onProgress: (p) => progress.push(p) }))).toBe('done');
    const late = (): Record<string, unknown> | undefined => records.find((r) => String(r.msg).includes('after its answer'));
    await waitFor(() => late() !== undefined, 3000, 'the late line logged');
    expect(late()).toMatchObject({ level: 30, method: 'tools/call', lineLevel: 'warning', data: expect.stringContaining('cleanup failed') });
    expect(JSON.stringify(records)).not.toContain('abcdefghijklmnopqrstuvwxyz');
    expect(modernLogs).toEqual([]);
    // Progress past the call's end means nothing (its token is no longer active): dropped, and said at debug.
    expect(progress).toEqual([]);
    expect(records.find((r) => String(r.msg).startsWith('progress for no call in flight'))).toMatchObject({ level: 20, method: 'tools/call', onCallStream: true });
    // Not said upstream-wide (where no log line is taken).
    const heard: unknown[] = [];
    u.on('notification', (n) => heard.push(n));
    await u.request('tools/call', { name: 'x', arguments: {} });
    await waitFor(() => records.filter((r) => String(r.msg).includes('after its answer')).length === 2, 3000, 'the third late line logged');
    expect(heard).toEqual([]);
  });
});

describe('a server that keeps each answer stream open after its response (it should close it)', () => {
  for (const era of [LEGACY, MODERN]) {
    it(`is started (${era}): its probe's and initialize's answers are taken, their streams closed by the hub, as a call's are`, async () => {
      const { url } = await listen((req, res, body) => {
        if (req.method !== 'POST') return void res.writeHead(405).end();
        const msg = JSON.parse(body) as { id?: number; method?: string };
        if (msg.id === undefined) return void res.writeHead(202).end();
        const answer = (m: Record<string, unknown>): void => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: msg.id, ...m })}\n\n`);
          // …and the stream is left open.
        };
        if (msg.method === 'server/discover')
          return answer(era === MODERN ? { result: { resultType: 'complete', supportedVersions: [MODERN], capabilities: { tools: {} } } } : { error: { code: -32601, message: 'Method not found' } });
        if (msg.method === 'initialize') return answer({ result: { protocolVersion: LEGACY, capabilities: { tools: {} }, serverInfo: { name: 'open-streams', version: '0' } } });
        answer({ result: { content: [{ type: 'text', text: 'open ok' }] } });
      });
      // A start that waited for the streams to end failed at probeTimeoutMs / timeoutMs ("no answer within").
      const u = make(spec(url, { probeTimeoutMs: 4000, timeoutMs: 4000 }));
      await u.start();
      expect(u.era).toBe(era);
      expect(text(await u.request('tools/call', { name: 'x', arguments: {} }))).toBe('open ok');
    });
  }
});

describe('an answer past maxFrameBytes', () => {
  it("fails its call, is not fetched again, and does not open the circuit for the server's other calls", async () => {
    let reads = 0;
    const { url } = await listen((req, res, body) => {
      if (!body.includes('"resources/read"')) return rawLegacy(req, res, body);
      reads++;
      const msg = JSON.parse(body) as { id?: number };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { contents: [{ uri: 'file:///big', text: 'y'.repeat(50_000) }] } }));
    });
    const u = make(spec(url, { maxFrameBytes: 10_000, circuitBreaker: { failures: 2, cooldownMs: 60_000 } }));
    await u.start();
    for (let i = 0; i < 2; i++)
      await expect(u.request('resources/read', { uri: 'file:///big' }, { retry: { maxAttempts: 3, budgetMs: 5000 } })).rejects.toMatchObject({ name: 'TransportError', oversized: true });
    expect(reads).toBe(2);
    expect(u.circuit).toBe('closed');
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('raw ok');
  });
});

describe('legacy: a server that opens an event stream on each notification and keeps it open (it should answer 202)', () => {
  it('is started: notifications/initialized is taken at its 2xx status, its stream closed by the hub', async () => {
    const { url, seen } = await listen((req, res, body) => {
      if (req.method === 'POST' && JSON.parse(body).id === undefined) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.write(': open\n\n');
      }
      rawLegacy(req, res, body);
    });
    // Waited out, the handshake failed at timeoutMs: "notifications/initialized: no answer within 4000 ms".
    const u = make(spec(url, { timeoutMs: 4000 }));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(rpcBodies(seen).some((b) => b.method === 'notifications/initialized')).toBe(true);
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('raw ok');
  });
});

describe('legacy: an SDK v1 server of one transport, restarted', () => {
  it('answers the old session 400 "Server not initialized": the hub initializes again, and the call runs once', async () => {
    let runs = 0;
    const fresh = async (): Promise<StreamableHTTPServerTransport> => {
      const s = new McpServerV1({ name: 'one-transport', version: '1.32.2' });
      s.registerTool('bump', { inputSchema: {} }, async () => ({ content: [{ type: 'text', text: String(++runs) }] }));
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
      await s.connect(t);
      return t;
    };
    let transport = await fresh();
    const { url, seen } = await listen((req, res, body) => transport.handleRequest(req, res, body ? JSON.parse(body) : undefined));
    const u = make(spec(url));
    await u.start();
    const first = u.sessionId!;
    expect(text(await u.request('tools/call', { name: 'bump', arguments: {} }))).toBe('1');
    // The process restarted: its one transport is new, and knows no session.
    const old = transport;
    transport = await fresh();
    await old.close();
    expect(text(await u.request('tools/call', { name: 'bump', arguments: {} }))).toBe('2');
    expect(u.sessionId).not.toBe(first);
    expect(runs).toBe(2);
    expect(rpcBodies(seen).filter((b) => b.method === 'initialize')).toHaveLength(2);
  });
});

describe('legacy: an SDK v1 server behind a proxy that sends Mcp-Session-Id twice', () => {
  it('takes the one session both copies name, and sends it on every later request', async () => {
    const s = new McpServerV1({ name: 'behind-proxy', version: '1.32.2' });
    s.registerTool('hi', { inputSchema: {} }, async () => ({ content: [{ type: 'text', text: 'hi' }] }));
    const t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
    await s.connect(t);
    const { url, seen } = await listen((req, res, body) => {
      // The proxy adds the header it passes on: each answer naming a session names it twice.
      const writeHead = res.writeHead.bind(res) as (status: number, headers?: unknown) => ServerResponse;
      (res as unknown as { writeHead: unknown }).writeHead = (status: number, headers?: Record<string, string>) => {
        const sid = headers?.['mcp-session-id'];
        if (sid === undefined) return writeHead(status, headers);
        return writeHead(status, [...Object.entries(headers!), ['Mcp-Session-Id', sid]]);
      };
      return t.handleRequest(req, res, body ? JSON.parse(body) : undefined);
    });
    const u = make(spec(url));
    await u.start();
    expect(u.sessionId).toBe(t.sessionId);
    expect(text(await u.request('tools/call', { name: 'hi', arguments: {} }))).toBe('hi');
    const call = seen.find((x) => x.body.includes('"tools/call"'))!;
    expect(call.headers['mcp-session-id']).toBe(t.sessionId);
  });
});

/** What a legacy server is redeployed as: SDK v2, modern only (legacy requests refused -32022); its echo answers `v2:<text>`. */
function modernOnlyEcho(): ReturnType<typeof fetchAdapter> {
  return fetchAdapter(
    createMcpHandler(
      () => {
        const s = new McpServer({ name: 'v2-http', version: '2.4.0' }, { capabilities: { tools: {} } });
        s.registerTool('echo', { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({ content: [{ type: 'text', text: `v2:${text}` }] }));
        return s;
      },
      { legacy: 'reject' },
    ).fetch,
  );
}

/** `u`, legacy, once its server was redeployed modern-only: its next call fails as not run (`refusal`), the era is probed again, and calls go on in 2026-07-28. */
async function refusedThenModern(u: HttpUpstream, refusal: RegExp): Promise<void> {
  const refused = await u.request('tools/call', { name: 'echo', arguments: { text: 'b' } }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(TransportError);
  expect((refused as TransportError).notDelivered).toBe(true);
  expect((refused as Error).message).toMatch(refusal);
  expect(await u.whenReady(10_000)).toBe(true);
  expect(u.era).toBe(MODERN);
  expect(text(await u.request('tools/call', { name: 'echo', arguments: { text: 'c' } }))).toBe('v2:c');
}

describe('legacy: redeployed modern-only at the same URL, with no downtime', () => {
  it('a legacy request refused -32022 naming it (SDK v2, legacy: reject) fails as not run, the era is probed again, and calls go on in 2026-07-28', async () => {
    let modern = false;
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const v2 = modernOnlyEcho();
    // The new deployment takes new requests; the old one keeps the connections it has (its GET stream).
    const { url } = await listen(async (req, res, body) => {
      if (modern) return v2(req, res, body);
      const parsed = body ? JSON.parse(body) : undefined;
      const known = sessions.get(req.headers['mcp-session-id'] as string);
      if (known) return known.handleRequest(req, res, parsed);
      if (req.method === 'POST' && isInitializeRequest(parsed)) {
        const server = new McpServerV1({ name: 'v1-http', version: '1.32.2' });
        server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text: `v1:${text}` }] }));
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void sessions.set(id, transport) });
        await server.connect(transport);
        return transport.handleRequest(req, res, parsed);
      }
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' }, id: null }));
    });
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { text: 'a' } }))).toBe('v1:a');
    modern = true;
    await refusedThenModern(u, /did not take the request as a 2025-11-25 one \(HTTP 400 -32022 Unsupported protocol version: 2025-11-25 \(it speaks 2026-07-28\)\), so it did not run/);
  });
});

describe('legacy: redeployed modern-only behind something that answers its refusal 200', () => {
  it('a -32022 inside a 2xx answer, naming the call, whose supported lacks the session version: the call fails as not run and the era is probed again (not relayed as the answer)', async () => {
    let modern = false;
    let legacyRuns = 0;
    const v2 = modernOnlyEcho();
    const { url } = await listen((req, res, body) => {
      if (!modern) {
        if (body.includes('"tools/call"')) legacyRuns++;
        return rawLegacy(req, res, body);
      }
      if (req.headers['mcp-protocol-version'] === MODERN) return v2(req, res, body);
      // The refusal SDK v2 sends as a 400, here in-band in a 200 (a gateway that rewrites 4xx, a hand-written server).
      const msg = JSON.parse(body) as { id?: number };
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32022, message: 'Unsupported protocol version: 2025-06-18', data: { supported: [MODERN], requested: '2025-06-18' } } }),
      );
    });
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(text(await u.request('tools/call', { name: 'x', arguments: {} }))).toBe('raw ok');
    modern = true;
    await refusedThenModern(u, /did not take the request as a 2025-06-18 one \(HTTP 200 -32022 Unsupported protocol version: 2025-06-18 \(it speaks 2026-07-28\)\), so it did not run/);
    expect(legacyRuns).toBe(1);
  });

  it('a -32022 inside a 2xx answer that lists the version the hub sent is the call\'s answer, relayed', async () => {
    const { url } = await listen((req, res, body) => {
      if (!body.includes('"tools/call"')) return rawLegacy(req, res, body);
      const msg = JSON.parse(body) as { id?: number };
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32022, message: 'odd', data: { supported: ['2025-06-18'], requested: '2025-06-18' } } }),
      );
    });
    const u = make(spec(url));
    await u.start();
    const err = await u.request('tools/call', { name: 'x', arguments: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ code: -32022 });
    expect(u.state).toBe('ready');
  });
});

describe('legacy: a session renewed while the circuit is open', () => {
  it('leaves it restarting until its cool-down is over (the renewal does not say it ready)', async () => {
    let n = 0;
    const live = new Set<string>();
    let held: ServerResponse | undefined;
    const { url, seen } = await listen((req, res, body) => {
      if (req.method !== 'POST') return void res.writeHead(req.method === 'GET' ? 405 : 200).end();
      const msg = JSON.parse(body) as { id?: number; method?: string; params?: { name?: string } };
      if (msg.method === 'initialize') {
        live.add(`s${++n}`);
        return void res
          .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': `s${n}` })
          .end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '0' } } }));
      }
      // The first 'held' call is answered (404) when the test says so; a later one never.
      if (msg.params?.name === 'held') return void (held ??= res);
      if (!live.has(req.headers['mcp-session-id'] as string)) return void res.writeHead(404).end();
      if (msg.id === undefined) return void res.writeHead(202).end();
      if (msg.params?.name === 'fail') return void res.writeHead(500).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: 'ok' }] } }));
    });
    const u = make(spec(url, { era: '2025-11-25', circuitBreaker: { failures: 1, cooldownMs: 10_000 } }));
    await u.start();
    const call = u.request('tools/call', { name: 'held' }, { timeoutMs: 1000 }).catch((e: Error) => e);
    await waitFor(() => held !== undefined, 5000, 'the held call');
    await expect(u.request('tools/call', { name: 'fail' })).rejects.toThrow(/500/);
    expect([u.state, u.circuit]).toEqual(['restarting', 'open']);
    expect(u.lastError).toMatch(/^circuit open after 1 consecutive failure; last: /); // not "1 consecutive failures"
    // The server forgot the session: the held call meets its 404 and renews it, then goes again.
    live.clear();
    held!.writeHead(404).end();
    await waitFor(() => seen.filter((s) => s.body.includes('"held"')).length === 2, 5000, 'the call sent again on the renewed session');
    expect([u.state, u.circuit]).toEqual(['restarting', 'open']);
    // Failed by the close (afterEach).
    void call;
  });
});

describe('legacy: a session a reconnect replaced while a call ran on it', () => {
  it("is ended (DELETE) only after that call's cancellation, which waited for its request to be taken", async () => {
    ({ url, order } = await sessionsServer());
    // A cancellation waits for its request to be taken timeoutMs here (shorter than 2 s); the call's own limit is longer.
    const u = make(spec(url, { era: '2025-11-25', timeoutMs: 600, circuitBreaker: { failures: 1, cooldownMs: 0 } }));
    await u.start();
    const ac = new AbortController();
    const call = u.request('tools/call', { name: 'hold' }, { signal: ac.signal, timeoutMs: 10_000 }).catch((e: Error) => e);
    await waitFor(() => u.busy, 5000, 'the held call');
    await expect(u.request('tools/call', { name: 'fail' })).rejects.toThrow(/500/);
    await waitFor(() => u.state === 'ready' && u.sessionId === 's2', 5000, 'the reconnect');
    ac.abort();
    expect(await call).toBeInstanceOf(Error);
    await waitFor(() => order.includes('DELETE s1'), 3000, 'the old session ended');
    expect(order.filter((o) => o.endsWith('s1'))).toEqual(['cancelled s1', 'DELETE s1']);
  });

  it('is not ended by a reconnect attempt that fails: the call on it goes on and is answered', async () => {
    ({ url, order } = await sessionsServer());
    const u = make(spec(url, { era: '2025-11-25', circuitBreaker: { failures: 1, cooldownMs: 0 } }));
    await u.start();
    const call = u.request('tools/call', { name: 'hold' }, { timeoutMs: 10_000 }).catch((e: Error) => e);
    await waitFor(() => u.busy, 5000, 'the held call');
    refuseInitialize = 1;
    await expect(u.request('tools/call', { name: 'fail' })).rejects.toThrow(/500/);
    await waitFor(() => u.state === 'ready' && u.sessionId === 's2', 5000, 'the reconnect, after one that failed');
    expect(order).toEqual([]);
    release!();
    expect(text((await call) as Record<string, unknown>)).toBe('held done');
    await waitFor(() => order.includes('DELETE s1'), 3000, 'the old session ended once its call was over');
  });

  it('a call cancelled just before the close has its cancellation sent before the session is ended', async () => {
    ({ url, order } = await sessionsServer());
    const u = make(spec(url, { era: '2025-11-25' }));
    await u.start();
    const ac = new AbortController();
    const call = u.request('tools/call', { name: 'hold' }, { signal: ac.signal }).catch((e: Error) => e);
    await waitFor(() => release !== undefined, 5000, 'the held call at the server');
    ac.abort();
    expect(await call).toBeInstanceOf(Error);
    await u.close(); // well within the 2 s its cancellation waits for the request to be taken
    expect(order).toEqual(['cancelled s1', 'DELETE s1']);
  });

  let url: string;
  let order: string[];
  /** initialize answers this many times 503 before it works again. */
  let refuseInitialize = 0;
  /** Answers the held call (its 'hold' POST). */
  let release: (() => void) | undefined;
  /** Sessions s1, s2...: 'hold' is answered (JSON) only when released, 'fail' answers 500; DELETEs and cancellations are recorded in order. */
  async function sessionsServer(): Promise<{ url: string; order: string[] }> {
    let n = 0;
    const order: string[] = [];
    refuseInitialize = 0;
    release = undefined;
    const { url } = await listen((req, res, body) => {
      const sid = req.headers['mcp-session-id'] as string | undefined;
      if (req.method === 'DELETE') return void (order.push(`DELETE ${sid}`), res.writeHead(200).end());
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const msg = JSON.parse(body) as { id?: number; method?: string; params?: { name?: string } };
      const ok = (t: string): void =>
        void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: t }] } }));
      if (msg.method === 'initialize') {
        if (refuseInitialize > 0 && refuseInitialize--) return void res.writeHead(503).end();
        return void res
          .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': `s${++n}` })
          .end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '0' } } }));
      }
      if (msg.method === 'notifications/cancelled') order.push(`cancelled ${sid}`);
      // A JSON answer comes at the end: when released, here.
      if (msg.params?.name === 'hold') return void (release = () => ok('held done'));
      if (msg.id === undefined) return void res.writeHead(202).end();
      if (msg.params?.name === 'fail') return void res.writeHead(500).end();
      ok('ok');
    });
    return { url, order };
  }
});

describe("the circuit breaker: the hub's own lists, tasks' results", () => {
  it("a list that hangs or fails, or a task's result out of time, says nothing of the server (the circuit stays closed, its calls served); a list refused a connection does", async () => {
    // Its tools work; its resources/list hangs, its prompts/list answers 500 (a broken handler behind a proxy).
    const { url, server } = await listen((req, res, body) => {
      if (body.includes('"resources/list"') || body.includes('"tasks/result"')) return;
      if (body.includes('"prompts/list"')) return void res.writeHead(500, { 'content-type': 'text/plain' }).end('Internal Server Error');
      rawLegacy(req, res, body);
    });
    const u = make(spec(url, { era: '2025-11-25', circuitBreaker: { failures: 3, cooldownMs: 10_000 } }));
    await u.start();
    // As the catalog fetches them: no options, the server's own limit (shortened once started).
    u.retime({ timeoutMs: 150 });
    const list = (m: string) => u.request(m, {}).catch((e: unknown) => e);
    for (let i = 0; i < 3; i++) expect(await list('resources/list')).toMatchObject({ name: 'TimeoutError' });
    for (let i = 0; i < 3; i++) expect(await list('prompts/list')).toMatchObject({ name: 'TransportError', status: 500 });
    // Before, the third of either opened the circuit (and, on timeouts, put the server on probation): its calls refused for the cool-down.
    expect([u.state, u.circuit, u.restarts]).toEqual(['ready', 'closed', 0]);
    // Nor is a task that outlasts the wait for its result (tasks/result waits, by the spec, until the task ends) a server down.
    for (let i = 0; i < 3; i++) expect(await u.request('tasks/result', { taskId: `t${i}` }).catch((e: unknown) => e)).toMatchObject({ name: 'TimeoutError' });
    expect([u.state, u.circuit, u.restarts]).toEqual(['ready', 'closed', 0]);
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('raw ok');
    // A connection refused is the server down, whatever was asked.
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    // (A kept-alive socket the close cut may fail one first, "other side closed": no evidence for a list.)
    const refused: unknown[] = [];
    for (let i = 0; i < 6 && u.state === 'ready'; i++) refused.push(await list('tools/list'));
    expect(refused.slice(-3)).toEqual(Array(3).fill(expect.objectContaining({ name: 'TransportError', notDelivered: true })));
    expect([u.state, u.circuit]).toEqual(['restarting', 'open']);
    expect(u.lastError).toMatch(/^circuit open after 3 consecutive failures; last: .*ECONNREFUSED/);
  });
});

describe('probe outcomes that are not modern', () => {
  it('takes a 2xx with an in-band -32601 as legacy; works without a session and without a GET stream', async () => {
    const { url, seen } = await listen(rawLegacy);
    const u = make(spec(url));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(u.protocolVersion).toBe('2025-06-18');
    expect(u.sessionId).toBeUndefined();
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('raw ok');
    const call = seen.find((s) => s.body.includes('"tools/call"'))!;
    expect(call.headers['mcp-protocol-version']).toBe('2025-06-18');
    await waitFor(() => seen.some((s) => s.method === 'GET'), 2000, 'GET attempt');
    await u.close();
    expect(seen.some((s) => s.method === 'DELETE')).toBe(false);
  });

  for (const status of [401, 403, 500, 503]) {
    it(`takes HTTP ${status} as no evidence: not started, retried later`, async () => {
      let answer = status;
      const { url } = await listen((req, res, body) => {
        if (answer !== 200) return void res.writeHead(answer, { 'content-type': 'application/json' }).end('{"error":"nope"}');
        rawLegacy(req, res, body);
      });
      const u = make(spec(url));
      await expect(u.start()).rejects.toThrow(new RegExp(`HTTP ${status}`));
      expect(u.state).toBe('starting');
      expect(u.era).toBeUndefined();
      expect(u.lastError).toMatch(new RegExp(`${status}`));
      answer = 200;
      await waitFor(() => u.state === 'ready', 5000, 'retry');
      expect(u.era).toBe(LEGACY);
      expect(u.restarts).toBeGreaterThanOrEqual(1);
    });
  }

  it('redirected at its probe (a server mounted at /mcp/): not started, and the error says where to, without the query', async () => {
    const { url, seen } = await listen((_req, res) => void res.writeHead(307, { location: '/mcp/?key=s3cret-value' }).end());
    const u = make(spec(url));
    await expect(u.start()).rejects.toThrow(`the upstream redirects to ${url}/; the hub does not follow redirects`);
    expect(u.state).toBe('starting');
    expect(u.lastError).not.toContain('s3cret');
    expect(seen.every((s) => s.method === 'POST' && s.body.includes('server/discover'))).toBe(true);
  });

  it('a call cancelled while its POST is unanswered (JSON: only at the end) holds it at most until the close', async () => {
    const { url, seen, server } = await listen((req, res, body) => {
      if (body.includes('"hold"')) return; // a JSON answer comes at the end: never, here
      rawLegacy(req, res, body);
    });
    const u = make(spec(url));
    await u.start();
    const acs = [new AbortController(), new AbortController(), new AbortController()];
    const calls = acs.map((ac) => u.request('tools/call', { name: 'hold' }, { signal: ac.signal }).catch((e: Error) => e));
    // And one still running at the close.
    const running = u.request('tools/call', { name: 'hold' }).catch((e: Error) => e);
    await waitFor(() => seen.filter((s) => s.body.includes('"hold"')).length === 4, 5000, 'the held calls');
    for (const ac of acs) ac.abort('changed my mind');
    for (const r of await Promise.all(calls)) expect(r).toBeInstanceOf(Error);
    // Their cancellations wait for the server to take them (2 s at most): other calls do not.
    const t0 = Date.now();
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('raw ok');
    expect(Date.now() - t0).toBeLessThan(1000);
    // The close does not wait the 2 s for them, and ends their POSTs (no socket left for the 2 s),
    // but sends them first: this sessionless server has no DELETE to end its calls. So is the
    // call still running told.
    await u.close();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await running).toBeInstanceOf(Error);
    const held = rpcBodies(seen).filter((b) => b.method === 'tools/call' && (b.params as { name?: string }).name === 'hold').map((b) => b.id);
    const cancelled = rpcBodies(seen).filter((b) => b.method === 'notifications/cancelled');
    expect(cancelled.map((b) => b.params!.requestId).sort()).toEqual([...held].sort());
    expect(cancelled.filter((b) => b.params!.reason === 'the hub stopped')).toHaveLength(1);
    const open = (): Promise<number> => new Promise((r) => server.getConnections((_e, n) => r(n)));
    let n = await open();
    for (const end = Date.now() + 1000; n > 0 && Date.now() < end; n = await open()) await new Promise((r) => setTimeout(r, 20));
    expect(n).toBe(0);
  });

  it('a call older than the wait is cancelled at once though its POST is unanswered; a young one still waits for its request to be taken', async () => {
    const cancelAt = new Map<unknown, number>();
    const { url, seen } = await listen((req, res, body) => {
      if (body.includes('"hold"')) return; // a JSON answer comes at the end: never, here
      const m = JSON.parse(body || '{}') as { method?: string; params?: { requestId?: unknown } };
      if (m.method === 'notifications/cancelled') cancelAt.set(m.params?.requestId, Date.now());
      rawLegacy(req, res, body);
    });
    // The wait is timeoutMs when shorter than 2 s; the calls' own limit is longer. 1.5 s: room
    // on both sides of the 0.75 s that tells "at once" from "waited" below, for a loaded machine
    // (0.6 s, with bounds of 0.3 s and 0.4 s, had little).
    const u = make(spec(url, { timeoutMs: 1_500, maxTotalTimeoutMs: 60_000 }));
    await u.start();
    const heldIds = (): unknown[] => rpcBodies(seen).filter((b) => (b.params as { name?: string } | undefined)?.name === 'hold').map((b) => b.id);
    const old = new AbortController();
    const oldCall = u.request('tools/call', { name: 'hold' }, { signal: old.signal, timeoutMs: 10_000 }).catch((e: Error) => e);
    await waitFor(() => heldIds().length === 1, 5000, 'the first call');
    await new Promise((r) => setTimeout(r, 1_600)); // older than the wait
    const young = new AbortController();
    const youngCall = u.request('tools/call', { name: 'hold' }, { signal: young.signal, timeoutMs: 10_000 }).catch((e: Error) => e);
    await waitFor(() => heldIds().length === 2, 5000, 'the second call');
    const t0 = Date.now();
    old.abort();
    young.abort();
    await Promise.all([oldCall, youngCall]);
    const [oldId, youngId] = heldIds();
    await waitFor(() => cancelAt.has(oldId) && cancelAt.has(youngId), 3000, 'both cancellations');
    expect(cancelAt.get(oldId)! - t0).toBeLessThan(750);
    expect(cancelAt.get(youngId)! - t0).toBeGreaterThanOrEqual(750);
  });

  it('takes a probe timeout as an outage, not as legacy', async () => {
    const { url } = await listen(() => undefined);
    const u = make(spec(url, { probeTimeoutMs: 200 }));
    await expect(u.start()).rejects.toThrow(/no answer within 200 ms/);
    expect(u.era).toBeUndefined();
  });

  it('a kept-alive connection the server closes as a request comes: a read, a notice or an idempotent call is sent again; another tools/call fails as maybe run', async () => {
    // The next request for `drop` that comes on a connection which served one before is closed
    // unread: a server's idle timeout firing as the request went out.
    let drop: string | undefined;
    const served = new WeakMap<object, number>();
    const { url, seen } = await listen((req, res, body) => {
      const n = served.get(req.socket) ?? 0;
      served.set(req.socket, n + 1);
      if (drop !== undefined && n > 0 && body.includes(`"method":"${drop}"`)) {
        drop = undefined;
        return void req.socket.destroy();
      }
      if (body.includes('"method":"ping"')) return void res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":${JSON.parse(body).id},"result":{}}`);
      rawLegacy(req, res, body);
    });
    const u = make(spec(url));
    await u.start();
    const sent = (method: string): number => rpcBodies(seen).filter((b) => b.method === method).length;
    /** Sends until the server dropped one `method` (sequential requests take turns on two connections: one may be new). */
    const untilDropped = async (method: string, send: () => Promise<unknown>): Promise<unknown[]> => {
      drop = method;
      const out: unknown[] = [];
      for (let i = 0; i < 6 && drop !== undefined; i++) out.push(await send().catch((e: unknown) => e));
      expect(drop).toBeUndefined();
      return out;
    };

    // Retries off (maxAttempts 1): only the transport sends these again.
    const once = { retry: { maxAttempts: 1, budgetMs: 5000 } };
    const pings = await untilDropped('ping', () => u.request('ping', {}, once));
    expect(pings.every((r) => JSON.stringify(r) === '{}')).toBe(true);
    expect(sent('ping')).toBe(pings.length + 1);

    const idempotent = await untilDropped('tools/call', () => u.request('tools/call', { name: 'x' }, { retry: { ...once.retry, idempotent: true } }));
    expect(idempotent.map((r) => text(r as Record<string, unknown>))).toEqual(idempotent.map(() => 'raw ok'));
    expect(sent('tools/call')).toBe(idempotent.length + 1);

    const before = sent('tools/call');
    const calls = await untilDropped('tools/call', () => u.request('tools/call', { name: 'x' }, once));
    expect(calls.at(-1)).toMatchObject({ name: 'TransportError', notDelivered: false, message: expect.stringMatching(/other side closed/) });
    expect(sent('tools/call') - before).toBe(calls.length);

    // A notification (the hub's own, unanswered but for 202): the dropped one is sent again.
    const note = 'notifications/roots/list_changed';
    drop = note;
    let notes = 0;
    for (let i = 0; i < 6 && drop !== undefined; i++) {
      u.notify(note);
      notes++;
      await waitFor(() => sent(note) >= notes + (drop === undefined ? 1 : 0), 2000, 'the notification');
    }
    expect(drop).toBeUndefined();
    expect(sent(note)).toBe(notes + 1);
  });

  it('reports connection refused, and marks a request that could not be delivered', async () => {
    // No connection kept alive: the call after the server is gone connects anew, and is refused
    // (on a kept one the server closed it would be lost, maybe delivered, and is not replayed).
    const { url, server } = await listen((req, res, body) => {
      res.setHeader('connection', 'close');
      rawLegacy(req, res, body);
    });
    const u = make(spec(url));
    await u.start();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    const err = await u.request('tools/call', { name: 'x' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'TransportError', notDelivered: true });
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
    const v = make(spec(url));
    await expect(v.start()).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('legacy: whether list changes can reach the hub (the standalone stream)', () => {
  /** A hand-written legacy server: `get` answers the standalone GET. */
  async function legacyServer(get: (res: ServerResponse) => void): Promise<string> {
    const { url } = await listen((req, res, body) => {
      if (req.method === 'GET') return get(res);
      if (req.method === 'DELETE') return res.writeHead(200).end();
      const msg = JSON.parse(body) as { id?: number; method: string };
      if (msg.id === undefined) return res.writeHead(202).end();
      const result = msg.method === 'initialize' ? { protocolVersion: '2025-11-25', capabilities: { tools: { listChanged: true } }, serverInfo: { name: 's', version: '1' } } : {};
      if (msg.method === 'server/discover') return res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'nope' } }));
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
    });
    return url;
  }

  it('a server with no GET stream (405): cannot, and the hub is told its lists were taken as if it could', async () => {
    const url = await legacyServer((res) => res.writeHead(405, { allow: 'POST' }).end());
    const u = make(spec(url));
    let gaps = 0;
    u.on('gap', () => gaps++);
    await u.start();
    await waitFor(() => u.hearsNotifications === false, 3000, 'GET answered 405');
    expect(gaps).toBe(1);
  });

  it('a GET stream answered 409 (SDK v1: "only one SSE stream is allowed per session", the one cut not yet let go): asked again later, not given up', async () => {
    let gets = 0;
    const url = await legacyServer((res) => {
      gets++;
      if (gets === 1) return void res.writeHead(200, { 'content-type': 'text/event-stream' }).end(); // cut
      if (gets === 2) return void res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Conflict: Only one SSE stream is allowed per session' } }));
      res.writeHead(200, { 'content-type': 'text/event-stream' }); // stays open
    });
    const u = make(spec(url));
    await u.start();
    await waitFor(() => gets === 3, 8000, 'the GET stream asked for again after the 409');
    expect(u.hearsNotifications).toBe(true);
  });

  it('a GET stream the server ends with no event id: reopened, and the hub is told what came meanwhile is lost', async () => {
    let gets = 0;
    const url = await legacyServer((res) => {
      gets++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (gets === 1) res.end(); // ended at once; the next stays open
    });
    const u = make(spec(url));
    let gaps = 0;
    u.on('gap', () => gaps++);
    await u.start();
    expect(u.hearsNotifications).toBe(true);
    await waitFor(() => gets === 2, 5000, 'the GET stream reopened');
    expect(gaps).toBe(1);
    expect(u.hearsNotifications).toBe(true);
  });
});

// A call's timeout is judged after the event loop's next read (UpstreamBase.timerFired): a hub
// held up past it (a long callback, a loaded machine) reads the answer that came in time first.
// An answer the server compressed (though the hub asks for identity) is read then, but decoded
// on the thread pool a turn or more later: it was failed as unanswered meanwhile, and the health
// check's ping had the server marked down (hung) for an answer that had come.
describe('a hub held up past a timeout while the answer came in time', () => {
  it.each([
    ['a call', 'an answer as JSON', 'tools/call', 'identity'],
    ['a call', 'an answer compressed (gzip)', 'tools/call', 'gzip'],
    ["the health check's ping", 'an answer compressed (gzip)', 'ping', 'gzip'],
  ])('%s that got %s in time is not failed as unanswered', async (_who, _what, held, coding) => {
    const dir = tmpDir();
    const [asked, go, sent, pings] = ['asked', 'go', 'sent', 'pings'].map((f) => join(dir, f));
    // Its first `held` request is answered once the test says go (the test's event loop then held), the rest at once.
    const src = `const { appendFileSync, existsSync, writeFileSync } = require('node:fs');
const { gzipSync } = require('node:zlib');
let first = true;
const server = require('node:http').createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    const m = body ? JSON.parse(body) : {};
    if (m.id === undefined) return res.writeHead(202).end();
    const answer = (result, then) => {
      const text = JSON.stringify({ jsonrpc: '2.0', id: m.id, result });
      const coded = ${JSON.stringify(coding)} === 'gzip';
      res.writeHead(200, { 'content-type': 'application/json', ...(coded ? { 'content-encoding': 'gzip' } : {}) });
      res.end(coded ? gzipSync(text) : text, then);
    };
    if (m.method === 'initialize') return answer({ protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'held', version: '1' } });
    if (m.method === 'ping') appendFileSync(${JSON.stringify(pings)}, '.');
    if (m.method !== ${JSON.stringify(held)} || !first) return answer(m.method === 'tools/list' ? { tools: [] } : m.method === 'tools/call' ? { content: [{ type: 'text', text: 'ok' }] } : {});
    first = false;
    writeFileSync(${JSON.stringify(asked)}, '');
    const t = setInterval(() => existsSync(${JSON.stringify(go)}) && (clearInterval(t), answer(m.method === 'ping' ? {} : { content: [{ type: 'text', text: 'ok' }] }, () => writeFileSync(${JSON.stringify(sent)}, ''))), 5);
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));`;
    const child = spawn(process.execPath, ['-e', src], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<string>((r) => child.stdout.once('data', (d: Buffer) => r(d.toString().trim())));
      const u = make(spec(`http://127.0.0.1:${port}/mcp`, { era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 300 }));
      // Started with time to spare (a loaded machine can take 300 ms over the handshake), then held to 300 ms.
      await u.start();
      u.retime({ timeoutMs: 300, ...(held === 'ping' ? { healthCheckMs: 100 } : {}) });
      const call = held === 'ping' ? undefined : u.request('tools/call', { name: 'a' }).then(() => 'answered', (e: Error) => e.message);
      await waitFor(() => existsSync(asked), 10_000, `the ${held}`);
      // The hub's event loop held (in a callback run after the poll, as a long one of any kind
      // would be) until the answer is sent and its 300 ms are over: its timer is due before the read.
      await holdLoopAfterPoll(go, sent);
      expect(existsSync(sent)).toBe(true);
      if (call) {
        // Before, compressed: 'server "web" did not answer within 300 ms'.
        expect(await call).toBe('answered');
      } else {
        // Before: marked down, "the server is not answering (health check after 0 s idle: no answer within 300 ms, …)".
        const pingsSeen = () => readFileSync(pings, 'utf8').length;
        await waitFor(() => u.state !== 'ready' || pingsSeen() >= 2, 10_000, 'the next ping, or the server marked down');
        expect([u.state, u.lastError]).toEqual(['ready', undefined]);
      }
    } finally {
      child.kill();
    }
  });
});
