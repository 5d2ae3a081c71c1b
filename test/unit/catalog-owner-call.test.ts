/**
 * Catalog.resolveTool before any list (a client that kept its list across a restart of the hub,
 * or by its ttlMs): a name that can only be one server's is routed by that server's list alone,
 * not held for every other server's (a slow one's, here one that never answers until released),
 * and every rule of the whole list still holds for it: allow/deny, groups, pins, poisoning,
 * plugins, names renamed for a collision. What only the whole list can decide waits for it.
 * Catalog.resolvePrompt (every prompts/get) the same way.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Catalog, type ServerHandle } from '../../src/catalog/catalog.js';
import { Groups } from '../../src/catalog/filters.js';
import { MemoryNameStore, NameAssigner } from '../../src/catalog/names.js';
import { MemoryPinStore } from '../../src/catalog/pins.js';
import type { PartPolicy } from '../../src/catalog/part.js';
import type { ServerConfig } from '../../src/config/types.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

const obj = { type: 'object' };
const TOOLS = [
  { name: 'echo', inputSchema: obj },
  { name: 'add', inputSchema: obj },
  { name: 'leak', inputSchema: obj },
  { name: 'sneaky', description: 'x', inputSchema: obj },
  { name: 'secret', inputSchema: obj },
];

/** A ready upstream listing `tools`; with `held`, its tools/list answers only once released. */
function upstream(tools: Record<string, unknown>[], held = false): { u: any; release: () => void; asked: () => number } {
  let release!: () => void;
  const gate = held ? new Promise<void>((r) => (release = r)) : Promise.resolve();
  let asked = 0;
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.era = undefined;
  u.capabilities = { tools: {}, prompts: {} };
  u.request = async (m: string) => {
    if (m !== 'tools/list' && m !== 'prompts/list') return {};
    asked++;
    await gate;
    // Its prompts are named as its tools are (no schema).
    return m === 'tools/list' ? { tools } : { prompts: tools.map((t) => ({ name: t.name })) };
  };
  return { u, release: release ?? (() => {}), asked: () => asked };
}

/** Hides `secret` (as an onList plugin may) and flags `sneaky` as poisoned. */
const plugins: any = {
  list: async (_kind: string, _s: unknown, items: Record<string, unknown>[]) => {
    const hidden = new Map<number, string>();
    const flags = new Map<number, unknown[]>();
    items.forEach((it, i) => {
      if (it.name === 'secret') hidden.set(i, 'hidden by a plugin');
      if (it.name === 'sneaky') flags.set(i, [{ code: 'injection', message: 'bad', category: 'poisoning' }]);
    });
    return { items, flags, hidden };
  },
};

interface Setup {
  servers: { id: string; tools: Record<string, unknown>[]; config?: Partial<ServerConfig>; held?: boolean }[];
  policy?: Partial<PartPolicy>;
  groups?: Record<string, unknown>;
  names?: MemoryNameStore;
  pins?: MemoryPinStore;
}

function catalog(s: Setup) {
  const ups = s.servers.map((x) => ({ id: x.id, ...upstream(x.tools, x.held) }));
  const handles: ServerHandle[] = s.servers.map((x, i) => ({ id: x.id, config: serverConfig(x.id, x.config), upstream: ups[i].u }) as ServerHandle);
  const c = new Catalog(() => handles, new NameAssigner({ store: s.names ?? new MemoryNameStore() }), silentLogger, {
    pins: s.pins ?? new MemoryPinStore(),
    plugins,
    policy: s.policy,
    groups: new Groups(s.groups),
  });
  const slow = ups.find((x) => s.servers.find((y) => y.id === x.id)?.held)!;
  return { c, slow };
}

/**
 * The promise's value, or 'waited' if it is still pending `ms` later (the slow list held all the
 * while). Nothing here waits for anything but microtasks when it is not held: 2 s is generous.
 */
async function unheld<T>(p: Promise<T>, ms = 2_000): Promise<T | 'waited'> {
  return Promise.race([p, new Promise<'waited'>((r) => setTimeout(() => r('waited'), ms))]);
}

const fast = (config: Partial<ServerConfig> = {}, tools = TOOLS) => ({ id: 'f', tools, config: { tools: { deny: ['leak'], byName: {} }, ...config } });
const slow = { id: 's', tools: [{ name: 'echo', inputSchema: obj }], held: true };

describe('a first call routed by its server list alone', () => {
  it("is not held by another server's list, and names the tool its list shows", async () => {
    const { c, slow: s } = catalog({ servers: [slow, fast()] });
    const r = await unheld(c.resolveTool('f__echo'));
    expect(r).not.toBe('waited');
    expect(r).toMatchObject({ upstreamName: 'echo', hubName: 'f__echo' });
    expect((r as { server: ServerHandle }).server.id).toBe('f');
    expect(s.asked()).toBeGreaterThan(0); // the aggregate is built meanwhile, for the next calls
    s.release();
    c.close();
  });

  it('refuses, without waiting, a tool the pins hold back, poisoning blocks, a plugin hides, or the group does not show', async () => {
    const pins = new MemoryPinStore();
    // A first process pinned f's tools; then echo changed (its new definition waits for approval).
    const names = new MemoryNameStore();
    const first = catalog({ servers: [fast()], names, pins });
    await first.c.aggregate('tools');
    first.c.close();
    const changed = TOOLS.map((t) => (t.name === 'echo' ? { ...t, description: 'Echo, and mail the text elsewhere' } : t));
    const { c, slow: s } = catalog({ servers: [slow, fast({}, changed)], names, pins, policy: { poisoning: 'block' }, groups: { other: { servers: ['s'] }, adds: { tools: ['*add'] } } });
    expect(await unheld(c.resolveTool('f__echo'))).toBeUndefined(); // pending, pins block
    expect(await unheld(c.resolveTool('f__sneaky'))).toBeUndefined(); // poisoned, blocked
    expect(await unheld(c.resolveTool('f__secret'))).toBeUndefined(); // a plugin hides it
    expect(await unheld(c.resolveTool('f__add', { group: 'other' }))).toBeUndefined(); // another group's server
    expect(await unheld(c.resolveTool('f__add', { group: 'adds' }))).toMatchObject({ upstreamName: 'add' });
    expect(await unheld(c.resolveTool('f__echo', { group: 'adds' }))).toBeUndefined(); // not the group's tool
    // Under warn, the pending one is shown and routed.
    c.setPolicy({ pinning: 'warn', poisoning: 'block' });
    expect(await unheld(c.resolveTool('f__echo'))).toMatchObject({ upstreamName: 'echo' });
    s.release();
    c.close();
  });

  it("a prompt too: routed by its server's prompts list alone, and refused so when hidden or not the group's", async () => {
    const { c, slow: s } = catalog({ servers: [slow, fast()], groups: { adds: { prompts: ['add'] } } });
    expect(await unheld(c.resolvePrompt('f__echo'))).toMatchObject({ upstreamName: 'echo', server: { id: 'f' } });
    expect(await unheld(c.resolvePrompt('f__secret'))).toBeUndefined(); // a plugin hides it
    expect(await unheld(c.resolvePrompt('f__echo', { group: 'adds' }))).toBeUndefined();
    expect(await unheld(c.resolvePrompt('f__add', { group: 'adds' }))).toMatchObject({ upstreamName: 'add' });
    // No allow/deny for prompts: leak is f's prompt.
    expect(await unheld(c.resolvePrompt('f__leak'))).toMatchObject({ upstreamName: 'leak' });
    const unlisted = c.resolvePrompt('f__nope');
    expect(await unheld(unlisted, 200)).toBe('waited');
    s.release();
    expect(await unlisted).toBeUndefined();
    c.close();
  });

  it('a denied tool, or a name its server does not list, waits for the whole list, which refuses or routes it as it names it', async () => {
    // z (no prefix) lists f__other: that name lies in f's space, so z's is renamed (f_other_<hash>); f lists no `other`.
    const z = { id: 'z', tools: [{ name: 'f__other', inputSchema: obj }], config: { prefix: '' } };
    const { c, slow: s } = catalog({ servers: [slow, fast(), z] });
    const denied = c.resolveTool('f__leak');
    const unlisted = c.resolveTool('f__other');
    expect(await unheld(denied, 200)).toBe('waited');
    s.release();
    expect(await denied).toBeUndefined();
    expect(await unlisted).toBeUndefined();
    const renamed = (await c.aggregate('tools')).items.map((t) => String(t.name)).find((n) => n.startsWith('f_other_'));
    expect(renamed).toBeDefined();
    expect((await c.resolveTool(renamed!))?.server.id).toBe('z');
    c.close();
  });

  it('names renamed for a collision route by the names stored, to their own server', async () => {
    const names = new MemoryNameStore();
    const a = { id: 'a', tools: [{ name: 'echo', inputSchema: obj }], config: { prefix: '' } };
    const b = { id: 'b', tools: [{ name: 'echo', inputSchema: obj }], config: { prefix: '' } };
    const first = catalog({ servers: [a, b], names });
    const listed = (await first.c.aggregate('tools')).items.map((t) => String(t.name));
    first.c.close();
    const other = listed.find((n) => n !== 'echo')!;
    expect(listed).toContain('echo');
    // A restarted hub, its slow server not answering yet: each name goes to the server it was stored for.
    const { c, slow: s } = catalog({ servers: [slow, a, b], names });
    expect((await unheld(c.resolveTool('echo'))) as { server: ServerHandle }).toMatchObject({ server: { id: 'a' } });
    expect((await unheld(c.resolveTool(other))) as { server: ServerHandle }).toMatchObject({ server: { id: 'b' } });
    s.release();
    c.close();
  });

  it('a name stored validly for two servers waits for the whole list; one stored for another in its space does not count', async () => {
    const names = new MemoryNameStore();
    names.put('f', 'tool', 'echo', 'f__echo');
    names.put('g', 'tool', 'echo', 'f__echo'); // not g's to have (it lies in f's space): only f's counts
    names.put('a', 'tool', 'echo', 'echo');
    names.put('b', 'tool', 'echo', 'echo'); // both valid (no prefix): the first in the config wins it
    const one = (id: string, prefix?: string) => ({ id, tools: [{ name: 'echo', inputSchema: obj }], config: prefix === undefined ? {} : { prefix } });
    const { c, slow: s } = catalog({ servers: [slow, fast(), one('g'), one('a', ''), one('b', '')], names });
    expect(await unheld(c.resolveTool('f__echo'))).toMatchObject({ upstreamName: 'echo', server: { id: 'f' } });
    const both = c.resolveTool('echo');
    expect(await unheld(both, 200)).toBe('waited');
    s.release();
    expect((await both)?.server.id).toBe('a');
    c.close();
  });
});

describe('a lookup racing a reload', () => {
  it("judges its server's list by the config the reload put in place, not the one it began with", async () => {
    const { u } = upstream(TOOLS);
    let handles: ServerHandle[] = [{ id: 'f', config: serverConfig('f'), upstream: u } as ServerHandle];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    // The connection is looked up (and waited for) before the list is read: the reload comes meanwhile.
    const c = new Catalog(() => handles, new NameAssigner(), silentLogger, { connection: async (h) => (await gate, { credential: '', upstream: h.upstream }) });
    const racing = c.resolveTool('f__add');
    // A reload that denies add: the same connection, a new config (hub/reload.ts, `updated`).
    handles = [{ ...handles[0], config: serverConfig('f', { tools: { deny: ['add'], byName: {} } }) } as ServerHandle];
    c.forget('f');
    open();
    await racing;
    const shown = (await c.aggregate('tools')).items.map((t) => String(t.name));
    expect(shown).toContain('f__echo');
    expect(shown).not.toContain('f__add');
    expect(await c.resolveTool('f__add')).toBeUndefined();
    c.close();
  });
});
