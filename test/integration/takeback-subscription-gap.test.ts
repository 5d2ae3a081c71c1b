/**
 * A legacy (2025-11-25) HTTP session a restarted hub takes back comes back with its resource
 * subscriptions (legacy-session-resume.test.ts); but nothing watched them while the hub was down,
 * and an update said then was not heard. As after the hub's other gaps in watching
 * (subscription-gap-eras.test.ts), each URI it subscribed again is said updated, once per
 * take-back, on the session's GET stream once that is open again: here the SDK 1.x client's
 * first request after the restart is a POST, and its GET stream comes back only after it.
 * A URI that routes nowhere any more is not said updated; a session that held no subscriptions,
 * and a modern client listening to the same URI, hear nothing of it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, startHubOnFreePort, type HubProcess } from '../helpers/hub-process.js';
import { firstText, LEGACY_VERSION, legacySession, waitForReady, type Json } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

let hub: HubProcess | undefined;
const closing: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await Promise.resolve(close()).catch(() => undefined);
  await hub?.stop();
  hub = undefined;
});

/**
 * A fetch for the SDK client whose GET requests (its standalone stream) wait while `hold` is
 * set: the test decides when the stream comes back after the restart. `cut` ends the GET
 * stream open now (the client reconnects with Last-Event-ID); `opened` counts GETs answered 2xx.
 */
function gatedFetch(): { fetch: typeof fetch; hold(): void; release(): void; cut(): void; opened: () => number } {
  let held: Promise<void> | undefined;
  let release = (): void => undefined;
  let current: AbortController | undefined;
  let opened = 0;
  const gated: typeof fetch = async (input, init) => {
    if (init?.method !== 'GET') return fetch(input, init);
    if (held) await held;
    const ac = new AbortController();
    current = ac;
    init.signal?.addEventListener('abort', () => ac.abort(), { once: true });
    const res = await fetch(input, { ...init, signal: ac.signal });
    if (res.ok) opened++;
    return res;
  };
  return {
    fetch: gated,
    hold: () => void (held = new Promise((r) => (release = r))),
    release: () => {
      held = undefined;
      release();
    },
    cut: () => current?.abort(),
    opened: () => opened,
  };
}

/** A raw legacy session's GET stream, its resources/updated collected as they come (list changes may come too). */
async function rawStream(url: string, sid: string): Promise<{ updates: Json[]; close(): void }> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION }, signal: ac.signal });
  expect(res.status).toBe(200);
  const updates: Json[] = [];
  // Read at once: a locked body is not cancelled when the test holds no reference to it (keepOpen).
  void (async () => {
    const dec = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += dec.decode(chunk, { stream: true });
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        for (const l of buf.slice(0, i).split('\n')) {
          const msg = l.startsWith('data:') && l.slice(5).trim() !== '' ? (JSON.parse(l.slice(5)) as Json) : undefined;
          if (msg?.method === 'notifications/resources/updated') updates.push(msg);
        }
        buf = buf.slice(i + 2);
      }
    }
  })().catch(() => undefined);
  return { updates, close: () => ac.abort() };
}

describe('a legacy session a restarted hub takes back with resource subscriptions', () => {
  it('hears each URI it subscribed said updated once its GET stream is open again, after a POST took it back; once per take-back; not a URI that routes nowhere; nobody else hears it', async () => {
    const m = nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'test://x' });
    const n = nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'gone://doc' });
    ({ hub } = await startHubOnFreePort({ servers: { m, n } }));
    const { dir, port, url } = hub;
    await waitForReady(url, ['m', 'n']);

    const gate = gatedFetch();
    const updates: string[] = [];
    // The server's retry (1 s) spaces its reconnections; as many as it takes while the hub is down.
    const transport = new TransportV1(new URL(url), { fetch: gate.fetch, reconnectionOptions: { initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1, maxRetries: 1_000 } });
    const c = new ClientV1({ name: 'takeback-v1', version: '1.0.0' });
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (note) => void updates.push(note.params.uri));
    await c.connect(transport);
    closing.push(() => c.close());
    const sid = transport.sessionId!;
    await c.listResources();
    expect(await c.subscribeResource({ uri: 'test://x' })).toEqual({});
    expect(await c.subscribeResource({ uri: 'gone://doc' })).toEqual({});
    // A session that holds no subscriptions.
    const bare = await legacySession(url);
    await expect.poll(() => gate.opened(), { timeout: 10_000, interval: 20 }).toBe(1);

    gate.hold();
    expect(await hub.stop()).toBe(0);
    // Restarted on the same ledger, without the server of gone://doc.
    hub = await startHub({ servers: { m } }, { dir, port });
    await waitForReady(url, ['m']);

    // The first request after the restart is a POST: it takes the session back. The server's
    // updates while no GET stream is open (the touch's, once subscribed again) are not heard.
    const touch = async () => String(firstText((await c.callTool({ name: 'm__touch', arguments: { uri: 'test://x', report: true } })) as never));
    await expect.poll(touch, { timeout: 10_000, interval: 50 }).toBe('told 1');
    expect(hub.logs.filter((l) => l.includes('legacy session taken back (') && l.includes('"subscriptions":2'))).toHaveLength(1);
    expect(updates).toEqual([]);
    // Taken back too, by its POST, and its stream open before the client's: it held nothing.
    expect((await bare.request(1, 'ping')).status).toBe(200);
    const bareStream = await rawStream(url, bare.sessionId);
    closing.push(() => bareStream.close());
    // A modern client listening to the same URI.
    const modernUpdates: string[] = [];
    const modern = new ClientV2({ name: 'takeback-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(url)));
    closing.push(() => modern.close());
    modern.setNotificationHandler('notifications/resources/updated', async (note) => void modernUpdates.push(String(note.params.uri)));
    const listening = await modern.listen({ resourceSubscriptions: ['test://x'] });
    closing.push(() => listening.close());
    expect(listening.honoredFilter.resourceSubscriptions).toEqual(['test://x']);

    // Its GET stream back: the URI is said updated there; gone://doc routes nowhere now.
    gate.release();
    await expect.poll(() => updates, { timeout: 10_000, interval: 20 }).toEqual(['test://x']);
    expect(gate.opened()).toBe(2);
    expect(transport.sessionId).toBe(sid);

    // Cut and resumed (Last-Event-ID): not said again; a real update comes as before.
    gate.cut();
    await expect.poll(() => gate.opened(), { timeout: 10_000, interval: 20 }).toBe(3);
    expect(await touch()).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5_000, interval: 20 }).toEqual(['test://x', 'test://x']);
    await expect.poll(() => modernUpdates, { timeout: 5_000, interval: 20 }).toEqual(['test://x']);
    await c.ping();
    expect(updates).toEqual(['test://x', 'test://x']);
    expect(hub.logs.filter((l) => l.includes('subscribed resources of a session taken back said updated'))).toHaveLength(1);
    // Neither the session that held nothing nor the modern client heard the take-back's.
    expect(bareStream.updates).toEqual([]);
    expect(modernUpdates).toEqual(['test://x']);
  }, 60_000);
});

describe('a URI the session taken back unsubscribes before its GET stream is open', () => {
  it('is not said updated; the others are', async () => {
    const m = nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'test://x' });
    const k = nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'test://left' });
    const config = { servers: { m, k } };
    ({ hub } = await startHubOnFreePort(config));
    const { dir, port, url } = hub;
    await waitForReady(url, ['m', 'k']);
    const s = await legacySession(url);
    expect((await s.request(1, 'resources/list')).status).toBe(200);
    for (const [id, uri] of [[2, 'test://x'], [3, 'test://left']] as const) expect((await s.request(id, 'resources/subscribe', { uri })).body?.result).toEqual({});
    expect(await hub.stop()).toBe(0);

    hub = await startHub(config, { dir, port });
    await waitForReady(url, ['m', 'k']);
    // Its first request after the restart takes it back.
    expect((await s.request(4, 'resources/unsubscribe', { uri: 'test://left' })).body?.result).toEqual({});
    const stream = await rawStream(url, s.sessionId);
    closing.push(() => stream.close());
    await expect.poll(() => stream.updates, { timeout: 10_000, interval: 20 }).toEqual([{ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'test://x' } }]);
    expect((await s.request(5, 'ping')).status).toBe(200);
    expect(stream.updates).toHaveLength(1);
  }, 60_000);
});
