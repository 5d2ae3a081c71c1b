/**
 * A legacy session is served by every hub given the same key (docs/RELIABILITY.md, "Several
 * hubs behind one address"), and by a hub restarted: each holds the session in an object of its
 * own. The questions each relays to the client (elicitation here) must not share ids across
 * them: an answer a load balancer sends to the other hub must be dropped there, never taken as
 * the answer to that hub's own question of the same session. Two real built hubs, one key, the
 * SDK v1 legacy fixture upstream, raw HTTP for the client.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, parseMessages, post, waitForReady, type RpcMessage } from '../helpers/wire.js';

const KEY = randomBytes(32).toString('hex');
const hubs: HubProcess[] = [];
beforeAll(async () => {
  const config = { servers: { leg: nodeServer('test/fixtures/translation/legacy-server.mjs') } };
  hubs.push(...(await Promise.all([startHub(config, { env: { SWITCHYARD_STATE_KEY: KEY } }), startHub(config, { env: { SWITCHYARD_STATE_KEY: KEY } })])));
  await Promise.all(hubs.map((h) => waitForReady(h.url, ['leg'])));
}, 60_000);
afterAll(async () => void (await Promise.all(hubs.map((h) => h.stop()))));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A call whose answer streams; resolves with the first message it carries (the question) and the rest as it comes. */
async function askingCall(url: string, headers: Record<string, string>, id: string, who: string) {
  const ac = new AbortController();
  const res = await fetch(url, { method: 'POST', headers, signal: ac.signal, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who } } }) });
  const heard = heardSoFar(res);
  // Whole events only: the stream may be cut mid-event when read.
  const messages = (): RpcMessage[] => {
    const text = heard();
    return parseMessages('text/event-stream', text.slice(0, text.lastIndexOf('\n\n') + 1));
  };
  for (let i = 0; i < 200 && messages().length === 0; i++) await sleep(50);
  return { question: messages()[0]!, messages, abort: () => ac.abort() };
}

describe('questions of one legacy session asked by two hubs', () => {
  it('have ids of their own: an answer sent to the other hub answers nothing there', async () => {
    const [a, b] = hubs as [HubProcess, HubProcess];
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await post(a.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: { elicitation: {} }, clientInfo: { name: 'behind-a-balancer', version: '1' } } }, base);
    const h = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
    await post(a.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);

    const onA = await askingCall(a.url, h, 'on-a', 'alice');
    const onB = await askingCall(b.url, h, 'on-b', 'bob');
    expect(onA.question).toMatchObject({ method: 'elicitation/create' });
    expect(onB.question).toMatchObject({ method: 'elicitation/create' });
    expect(onA.question.id).not.toEqual(onB.question.id);

    // The client answers A's question; the balancer sends the POST to B.
    const stray = await post(b.url, { jsonrpc: '2.0', id: onA.question.id, result: { action: 'accept', content: { name: 'meant-for-alice' } } }, h);
    expect(stray.status).toBe(202);
    await sleep(500);
    // B's question is still open: its call has not ended with A's answer.
    expect(onB.messages().length, JSON.stringify(onB.messages())).toBe(1);

    // Each hub's own answer still reaches its question.
    await post(b.url, { jsonrpc: '2.0', id: onB.question.id, result: { action: 'accept', content: { name: 'bob-answer' } } }, h);
    await post(a.url, { jsonrpc: '2.0', id: onA.question.id, result: { action: 'accept', content: { name: 'alice-answer' } } }, h);
    for (let i = 0; i < 100 && (onA.messages().length < 2 || onB.messages().length < 2); i++) await sleep(50);
    expect(JSON.stringify(onB.messages().at(-1))).toContain('bob-answer');
    expect(JSON.stringify(onB.messages().at(-1))).not.toContain('meant-for-alice');
    expect(JSON.stringify(onA.messages().at(-1))).toContain('alice-answer');
    onA.abort();
    onB.abort();
  }, 60_000);
});
