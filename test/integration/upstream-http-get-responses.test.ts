/**
 * A legacy (2025-11-25) HTTP upstream that sends a JSON-RPC response on its standalone GET
 * stream. That stream carries the server's requests and notifications; a response may come
 * there only when a request's own stream is resumed (digest §6.2), which the hub does with a
 * GET of its own. A response on it answers nothing: dropped (warn), the call answered by its
 * own POST stream. A raw server in this process, on a port of 24000-24999.
 */
import http, { type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createUpstream, type HttpUpstream } from '../../src/upstream/index.js';
import { listenInRange } from '../helpers/port-range.js';
import { captureLogger, waitFor } from './upstream-helpers.js';

const servers: http.Server[] = [];
const open: HttpUpstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((u) => u.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

const sse = (m: unknown): string => `data: ${JSON.stringify(m)}\n\n`;

describe('legacy HTTP: a response on the standalone GET stream', () => {
  it('is dropped with a warning, not taken as the answer of the call in flight with its id; the stream goes on', async () => {
    let get: ServerResponse | undefined;
    let callId: number | undefined;
    let answer: ((text: string) => void) | undefined;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(': open\n\n');
          get = res;
          return;
        }
        if (req.method === 'DELETE') return void res.writeHead(200).end();
        const msg = JSON.parse(body);
        const json = (status: number, m: unknown, headers: Record<string, string> = {}): void => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers });
          res.end(JSON.stringify(m));
        };
        if (msg.method === 'initialize')
          return json(200, { jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'get-responder', version: '1' } } }, { 'mcp-session-id': 's-1' });
        if (req.headers['mcp-session-id'] !== 's-1') return json(400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' } });
        if (msg.id === undefined) return void res.writeHead(202).end();
        // tools/call: an SSE answer held open until the test lets it answer.
        callId = msg.id;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': started\n\n');
        answer = (text) => res.end(sse({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text }] } }));
      });
    });
    servers.push(server);
    const port = await listenInRange(server);
    const { log, records } = captureLogger();
    const u = createUpstream(
      { id: 'web', url: `http://127.0.0.1:${port}/mcp`, era: 'auto', timeoutMs: 5000, probeTimeoutMs: 10_000, maxFrameBytes: 1 << 20 },
      log,
      { backoff: { baseMs: 50 } },
    ) as HttpUpstream;
    open.push(u);
    await u.start();
    await waitFor(() => get !== undefined, 3000, 'the GET stream');
    const notes: unknown[] = [];
    u.on('notification', (n) => notes.push(n));
    let settled: string | undefined;
    const call = u.request('tools/call', { name: 'work', arguments: {} }).then(
      (r) => (settled = (r.content as { text: string }[])[0].text),
      (err: Error) => (settled = `error: ${err.message}`),
    );
    await waitFor(() => callId !== undefined, 3000, 'the call at the server');
    // A response for the call in flight, and one the hub refuses (nested too deep), on the GET stream.
    get!.write(sse({ jsonrpc: '2.0', id: callId, result: { content: [{ type: 'text', text: 'forged on the GET stream' }] } }));
    get!.write(`data: {"jsonrpc":"2.0","id":${callId},"result":{"x":${'['.repeat(1200)}${']'.repeat(1200)}}}\n\n`);
    get!.write(sse({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }));
    await waitFor(() => notes.length === 1, 3000, 'the notification after them');
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBeUndefined();
    answer!('own answer');
    await call;
    expect(settled).toBe('own answer');
    const warned = records.filter((r) => String(r.msg).includes('dropped a response on the standalone GET stream'));
    expect(warned.map((r) => r.id)).toEqual([callId, callId]);
    expect(warned.every((r) => r.level === 40)).toBe(true);
  });
});
