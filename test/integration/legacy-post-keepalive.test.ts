/**
 * A legacy call's answer stream that waits (here for the user's answer to a relayed question)
 * sends SSE comments, as the GET stream does: a proxy that cuts a response quiet for 60 s would
 * otherwise end the call, since the hub cannot resume a POST's stream. Real built hub, the SDK
 * v1 legacy fixture upstream, raw HTTP client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, parseMessages, post, waitForReady } from '../helpers/wire.js';

/** The comments' interval of the hub under test (SWITCHYARD_KEEPALIVE_MS; 15 s by default), so that the test does not wait 15 s. */
const KEEP_ALIVE_MS = 500;

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { leg: nodeServer('test/fixtures/translation/legacy-server.mjs') } }, { env: { SWITCHYARD_KEEPALIVE_MS: String(KEEP_ALIVE_MS) } });
  await waitForReady(hub.url, ['leg']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe("a legacy call's answer stream waiting for the user", () => {
  it('sends a keep-alive comment while nothing else is said, and still answers', async () => {
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: { elicitation: {} }, clientInfo: { name: 'slow-user', version: '1' } } }, base);
    const h = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    const ac = new AbortController();
    const res = await fetch(hub.url, { method: 'POST', headers: h, signal: ac.signal, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who: 'slow' } } }) });
    const heard = heardSoFar(res);
    try {
      await expect.poll(() => heard(), { timeout: 5_000 }).toContain('elicitation/create');
      // The streams' interval (here 500 ms), with slack for a loaded machine.
      await expect.poll(() => heard(), { timeout: 10_000, interval: 100 }).toContain(': keep-alive');
      const question = parseMessages('text/event-stream', heard().replace(/^: keep-alive\n\n/gm, '')).find((m) => m.method === 'elicitation/create')!;
      await post(hub.url, { jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: 'Sloane' } } }, h);
      await expect.poll(() => heard(), { timeout: 5_000 }).toContain('Sloane');
    } finally {
      ac.abort();
    }
  }, 40_000);
});
