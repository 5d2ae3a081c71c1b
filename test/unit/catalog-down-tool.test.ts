/**
 * Catalog.downTool: which tool names of a server that is down the hub still owns up to, with no
 * list of this process behind them (a restart). The names and pins are the ones a list stored;
 * the upstream is a stand-in that answers tools/list and changes state when told.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { MemoryNameStore, NameAssigner } from '../../src/catalog/names.js';
import { MemoryPinStore } from '../../src/catalog/pins.js';
import type { PinningPolicy } from '../../src/catalog/part.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function upstream(): any {
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.era = undefined;
  u.capabilities = { tools: {} };
  u.request = async (m: string) => (m === 'tools/list' ? { tools: [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'add', inputSchema: { type: 'object' } }] } : {});
  return u;
}

/** A first hub process lists `s`'s tools (storing names and pins); a second one starts with `s` down. */
async function restartedWithServerDown(pinning: PinningPolicy = 'block') {
  const names = new MemoryNameStore();
  const pins = new MemoryPinStore();
  const first = { id: 's', config: serverConfig('s'), upstream: upstream() };
  const before = new Catalog(() => [first], new NameAssigner({ store: names }), silentLogger, { pins });
  expect((await before.aggregate('tools')).items.map((t) => t.name)).toEqual(['s__echo', 's__add']);
  before.close();
  const h = { id: 's', config: serverConfig('s'), upstream: upstream() };
  h.upstream.state = 'failed';
  const c = new Catalog(() => [h], new NameAssigner({ store: names }), silentLogger, { pins, policy: { pinning } });
  return { c, h, pins };
}

describe('Catalog.downTool', () => {
  it('names the server that is down behind a name a list of it stored, and nothing else', async () => {
    const { c, h } = await restartedWithServerDown();
    expect(c.downTool('s__echo')).toBe(h);
    expect(c.downTool('s__add')).toBe(h);
    expect(c.downTool('s__nope')).toBeUndefined();
    expect(c.downTool('echo')).toBeUndefined();
    // Ready again: the catalog itself routes its names; downTool is only for a server that is down.
    h.upstream.state = 'ready';
    expect(c.downTool('s__echo')).toBeUndefined();
    c.close();
  });

  it('a tool whose pin waits for approval is not owned up to while pins block, and is while they warn', async () => {
    for (const [pinning, owned] of [['block', false], ['warn', true]] as const) {
      const { c, h, pins } = await restartedWithServerDown(pinning);
      const rec = pins.get('s', 'echo')!;
      pins.put({ ...rec, pendingHash: 'f'.repeat(64), pendingBodyHash: 'f'.repeat(64), pendingDefinition: '{}', pendingReason: 'changed', pendingSinceMs: 2 });
      expect(c.downTool('s__echo')).toBe(owned ? h : undefined);
      expect(c.downTool('s__add')).toBe(h);
      c.close();
    }
  });

  it('a name with no approved pin (a rename never approved, or no pin at all) is not owned up to', async () => {
    const { c, h, pins } = await restartedWithServerDown();
    pins.put({ ...pins.get('s', 'echo')!, hash: null });
    expect(c.downTool('s__echo')).toBeUndefined();
    const fresh = new MemoryPinStore();
    const names = new MemoryNameStore();
    names.put('s', 'tool', 'echo', 's__echo');
    const bare = new Catalog(() => [h], new NameAssigner({ store: names }), silentLogger, { pins: fresh });
    expect(bare.downTool('s__echo')).toBeUndefined();
    c.close();
    bare.close();
  });
});
