/**
 * A server whose list differs at every answer (its order turns) and says nothing of it (a
 * legacy server without listChanged, kept `cacheTtlMs` 100 ms): each change is found when the
 * list is fetched again, and told; a client that lists again when told finds it changed again.
 * That was a notice a second, to every client, for as long as they listened. The wait between
 * two such notices of one list now doubles while each refresh finds it changed again (1, 2, 4 …
 * 30 s), and starts over once a refresh finds it the same. Real built hub; a raw legacy stdio
 * upstream (test/fixtures/catalog/mutable-server.mjs, SHUFFLE); the official v1 client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { turn: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', LIST_CHANGED: '0', SHUFFLE: '1' }), cacheTtlMs: 100 } } });
  await waitForReady(hub.url, ['turn']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('a list that differs at every answer, nobody saying so', () => {
  it('is told to a client that lists again when told ever less often, not once a second for good', async () => {
    const c = new ClientV1({ name: 'relists-when-told', version: '1.0.0' });
    const told: number[] = [];
    c.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      told.push(Date.now());
      // A moment later, as an IDE does: past the 100 ms the list is kept, so each list is a refresh.
      await new Promise((r) => setTimeout(r, 150));
      await c.listTools();
    });
    const watch = streamWatchingFetch();
    await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
    await watch.streamOpen;
    try {
      await new Promise((r) => setTimeout(r, 200)); // the list held (100 ms) is stale
      await c.listTools(); // its refresh finds the order turned: told, and so on
      await expect.poll(() => told.length, { timeout: 5_000, interval: 20 }).toBeGreaterThanOrEqual(1);
      // Ten seconds of it (no event stands for notices not sent): at 0, 1, 3 and 7 s now; ten before.
      await new Promise((r) => setTimeout(r, 10_000));
      expect(told.length).toBeGreaterThanOrEqual(3);
      expect(told.length).toBeLessThanOrEqual(5);
      // The waits grow.
      const gaps = told.slice(1).map((t, i) => t - told[i]!);
      expect(gaps.at(-1)!).toBeGreaterThan(2_500);
    } finally {
      await c.close();
    }
  }, 60_000);
});
