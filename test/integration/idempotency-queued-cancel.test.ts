/**
 * A keyed call cancelled before it left the hub (it waited for a slot of a busy server) frees
 * its key: nothing reached the upstream, so a retry with the key runs it, once. A keyed call
 * cancelled after it was sent keeps its key taken ("outcome unknown"): it may have run. Real
 * hub, an SDK v1 upstream limited to one request at a time, raw HTTP (the client goes away).
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';

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
});
