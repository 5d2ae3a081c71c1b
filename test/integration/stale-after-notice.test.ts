/**
 * A server says its tools changed, and its list then fails: clients told of the change list
 * again and are given the list held before (the stale one, with a warning). When the server's
 * list is fetched again and has the change, they are told once more. Before, nothing told them
 * (the list was kept 0 ms since the notice, and a change found in such a list is never told), so
 * a legacy client, which keeps its list until told, kept the list from before the change for
 * good. Real built hub; a raw legacy stdio upstream that declares listChanged and can be made to
 * fail its lists; the official v1 client (GET stream) and a modern listen stream over loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, modernBody, modernHeaders, modernPost, streamWatchingFetch, waitForReady, type Json } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const TOOLS = JSON.stringify(['echo', 'mutate', 'fail_lists'].map((name) => ({ name, inputSchema: { type: 'object' } })));

let hub: HubProcess;
const ac = new AbortController();

beforeAll(async () => {
  hub = await startHub({ servers: { leg: nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS }) } });
  await waitForReady(hub.url, ['leg']);
}, 60_000);
afterAll(async () => {
  ac.abort();
  await hub?.stop();
});

describe('a change said, then the list failing', () => {
  it('clients given the list from before it are told again once the list with the change is fetched', async () => {
    let told = 0;
    const c = new ClientV1({ name: 'stale-after-notice', version: '1.0.0' });
    c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told++);
    const watch = streamWatchingFetch();
    await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
    await watch.streamOpen;
    const listen = await fetch(hub.url, {
      method: 'POST',
      headers: modernHeaders('subscriptions/listen'),
      body: JSON.stringify(modernBody('l-stale', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      signal: ac.signal,
    });
    const heard = heardSoFar(listen);
    await expect.poll(() => heard().includes('acknowledged'), { timeout: 5_000 }).toBe(true);
    const changes = () => heard().split('notifications/tools/list_changed').length - 1;
    try {
      const names = async () => (await c.listTools()).tools.map((t) => t.name);
      expect(await names()).toEqual(['leg__echo', 'leg__mutate', 'leg__fail_lists']);

      await c.callTool({ name: 'leg__fail_lists', arguments: { on: true } });
      await c.callTool({ name: 'leg__mutate', arguments: { op: 'add', def: { name: 'fresh', inputSchema: { type: 'object' } } } });
      await expect.poll(() => told, { timeout: 5_000 }).toBe(1);
      await expect.poll(changes, { timeout: 5_000 }).toBe(1);
      // Listed again as told: the server's list fails, and the one held is served.
      expect(await names()).toEqual(['leg__echo', 'leg__mutate', 'leg__fail_lists']);

      await c.callTool({ name: 'leg__fail_lists', arguments: { on: false } });
      // Once the failed list may be asked for again (LIST_RETRY_MS), another client's list fetches it.
      const modern = async () => (((await modernPost(hub.url, 1, 'tools/list')).body?.result as Json).tools as Json[]).map((t) => t.name);
      await expect.poll(modern, { timeout: 15_000, interval: 250 }).toContain('leg__fresh');
      // Both clients are told, once more.
      await expect.poll(() => told, { timeout: 5_000 }).toBe(2);
      await expect.poll(changes, { timeout: 5_000 }).toBe(2);
      expect(await names()).toEqual(['leg__echo', 'leg__mutate', 'leg__fail_lists', 'leg__fresh']);
    } finally {
      await c.close();
    }
  }, 60_000);
});
