/**
 * A 2026-07-28 HTTP server that sends a log line on a call's answer stream after the call's
 * response (a server logging as it cleans up). The line is about that call: a legacy client's
 * lines are session-wide (digest §4), so through a real hub it reaches the client on its
 * session's GET stream, the call's own stream being closed by then. Real hub, raw node:http
 * upstream (the misbehaviour), SDK v1 client.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const MODERN = '2026-07-28';
let hub: HubProcess;
let upstream: http.Server;

beforeAll(async () => {
  upstream = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const msg = JSON.parse(body) as { id?: number; method?: string };
    const json = (m: Record<string, unknown>): void => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, ...m }));
    if (msg.method === 'server/discover') return json({ result: { resultType: 'complete', supportedVersions: [MODERN], capabilities: { tools: {}, logging: {} }, ttlMs: 0, cacheScope: 'public' } });
    if (msg.method === 'tools/list')
      return json({ result: { resultType: 'complete', tools: [{ name: 'work', inputSchema: { type: 'object' } }], ttlMs: 0, cacheScope: 'public' } });
    if (msg.method !== 'tools/call') return void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } }));
    const event = (m: Record<string, unknown>): string => `data: ${JSON.stringify({ jsonrpc: '2.0', ...m })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(event({ id: msg.id, result: { resultType: 'complete', content: [{ type: 'text', text: 'done' }] } }));
    // After the hub has answered its client (the answer's stream closed): the line comes late.
    setTimeout(() => res.end(event({ method: 'notifications/message', params: { level: 'warning', data: 'cleanup after work' } })), 200);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
  hub = await startHub({ servers: { m: { url, era: 'auto', healthCheckMs: 0 } } });
  await waitForReady(hub.url, ['m']);
}, 30_000);

afterAll(async () => {
  if (hub) expect(await hub.stop()).toBe(0);
  upstream?.closeAllConnections();
  upstream?.close();
});

describe("a log line a modern server sends after a call's answer", () => {
  it("reaches the legacy client that made the call, on its session's GET stream", async () => {
    const logs: Record<string, unknown>[] = [];
    const c = new Client({ name: 'late-log', version: '1.0.0' }, { capabilities: {} });
    c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      await c.setLoggingLevel('info');
      const r = await c.callTool({ name: 'm__work', arguments: {} });
      expect((r.content as { text: string }[])[0]!.text).toBe('done');
      expect(logs).toEqual([]);
      await expect.poll(() => logs, { timeout: 5000 }).toEqual([expect.objectContaining({ level: 'warning', data: 'cleanup after work' })]);
    } finally {
      await c.close();
    }
  });
});
