/**
 * A key whose call has ended is answered first, before the hub opens a retry's requestState or
 * asks the user to confirm: a client that sends its last request again (its response was lost)
 * gets the stored answer, not -32602 for a requestState used up, and is never asked to confirm
 * a call that has run (a decline would read as "not run"). Real hub, SDK v1 upstream with a
 * side-effect counter, policy.confirm on its counter_bump, raw requests of both eras.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { exportRows, fixture, LEGACY, modernCall, readCounter, SDK1, textOf, waitForReady, type Json } from './ledger-helpers.js';

let hub: HubProcess;
let dir: string;
const counter = () => readCounter(join(dir, 'counter.json'));
const CAPS = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } } };
const META_KEY = 'dev.switchyard/idempotency-key';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-ended-first-'));
  // A legacy client that is asked and does not answer hears so after 2 s (the test's bound).
  hub = await startHub({ policy: { confirm: ['f__counter_bump'], inputTimeoutMs: 2000 }, servers: { f: fixture(SDK1, dir) } }, { dir });
  await waitForReady(hub.url, ['f']);
}, 40_000);

afterAll(async () => {
  await hub?.stop();
});

const bump = (label: string) => ({ name: 'f__counter_bump', arguments: { label } });

describe('a keyed call that has ended, sent again', () => {
  it('the confirmed retry sent twice replays its answer; so does the call sent afresh, without asking again', async () => {
    const meta = { ...CAPS, [META_KEY]: 'ended-1' };
    const first = await modernCall(hub.url, 'c1', 'tools/call', bump('ended'), { meta });
    expect(first.body?.result?.resultType).toBe('input_required');
    const retry: Json = {
      ...bump('ended'),
      requestState: first.body!.result!.requestState,
      inputResponses: { 'switchyard/confirm': { action: 'accept', content: { confirm: true } } },
    };
    const ran = await modernCall(hub.url, 'c2', 'tools/call', retry, { meta });
    expect(ran.body?.result?.structuredContent).toEqual({ label: 'ended', count: 1 });
    // The response was lost: the same request again, its requestState used up.
    const again = await modernCall(hub.url, 'c3', 'tools/call', retry, { meta });
    expect(again.body?.error).toBeUndefined();
    expect(again.body?.result?.structuredContent).toEqual({ label: 'ended', count: 1 });
    // The call afresh with its key: the stored answer, not a new confirmation.
    const afresh = await modernCall(hub.url, 'c4', 'tools/call', bump('ended'), { meta });
    expect(afresh.body?.result?.resultType).toBe('complete');
    expect(afresh.body?.result?.structuredContent).toEqual({ label: 'ended', count: 1 });
    // Another call under the key is refused at once, not asked about.
    const other = await modernCall(hub.url, 'c5', 'tools/call', bump('other'), { meta });
    expect(textOf(other.body?.result)).toMatch(/was already used for this tool with other arguments/);
    expect(counter()).toEqual({ ended: 1 });
    const rows = (await exportRows(join(dir, 'ledger.db'))).filter((r) => r.idempotencyKey === 'ended-1');
    expect(rows.map((r) => [r.requestId, r.outcome])).toEqual([
      ['c1', 'input_required'], // asked for the user's confirmation: a round
      ['c2', 'ok'],
      ['c3', 'replayed'],
      ['c4', 'replayed'],
      ['c5', 'denied'],
    ]);
  }, 30_000);

  it('a legacy client that can be asked gets the stored answer of its key without being asked', async () => {
    const init = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: { elicitation: {} }, clientInfo: { name: 'ended-first', version: '1' } } }),
    });
    await init.text();
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY };
    await (await fetch(hub.url, { method: 'POST', headers: { 'content-type': 'application/json', ...session }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
    // Run once through the modern path (confirmed), then retried by the legacy client with the key.
    const meta = { ...CAPS, [META_KEY]: 'ended-2' };
    const asked = await modernCall(hub.url, 'l1', 'tools/call', bump('legacy'), { meta });
    const retry = { ...bump('legacy'), requestState: asked.body!.result!.requestState, inputResponses: { 'switchyard/confirm': { action: 'accept', content: { confirm: true } } } };
    expect((await modernCall(hub.url, 'l2', 'tools/call', retry, { meta })).body?.result?.structuredContent).toEqual({ label: 'legacy', count: 1 });
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session, 'idempotency-key': 'ended-2' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'l3', method: 'tools/call', params: bump('legacy') }),
    });
    const text = await res.text();
    expect(text).not.toContain('elicitation/create');
    expect(text).toContain('"structuredContent":{"label":"legacy","count":1}');
    expect(counter().legacy).toBe(1);
  }, 30_000);
});
