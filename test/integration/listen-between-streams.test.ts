/**
 * Updates a modern upstream says while the hub is between two of its listen streams must still
 * reach the clients subscribed to them, legacy (resources/subscribe) and modern (listen). The
 * real built hub, an SDK v2 (2.4.0) server over Streamable HTTP
 * (test/fixtures/catalog/sdk2-listen-gap.mjs), SDK v1 and v2 clients.
 *  - A stream replaced (a subscribe changed the filter): the change said just before the server
 *    took the new stream went on the old one only, and its bytes come after the new stream's
 *    acknowledgement (held back by the fixture, as a buffering proxy would).
 *  - The connection replaced (`servers restart`): the change said after the old connection's
 *    stream closed and before the new one's was acknowledged went on no stream at all.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { firstText, waitForReady } from '../helpers/wire.js';

const FIXTURE = 'test/fixtures/catalog/sdk2-listen-gap.mjs';
const doc = (n: string): string => `sdk2g://doc/${n}`;
let hub: HubProcess | undefined;
let up: HttpFixture | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
  await hub?.stop();
  await up?.stop();
  hub = up = undefined;
});

/** The first time `heard` holds `uri` (pushed to by a notification handler). */
function hearing(heard: string[], uri: string): { when: Promise<void>; push: (u: string) => void } {
  let done!: () => void;
  const when = new Promise<void>((r) => (done = r));
  return {
    when,
    push: (u) => {
      heard.push(u);
      if (u === uri) done();
    },
  };
}

/** Resolves `p`, or fails naming what was not heard within `ms`. */
async function within(p: Promise<unknown>, ms: number, what: string): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise<unknown>((_, reject) => (t = setTimeout(() => reject(new Error(`${what} not heard within ${ms} ms`)), ms)))]).finally(() => clearTimeout(t));
}

/** A legacy client subscribed to a, and a modern one listening to it; each says what it heard. */
async function subscribers(url: string): Promise<{ legacyHeard: string[]; modernHeard: string[]; both: Promise<[void, void]>; legacy: ClientV1 }> {
  const legacy = new ClientV1({ name: 'legacy-watcher', version: '1.0.0' }, { capabilities: {} });
  await legacy.connect(new TransportV1(new URL(url)));
  closing.push(() => legacy.close());
  const legacyHeard: string[] = [];
  const l = hearing(legacyHeard, doc('a'));
  legacy.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => l.push(n.params.uri));
  await legacy.listResources();
  expect(await legacy.subscribeResource({ uri: doc('a') })).toEqual({});
  const modern = new ClientV2({ name: 'modern-watcher', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await modern.connect(new TransportV2(new URL(url)));
  closing.push(() => modern.close());
  const modernHeard: string[] = [];
  const m = hearing(modernHeard, doc('a'));
  modern.setNotificationHandler('notifications/resources/updated', async (n) => m.push(String(n.params.uri)));
  const sub = await modern.listen({ resourceSubscriptions: [doc('a')] });
  closing.unshift(() => sub.close());
  expect(sub.honoredFilter.resourceSubscriptions).toEqual([doc('a')]);
  return { legacyHeard, modernHeard, both: Promise.all([l.when, m.when]), legacy };
}

describe('a modern upstream over HTTP, between two of the hub\'s listen streams', () => {
  it('a change said on the replaced stream just before the new one was taken, arriving after its acknowledgement, reaches both subscribers once', async () => {
    up = await startHttpFixture(FIXTURE, { GAP_WHEN: 'late', WATCHED_URI: doc('a'), TRIGGER_URI: doc('b') });
    hub = await startHub({ servers: { g: { url: up.url } } });
    await waitForReady(hub.url, ['g']);
    const s = await subscribers(hub.url);
    // Another client subscribes b: the hub's stream [a] is replaced by one with [a, b]. The server
    // says a updated as that stream's request comes in, on the old stream only, whose bytes it
    // holds back until the new stream's acknowledgement is written.
    const trigger = new ClientV1({ name: 'trigger', version: '1.0.0' }, { capabilities: {} });
    await trigger.connect(new TransportV1(new URL(hub.url)));
    closing.push(() => trigger.close());
    await trigger.listResources();
    // Answered once the new stream's acknowledgement came (it honours b).
    expect(await trigger.subscribeResource({ uri: doc('b') })).toEqual({});
    // The old stream's bytes went right after the acknowledgement: the hub was still reading it
    // (closed at the acknowledgement, the update was lost).
    await within(s.both, 10_000, 'the update said on the replaced stream');
    expect(firstText(await trigger.callTool({ name: 'g__said', arguments: {} }))).toBe('released');
    // Once each: a marker said after it, on the same stream as any copy, comes after every copy.
    await trigger.callTool({ name: 'g__touch', arguments: { uri: doc('a') } });
    await expect.poll(() => [s.legacyHeard.length, s.modernHeard.length], { timeout: 5000, interval: 20 }).toEqual([2, 2]);
    expect({ legacy: s.legacyHeard, modern: s.modernHeard }).toEqual({ legacy: [doc('a'), doc('a')], modern: [doc('a'), doc('a')] });
  }, 60_000);

  it('`servers restart`: once the new connection\'s stream is acknowledged, subscribers are told the resources they watch updated', async () => {
    up = await startHttpFixture(FIXTURE, { GAP_WHEN: 'gap', WATCHED_URI: doc('a') });
    hub = await startHub({ servers: { g: { url: up.url } } });
    await waitForReady(hub.url, ['g']);
    const s = await subscribers(hub.url);
    // Nothing is said at the first stream's acknowledgement: a marker said after it comes alone.
    await s.legacy.callTool({ name: 'g__touch', arguments: { uri: doc('m') } });
    const restarted = await fetch(new URL('/admin/servers/g/restart', hub.url), { method: 'POST', signal: AbortSignal.timeout(10_000) });
    expect(restarted.status).toBe(200);
    await waitForReady(hub.url, ['g']);
    // The server said a updated once the old connection's stream closed, before the new one's was open.
    await expect.poll(async () => firstText(await s.legacy.callTool({ name: 'g__said', arguments: {} })), { timeout: 10_000, interval: 50 }).toBe('said');
    await within(s.both, 10_000, 'an update after the gap');
    // Once each: a marker said on the new stream after its acknowledgement comes after it.
    await s.legacy.callTool({ name: 'g__touch', arguments: { uri: doc('a') } });
    await expect.poll(() => [s.legacyHeard.length, s.modernHeard.length], { timeout: 5000, interval: 20 }).toEqual([2, 2]);
    expect({ legacy: s.legacyHeard, modern: s.modernHeard }).toEqual({ legacy: [doc('a'), doc('a')], modern: [doc('a'), doc('a')] });
    expect(hub.logs.filter((l) => l.includes('listening again after a gap'))).toHaveLength(1);
  }, 60_000);
});
