import { afterEach, describe, expect, it, vi } from 'vitest';
import { Catalog, LACKING_TTL_MS, SHARED_ONLY, type Connection, type ServerHandle } from '../../src/catalog/catalog.js';
import { Groups } from '../../src/catalog/filters.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig, sleep, startMutable, type Fixture } from './catalog-helpers.js';
import { waitFor } from './upstream-helpers.js';
import { createUpstream, type StdioUpstream, type UpstreamSpec } from '../../src/upstream/index.js';
import { KnownCapabilities } from '../../src/hub/known-capabilities.js';

let fixtures: Fixture[] = [];
let catalogs: Catalog[] = [];
afterEach(async () => {
  for (const c of catalogs) c.close();
  await Promise.allSettled(fixtures.map((f) => f.upstream.close()));
  fixtures = [];
  catalogs = [];
});

async function fixture(id: string, env: Record<string, string> = {}, spec: Parameters<typeof startMutable>[3] = {}): Promise<Fixture> {
  const f = await startMutable(id, env, silentLogger, spec);
  fixtures.push(f);
  return f;
}

function catalogOf(handles: ServerHandle[], opts: ConstructorParameters<typeof Catalog>[3] = {}): Catalog {
  const c = new Catalog(() => handles, new NameAssigner(), silentLogger, opts);
  for (const h of handles) c.watch(h);
  catalogs.push(c);
  return c;
}

const names = (items: Record<string, unknown>[]) => items.map((t) => String(t.name)).sort();

describe('catalog cache (real stdio upstreams)', () => {
  it('honours a modern upstream ttlMs: one fetch within the TTL, a refetch after it', async () => {
    const f = await fixture('m', { LIST_TTL_MS: '400', CACHE_SCOPE: 'public' });
    const c = catalogOf([{ id: 'm', config: serverConfig('m'), upstream: f.upstream }]);
    const a = await c.aggregate('tools');
    expect(names(a.items)).toContain('m__echo');
    expect(a.scope).toBe('public');
    expect(a.ttlMs).toBeGreaterThan(0);
    expect(a.ttlMs).toBeLessThanOrEqual(400);
    for (let i = 0; i < 5; i++) await c.aggregate('tools');
    expect(f.stats()['tools/list']).toBe(1);
    await sleep(450);
    await c.aggregate('tools');
    expect(f.stats()['tools/list']).toBe(2);
  });

  it('asks a modern server for server/discover again once its answer is stale: a family added by a redeploy is listed, clients told', async () => {
    const f = await fixture('d', { DISCOVER_CAPS: JSON.stringify({ tools: {} }), LIST_TTL_MS: '60000', CACHE_SCOPE: 'public' }, { rediscoverMinMs: 200 });
    const c = catalogOf([{ id: 'd', config: serverConfig('d'), upstream: f.upstream }]);
    const changed: string[] = [];
    c.on('changed', (kind: string) => void changed.push(kind));
    expect((await c.aggregate('resources')).items).toEqual([]);
    // Redeployed: resources now, other instructions. Nothing is said; its discover answer (ttlMs 0) is stale.
    await f.upstream.request('tools/call', { name: 'rediscover', arguments: { capabilities: { tools: {}, resources: {} }, instructions: 'v2' } });
    await sleep(250);
    await c.aggregate('tools');
    await waitFor(() => f.upstream.capabilities?.resources !== undefined, 2000, 'the discover answer asked again');
    expect(f.upstream.instructions).toBe('v2');
    // Of the families it offered before or offers now: never prompts, which it offers in neither.
    expect(changed).toEqual(expect.arrayContaining(['tools', 'resources']));
    expect(changed).not.toContain('prompts');
    expect((await c.aggregate('resources')).items.map((r) => r.uri)).toEqual(['mut://doc']);
    expect(f.stats()['server/discover']).toBe(2);
    // Within rediscoverMinMs it is not asked again, and an answer that did not change is no change.
    await c.aggregate('tools');
    await sleep(250);
    changed.length = 0;
    await c.aggregate('tools');
    await waitFor(() => f.stats()['server/discover'] === 3, 2000, 'asked a third time');
    await sleep(50);
    expect(changed).toEqual([]);
  });

  it('a wall clock stepped back an hour keeps neither a list nor a discover answer past its time: freshness is monotonic', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const f = await fixture('w', { LIST_TTL_MS: '300', CACHE_SCOPE: 'public' }, { rediscoverMinMs: 200 });
      const c = catalogOf([{ id: 'w', config: serverConfig('w'), upstream: f.upstream }]);
      await c.aggregate('tools');
      step = -3_600_000;
      await sleep(350);
      // On the wall clock both were received an hour ahead, and stayed fresh for the hour.
      await c.aggregate('tools');
      expect(f.stats()['tools/list']).toBe(2);
      await waitFor(() => f.stats()['server/discover'] === 2, 2000, 'the discover answer asked again');
    } finally {
      wall.mockRestore();
    }
  });

  it('ttlMs 0 refetches every time; a private answer makes the aggregate private', async () => {
    const f = await fixture('z', { LIST_TTL_MS: '0' });
    const c = catalogOf([{ id: 'z', config: serverConfig('z'), upstream: f.upstream }]);
    const a = await c.aggregate('tools');
    await c.aggregate('tools');
    expect(f.stats()['tools/list']).toBe(2);
    expect(a.scope).toBe('private');
    expect(a.ttlMs).toBe(0);
  });

  it('a part kept until list_changed makes the aggregate ttlMs 0, however long the others stay fresh', async () => {
    const m = await fixture('m', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' });
    const l = await fixture('l', { ERA: 'legacy' });
    const c = catalogOf([
      { id: 'm', config: serverConfig('m'), upstream: m.upstream },
      { id: 'l', config: serverConfig('l'), upstream: l.upstream },
    ]);
    expect((await c.aggregate('tools', {})).ttlMs).toBe(0);
    const alone = catalogOf([{ id: 'm', config: serverConfig('m'), upstream: m.upstream }]);
    expect((await alone.aggregate('tools')).ttlMs).toBeGreaterThan(3_000_000);
    // A group that shows only the modern server is dated and scoped by its list alone.
    const grouped = catalogOf(
      [
        { id: 'm', config: serverConfig('m'), upstream: m.upstream },
        { id: 'l', config: serverConfig('l'), upstream: l.upstream },
      ],
      { groups: new Groups({ mo: { servers: ['m'] }, lo: { servers: ['l'] } }) },
    );
    const mo = await grouped.aggregate('tools', { group: 'mo' });
    expect([mo.ttlMs > 3_000_000, mo.scope]).toEqual([true, 'public']);
    const lo = await grouped.aggregate('tools', { group: 'lo' });
    expect([lo.ttlMs, lo.scope]).toEqual([0, 'private']);
    expect((await grouped.aggregate('tools')).ttlMs).toBe(0);
  });

  it('a list that lacks a server whose list failed has ttlMs LACKING_TTL_MS at most (the next list may have its items); a group without that server keeps its own', async () => {
    const m = await fixture('m', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' });
    const f = await fixture('f', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' });
    await f.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    const c = catalogOf(
      [
        { id: 'm', config: serverConfig('m'), upstream: m.upstream },
        { id: 'f', config: serverConfig('f'), upstream: f.upstream },
      ],
      // Asked again at once once it works (the wait after a failure is the next test's).
      { groups: new Groups({ mo: { servers: ['m'] } }), listRetryMs: 0 },
    );
    expect((await c.aggregate('tools')).ttlMs).toBe(LACKING_TTL_MS);
    // Built again from the same parts (the memo): still lacking f.
    expect((await c.aggregate('tools')).ttlMs).toBe(LACKING_TTL_MS);
    expect((await c.aggregate('tools', { group: 'mo' })).ttlMs).toBeGreaterThan(3_000_000);
    await f.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: false } });
    expect((await c.aggregate('tools')).ttlMs).toBeGreaterThan(3_000_000);
  });

  it('a list that lacks a server it shows because that server is down (restarting) has ttlMs LACKING_TTL_MS at most, however long it stays down: it is back any moment', async () => {
    const m = await fixture('m', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' });
    // Restarted only after a minute: down for the whole test.
    const f = await startMutable('f', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' }, silentLogger, {}, { backoff: { baseMs: 60_000, maxMs: 60_000, jitter: 0 } });
    fixtures.push(f);
    const c = catalogOf(
      [
        { id: 'm', config: serverConfig('m'), upstream: m.upstream },
        { id: 'f', config: serverConfig('f'), upstream: f.upstream },
      ],
      { groups: new Groups({ mo: { servers: ['m'] }, fo: { servers: ['f'] } }) },
    );
    expect((await c.aggregate('tools')).ttlMs).toBeGreaterThan(3_000_000);
    process.kill((f.upstream as StdioUpstream).pid!, 'SIGKILL'); // startMutable's servers are stdio
    await waitFor(() => f.upstream.state === 'restarting', 5000, 'f restarting');
    const down = await c.aggregate('tools');
    expect(names(down.items).some((n) => n.startsWith('f__'))).toBe(false);
    expect(down.ttlMs).toBe(LACKING_TTL_MS);
    // A list of none but down servers: bounded too, not 0 (a client keeping lists by ttlMs asked at every turn).
    expect((await c.aggregate('tools', { group: 'fo' })).ttlMs).toBe(LACKING_TTL_MS);
    // A group that does not show it is not dated by it.
    expect((await c.aggregate('tools', { group: 'mo' })).ttlMs).toBeGreaterThan(3_000_000);
  });

  it('a server not ready since it was started (first start, restart, reload) counts as down by what the hub knows it offers: ttlMs LACKING_TTL_MS at most', async () => {
    const m = await fixture('m', { LIST_TTL_MS: '3600000', CACHE_SCOPE: 'public' });
    // A server that never answers its handshake (it exits as its stdin closes): starting for the whole test, with no capabilities of its own.
    const spec: UpstreamSpec = { id: 's', command: process.execPath, args: ['-e', "process.stdin.on('data', () => {}).on('end', () => process.exit(0))"], env: {}, era: 'auto', timeoutMs: 60_000, probeTimeoutMs: 60_000, maxFrameBytes: 1 << 20 };
    const slow = createUpstream(spec, silentLogger);
    fixtures.push({ upstream: slow } as Fixture);
    void slow.start().catch(() => undefined);
    const known = new KnownCapabilities();
    const c = catalogOf(
      [
        { id: 'm', config: serverConfig('m'), upstream: m.upstream },
        { id: 's', config: serverConfig('s'), upstream: slow },
      ],
      { capabilitiesOf: (h) => known.of(h.id, h.upstream.state, h.upstream.capabilities) },
    );
    expect(slow.state).toBe('starting');
    const list = await c.aggregate('tools');
    expect(names(list.items).every((n) => n.startsWith('m__'))).toBe(true);
    // It carried m's hour: a modern client that does not listen kept a list without s's tools that long.
    expect(list.ttlMs).toBe(LACKING_TTL_MS);
  });

  it('a snapshot has one cacheScope: the same items under another scope are another snapshot', async () => {
    const f = await fixture('f', { LIST_TTL_MS: '0', SCOPE_FLIP: '1' });
    const c = catalogOf([{ id: 'f', config: serverConfig('f'), upstream: f.upstream }]);
    const a = await c.aggregate('tools');
    const b = await c.aggregate('tools');
    expect(names(a.items)).toEqual(names(b.items));
    expect([a.scope, b.scope].sort()).toEqual(['private', 'public']);
    expect(a.snapshot).not.toBe(b.snapshot);
    const again = await c.aggregate('tools');
    expect(again.scope).toBe(a.scope);
    expect(again.snapshot).toBe(a.snapshot);
  });

  it('concurrent misses share one upstream fetch', async () => {
    const f = await fixture('s', { LIST_TTL_MS: '0', LIST_DELAY_MS: '200' });
    const c = catalogOf([{ id: 's', config: serverConfig('s'), upstream: f.upstream }]);
    const all = await Promise.all(Array.from({ length: 100 }, () => c.aggregate('tools')));
    expect(new Set(all.map((a) => a.snapshot)).size).toBe(1);
    expect(f.stats()['tools/list']).toBe(1);
  });

  it('legacy with listChanged: cached until list_changed; without it: cacheTtlMs', async () => {
    const lc = await fixture('lc', { ERA: 'legacy' });
    const plain = await fixture('pl', { ERA: 'legacy', LIST_CHANGED: '0' });
    const c = catalogOf([
      { id: 'lc', config: serverConfig('lc'), upstream: lc.upstream },
      { id: 'pl', config: serverConfig('pl', { cacheTtlMs: 300 }), upstream: plain.upstream },
    ]);
    const a = await c.aggregate('tools');
    expect(a.scope).toBe('private'); // legacy upstreams give no scope: the safe reading
    await c.aggregate('tools');
    expect(lc.stats()['tools/list']).toBe(1);
    expect(plain.stats()['tools/list']).toBe(1);
    await sleep(350);
    await c.aggregate('tools');
    expect(lc.stats()['tools/list']).toBe(1); // no TTL: only list_changed refreshes it
    expect(plain.stats()['tools/list']).toBe(2);
    const changed = new Promise((r) => c.once('changed', r));
    await lc.upstream.request('tools/call', { name: 'mutate', arguments: { op: 'describe', tool: 'add', description: 'Adds' } });
    await changed;
    await c.aggregate('tools');
    expect(lc.stats()['tools/list']).toBe(2);
  });

  it('serves the stale entry when a refresh fails', async () => {
    const f = await fixture('st', { LIST_TTL_MS: '50' });
    const c = catalogOf([{ id: 'st', config: serverConfig('st'), upstream: f.upstream }]);
    const a = await c.aggregate('tools');
    await sleep(80);
    // The upstream's lists start failing: the refresh fails, the stale entry is served.
    await f.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    const b = await c.aggregate('tools');
    expect(b.items).toEqual(a.items);
    expect(c.cache.stats.staleServed).toBe(1);
  });

  it('a list that failed is not asked again for LIST_RETRY_MS, whether a stale one is served or none: clients listing meanwhile do not reach the failing upstream; a list_changed ends the wait', async () => {
    const st = await fixture('st', { LIST_TTL_MS: '50' });
    const none = await fixture('no', { LIST_TTL_MS: '50' });
    await none.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    const c = catalogOf([
      { id: 'st', config: serverConfig('st'), upstream: st.upstream },
      { id: 'no', config: serverConfig('no'), upstream: none.upstream },
    ]);
    const a = await c.aggregate('tools');
    await sleep(80);
    await st.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    for (let i = 0; i < 20; i++) {
      const b = await c.aggregate('tools');
      expect(b.items).toEqual(a.items);
    }
    expect(st.stats()['tools/list']).toBe(2);
    expect(none.stats()['tools/list']).toBe(1);
    expect(c.cache.stats.staleServed).toBe(20);
    // The server says its list changed: asked again at once.
    const changed = new Promise((r) => c.once('changed', r));
    await st.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: false } });
    await st.upstream.request('tools/call', { name: 'mutate', arguments: { op: 'storm', n: 1 } });
    await changed;
    expect(names((await c.aggregate('tools')).items)).toEqual(names(a.items));
    expect(st.stats()['tools/list']).toBe(3);
    expect(c.cache.stats.staleServed).toBe(20);
  });

  it('a list that failed with nothing to serve instead, when it succeeds again, is told to clients: those that listed meanwhile lack its items', async () => {
    const ok = await fixture('ok', { LIST_TTL_MS: '60000', CACHE_SCOPE: 'public' });
    const f = await fixture('f', { LIST_TTL_MS: '60000', CACHE_SCOPE: 'public' });
    await f.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    const c = catalogOf(
      [
        { id: 'ok', config: serverConfig('ok'), upstream: ok.upstream },
        { id: 'f', config: serverConfig('f'), upstream: f.upstream },
      ],
      { listRetryMs: 0 },
    );
    const changed: unknown[][] = [];
    c.on('changed', (...args: unknown[]) => void changed.push(args));
    expect(names((await c.aggregate('tools')).items).some((n) => n.startsWith('f__'))).toBe(false);
    expect(changed).toEqual([]);
    await f.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: false } });
    expect(names((await c.aggregate('tools')).items)).toContain('f__echo');
    // Of the server's own connection's list: not told to principals listed from their own (SHARED_ONLY).
    expect(changed).toEqual([['tools', undefined, 'f', SHARED_ONLY]]);
    // Once: the next list is no news.
    await c.aggregate('tools');
    expect(changed).toHaveLength(1);
  });

  it('private entries are partitioned by the upstream authorization context; public ones are shared', async () => {
    const shared = await fixture('p', { CACHE_SCOPE: 'public', LIST_TTL_MS: '60000' });
    const alice = await fixture('p-alice', { CACHE_SCOPE: 'private', LIST_TTL_MS: '60000', TOOLS: JSON.stringify([{ name: 'alice_only', inputSchema: { type: 'object' } }]) });
    const bob = await fixture('p-bob', { CACHE_SCOPE: 'private', LIST_TTL_MS: '60000', TOOLS: JSON.stringify([{ name: 'bob_only', inputSchema: { type: 'object' } }]) });
    const h: ServerHandle = { id: 'p', config: serverConfig('p'), upstream: shared.upstream };
    const own: Record<string, Fixture> = { alice, bob };
    const connection = (_h: ServerHandle, principal: string | undefined): Connection =>
      principal && own[principal] ? { credential: principal, upstream: own[principal].upstream } : { credential: '', upstream: shared.upstream };
    const c = catalogOf([h], { connection });

    // The shared (server's own credentials) list is public: a principal without its own
    // credentials and one with them both reuse it while fresh.
    const anon = await c.aggregate('tools', { principal: 'anonymous' });
    expect(names(anon.items)).toContain('p__echo');
    expect(anon.scope).toBe('public');
    const aliceSeesShared = await c.aggregate('tools', { principal: 'alice' });
    expect(names(aliceSeesShared.items)).toContain('p__echo');
    expect(alice.stats()['tools/list']).toBeUndefined();

    // Once the shared entry is gone, each principal's own private list is fetched and kept apart.
    c.cache.drop('p\0');
    await shared.upstream.request('tools/call', { name: 'fail_lists', arguments: { on: true } });
    const a = await c.aggregate('tools', { principal: 'alice' });
    const b = await c.aggregate('tools', { principal: 'bob' });
    expect(names(a.items)).toEqual(['p__alice_only']);
    expect(names(b.items)).toEqual(['p__bob_only']);
    expect(a.scope).toBe('private');
    expect(b.scope).toBe('private');
    for (let i = 0; i < 3; i++) {
      expect(names((await c.aggregate('tools', { principal: 'alice' })).items)).toEqual(['p__alice_only']);
      expect(names((await c.aggregate('tools', { principal: 'bob' })).items)).toEqual(['p__bob_only']);
    }
    expect(alice.stats()['tools/list']).toBe(1);
    expect(bob.stats()['tools/list']).toBe(1);
    expect(await c.resolveTool('p__bob_only', { principal: 'alice' })).toBeUndefined();
    expect((await c.resolveTool('p__bob_only', { principal: 'bob' }))?.upstreamName).toBe('bob_only');
  });

  it('caches resources/read per URI for the upstream ttlMs; resources/updated drops it', async () => {
    const f = await fixture('r', { CACHE_SCOPE: 'public', LIST_TTL_MS: '60000' });
    const h: ServerHandle = { id: 'r', config: serverConfig('r'), upstream: f.upstream };
    let uris: string[] = [];
    const c = catalogOf([h], { subscribedUris: () => uris });
    expect(c.reads.get('r', '', 'mut://doc')).toBeUndefined();
    const r = await f.upstream.request('resources/read', { uri: 'mut://doc' });
    c.reads.put('r', '', 'mut://doc', r, 60000, 'public');
    expect(c.reads.get('r', 'someone', 'mut://doc')?.result).toBe(r); // public: every partition
    // The catalog listens to the modern upstream: subscribe the URI, then announce a change.
    const listening = () => c.listens.listening('r');
    await waitFor(listening, 2000, 'listen stream');
    const updated = new Promise((res) => c.once('resourceUpdated', res));
    uris = ['mut://doc'];
    c.subscriptionsChanged('r');
    await sleep(100);
    await f.upstream.request('tools/call', { name: 'touch', arguments: { uri: 'mut://doc' } });
    expect(await updated).toEqual({ server: 'r', uri: 'mut://doc' });
    expect(c.reads.get('r', '', 'mut://doc')).toBeUndefined();
  });
});
