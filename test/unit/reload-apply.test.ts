/**
 * applyReload against a stand-in for the running hub (the function under test is real): all or
 * nothing when a new server cannot be built, and live time limits reach the connections.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import type { ServerHandle } from '../../src/catalog/types.js';
import { parseConfig } from '../../src/config/load.js';
import type { HubConfig, ServerConfig } from '../../src/config/types.js';
import { applyReload, restartServer, type ReloadTarget } from '../../src/hub/reload.js';
import type { Upstream } from '../../src/upstream/types.js';

const cfg = (servers: Record<string, unknown>): HubConfig => parseConfig({ servers }, '/hub/hub.config.json', {});

function fakeUpstream(id: string): Upstream & { closed: boolean; limits: unknown[]; started: boolean } {
  const u = Object.assign(new EventEmitter(), {
    id,
    state: 'ready',
    load: { active: 0, queued: 0 },
    closed: false,
    started: false,
    limits: [] as unknown[],
    start: async () => void (u.started = true),
    close: async () => void (u.closed = true),
    retime: (l: unknown) => void u.limits.push(l),
  });
  return u as unknown as Upstream & { closed: boolean; limits: unknown[]; started: boolean };
}

function target(running: HubConfig, cannotBuild: string | undefined, filesChanged = () => false) {
  const handles = new Map<string, ServerHandle>();
  for (const s of Object.values(running.servers)) handles.set(s.id, { id: s.id, config: s, upstream: fakeUpstream(s.id) });
  const built: ServerHandle[] = [];
  const changes: string[] = [];
  const pooled: [string, unknown][] = [];
  const t: ReloadTarget = {
    config: running,
    handles,
    catalog: { forget: (id: string) => void changes.push(`catalog.forget ${id}`) },
    upstreams: { forget: async (id: string) => void changes.push(`upstreams.forget ${id}`), retime: (id: string, l: unknown) => void pooled.push([id, l]) },
    routes: { forgetServer: (id: string) => void changes.push(`routes.forget ${id}`) },
    auth: { replaceKeys: () => void changes.push('keys'), required: false },
    log: pino({ level: 'silent' }),
    buildServer: (s: ServerConfig) => {
      if (s.id === cannotBuild) throw new TypeError('Invalid URL');
      const h = { id: s.id, config: s, upstream: fakeUpstream(s.id) };
      built.push(h);
      return h;
    },
    addServer: (h: ServerHandle) => void handles.set(h.id, h),
    startServer: (h: ServerHandle) => void h.upstream.start(),
    applyPolicy: () => void changes.push('policy'),
    applyGroups: (g: object) => void changes.push(`groups ${Object.keys(g).join(',')}`),
    applyPageSize: (n: number) => void changes.push(`pageSize ${n}`),
    applyPlugins: async (p: { disable?: string[] }) => {
      changes.push(`plugins ${(p.disable ?? []).join(',')}`);
      return p.disable?.includes('broken') ? ['broken.mjs: no default export'] : [];
    },
    pluginFilesChanged: filesChanged,
    credentialsRevoked: () => void changes.push('revoked'),
    forgetUnconfigured: () => void changes.push(`forgetUnconfigured ${Object.keys(t.config.servers).join(',')}`),
  };
  return { t, handles, built, changes, pooled };
}

describe('applyReload', () => {
  it('changes nothing when a new server cannot be built: the running servers keep serving', async () => {
    const running = cfg({ a: { command: 'node', args: ['a.js'] }, b: { command: 'node', args: ['b.js'] } });
    const { t, handles, built, changes } = target(running, 'bad');
    const before = new Map(handles);
    const next = cfg({ a: { command: 'node', args: ['a.js', 'v2'] }, fresh: { command: 'node' }, bad: { command: 'node' } });
    await expect(applyReload(t, next)).rejects.toThrow(/^servers\.bad: Invalid URL$/);
    expect(changes).toEqual([]);
    expect([...handles.entries()]).toEqual([...before.entries()]);
    expect(Object.keys(running.servers)).toEqual(['a', 'b']);
    expect(running.servers.a!.args).toEqual(['a.js']);
    for (const h of before.values()) expect((h.upstream as unknown as { closed: boolean }).closed).toBe(false);
    // What it had built already is let go, never started.
    expect(built.map((h) => h.id)).toEqual(['fresh']);
    for (const h of built) expect(h.upstream as unknown as { closed: boolean; started: boolean }).toMatchObject({ closed: true, started: false });
  });

  it('new groups are put in place and become the running config; the same groups are left alone', async () => {
    const running = cfg({ a: { command: 'node' } });
    running.groups = { small: { tools: ['a__x'] } };
    const { t, changes } = target(running, undefined);
    const next = cfg({ a: { command: 'node' } });
    next.groups = { small: { tools: ['a__y'] }, big: {} };
    await applyReload(t, next);
    expect(changes).toEqual(['groups small,big']);
    expect(running.groups).toEqual({ small: { tools: ['a__y'] }, big: {} });
    changes.length = 0;
    const same = cfg({ a: { command: 'node' } });
    same.groups = { big: {}, small: { tools: ['a__y'] } };
    await applyReload(t, same);
    expect(changes).toEqual([]);
  });

  it('a new page size is put in place and becomes the running config', async () => {
    const running = cfg({ a: { command: 'node' } });
    const { t, changes } = target(running, undefined);
    const next = cfg({ a: { command: 'node' } });
    next.pageSize = 7;
    await applyReload(t, next);
    expect(changes).toEqual(['pageSize 7']);
    expect(running.pageSize).toBe(7);
  });

  it('new plugins are loaded last, after the servers changed, and become the running config', async () => {
    const running = cfg({ a: { command: 'node' } });
    const { t, changes } = target(running, undefined);
    const next = cfg({ b: { command: 'node' } });
    next.plugins = { disable: ['redact-secrets'] };
    await applyReload(t, next);
    // What the hub kept of the removed server goes, once the servers section is the new one.
    expect(changes).toEqual(['routes.forget a', 'catalog.forget a', 'upstreams.forget a', 'forgetUnconfigured b', 'plugins redact-secrets']);
    expect(running.plugins).toEqual({ disable: ['redact-secrets'] });
    changes.length = 0;
    await applyReload(t, cfg({ b: { command: 'node' } }));
    expect(changes).toEqual(['plugins ']); // the section gone: the defaults
    changes.length = 0;
    await applyReload(t, cfg({ b: { command: 'node' } }));
    expect(changes).toEqual([]);
  });

  it('plugins are loaded again from the unchanged section when their files changed, and only then', async () => {
    const running = cfg({ a: { command: 'node' } });
    running.plugins = { disable: ['description-checks'] };
    let edited = true;
    const asked: unknown[] = [];
    const { t, changes } = target(running, undefined, (p?: unknown) => (asked.push(p), edited));
    const same = (): HubConfig => Object.assign(cfg({ a: { command: 'node' } }), { plugins: { disable: ['description-checks'] } });
    await applyReload(t, same());
    expect(changes).toEqual(['plugins description-checks']);
    expect(asked).toEqual([{ disable: ['description-checks'] }]); // the files of the new section
    changes.length = 0;
    edited = false;
    await applyReload(t, same());
    expect(changes).toEqual([]);
  });

  it('a server whose time limits changed keeps its connection, and it and its pooled connections take the new limits', async () => {
    const running = cfg({ a: { url: 'http://127.0.0.1:9/mcp', timeoutMs: 60_000 } });
    const { t, handles, pooled } = target(running, undefined);
    const upstream = handles.get('a')!.upstream as unknown as { limits: unknown[]; closed: boolean };
    await applyReload(t, cfg({ a: { url: 'http://127.0.0.1:9/mcp', timeoutMs: 1_000, maxTotalTimeoutMs: 5_000 } }));
    expect(handles.get('a')!.upstream).toBe(upstream);
    expect(upstream.closed).toBe(false);
    // The idle check's interval too (as configured: the default), but not for principals' connections, which have none.
    expect(upstream.limits).toEqual([{ timeoutMs: 1_000, maxTotalTimeoutMs: 5_000, healthCheckMs: 30_000 }]);
    expect(pooled).toEqual([['a', { timeoutMs: 1_000, maxTotalTimeoutMs: 5_000 }]]);
  });

  it("restartServer: a fresh connection in the old one's place, in config order; the old one closes; an unknown or unbuildable server changes nothing", async () => {
    const running = cfg({ a: { command: 'node' }, b: { command: 'node' }, c: { command: 'node' } });
    const { t, handles, built, changes } = target(running, undefined);
    const old = handles.get('b')!;
    restartServer(t, 'b');
    expect([...handles.keys()]).toEqual(['a', 'b', 'c']);
    expect(handles.get('b')).toBe(built[0]);
    expect(built[0]!.upstream as unknown as { started: boolean }).toMatchObject({ started: true });
    // The names clients were shown stay known: a call while it starts is "unavailable".
    expect(changes).toEqual(['catalog.forget b', 'upstreams.forget b']);
    await expect.poll(() => (old.upstream as unknown as { closed: boolean }).closed).toBe(true);
    expect(running.servers.b).toBe(handles.get('b')!.config); // its config as it was

    changes.length = 0;
    expect(() => restartServer(t, 'nope')).toThrow('no server "nope" is running');
    const broken = target(cfg({ bad: { command: 'node' } }), 'bad');
    const before = broken.handles.get('bad');
    expect(() => restartServer(broken.t, 'bad')).toThrow('Invalid URL');
    expect(broken.handles.get('bad')).toBe(before);
    expect([changes, broken.changes]).toEqual([[], []]);
  });

  it('a server restarted by a reload keeps the names clients were shown unless its prefix or tool settings changed too', async () => {
    const running = cfg({ a: { command: 'node', args: ['a.js'] }, b: { command: 'node', args: ['b.js'] }, c: { command: 'node', args: ['c.js'] } });
    const { t, changes } = target(running, undefined);
    const next = cfg({
      a: { command: 'node', args: ['a.js', 'v2'] },
      b: { command: 'node', args: ['b.js', 'v2'], prefix: 'bee' },
      c: { command: 'node', args: ['c.js', 'v2'], tools: { deny: ['x'] } },
    });
    await applyReload(t, next);
    expect(changes.filter((c) => c.startsWith('routes.forget'))).toEqual(['routes.forget b', 'routes.forget c']);
    expect(changes.filter((c) => c.startsWith('catalog.forget'))).toEqual(['catalog.forget a', 'catalog.forget b', 'catalog.forget c']);
  });

  it('the report names the sections applied, those left for a restart and the plugins that could not be loaded', async () => {
    const running = cfg({ a: { command: 'node' } });
    const { t } = target(running, undefined);
    const next = cfg({ a: { command: 'node' } });
    next.pageSize = 9;
    next.plugins = { disable: ['broken'] };
    next.listen = { ...next.listen, port: 1 };
    expect(await applyReload(t, next)).toEqual({ added: [], removed: [], restarted: [], updated: [], disabled: [], applied: ['pageSize', 'plugins'], restartOnly: ['listen.port'], pluginsFailed: ['broken.mjs: no default export'] });
    expect(await applyReload(t, next)).toMatchObject({ applied: [], pluginsFailed: [] }); // nothing new: nothing loaded
  });

  it('a disabled entry the reload adds or changes is in the report, started by nothing; a server turned off is removed', async () => {
    // `switchyard servers` lists disabled entries: a reload that brought one changed what it shows,
    // and reported nothing, so `switchyard reload` then named an older reload as the one that had
    // applied the file.
    const running = cfg({ a: { command: 'node' }, b: { command: 'node' } });
    const { t, built } = target(running, undefined);
    const next = cfg({ a: { command: 'node' }, b: { command: 'node', enabled: false }, off: { command: 'node', enabled: false } });
    expect(await applyReload(t, next)).toMatchObject({ added: [], removed: ['b'], disabled: ['off'] });
    expect(built).toEqual([]);
    expect(Object.keys(running.servers)).toEqual(['a', 'b', 'off']);
    // The same disabled entries again: nothing new; one of them changed: named again.
    expect(await applyReload(t, cfg({ a: { command: 'node' }, b: { command: 'node', enabled: false }, off: { command: 'node', enabled: false } }))).toMatchObject({ removed: [], disabled: [] });
    expect(await applyReload(t, cfg({ a: { command: 'node' }, b: { command: 'node', enabled: false }, off: { command: 'node', args: ['v2'], enabled: false } }))).toMatchObject({ removed: [], disabled: ['off'] });
    expect(built).toEqual([]);
  });

  it('a disabled entry the reload removes is in the report as removed, and what the ledger kept of it goes', async () => {
    // Nothing said it: `switchyard reload` named an older reload as the one that had applied the
    // file, `switchyard servers` no longer listed the entry, and its capabilities and resource
    // routes stayed until a restart (a server added later under its id may be another one).
    const running = cfg({ a: { command: 'node' }, off: { command: 'node', enabled: false } });
    const { t, built, changes } = target(running, undefined);
    expect(await applyReload(t, cfg({ a: { command: 'node' } }))).toEqual({ added: [], removed: ['off'], restarted: [], updated: [], disabled: [], applied: [], restartOnly: [], pluginsFailed: [] });
    expect(changes).toEqual(['forgetUnconfigured a']);
    expect(built).toEqual([]);
    expect(Object.keys(running.servers)).toEqual(['a']);
  });
});
