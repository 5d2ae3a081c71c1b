/**
 * A legacy stdio upstream's log line comes with no word of the call it is about. While the
 * connection has carried one principal's calls alone, the line is that principal's whichever of
 * its calls it is about: with several of them in flight it reaches each, once per legacy session
 * (its log lines are session-wide), instead of none. The real built hub without authentication
 * (one principal), an SDK v1 upstream that logs after answering, raw legacy sessions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, post, waitForReady } from '../helpers/wire.js';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { late: nodeServer('test/fixtures/servers/legacy-late-log.mjs') } });
  await waitForReady(hub.url, ['late']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

async function session(): Promise<(id: number, name: string, args: Record<string, unknown>) => Promise<string[]>> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'overlap', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  // The log lines that came on the call's answer stream.
  return async (id, name, args) =>
    (await post(hub.url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, h)).messages
      .filter((m) => m.method === 'notifications/message')
      .map((m) => String((m.params as { data?: unknown }).data));
}

describe('a legacy stdio upstream log line while several calls of one principal are in flight', () => {
  it('reaches each legacy session with a call in flight, once', async () => {
    const a = await session();
    const b = await session();
    // Answered at once; its line comes 800 ms later, while the three waits below run.
    expect(await a(1, 'late__log_later', { text: 'overlap', delay: 800 })).toEqual([]);
    const [a1, a2, b1] = await Promise.all([a(2, 'late__wait', { ms: 3000 }), a(3, 'late__wait', { ms: 3000 }), b(1, 'late__wait', { ms: 3000 })]);
    // Session a had two calls in flight: the line came on one of their streams, not on both.
    expect([...a1, ...a2]).toEqual(['after:overlap']);
    expect(b1).toEqual(['after:overlap']);
  }, 30_000);
});
