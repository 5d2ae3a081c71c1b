/**
 * A call routed by its server's list alone (Catalog.ownerItem) or by the whole list, racing a
 * reload: what the reload changed (allow/deny) holds for every call after it.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

describe('a list fetched across a reload', () => {
  let hub: HubProcess;
  const gate = join(tmp(), 'reload-race-gate');
  const stats = join(tmp(), 'reload-race-stats.json');
  const lists = () => (JSON.parse(readFileSync(stats, 'utf8')) as Json)['tools/list'] as number;
  const servers = (deny: string[]) => ({
    mod: { ...nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '600000', CACHE_SCOPE: 'public', LIST_GATE: gate, STATS_FILE: stats }), tools: { deny } },
  });
  beforeAll(async () => {
    writeFileSync(gate, '');
    hub = await startHub({ servers: servers([]) });
    await waitForReady(hub.url, ['mod']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('is judged by the config in force when it arrives: a tool the reload denied is neither listed nor called', async () => {
    const names = async () => (((await modernPost(hub.url, 'l', 'tools/list')).body!.result as Json).tools as Json[]).map((t) => t.name);
    expect(await names()).toContain('mod__echo');
    // The next list is held: the mutation's list_changed has the hub fetch it again (and wait).
    rmSync(gate);
    const before = lists();
    const m = await modernPost(hub.url, 'm', 'tools/call', { name: 'mod__mutate', arguments: { op: 'add', def: { name: 'extra', inputSchema: { type: 'object' } } } });
    expect(m.body?.result).toBeDefined();
    await expect.poll(lists, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before);
    setSection(hub, 'servers', servers(['echo']));
    await loggedTimes(hub, 'config reloaded', 1);
    writeFileSync(gate, '');
    await expect.poll(names, { timeout: 10_000, interval: 100 }).toContain('mod__extra');
    expect(await names()).not.toContain('mod__echo');
    const call = await modernPost(hub.url, 'c', 'tools/call', { name: 'mod__echo', arguments: { text: 'x' } });
    expect(call.body?.error).toMatchObject({ code: -32602 });
    expect(existsSync(gate)).toBe(true);
  });
});
