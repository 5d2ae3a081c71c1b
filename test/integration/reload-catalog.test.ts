/**
 * `groups` and `pageSize` changed while the hub runs (config watch). What `/mcp/<group>` shows
 * and lets be called follows at once, a client connected to the group hears list_changed, a
 * new group serves and a removed one is gone, with no restart and no upstream restarted; a new
 * page size applies from the next list, and a client paging through one goes on where it was.
 * The real built hub over loopback HTTP, a real stdio upstream, the SDK v1 client.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { setSection, loggedTimes } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, modernPost, streamWatchingFetch, waitForReady, type Json } from '../helpers/wire.js';

const TOOLS = [
  { name: 'alpha', description: 'First tool', inputSchema: { type: 'object' } },
  { name: 'beta', description: 'Second tool', inputSchema: { type: 'object' } },
  { name: 'gamma', description: 'Third tool', inputSchema: { type: 'object' } },
];

let hub: HubProcess;
let id = 0;
const at = (group: string): string => hub.url.replace(/\/mcp$/, `/mcp/${group}`);

beforeAll(async () => {
  hub = await startHub({
    servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', TOOLS: JSON.stringify(TOOLS) }) },
    groups: { pick: { tools: ['s__alpha'] } },
  });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

async function toolNames(url: string): Promise<string[]> {
  const r = await modernPost(url, ++id, 'tools/list');
  return ((r.body?.result?.tools ?? []) as Json[]).map((t) => String(t.name)).sort();
}

const rewrite = (value: Json | undefined): void => setSection(hub, 'groups', value);
const reloaded = (n: number): Promise<void> => loggedTimes(hub, 'config reload: groups replaced', n, 10_000);

describe('groups reloaded while the hub runs', () => {
  it('a group shows and routes by its new globs at once; its clients hear list_changed; groups come and go', async () => {
    expect(await toolNames(at('pick'))).toEqual(['s__alpha']);
    const client = new Client({ name: 'group-client', version: '1.0.0' });
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    const watch = streamWatchingFetch();
    await client.connect(new StreamableHTTPClientTransport(new URL(at('pick')), { fetch: watch.fetch }));
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['s__alpha']);
    await watch.streamOpen; // the client's GET stream, where list_changed comes, opens after initialize
    const before = (await health(hub.url)).servers.find((s) => s.id === 's') as unknown as Json;

    rewrite({ pick: { tools: ['s__beta'] }, more: { servers: ['s'] } });
    await reloaded(1);
    expect(hub.logs.some((l) => l.includes('change only on a restart'))).toBe(false);
    await expect.poll(() => changed, { timeout: 2_000, interval: 20 }).toBeGreaterThan(0);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['s__beta']);
    // The tool the group no longer shows cannot be called through it, even by a client that saw it.
    const hidden = await modernPost(at('pick'), ++id, 'tools/call', { name: 's__alpha', arguments: {} });
    expect(hidden.body?.error?.message).toBe('Unknown tool: s__alpha');
    const shown = await client.callTool({ name: 's__beta', arguments: {} });
    expect(shown.isError).not.toBe(true);
    expect(await toolNames(at('more'))).toEqual(['s__alpha', 's__beta', 's__gamma']);
    expect(await toolNames(hub.url)).toEqual(['s__alpha', 's__beta', 's__gamma']);

    rewrite(undefined);
    await reloaded(2);
    expect((await fetch(at('pick'), { method: 'POST' })).status).toBe(404);
    expect((await fetch(at('more'), { method: 'POST' })).status).toBe(404);
    expect(await toolNames(hub.url)).toEqual(['s__alpha', 's__beta', 's__gamma']);
    // The upstream kept its connection throughout.
    expect((await health(hub.url)).servers.find((s) => s.id === 's')).toMatchObject({ state: 'ready', restarts: before.restarts, since: before.since });
    await client.close();
  });

  it("a removed group's legacy sessions and listen streams end at once; another group's go on", async () => {
    rewrite({ gone: { servers: ['s'] }, stays: { servers: ['s'] } });
    await reloaded(3);
    // Connected once its GET stream, opened after initialize, is open too.
    const legacy = async (group: string) => {
      const c = new Client({ name: `in-${group}`, version: '1.0.0' });
      const watch = streamWatchingFetch();
      await c.connect(new StreamableHTTPClientTransport(new URL(at(group)), { fetch: watch.fetch }));
      await watch.streamOpen;
      return c;
    };
    const [gone, stays] = [await legacy('gone'), await legacy('stays')];
    const modern = new ClientV2({ name: 'listen-gone', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(at('gone'))));
    const sub = await modern.listen({ toolsListChanged: true });
    try {
      rewrite({ stays: { servers: ['s'] } });
      await reloaded(4);
      expect(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r('still open'), 3_000))])).toBe('graceful');
      const line = hub.logs.filter((l) => l.includes('sessions and streams of removed groups ended')).at(-1);
      expect(line && JSON.parse(line)).toMatchObject({ sessions: 1, listenStreams: 1 });
      expect((await stays.listTools()).tools.map((t) => t.name)).toEqual(['s__alpha', 's__beta', 's__gamma']);
    } finally {
      rewrite(undefined);
      await reloaded(5);
      await Promise.all([gone.close(), stays.close(), modern.close()]);
    }
  });
});

describe('pageSize reloaded while the hub runs', () => {
  it('applies from the next list; a cursor from before goes on from where it was, with pages of the new size', async () => {
    const page = async (cursor?: string): Promise<{ names: string[]; next?: string }> => {
      const r = await modernPost(hub.url, ++id, 'tools/list', cursor === undefined ? {} : { cursor });
      const result = r.body?.result as Json;
      return { names: ((result.tools ?? []) as Json[]).map((t) => String(t.name)), next: result.nextCursor as string | undefined };
    };
    const all = (await page()).names;
    expect([...all].sort()).toEqual(['s__alpha', 's__beta', 's__gamma']);
    setSection(hub, 'pageSize', 1);
    await loggedTimes(hub, 'config reload: page size replaced', 1);
    const first = await page();
    expect(first.names).toEqual([all[0]]);
    const second = await page(first.next);
    expect(second.names).toEqual([all[1]]);
    setSection(hub, 'pageSize', 2);
    await loggedTimes(hub, 'config reload: page size replaced', 2);
    // The cursor after the first page again: two items now, not the one-item page seen before.
    const again = await page(first.next);
    expect(again).toEqual({ names: [all[1], all[2]], next: undefined });
    expect(hub.logs.some((l) => l.includes('change only on a restart'))).toBe(false);
  });
});

describe("a server's settings reloaded while its connection goes on", () => {
  it('judge the lists made after the reload, including those made when the server says its tools changed', async () => {
    const tools = [
      { name: 'alpha', description: 'First tool', inputSchema: { type: 'object' } },
      { name: 'secret', description: 'Not for everyone', inputSchema: { type: 'object' } },
      { name: 'mutate', description: 'test control', inputSchema: { type: 'object' } },
    ];
    const h = await startHub({ servers: { w: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', TOOLS: JSON.stringify(tools) }) } });
    try {
      await waitForReady(h.url, ['w']);
      const names = async () => (((await modernPost(h.url, ++id, 'tools/list')).body?.result?.tools ?? []) as Json[]).map((t) => String(t.name)).sort();
      expect(await names()).toEqual(['w__alpha', 'w__mutate', 'w__secret']);
      const config = JSON.parse(readFileSync(h.configFile, 'utf8')) as { servers: Record<string, Json> };
      config.servers.w!.tools = { deny: ['secret'] };
      writeFileSync(h.configFile, JSON.stringify(config));
      await expect.poll(names, { timeout: 10_000, interval: 100 }).toEqual(['w__alpha', 'w__mutate']);
      // The server adds a tool and says so: the list it gets is judged by the new settings.
      const r = await modernPost(h.url, ++id, 'tools/call', { name: 'w__mutate', arguments: { op: 'add', def: { name: 'delta', inputSchema: { type: 'object' } } } });
      expect(r.body?.result).toBeDefined();
      await new Promise((res) => setTimeout(res, 500));
      expect(await names()).toEqual(['w__alpha', 'w__delta', 'w__mutate']);
      expect((await modernPost(h.url, ++id, 'tools/call', { name: 'w__secret', arguments: {} })).body?.error?.message).toMatch(/Unknown tool/);
    } finally {
      await h.stop();
    }
  }, 40_000);
});
