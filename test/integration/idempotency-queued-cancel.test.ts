/**
 * A keyed call cancelled before it left the hub (it waited for a slot of a busy server) frees
 * its key: nothing reached the upstream, so a retry with the key runs it, once. A keyed call
 * cancelled after it was sent keeps its key taken ("outcome unknown"): it may have run. A
 * duplicate waiting for the first call with its key stops at its own cancellation. Real hub, an
 * SDK v1 upstream limited to one request at a time, raw HTTP (the client goes away or cancels).
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, legacySession, modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';
import { waitForRows } from './ledger-helpers.js';

describe('a keyed call cancelled while it waits for a busy server', () => {
  let hub: HubProcess;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-queued-cancel-'));
  const counter = join(dir, 'counter.json');
  const count = (label: string): number => (existsSync(counter) ? ((JSON.parse(readFileSync(counter, 'utf8')) as Record<string, number>)[label] ?? 0) : 0);

  beforeAll(async () => {
    hub = await startHub({ servers: { a: { ...nodeServer('test/fixtures/servers/sdk1-server.mjs', [], { COUNTER_FILE: counter }), maxConcurrent: 1, maxQueue: 4 } } }, { dir });
    await waitForReady(hub.url, ['a']);
  });
  afterAll(async () => void (await hub?.stop()));

  const call = (id: string, name: string, args: Record<string, unknown>, key?: string, signal?: AbortSignal) =>
    fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('tools/call', name), 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify(modernBody(id, 'tools/call', { name, arguments: args })),
      signal,
    });

  it('frees its key: a retry runs it once', async () => {
    const busy = call('busy', 'a__slow', { ms: 1500 });
    await new Promise((r) => setTimeout(r, 200));
    const ac = new AbortController();
    const queued = call('queued', 'a__counter_bump', { label: 'q' }, 'queued-key', ac.signal).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    ac.abort(); // the client goes away while its call waits for the slot
    await queued;
    await busy;
    expect(count('q')).toBe(0);
    const retry = await post(hub.url, modernBody('retry', 'tools/call', { name: 'a__counter_bump', arguments: { label: 'q' } }), { ...modernHeaders('tools/call', 'a__counter_bump'), 'idempotency-key': 'queued-key' });
    expect(retry.body?.result?.isError, retry.text).toBeFalsy();
    expect(count('q')).toBe(1);
  });

  it('a call cancelled after it was sent keeps its key taken', async () => {
    const ac = new AbortController();
    const sent = call('sent', 'a__slow', { ms: 800 }, 'sent-key', ac.signal).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 300));
    ac.abort();
    await sent;
    const retry = await post(hub.url, modernBody('retry-2', 'tools/call', { name: 'a__slow', arguments: { ms: 800 } }), { ...modernHeaders('tools/call', 'a__slow'), 'idempotency-key': 'sent-key' });
    expect(JSON.stringify(retry.body)).toMatch(/unknown/i);
  });

  it('a duplicate waiting for the first call with its key stops at its own cancellation; the first goes on', async () => {
    const a = await legacySession(hub.url);
    const b = await legacySession(hub.url);
    const args = { name: 'a__slow', arguments: { ms: 800 }, _meta: { 'dev.switchyard/idempotency-key': 'shared-key' } };
    let firstDone = false;
    const first = a.request(1, 'tools/call', args).then((r) => ((firstDone = true), r));
    await new Promise((r) => setTimeout(r, 200));
    const duplicate = b.request(7, 'tools/call', args).then((r) => ({ r, firstDoneThen: firstDone }));
    await new Promise((r) => setTimeout(r, 200));
    const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': b.sessionId, 'mcp-protocol-version': LEGACY_VERSION };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'not needed' } }, h);
    const dup = await duplicate;
    // Answered at its cancellation with nothing (no response to a cancelled request), not held until the first ends.
    expect(dup.firstDoneThen).toBe(false);
    expect(dup.r.body, dup.r.text).toBeUndefined();
    const one = await first;
    expect(one.body?.result?.isError, one.text).toBeFalsy();
    const rows = await waitForRows(join(dir, 'ledger.db'), { tool: 'a__slow' }, (rs) => rs.filter((r) => r.idempotencyKey === 'shared-key').length === 2);
    const byId = Object.fromEntries(rows.filter((r) => r.idempotencyKey === 'shared-key').map((r) => [r.requestId, r.outcome]));
    expect(byId).toEqual({ '1': 'ok', '7': 'cancelled' });
  });
});
