/**
 * A reload that changes one group's definition tells that group's clients of the lists it
 * changed for, and nobody else: every client (of `/mcp`, of every group) was told that tools,
 * prompts and resources all changed, and listed all three again, at any change of any group.
 * The real built hub (config watch) over loopback HTTP, a real stdio upstream with tools,
 * prompts and resources, the official v1 client (GET stream) on three endpoints and the v2
 * client (listen stream) on the group changed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';

let hub: HubProcess;
const at = (group?: string): string => (group === undefined ? hub.url : hub.url.replace(/\/mcp$/, `/mcp/${group}`));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  hub = await startHub({
    servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', PROMPTS: '1' }) },
    groups: { pick: { tools: ['s__echo'] }, other: { servers: ['s'] } },
  });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

type Told = { tools: number; prompts: number; resources: number };

async function legacyClient(group?: string): Promise<{ c: ClientV1; told: Told }> {
  const told: Told = { tools: 0, prompts: 0, resources: 0 };
  const c = new ClientV1({ name: `reload-told-${group ?? 'all'}`, version: '1.0.0' });
  c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told.tools++);
  c.setNotificationHandler(PromptListChangedNotificationSchema, async () => void told.prompts++);
  c.setNotificationHandler(ResourceListChangedNotificationSchema, async () => void told.resources++);
  const watch = streamWatchingFetch();
  await c.connect(new TransportV1(new URL(at(group)), { fetch: watch.fetch }));
  await watch.streamOpen;
  return { c, told };
}

describe('a reload that changes one group', () => {
  it("tells that group's clients of the lists it changed for, and no other client", async () => {
    const all = await legacyClient();
    const pick = await legacyClient('pick');
    const other = await legacyClient('other');
    const modern = new ClientV2({ name: 'reload-told-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(at('pick'))));
    const modernTold: Told = { tools: 0, prompts: 0, resources: 0 };
    modern.setNotificationHandler('notifications/tools/list_changed', async () => void modernTold.tools++);
    modern.setNotificationHandler('notifications/prompts/list_changed', async () => void modernTold.prompts++);
    modern.setNotificationHandler('notifications/resources/list_changed', async () => void modernTold.resources++);
    const sub = await modern.listen({ toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true });
    try {
      expect((await pick.c.listTools()).tools.map((t) => t.name)).toEqual(['s__echo']);
      const zero = { tools: 0, prompts: 0, resources: 0 };
      // Counted from here (a listen stream opened right after the server's start may hear of it).
      for (const t of [all.told, pick.told, other.told, modernTold]) Object.assign(t, zero);

      // pick's tool globs change: its tools list, nothing else, of no other endpoint.
      setSection(hub, 'groups', { pick: { tools: ['s__add'] }, other: { servers: ['s'] } });
      await loggedTimes(hub, 'config reload: groups replaced', 1);
      await expect.poll(() => pick.told.tools, { timeout: 5_000, interval: 20 }).toBe(1);
      await expect.poll(() => modernTold.tools, { timeout: 5_000, interval: 20 }).toBe(1);
      expect((await pick.c.listTools()).tools.map((t) => t.name)).toEqual(['s__add']);
      // Nothing else is said (no event stands for a notice not sent: past the 250 ms window).
      await sleep(600);
      expect(pick.told).toEqual({ tools: 1, prompts: 0, resources: 0 });
      expect(modernTold).toEqual({ tools: 1, prompts: 0, resources: 0 });
      expect(all.told).toEqual(zero);
      expect(other.told).toEqual(zero);
    } finally {
      await sub.close();
      await modern.close();
      for (const x of [all, pick, other]) await x.c.close();
    }
  }, 60_000);
});
