/**
 * A modern upstream's listen stream replaced by a new one (a subscribe changed the hub's
 * filter): a change the server says while both are open, on both of them, reaches each
 * subscribed client once, legacy and modern. The real built hub, an SDK v2 server over stdio
 * (test/fixtures/catalog/sdk2-replaced-listen.mjs), SDK v1 and v2 clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const FIXTURE = 'test/fixtures/catalog/sdk2-replaced-listen.mjs';
const doc = (n: string): string => `sdk2r://doc/${n}`;
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { rep: nodeServer(FIXTURE, [], { REPLACED_URI: doc('a'), TRIGGER_URI: doc('b') }) } });
  await waitForReady(hub.url, ['rep']);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
});

describe("a modern upstream's listen stream replaced while the server says a change", () => {
  it('the update reaches a legacy and a modern subscriber once each', async () => {
    // Legacy: subscribes a and its marker m1 (the hub's base stream is then [a, m1]).
    const legacy = new ClientV1({ name: 'legacy-watcher', version: '1.0.0' }, { capabilities: {} });
    await legacy.connect(new TransportV1(new URL(hub.url)));
    const legacyHeard: string[] = [];
    legacy.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void legacyHeard.push(n.params.uri));
    await legacy.listResources();
    expect(await legacy.subscribeResource({ uri: doc('a') })).toEqual({});
    expect(await legacy.subscribeResource({ uri: doc('m1') })).toEqual({});
    // Modern: listens to a and its marker m2 (m2 a stream of its own).
    const modern = new ClientV2({ name: 'modern-watcher', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(hub.url)));
    const modernHeard: string[] = [];
    modern.setNotificationHandler('notifications/resources/updated', async (n) => void modernHeard.push(String(n.params.uri)));
    const sub = await modern.listen({ resourceSubscriptions: [doc('a'), doc('m2')] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual([doc('a'), doc('m2')]);
    // A third client subscribes b: the hub's streams are replaced by one with the whole filter,
    // and the server says a updated as it acknowledges it, while the old streams are still open.
    const trigger = new ClientV1({ name: 'trigger', version: '1.0.0' }, { capabilities: {} });
    await trigger.connect(new TransportV1(new URL(hub.url)));
    await trigger.listResources();
    expect(await trigger.subscribeResource({ uri: doc('b') })).toEqual({});
    await expect.poll(() => legacyHeard, { timeout: 5000, interval: 20 }).toContain(doc('a'));
    // Said after it by the same server on the same pipe: once a marker is here, every copy of a
    // that the hub passed on is here too.
    await trigger.callTool({ name: 'rep__touch', arguments: { uri: doc('m1') } });
    await trigger.callTool({ name: 'rep__touch', arguments: { uri: doc('m2') } });
    await expect.poll(() => legacyHeard, { timeout: 5000, interval: 20 }).toContain(doc('m1'));
    await expect.poll(() => modernHeard, { timeout: 5000, interval: 20 }).toContain(doc('m2'));
    expect({ legacyHeard, modernHeard }).toEqual({ legacyHeard: [doc('a'), doc('m1')], modernHeard: [doc('a'), doc('m2')] });
    // Once because the new stream's copy stood for the old one's, not because the old one's is
    // still held (it would be passed on later).
    expect(hub.logs.filter((l) => l.includes('said again by another: passed on once'))).toHaveLength(1);
    expect(hub.logs.filter((l) => l.includes('not said again by another'))).toHaveLength(0);
    await sub.close();
    await Promise.all([legacy.close(), modern.close(), trigger.close()]);
  }, 30_000);
});
