/**
 * A legacy client that declared elicitation but posts a call with `Accept: application/json`
 * cannot be asked anything on that answer (a server → client request needs the SSE stream).
 * The hub refuses the upstream's question at once instead of leaving the call waiting for the
 * upstream's own timeout. The real built hub, the SDK v1 translation fixture, a raw session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, parseMessages, post, waitForReady } from '../helpers/wire.js';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { leg: nodeServer('test/fixtures/translation/legacy-server.mjs') } });
  await waitForReady(hub.url, ['leg']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('a question for a client that takes only JSON answers', () => {
  it('is refused at once, and the call ends with that reason', async () => {
    const both = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: { elicitation: {} }, clientInfo: { name: 'json-only', version: '1' } } }, both);
    const h = { 'content-type': 'application/json', accept: 'application/json', 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    const t0 = Date.now();
    const r = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who: 'json' } } }, h);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r.headers.get('content-type')).toMatch(/application\/json/);
    expect(JSON.stringify(r.body)).toMatch(/Accept header does not take text\/event-stream/);
  }, 20_000);
});

describe('an Accept header read as RFC 9110 reads it', () => {
  async function session(): Promise<Record<string, string>> {
    const both = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: { elicitation: {} }, clientInfo: { name: 'mixed-case', version: '1' } } }, both);
    const h = { ...both, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    return h;
  }

  it('takes media types in any case: the client is asked on its stream, and gets its GET stream', async () => {
    const h = { ...(await session()), accept: 'Application/JSON, Text/Event-Stream' };
    const ac = new AbortController();
    const res = await fetch(hub.url, { method: 'POST', headers: h, signal: ac.signal, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who: 'mixed' } } }) });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const heard = heardSoFar(res);
    await expect.poll(() => heard(), { timeout: 5_000 }).toContain('elicitation/create');
    const question = parseMessages('text/event-stream', heard()).find((m) => m.method === 'elicitation/create')!;
    await post(hub.url, { jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { name: 'Casey' } } }, h);
    await expect.poll(() => heard(), { timeout: 5_000 }).toContain('Casey');
    ac.abort();

    const get = new AbortController();
    const stream = await fetch(hub.url, { headers: { ...h, accept: 'Text/Event-Stream' }, signal: get.signal });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    get.abort();
  }, 20_000);

  it('takes q=0 as a refusal of the stream', async () => {
    const h = { ...(await session()), accept: 'application/json, text/event-stream;q=0' };
    const r = await post(hub.url, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who: 'q0' } } }, h);
    expect(r.headers.get('content-type')).toMatch(/application\/json/);
    expect(JSON.stringify(r.body)).toMatch(/Accept header does not take text\/event-stream/);
  }, 20_000);
});
