/**
 * What a server puts in the `_meta` of its `notifications/resources/updated` is the server's to
 * its subscribers (digest §8.4: third-party keys pass), whichever era the server and the client
 * speak; only the protocol's own keys are the hub's (the subscription id names the client's listen
 * stream, not the hub's stream upstream). Real fixture upstreams of both eras, the real built hub,
 * the SDK v2 client (2026-07-28 listen stream) and the SDK v1 client (2025-11-25 subscribe).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady, type Json } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    servers: {
      leg: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'leg://doc' }),
      mod: nodeServer(MUTABLE, [], { ERA: 'modern', DOC_URI: 'mod://doc' }),
    },
  });
  await waitForReady(hub.url, ['leg', 'mod'], 30_000);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

/** The server's own words on the update: keys of its own vendor's. */
const metaOf = (server: string): Json => ({ 'com.example/changed-by': `${server}-editor`, 'com.example/revision': 7 });

describe('the _meta of an upstream resources/updated', () => {
  it('reaches a 2026-07-28 listen stream with its third-party keys, under the stream’s own subscription id', async () => {
    const c = new ClientV2({ name: 'update-meta-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new TransportV2(new URL('/mcp', hub.url)));
    const updates: Json[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(n.params as Json));
    const sub = await c.listen({ resourceSubscriptions: ['leg://doc', 'mod://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['leg://doc', 'mod://doc']);
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc', meta: metaOf('leg') } });
    await c.callTool({ name: 'mod__touch', arguments: { uri: 'mod://doc', meta: metaOf('mod') } });
    await expect.poll(() => updates.length, { timeout: 5000, interval: 20 }).toBe(2);
    const byUri = Object.fromEntries(updates.map((u) => [u.uri, u._meta as Json]));
    const ids = new Set(updates.map((u) => (u._meta as Json)[SUBSCRIPTION_ID]));
    // One id, the client's listen stream's (the SDK routes on it): not the hub's own stream to `mod`.
    expect(ids.size).toBe(1);
    expect(typeof [...ids][0]).toBe('string');
    expect(byUri['leg://doc']).toEqual({ ...metaOf('leg'), [SUBSCRIPTION_ID]: [...ids][0] });
    expect(byUri['mod://doc']).toEqual({ ...metaOf('mod'), [SUBSCRIPTION_ID]: [...ids][0] });
    await sub.close();
    await c.close();
  }, 30_000);

  it('reaches a 2025-11-25 session with its third-party keys and no subscription id', async () => {
    const c = new ClientV1({ name: 'update-meta-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL('/mcp', hub.url)));
    const updates: Json[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params as Json));
    await c.subscribeResource({ uri: 'leg://doc' });
    await c.subscribeResource({ uri: 'mod://doc' });
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc', meta: metaOf('leg') } });
    await c.callTool({ name: 'mod__touch', arguments: { uri: 'mod://doc', meta: metaOf('mod') } });
    await expect.poll(() => updates.length, { timeout: 5000, interval: 20 }).toBe(2);
    const byUri = Object.fromEntries(updates.map((u) => [u.uri, u._meta]));
    expect(byUri['leg://doc']).toEqual(metaOf('leg'));
    expect(byUri['mod://doc']).toEqual(metaOf('mod'));
    await c.close();
  }, 30_000);
});
