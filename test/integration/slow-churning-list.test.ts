/**
 * A modern server whose tools list is kept 0 ms, is slow (past the 1 s stale wait) and differs
 * at every answer (its order turns): a client's list is given the list held while the refresh
 * is slow, and the refresh then lands changed. Once one change was said, a client that lists
 * again at each notice was told again at each of its lists (the list given stood in, the
 * refresh landed changed), about once a second for good. Now a list kept 0 ms that stood in is
 * told only when a change was said since it was asked for (the clients told listed again and
 * got the list from before it): the real change reaches them, twice at most, then it is quiet.
 * Real built hub; a raw modern stdio upstream (test/fixtures/catalog/mutable-server.mjs,
 * SHUFFLE and LIST_DELAY_MS); the official v1 client over loopback HTTP with its GET stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { churn: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '0', SHUFFLE: '1', LIST_DELAY_MS: '1300' }) } });
  await waitForReady(hub.url, ['churn']);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
});

describe('a slow list kept 0 ms that differs at every answer', () => {
  it('is not told at every list of a client that lists again when told; a real change is', async () => {
    const c = new ClientV1({ name: 'relists-when-told', version: '1.0.0' });
    let told = 0;
    let view: string[] = [];
    const relist = async () => (view = (await c.listTools(undefined, { timeout: 20_000 })).tools.map((t) => t.name));
    c.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      told++;
      await relist();
    });
    const watch = streamWatchingFetch();
    await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
    await watch.streamOpen;
    try {
      await relist();
      expect(view).toContain('churn__echo');
      // Nothing said, nothing told (no event stands for a notice not sent: a while).
      await sleep(3_000);
      expect(told).toBe(0);

      // A real change: said on the listen stream, told; the list given then (the refresh slow)
      // is the one from before it, so the refresh landing is told once more, and has the tool.
      await c.callTool({ name: 'churn__mutate', arguments: { op: 'add', def: { name: 'fresh', inputSchema: { type: 'object' } } } }, undefined, { timeout: 20_000 });
      await expect.poll(() => view.includes('churn__fresh'), { timeout: 15_000, interval: 50 }).toBe(true);
      const after = told;
      expect(after).toBeGreaterThanOrEqual(1);
      expect(after).toBeLessThanOrEqual(2);
      // About four turns of the loop as it was (a notice, a list, 1.3 s for the refresh to land).
      await sleep(6_000);
      expect(told).toBe(after);
    } finally {
      await c.close();
    }
  }, 60_000);
});
