/**
 * Lists and calls racing a reload, through the real hub: what the reload changed (allow/deny)
 * holds for every list and call after it, and a list under way on a connection the reload
 * replaced holds up neither the new connection's lists nor the calls routed by them.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, modernPost, post, waitForReady, type Json, type RawReply } from '../helpers/wire.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

/** A call of `tool` (never answered upstream) that keeps its connection draining until `signal` aborts it. */
function hangingCall(url: string, tool: string, signal: AbortSignal, key?: string): Promise<unknown> {
  const headers = key === undefined ? modernHeaders('tools/call', tool) : { ...modernHeaders('tools/call', tool), authorization: `Bearer ${key}` };
  return fetch(url, { method: 'POST', headers, body: JSON.stringify(modernBody('hang', 'tools/call', { name: tool, arguments: {} })), signal }).catch(() => undefined);
}

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

describe("a list under way on a server's connection as a reload replaces it", () => {
  let hub: HubProcess;
  const gate = join(tmp(), 'restart-race-gate');
  const stats = join(tmp(), 'restart-race-stats.json');
  const lists = () => (JSON.parse(readFileSync(stats, 'utf8')) as Json)['tools/list'] as number;
  const TOOLS = JSON.stringify([{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'hang', inputSchema: { type: 'object' } }]);
  // Lists kept 0 ms: every list asks the server. Its first process's lists wait for the gate; the second's do not.
  const servers = (env: Record<string, string>) => ({ r: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '0', TOOLS, STATS_FILE: stats, ...env }) });
  beforeAll(async () => {
    writeFileSync(gate, '');
    hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: servers({ LIST_GATE: gate }) });
    await waitForReady(hub.url, ['r']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('does not hold, nor fail, the lists and calls of the connection that replaced it', async () => {
    expect((await modernPost(hub.url, 'first-list', 'tools/list')).body?.result).toBeDefined();
    // A call that keeps the first process draining after the reload, and a list held on it.
    // Cancelled at the end (its client goes away): the first process then drains and closes.
    const cancel = new AbortController();
    let hangEnded = false;
    const hanging = fetch(hub.url, {
      method: 'POST',
      headers: modernHeaders('tools/call', 'r__hang'),
      body: JSON.stringify(modernBody('hang', 'tools/call', { name: 'r__hang', arguments: {} })),
      signal: cancel.signal,
    })
      .then((r) => r.text())
      .catch(() => undefined)
      .finally(() => (hangEnded = true));
    await expect.poll(() => (JSON.parse(readFileSync(stats, 'utf8')) as Json)['tools/call'], { timeout: 10_000, interval: 20 }).toBe(1);
    rmSync(gate);
    const before = lists();
    const held = modernPost(hub.url, 'held-list', 'tools/list');
    await expect.poll(lists, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before);
    setSection(hub, 'servers', servers({}));
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['r']);
    const call = await modernPost(hub.url, 'c', 'tools/call', { name: 'r__echo', arguments: { text: 'x' } });
    expect(call.body?.result).toMatchObject({ content: [{ text: 'echo:x' }] });
    // Answered by the new process while the first one still drains (it held the call until it closed).
    expect(hangEnded).toBe(false);
    const names = (((await modernPost(hub.url, 'l', 'tools/list')).body!.result as Json).tools as Json[]).map((t) => t.name);
    expect(names).toContain('r__echo');
    cancel.abort();
    await hanging;
    // The held list ends with the first process (closed once its call was cancelled): its failure is the old connection's.
    expect(await held).toMatchObject({ status: 200 });
    const view = (await (await fetch(new URL("/admin/servers", hub.url))).json()) as { servers: Json[] };
    expect(view.servers.find((s) => s.id === "r")).toMatchObject({ state: 'ready', listError: null });
  });
});

describe('a list change said by a connection a reload replaced, as it drains', () => {
  let hub: HubProcess;
  const dir = tmp();
  const said = join(dir, 'said');
  const TOOLS = JSON.stringify(['echo', 'hang', 'mutate'].map((name) => ({ name, inputSchema: { type: 'object' } })));
  const servers = (stats: string) => ({ r: nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS, STATS_FILE: join(dir, stats) }) });
  const oldLists = () => (JSON.parse(readFileSync(join(dir, 'first.json'), 'utf8')) as Json)['tools/list'] as number;
  beforeAll(async () => {
    hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: servers('first.json') });
    await waitForReady(hub.url, ['r']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it("is not the new connection's list: the first process's tools are not listed for the second", async () => {
    const names = async () => (((await modernPost(hub.url, 'l', 'tools/list')).body!.result as Json).tools as Json[]).map((t) => String(t.name));
    expect(await names()).toContain('r__echo');
    // The first process lists a tool the hub is not told of, and will say its list changed once `said` exists.
    await modernPost(hub.url, 'm', 'tools/call', { name: 'r__mutate', arguments: { op: 'add', def: { name: 'ghost', inputSchema: { type: 'object' } }, silent: true } });
    await modernPost(hub.url, 's', 'tools/call', { name: 'r__mutate', arguments: { op: 'storm', n: 1, gate: said } });
    const cancel = new AbortController();
    const hanging = hangingCall(hub.url, 'r__hang', cancel.signal);
    await expect.poll(() => (JSON.parse(readFileSync(join(dir, 'first.json'), 'utf8')) as Json)['tools/call'], { timeout: 10_000, interval: 20 }).toBe(3);
    const listed = oldLists();
    setSection(hub, 'servers', servers('second.json'));
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['r']);
    expect(await names()).not.toContain('r__ghost');
    writeFileSync(said, '');
    // Either the hub passes the first process's change over, or it lists that process's tools again.
    await expect
      .poll(async () => hub.logs.some((l) => l.includes('a connection replaced since')) || (await names()).includes('r__ghost'), { timeout: 10_000, interval: 50 })
      .toBe(true);
    expect(await names()).not.toContain('r__ghost');
    expect(oldLists()).toBe(listed);
    cancel.abort();
    await hanging;
  });
});

describe('a connection a reload replaced, as it closes at last', () => {
  let hub: HubProcess;
  const dir = tmp();
  const TOOLS = JSON.stringify(['echo', 'hang'].map((name) => ({ name, inputSchema: { type: 'object' } })));
  // Legacy with listChanged: its tools are listed again only when the hub is told (or thinks) they changed.
  const servers = (stats: string) => ({ r: nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS, STATS_FILE: join(dir, stats) }) });
  const newLists = () => (JSON.parse(readFileSync(join(dir, 'second.json'), 'utf8')) as Json)['tools/list'] as number;
  beforeAll(async () => {
    hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: servers('first.json') });
    await waitForReady(hub.url, ['r']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it("leaves the new connection's lists as they are: a call after it is routed without listing the tools again", async () => {
    const echo = async (id: string) => (await modernPost(hub.url, id, 'tools/call', { name: 'r__echo', arguments: { text: id } })).body?.result;
    expect(await echo('first')).toMatchObject({ content: [{ text: 'echo:first' }] });
    // A call that keeps the first process draining after the reload; cancelled once the second is in use.
    const cancel = new AbortController();
    const hanging = hangingCall(hub.url, 'r__hang', cancel.signal);
    await expect.poll(() => (JSON.parse(readFileSync(join(dir, 'first.json'), 'utf8')) as Json)['tools/call'], { timeout: 10_000, interval: 20 }).toBe(2);
    setSection(hub, 'servers', servers('second.json'));
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['r']);
    expect(await echo('second')).toMatchObject({ content: [{ text: 'echo:second' }] });
    const listed = newLists();
    const stopped = () => hub.logs.filter((l) => l.includes('upstream state') && l.includes('"stopped"')).length;
    expect(stopped()).toBe(0);
    cancel.abort();
    await hanging;
    // The first process drained: its connection closed (logged as its state turns, before the state is acted on).
    await expect.poll(stopped, { timeout: 10_000, interval: 20 }).toBe(1);
    expect(await echo('after')).toMatchObject({ content: [{ text: 'echo:after' }] });
    expect(newLists()).toBe(listed);
  });
});

/** The legacy HTTP fixture whose tools and GET streams depend on the bearer's user (`<who>-upstream`). */
const PER_USER = 'test/fixtures/catalog/legacy-per-user-http.mjs';
// `report` as every user lists it (a change of it would be held back: pinning), and `hang`.
const HANG_TOOLS = [
  { name: 'report', description: 'Weekly report', inputSchema: { type: 'object' } },
  { name: 'hang', inputSchema: { type: 'object' } },
];
type UpStats = { sessions: Record<string, number>; calls: Record<string, Record<string, number> | undefined> };
const upStats = async (up: HttpFixture) => (await (await fetch(new URL('/stats', up.url))).json()) as UpStats;

describe('a notification gap of a connection a reload replaced, as it drains', () => {
  let up: HttpFixture;
  let hub: HubProcess;
  // Its user changes with the reload: the first connection's GET stream can be dropped alone.
  const servers = (who: string) => ({ u: { url: up.url, headers: { authorization: `Bearer ${who}-upstream` } } });
  beforeAll(async () => {
    up = await startHttpFixture(PER_USER);
    await fetch(new URL('/ctl', up.url), { method: 'POST', body: JSON.stringify({ who: 'first', tools: HANG_TOOLS }) });
    hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: servers('first') });
    await waitForReady(hub.url, ['u']);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  it("leaves the new connection's lists as they are: they are not listed again", async () => {
    const names = async () => (((await modernPost(hub.url, 'l', 'tools/list')).body!.result as Json).tools as Json[]).map((t) => String(t.name));
    expect(await names()).toContain('u__hang');
    // A call that keeps the first connection draining after the reload; cancelled at the end.
    const cancel = new AbortController();
    const hanging = hangingCall(hub.url, 'u__hang', cancel.signal);
    await expect.poll(async () => (await upStats(up)).calls.first?.['tools/call'], { timeout: 10_000, interval: 20 }).toBe(1);
    setSection(hub, 'servers', servers('second'));
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['u']);
    await expect.poll(names, { timeout: 10_000, interval: 50 }).toEqual(['u__report']);
    const listed = (await upStats(up)).calls.second?.['tools/list'];
    expect(listed).toBeGreaterThan(0);
    // The first connection's GET stream ends with no event to resume from: what it missed is lost.
    await fetch(new URL('/drop?who=first', up.url), { method: 'POST' });
    // Either the hub passes the first connection's gap over, or the new connection's list is fetched again.
    await expect
      .poll(async () => hub.logs.some((l) => l.includes('gap of a connection replaced since')) || ((await names()) && (await upStats(up)).calls.second?.['tools/list'] !== listed), { timeout: 15_000, interval: 100 })
      .toBe(true);
    await names();
    expect((await upStats(up)).calls.second?.['tools/list']).toBe(listed);
    cancel.abort();
    await hanging;
  }, 60_000);
});

/**
 * alice's own connection to PER_USER on a hub of her key, replaced by a reload that changes her
 * upstream credentials while her call on it hangs (so it drains): the steps both cases below take.
 */
function aliceReplacedWhileDraining(ALICE: string) {
  let up: HttpFixture;
  let hub: HubProcess;
  const servers = (who: string) => ({ u: { url: up.url, credentials: { alice: { headers: { authorization: `Bearer ${who}-upstream` } } } } });
  beforeAll(async () => {
    up = await startHttpFixture(PER_USER);
    await fetch(new URL('/ctl', up.url), { method: 'POST', body: JSON.stringify({ who: 'first', tools: HANG_TOOLS }) });
    hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE) }] }, servers: servers('first') });
    await waitForReadyWith(hub.url, ['u'], ALICE);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });
  const as = (id: string, method: string, params: Json = {}, name?: string) =>
    post(hub.url, modernBody(id, method, params), { ...modernHeaders(method, name), authorization: `Bearer ${ALICE}` });
  const report = async (id: string) => ((await as(id, 'tools/call', { name: 'u__report', arguments: {} }, 'u__report')).body?.result as Json | undefined)?.content;
  return {
    up: () => up,
    report,
    /** Her call that keeps her first connection draining after the reload, until `signal` aborts it. */
    hang: (signal: AbortSignal) => hangingCall(hub.url, 'u__hang', signal, ALICE),
    /** Once her hanging call reached her first connection, the reload: her calls go to her second, whose tools/list count it returns. */
    async reload(): Promise<number | undefined> {
      await expect.poll(async () => (await upStats(up)).calls.first?.['tools/call'], { timeout: 10_000, interval: 20 }).toBe(2);
      setSection(hub, 'servers', servers('second'));
      await loggedTimes(hub, 'config reloaded', 1);
      await waitForReadyWith(hub.url, ['u'], ALICE);
      expect(await report('second')).toMatchObject([{ text: 'report for second' }]);
      const listed = (await upStats(up)).calls.second?.['tools/list'];
      expect(listed).toBeGreaterThan(0);
      expect((await upStats(up)).sessions.first).toBe(1);
      return listed;
    },
    /** Her next call is routed without listing the tools again: the hub logged `passedOver`, or its list count moved. */
    async notListedAgain(passedOver: string, listed: number | undefined): Promise<void> {
      await expect
        .poll(async () => hub.logs.some((l) => l.includes(passedOver)) || ((await report('after')) && (await upStats(up)).calls.second?.['tools/list'] !== listed), { timeout: 10_000, interval: 50 })
        .toBe(true);
      expect(await report('after')).toMatchObject([{ text: 'report for second' }]);
      expect((await upStats(up)).calls.second?.['tools/list']).toBe(listed);
    },
  };
}

describe("a principal's own connection a reload replaced, as it closes at last", () => {
  const alice = aliceReplacedWhileDraining('sy_route-races-alice-key-0000000000000000');

  it("leaves her new connection's lists as they are: her next call is routed without listing the tools again", async () => {
    expect(await alice.report('first')).toMatchObject([{ text: 'report for first' }]);
    // Cancelled once the second connection is in use.
    const cancel = new AbortController();
    const hanging = alice.hang(cancel.signal);
    const listed = await alice.reload();
    cancel.abort();
    await hanging;
    // Her first connection drained and closed (its session ended); then her next call.
    await expect.poll(async () => (await upStats(alice.up())).sessions.first ?? 0, { timeout: 15_000, interval: 50 }).toBe(0);
    await alice.notListedAgain("principal's connection replaced since", listed);
  }, 60_000);
});

describe("a list change said by a principal's own connection a reload replaced, as it drains", () => {
  const alice = aliceReplacedWhileDraining('sy_route-races-alice-key-1111111111111111');

  it("leaves her new connection's lists as they are: her next call is routed without listing the tools again", async () => {
    expect(await alice.report('first')).toMatchObject([{ text: 'report for first' }]);
    const cancel = new AbortController();
    const hanging = alice.hang(cancel.signal);
    try {
      const listed = await alice.reload();
      // Her first process, still draining her call, says its tools changed (on its own GET stream).
      await fetch(new URL('/notify?who=first', alice.up().url), { method: 'POST' });
      await alice.notListedAgain('list change said by a connection replaced since', listed);
    } finally {
      cancel.abort();
      await hanging;
    }
  }, 60_000);
});

describe("a notification gap of a principal's own connection", () => {
  let up: HttpFixture;
  let hub: HubProcess;
  const ALICE = 'sy_route-races-alice-key-2222222222222222';
  const BOB = 'sy_route-races-bob-key-22222222222222222222';
  beforeAll(async () => {
    up = await startHttpFixture(PER_USER);
    hub = await startHub({
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE) }, { principal: 'bob', sha256: sha256Hex(BOB) }] },
      servers: { u: { url: up.url, credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } } } } },
    });
    await waitForReadyWith(hub.url, ['u'], ALICE);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  it("lapses her own lists only, not the server's other lists (bob's shared one is not listed again)", async () => {
    const names = async (key: string) =>
      (((await post(hub.url, modernBody('l', 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` })).body!.result as Json).tools as Json[]).map((t) => String(t.name));
    expect(await names(ALICE)).toEqual(['u__report']);
    expect(await names(BOB)).toEqual(['u__report']);
    const before = (await upStats(up)).calls;
    const shared = before.shared?.['tools/list'];
    const hers = before.alice?.['tools/list'];
    expect(shared).toBeGreaterThan(0);
    expect(hers).toBeGreaterThan(0);
    // Her connection's GET stream ends with no event to resume from: what it missed is lost.
    await fetch(new URL('/drop?who=alice', up.url), { method: 'POST' });
    // Either the hub lapses her own lists alone, or bob's shared list is fetched again.
    await expect
      .poll(async () => hub.logs.some((l) => l.includes("notification gap of a principal's own connection")) || ((await names(BOB)) && (await upStats(up)).calls.shared?.['tools/list'] !== shared), { timeout: 15_000, interval: 100 })
      .toBe(true);
    expect(await names(BOB)).toEqual(['u__report']);
    expect((await upStats(up)).calls.shared?.['tools/list']).toBe(shared);
    // Her own list is fetched again: the gap was heard.
    expect(await names(ALICE)).toEqual(['u__report']);
    expect((await upStats(up)).calls.alice?.['tools/list']).toBe(hers! + 1);
  }, 60_000);
});

describe("a list under way as a reload restarts a server it takes nothing from", () => {
  let hub: HubProcess;
  const gate = join(tmp(), 'unrelated-reload-gate');
  const stats = join(tmp(), 'unrelated-reload-stats.json');
  const lists = () => (JSON.parse(readFileSync(stats, 'utf8')) as Json)['tools/list'] as number;
  // `slow`'s lists are kept 0 ms (every build asks it) and held while the gate is away; `other`
  // does not offer tools, so no tools list takes a part of it, and a new TAG restarts it.
  const servers = (tag: string) => ({
    slow: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '0', LIST_GATE: gate, STATS_FILE: stats }),
    other: nodeServer(MUTABLE, [], { ERA: 'modern', TAG: tag, DISCOVER_CAPS: JSON.stringify({ resources: {} }) }),
  });
  beforeAll(async () => {
    writeFileSync(gate, '');
    hub = await startHub({ servers: servers('a') });
    await waitForReady(hub.url, ['slow', 'other']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it("is not built again, nor its servers' lists fetched again", async () => {
    const names = (r: RawReply) => ((r.body!.result as Json).tools as Json[]).map((t) => t.name);
    expect(names(await modernPost(hub.url, 'first', 'tools/list'))).toContain('slow__echo');
    rmSync(gate);
    const before = lists();
    const held = modernPost(hub.url, 'held', 'tools/list');
    await expect.poll(lists, { timeout: 10_000, interval: 20 }).toBe(before + 1);
    setSection(hub, 'servers', servers('b'));
    await loggedTimes(hub, 'config reloaded', 1);
    writeFileSync(gate, '');
    expect(names(await held)).toContain('slow__echo');
    // Built again, it asked `slow` for its list once more (a wait of its slowest list, every time).
    expect(lists()).toBe(before + 1);
  });
});
