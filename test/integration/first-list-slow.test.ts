/**
 * A server ready whose first tools list hangs (nothing cached to stand in): a client's list is
 * answered with the other servers' tools within FIRST_LIST_WAIT_MS (3 s), not after the slow
 * one's timeoutMs (60 s), and clients of both eras are told (list_changed) when its list lands.
 * Calls route as before: the other server's at once, the slow one's once its list is judged.
 * Real built hub; raw stdio upstreams (test/fixtures/catalog/mutable-server.mjs), one whose
 * tools/list a test holds; the official v1 client (GET stream) and v2 client (listen stream).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const dir = mkdtempSync(join(tmpdir(), 'first-list-slow-'));
const gate = join(dir, 'gate');

let hub: HubProcess;

beforeAll(async () => {
  // The gate is shut from the start: slow's first tools list (the hub's own, at ready) hangs.
  hub = await startHub({
    servers: {
      fast: nodeServer(MUTABLE, [], { ERA: 'legacy' }),
      slow: { ...nodeServer(MUTABLE, [], { ERA: 'modern', LIST_GATE: gate, LIST_TTL_MS: '60000', CACHE_SCOPE: 'public' }), timeoutMs: 60_000 },
    },
  });
  await waitForReady(hub.url, ['fast', 'slow']);
}, 60_000);
afterAll(async () => {
  writeFileSync(gate, '');
  await hub?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a server whose first list hangs", () => {
  it("holds no client's list past the first-list wait; its tools, when they land, are told to clients of both eras; calls route", async () => {
    const legacyTold = { n: 0 };
    const v1 = new ClientV1({ name: 'first-list-v1', version: '1.0.0' });
    v1.setNotificationHandler(ToolListChangedNotificationSchema, async () => void legacyTold.n++);
    const watch = streamWatchingFetch();
    await v1.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
    await watch.streamOpen;
    const v2 = new ClientV2({ name: 'first-list-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await v2.connect(new TransportV2(new URL(hub.url)));
    const modernTold = { n: 0 };
    v2.setNotificationHandler('notifications/tools/list_changed', async () => void modernTold.n++);
    const sub = await v2.listen({ toolsListChanged: true });
    try {
      const started = Date.now();
      const [l1, l2] = await Promise.all([v1.listTools(undefined, { timeout: 20_000 }), v2.listTools(undefined, { timeout: 20_000 })]);
      expect(Date.now() - started).toBeLessThan(10_000);
      for (const l of [l1, l2]) {
        expect(l.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['fast__echo', 'fast__mutate']));
        expect(l.tools.some((t) => t.name.startsWith('slow__'))).toBe(false);
      }
      // What they were told so far is of the servers' start (a listen stream opened within its window may hear it).
      const told0 = [legacyTold.n, modernTold.n];
      // The modern client is told to ask again soon (the list lacks a server), not kept for slow's 60 s.
      expect((l2 as { ttlMs?: number }).ttlMs).toBeLessThanOrEqual(5_000);
      // fast's tool is called at once, routed by the list given.
      expect(await v1.callTool({ name: 'fast__echo', arguments: { text: 'hi' } }, undefined, { timeout: 5_000 })).toMatchObject({ content: [{ text: 'echo:hi' }] });
      // slow's tool, named before its list landed, waits for that list (routed by it, judged), and runs.
      const call = v2.callTool({ name: 'slow__echo', arguments: { text: 'late' } }, { timeout: 20_000 });
      // Nothing is told while slow's list is out (no event stands for a notice not sent: a while).
      await new Promise((r) => setTimeout(r, 500));
      expect([legacyTold.n, modernTold.n]).toEqual(told0);

      writeFileSync(gate, '');
      expect(await call).toMatchObject({ content: [{ text: 'echo:late' }] });
      await expect.poll(() => legacyTold.n, { timeout: 10_000 }).toBeGreaterThan(told0[0]!);
      await expect.poll(() => modernTold.n, { timeout: 10_000 }).toBeGreaterThan(told0[1]!);
      for (const c of [v1, v2]) expect((await c.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['fast__echo', 'slow__echo', 'slow__mutate']));
    } finally {
      await sub.close();
      await v2.close();
      await v1.close();
    }
  }, 60_000);
});
