/**
 * Catalog.downItem: which tool and prompt names of a server that is down the hub still owns up
 * to, with no list of this process behind them (a restart); Catalog.downResource: which URIs,
 * from the lists this process holds, or (a restart) from the route store. The names and pins are the ones a list stored;
 * the upstream is a stand-in that answers tools/list and changes state when told.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { MemoryNameStore, NameAssigner } from '../../src/catalog/names.js';
import { MemoryPinStore } from '../../src/catalog/pins.js';
import type { PinningPolicy } from '../../src/catalog/part.js';
import type { ResourceRouteStore, ResourceRoutes } from '../../src/catalog/resource-routes.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function upstream(): any {
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.era = undefined;
  u.capabilities = { tools: {}, prompts: {} };
  u.request = async (m: string) =>
    m === 'tools/list'
      ? { tools: [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'add', inputSchema: { type: 'object' } }] }
      : m === 'prompts/list'
        ? { prompts: [{ name: 'greet' }] }
        : {};
  return u;
}

/** A first hub process lists `s`'s tools (storing names and pins); a second one starts with `s` down. */
async function restartedWithServerDown(pinning: PinningPolicy = 'block') {
  const names = new MemoryNameStore();
  const pins = new MemoryPinStore();
  const itemPins = { prompts: new MemoryPinStore(), resources: new MemoryPinStore(), resourceTemplates: new MemoryPinStore() };
  const first = { id: 's', config: serverConfig('s'), upstream: upstream() };
  const before = new Catalog(() => [first], new NameAssigner({ store: names }), silentLogger, { pins, itemPins });
  expect((await before.aggregate('tools')).items.map((t) => t.name)).toEqual(['s__echo', 's__add']);
  expect((await before.aggregate('prompts')).items.map((t) => t.name)).toEqual(['s__greet']);
  before.close();
  const h = { id: 's', config: serverConfig('s'), upstream: upstream() };
  h.upstream.state = 'failed';
  const c = new Catalog(() => [h], new NameAssigner({ store: names }), silentLogger, { pins, itemPins, policy: { pinning } });
  return { c, h, pins, itemPins, names };
}

describe('Catalog.downItem', () => {
  it('names the server that is down behind a name a list of it stored, and nothing else', async () => {
    const { c, h } = await restartedWithServerDown();
    expect(c.downItem('tools', 's__echo')?.server).toBe(h);
    expect(c.downItem('tools', 's__add')?.server).toBe(h);
    expect(c.downItem('tools', 's__nope')?.server).toBeUndefined();
    expect(c.downItem('tools', 'echo')?.server).toBeUndefined();
    expect(c.downItem('tools', 's__echo')?.upstreamName).toBe('echo');
    // A prompt's name is its own kind's: its own pins, no allow/deny.
    expect(c.downItem('prompts', 's__greet')).toEqual({ server: h, upstreamName: 'greet' });
    expect(c.downItem('prompts', 's__echo')).toBeUndefined();
    expect(c.downItem('tools', 's__greet')).toBeUndefined();
    // Ready again: the catalog itself routes its names; downTool is only for a server that is down.
    h.upstream.state = 'ready';
    expect(c.downItem('tools', 's__echo')?.server).toBeUndefined();
    c.close();
  });

  it('a tool whose pin waits for approval is not owned up to while pins block, and is while they warn', async () => {
    for (const [pinning, owned] of [['block', false], ['warn', true]] as const) {
      const { c, h, pins } = await restartedWithServerDown(pinning);
      const rec = pins.get('s', 'echo')!;
      pins.put({ ...rec, pendingHash: 'f'.repeat(64), pendingBodyHash: 'f'.repeat(64), pendingDefinition: '{}', pendingReason: 'changed', pendingSinceMs: 2 });
      expect(c.downItem('tools', 's__echo')?.server).toBe(owned ? h : undefined);
      expect(c.downItem('tools', 's__add')?.server).toBe(h);
      c.close();
    }
  });

  it('so is a prompt whose pin waits for approval; one with no pin (listed before prompts were pinned) is owned up to', async () => {
    for (const [pinning, owned] of [['block', false], ['warn', true]] as const) {
      const { c, h, itemPins } = await restartedWithServerDown(pinning);
      const rec = itemPins.prompts.get('s', 'greet')!;
      expect(rec.hash).not.toBeNull();
      itemPins.prompts.put({ ...rec, pendingHash: 'f'.repeat(64), pendingBodyHash: 'f'.repeat(64), pendingDefinition: '{}', pendingReason: 'changed', pendingSinceMs: 2 });
      expect(c.downItem('prompts', 's__greet')?.server).toBe(owned ? h : undefined);
      c.close();
    }
    const { h, pins, names } = await restartedWithServerDown();
    const unpinned = new Catalog(() => [h], new NameAssigner({ store: names }), silentLogger, { pins });
    expect(unpinned.downItem('prompts', 's__greet')?.server).toBe(h);
    unpinned.close();
  });

  it('a name a server that is up holds too is left to the catalog', async () => {
    const { c, h, pins, names } = await restartedWithServerDown();
    expect(c.downItem('tools', 's__echo')?.server).toBe(h);
    // `t` (prefix s) was given s__echo once `s` had dropped its echo: t's list decides now.
    names.put('t', 'tool', 'echo', 's__echo');
    const t = { id: 't', config: serverConfig('t', { prefix: 's' }), upstream: upstream() };
    const both = new Catalog(() => [h, t], new NameAssigner({ store: names }), silentLogger, { pins });
    expect(both.downItem('tools', 's__echo')).toBeUndefined();
    t.upstream.state = 'starting';
    expect(both.downItem('tools', 's__echo')?.server).toBe(h);
    c.close();
    both.close();
  });

  it('a name with no approved pin (a rename never approved, or no pin at all) is not owned up to', async () => {
    const { c, h, pins } = await restartedWithServerDown();
    pins.put({ ...pins.get('s', 'echo')!, hash: null });
    expect(c.downItem('tools', 's__echo')?.server).toBeUndefined();
    const fresh = new MemoryPinStore();
    const names = new MemoryNameStore();
    names.put('s', 'tool', 'echo', 's__echo');
    const bare = new Catalog(() => [h], new NameAssigner({ store: names }), silentLogger, { pins: fresh });
    expect(bare.downItem('tools', 's__echo')?.server).toBeUndefined();
    c.close();
    bare.close();
  });
});

describe('Catalog.downResource', () => {
  it('owns up to the URIs and templates its last lists showed, never a hidden URI in any spelling', async () => {
    const { c, h } = await listedResources();
    expect(await c.downResource('u://ok')).toBeUndefined(); // ready: the catalog routes it
    h.upstream.state = 'restarting';
    await expectOwned(c, h);
    c.close();
  });

  it('after a restart of the hub, from what the route store kept (the first lists of this process not made yet)', async () => {
    const stored = new Map<string, ResourceRoutes>();
    const resourceRoutes: ResourceRouteStore = {
      get: (s, k) => stored.get(`${s}/${k}`),
      put: (s, k, r) => void stored.set(`${s}/${k}`, r),
      retain: (servers) => {
        for (const key of stored.keys()) if (!servers.has(key.slice(0, key.lastIndexOf('/')))) stored.delete(key);
      },
    };
    const first = await listedResources(resourceRoutes);
    first.c.close();
    expect(stored.get('s/resources')).toEqual({ shown: ['u://ok'], hidden: ['u://t/bad'] });
    expect(stored.get('s/resourceTemplates')).toEqual({ shown: ['u://t/{id}'], hidden: [] });

    const h = { id: 's', config: serverConfig('s'), upstream: upstream() };
    h.upstream.state = 'starting';
    const c = new Catalog(() => [h], new NameAssigner(), silentLogger, { resourceRoutes });
    await expectOwned(c, h);
    // Without the store, nothing is known of it.
    expect(await new Catalog(() => [h], new NameAssigner(), silentLogger).downResource('u://ok')).toBeUndefined();
    c.close();
  });
});

async function expectOwned(c: Catalog, h: unknown): Promise<void> {
  expect(await c.downResource('u://ok')).toBe(h);
  expect(await c.downResource('u://t/5')).toBe(h);
  expect(await c.downResource('u://t/{id}')).toBe(h); // a completion reference names the template
  // Hidden, though the template matches it: in no spelling (the scheme's case is no new URI).
  expect(await c.downResource('u://t/bad')).toBeUndefined();
  expect(await c.downResource('U://t/bad')).toBeUndefined();
  expect(await c.downResource('u://nothing')).toBeUndefined();
}

/** A catalog that listed `s`'s resources and templates (one of them hidden by a plugin). */
async function listedResources(resourceRoutes?: ResourceRouteStore) {
  const u = upstream();
  u.capabilities = { resources: {} };
  u.request = async (m: string) =>
    m === 'resources/list'
      ? { resources: [{ uri: 'u://ok', name: 'ok' }, { uri: 'u://t/bad', name: 'bad', description: 'BAD' }] }
      : m === 'resources/templates/list'
        ? { resourceTemplates: [{ uriTemplate: 'u://t/{id}', name: 't' }] }
        : {};
  const plugins: any = {
    list: async (_k: string, _s: unknown, items: any[]) => ({ items, flags: new Map(), hidden: new Map(items.map((it, i): [number, string | undefined] => [i, it.description === 'BAD' ? 'plugin' : undefined]).filter(([, v]) => v)) }),
    notification: async () => true,
  };
  const h = { id: 's', config: serverConfig('s'), upstream: u };
  const c = new Catalog(() => [h], new NameAssigner(), silentLogger, { plugins, resourceRoutes });
  expect((await c.aggregate('resources')).items.map((r) => r.uri)).toEqual(['u://ok']);
  expect((await c.aggregate('resourceTemplates')).items.map((r) => r.uriTemplate)).toEqual(['u://t/{id}']);
  return { c, h };
}
