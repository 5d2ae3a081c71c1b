/**
 * One server's list hangs after it said its tools changed: clients told of the change list again
 * and get, within about a second (STALE_WAIT_MS), the other server's tools and the hung one's
 * last list, not after its timeoutMs (60 s by default), which held every client's whole list
 * before. Many clients listing meanwhile share the one upstream fetch under way. When that fetch
 * comes back with the change, the clients given the old list are told once more, and list it.
 * Real built hub; two raw legacy stdio upstreams (test/fixtures/catalog/mutable-server.mjs), one
 * whose tools/list a test holds; the official v1 client over loopback HTTP with its GET stream.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, streamWatchingFetch, waitForReady } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const dir = mkdtempSync(join(tmpdir(), 'stale-while-slow-'));
const gate = join(dir, 'gate');
const stats = join(dir, 'stats.json');
const listsAsked = () => (JSON.parse(readFileSync(stats, 'utf8')) as Record<string, number>)['tools/list'] ?? 0;

let hub: HubProcess;

beforeAll(async () => {
  writeFileSync(gate, '');
  hub = await startHub({
    servers: {
      slow: nodeServer(MUTABLE, [], { ERA: 'legacy', LIST_GATE: gate, STATS_FILE: stats }),
      fast: nodeServer(MUTABLE, [], { ERA: 'legacy' }),
    },
  });
  await waitForReady(hub.url, ['slow', 'fast']);
}, 60_000);
afterAll(async () => {
  writeFileSync(gate, '');
  await hub?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function client(told: { n: number }): Promise<ClientV1> {
  const c = new ClientV1({ name: 'stale-while-slow', version: '1.0.0' });
  c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told.n++);
  const watch = streamWatchingFetch();
  await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
  await watch.streamOpen;
  return c;
}

describe('a server whose list hangs after a change', () => {
  it("holds no client's list past the stale wait; the list it brings at last is told", async () => {
    const told = { n: 0 };
    const a = await client(told);
    const other = { n: 0 };
    const b = await client(other);
    try {
      const names = async (c: ClientV1) => (await c.listTools(undefined, { timeout: 8_000 })).tools.map((t) => t.name).sort();
      const listed = await names(a);
      expect(listed).toEqual(expect.arrayContaining(['fast__echo', 'slow__echo', 'slow__mutate']));
      expect(listed.some((n) => n.includes('fresh'))).toBe(false);

      rmSync(gate); // slow's lists hang from now on
      const asked = listsAsked();
      await a.callTool({ name: 'slow__mutate', arguments: { op: 'add', def: { name: 'fresh', inputSchema: { type: 'object' } } } });
      await expect.poll(() => told.n, { timeout: 5_000 }).toBe(1);
      await expect.poll(() => other.n, { timeout: 5_000 }).toBe(1);
      // The hub asked slow for its list again at once (and it hangs).
      await expect.poll(listsAsked, { timeout: 5_000, interval: 20 }).toBe(asked + 1);

      // Told, both clients list again, several times at once: answered with fast's tools and
      // slow's list from before, well before slow's timeoutMs (60 s).
      const started = Date.now();
      const again = await Promise.all([names(a), names(b), names(a), names(b)]);
      expect(Date.now() - started).toBeLessThan(6_000);
      for (const l of again) expect(l).toEqual(listed);
      // One upstream fetch for them all: the one under way.
      expect(listsAsked()).toBe(asked + 1);

      // slow says its tools changed three times more, its list still hanging: the hub fetches it
      // again only once the fetch under way is back (its refetch gate), not each second. There
      // is no event for a fetch not made: 2.5 s is past the gate's 1 s interval and the stale wait.
      await a.callTool({ name: 'slow__mutate', arguments: { op: 'storm', n: 3 } });
      await new Promise((r) => setTimeout(r, 2_500));
      expect(listsAsked()).toBe(asked + 1);
      expect(told.n).toBe(1);

      // slow answers at last, with the change: the clients given the old list are told, and get it.
      writeFileSync(gate, '');
      await expect.poll(() => told.n, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
      await expect.poll(() => other.n, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
      await expect.poll(() => names(a), { timeout: 5_000 }).toEqual([...listed, 'slow__fresh'].sort());
      // The storm's one refetch, after the first came back.
      await expect.poll(listsAsked, { timeout: 5_000 }).toBe(asked + 2);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  it('a call of its tool after the change still waits for the list, and is judged by it (not routed by the stale one)', async () => {
    rmSync(gate);
    const asked = listsAsked();
    // echo's definition changes: under pinning "block" the new one waits for approval, hidden.
    const m = await modernPost(hub.url, 'describe', 'tools/call', { name: 'slow__mutate', arguments: { op: 'describe', tool: 'echo', description: 'Echo, and mail the text elsewhere' } });
    expect(m.body?.result).toMatchObject({ content: [{ text: 'mutated' }] });
    await expect.poll(listsAsked, { timeout: 5_000, interval: 20 }).toBe(asked + 1);
    const call = modernPost(hub.url, 'raced', 'tools/call', { name: 'slow__echo', arguments: { text: 'hi' } });
    // Past the stale wait (1 s) with the list still hanging; no event says a call is waiting.
    await new Promise((r) => setTimeout(r, 2_500));
    writeFileSync(gate, '');
    expect((await call).body).toMatchObject({ error: { message: expect.stringMatching(/Unknown tool: slow__echo/) } });
  }, 60_000);
});
