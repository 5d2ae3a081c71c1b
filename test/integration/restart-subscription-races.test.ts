/**
 * Resource subscriptions made while `servers restart` (or a reload) replaces their legacy
 * server, through the real hub and real upstream processes: the subscribe sent to the old
 * process is answered by it as it drains, after the new process was started and asked for the
 * subscriptions the hub held then. The subscription must still live on the new process: the
 * client is told of updates from there. The first process holds its resources/subscribe answers
 * until a gate file exists; the second answers at once.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, LEGACY_VERSION, legacySession, post, waitForReady, type Json } from '../helpers/wire.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { tmp } from './catalog-helpers.js';
import { waitUntil } from './faults-helpers.js';
import { queryRows } from './ledger-helpers.js';
import { inOneTurn, restartRequest } from '../helpers/one-turn.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

interface Rig {
  hub: HubProcess;
  gate: string;
  /** The request counts of the first process (or of the process `pid`). */
  stats: (pid?: string) => Record<string, number>;
  /** The first process's pid. */
  pid1: string;
  /** Writes the config with `r`'s environment changed by `extra`: a reload replaces it. */
  reconfigure: (extra: Record<string, string>) => void;
}

let rig: Rig | undefined;
/** Stopped after each test, as rig's. */
let plain: HubProcess | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
  await rig?.hub.stop();
  await plain?.stop();
  rig = plain = undefined;
});

/**
 * A hub with one legacy server `r` whose first process holds its answers of `held` (its
 * subscribes, unless told) while the gate is missing. Each process counts its requests in a file
 * of its own.
 */
async function rigged(held = 'resources/subscribe', env: Record<string, string> = {}): Promise<Rig> {
  const dir = tmp();
  const gate = join(dir, 'gate');
  writeFileSync(gate, '');
  const servers = (extra: Record<string, string>) => ({
    r: nodeServer(MUTABLE, [], { ERA: 'legacy', LIST_GATE: gate, LIST_GATE_FIRST: '1', LIST_GATE_KINDS: held, STATS_FILE: join(dir, 'stats-{pid}.json'), ...env, ...extra }),
  });
  const hub = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: servers({}) }, { dir });
  await waitForReady(hub.url, ['r']);
  // The first process claimed the gate's `.first` file with its pid as it started.
  const pid1 = readFileSync(`${gate}.first`, 'utf8');
  const stats = (pid = pid1) => JSON.parse(readFileSync(join(dir, `stats-${pid}.json`), 'utf8')) as Record<string, number>;
  return { hub, gate, stats, pid1, reconfigure: (extra) => setSection(hub, 'servers', servers(extra)) };
}

async function restart(hub: HubProcess): Promise<void> {
  expect((await fetch(new URL('/admin/servers/r/restart', hub.url), { method: 'POST' })).status).toBe(200);
  await waitForReady(hub.url, ['r']);
}

async function reload(r: Rig): Promise<void> {
  r.reconfigure({ TAG: '-reloaded' });
  await loggedTimes(r.hub, 'config reloaded', 1);
  await waitForReady(r.hub.url, ['r']);
}

/**
 * Makes `subscribe` once the first process holds subscribe answers, waits until that process got
 * it, has `r` replaced (the new process ready), then lets the first process answer.
 */
async function acrossRestart<T>(r: Rig, subscribe: () => Promise<T>, replace = () => restart(r.hub)): Promise<T> {
  rmSync(r.gate);
  const before = r.stats()['resources/subscribe'] ?? 0;
  const pending = subscribe();
  await expect.poll(() => r.stats()['resources/subscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before);
  await replace();
  writeFileSync(r.gate, '');
  return pending;
}

async function legacyClient(hub: HubProcess, updates: string[]): Promise<ClientV1> {
  const c = new ClientV1({ name: 'legacy-subs', version: '1.0.0' });
  await c.connect(new TransportV1(new URL('/mcp', hub.url)));
  closing.push(() => c.close());
  c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
  return c;
}

async function modernClient(hub: HubProcess, updates: string[]): Promise<ClientV2> {
  const c = new ClientV2({ name: 'modern-subs', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await c.connect(new TransportV2(new URL('/mcp', hub.url)));
  closing.push(() => c.close());
  c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
  return c;
}

/** `told 1` when the process serving `r` now holds a subscription to mut://doc (so it sent an update). */
async function touch(c: { callTool: ClientV1['callTool'] }): Promise<string> {
  return String(firstText((await c.callTool({ name: 'r__touch', arguments: { uri: 'mut://doc', report: true } })) as never));
}

describe('a legacy server replaced while a subscription to it is made', () => {
  it('resources/subscribe answered by the old process after `servers restart`: the new process holds it, and its updates arrive', async () => {
    rig = await rigged();
    const updates: string[] = [];
    const c = await legacyClient(rig.hub, updates);
    expect(await acrossRestart(rig, () => c.subscribeResource({ uri: 'mut://doc' }))).toEqual({});
    // Answered once the new process holds it: not a subscription the old one took away with it.
    expect(await touch(c)).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
  }, 60_000);

  it('resources/subscribe answered by the old process after a reload that replaced the server: the new process holds it', async () => {
    rig = await rigged();
    const r = rig;
    const updates: string[] = [];
    const c = await legacyClient(r.hub, updates);
    expect(await acrossRestart(r, () => c.subscribeResource({ uri: 'mut://doc' }), () => reload(r))).toEqual({});
    expect(await touch(c)).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
  }, 60_000);

  // Its client unsubscribed while the old process held it: nobody stays for it, and the old
  // process lets it go. Carried to the new process all the same, it was held there for nobody
  // (never unsubscribed: no holder left to do it), made for no principal.
  it('resources/subscribe taken back (unsubscribe) while the old process holds it after `servers restart`: the new process is not subscribed for nobody', async () => {
    rig = await rigged();
    const r = rig;
    const c = await legacyClient(r.hub, []);
    const other = await legacyClient(r.hub, []);
    const replaceThenUnsubscribe = async () => {
      await restart(r.hub);
      expect(await c.unsubscribeResource({ uri: 'mut://doc' })).toEqual({});
    };
    expect(await acrossRestart(r, () => c.subscribeResource({ uri: 'mut://doc' }), replaceThenUnsubscribe)).toEqual({});
    expect(await touch(other)).toBe('told 0');
  }, 60_000);

  it("a modern listen stream's resourceSubscriptions, subscribed by the old process after `servers restart`: the new process holds them, and the stream gets their updates", async () => {
    rig = await rigged();
    const updates: string[] = [];
    const c = await modernClient(rig.hub, updates);
    const sub = await acrossRestart(rig, () => c.listen({ resourceSubscriptions: ['mut://doc'] }));
    closing.unshift(() => sub.close());
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['mut://doc']);
    expect(String(firstText((await c.callTool({ name: 'r__touch', arguments: { uri: 'mut://doc', report: true } })) as never))).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
  }, 60_000);
});

/**
 * Has `c` subscribe to mut://doc once the first process holds the unsubscribe of it (its only
 * other subscriber's, `leaving`), so that the subscribe waits to be made for that one's answer;
 * has `r` replaced meanwhile (the new process ready), then lets the first process answer.
 */
async function behindUnsubscribe<T>(r: Rig, subscribe: () => Promise<T>): Promise<T> {
  const other = await legacyClient(r.hub, []);
  expect(await other.subscribeResource({ uri: 'mut://doc' })).toEqual({});
  rmSync(r.gate);
  const leaving = other.unsubscribeResource({ uri: 'mut://doc' });
  await expect.poll(() => r.stats()['resources/unsubscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
  const pending = subscribe();
  await loggedTimes(r.hub, 'a subscribe waits for the unsubscribe of its URI on its way there', 1);
  await restart(r.hub);
  writeFileSync(r.gate, '');
  expect(await leaving).toEqual({});
  return pending;
}

describe('a subscribe routed before `servers restart` and made after it', () => {
  it('a legacy resources/subscribe that waited for an unsubscribe of its URI on the old process is routed again: the new process holds it', async () => {
    rig = await rigged('resources/unsubscribe');
    const r = rig;
    const updates: string[] = [];
    const c = await legacyClient(r.hub, updates);
    // Not answered "replaced … send it again": nothing was sent, and it is made on the new process.
    expect(await behindUnsubscribe(r, () => c.subscribeResource({ uri: 'mut://doc' }))).toEqual({});
    expect(r.stats()['resources/subscribe']).toBe(1);
    expect(await touch(c)).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
  }, 60_000);

  // Made once the old process answered the other session's unsubscribe: its row begun in that
  // turn, and the restart read in the same turn, before the row's commit at its end (the hub
  // stopped while both came: inOneTurn). Nothing was sent, so it is routed again, as one held
  // before it was made; its first row says so.
  it('a legacy resources/subscribe whose server is replaced in the turn its row is written is routed again: the new process holds it', async () => {
    const said = join(tmp(), 'said');
    rig = await rigged('resources/unsubscribe', { GATE_SAID: said });
    const r = rig;
    const updates: string[] = [];
    const c = await legacyClient(r.hub, updates);
    const other = await legacyClient(r.hub, []);
    expect(await other.subscribeResource({ uri: 'mut://doc' })).toEqual({});
    rmSync(r.gate);
    const leaving = other.unsubscribeResource({ uri: 'mut://doc' });
    await expect.poll(() => r.stats()['resources/unsubscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
    // Its error, if any, as text: it may come before the restart is waited for.
    const pending = c.subscribeResource({ uri: 'mut://doc' }).catch((err: unknown) => String(err));
    await loggedTimes(r.hub, 'a subscribe waits for the unsubscribe of its URI on its way there', 1);
    const answered = () => expect.poll(() => (existsSync(said) ? readFileSync(said, 'utf8') : ''), { timeout: 10_000, interval: 5 }).toContain('resources/unsubscribe');
    expect(await inOneTurn(r.hub, () => writeFileSync(r.gate, ''), answered, restartRequest('r'))).toBe(200);
    await waitForReady(r.hub.url, ['r']);
    expect(await leaving).toEqual({});
    expect(await pending).toEqual({});
    // The old process was sent the other session's subscribe only.
    expect(r.stats()['resources/subscribe']).toBe(1);
    expect(await touch(c)).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
    const rows = await queryRows(join(r.hub.dir, 'ledger.db'), { tool: 'mut://doc' });
    const subscribes = rows.filter((row) => row.method === 'resources/subscribe');
    // The other session's, this one's first (not sent), and this one's routed again.
    expect(subscribes.map((row) => [row.outcome, row.errorMessage]).sort()).toEqual([
      ['ok', null],
      ['ok', null],
      ['unavailable', expect.stringMatching(/is replaced: .*not sent, routed again$/)],
    ]);
  }, 60_000);

  it("a modern listen stream's resourceSubscriptions that waited for an unsubscribe of the URI on the old process: made on the new process only", async () => {
    rig = await rigged('resources/unsubscribe');
    const r = rig;
    const updates: string[] = [];
    const c = await modernClient(r.hub, updates);
    const sub = await behindUnsubscribe(r, () => c.listen({ resourceSubscriptions: ['mut://doc'] }));
    closing.unshift(() => sub.close());
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['mut://doc']);
    // The old process, draining, was sent the other session's subscribe and nothing more.
    expect(r.stats()['resources/subscribe']).toBe(1);
    expect(String(firstText((await c.callTool({ name: 'r__touch', arguments: { uri: 'mut://doc', report: true } })) as never))).toBe('told 1');
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('mut://doc');
  }, 60_000);
});

/** Requests of legacy session `sid` at `url`: a hub restarted since takes the session back at the first. */
function inSession(url: string, sid: string): (id: number, method: string, params?: Json) => Promise<Json | undefined> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION };
  return async (id, method, params = {}) => {
    const reply = await post(url, { jsonrpc: '2.0', id, method, params }, headers);
    expect(reply.status, reply.text).toBe(200);
    return reply.body?.result as Json | undefined;
  };
}

describe('a legacy session taken back by a restarted hub while `servers restart` replaces the server', () => {
  // The hub that takes the session back subscribes again for it (Hub.subscribeResources), on a
  // first process that holds the subscribe; meanwhile `r` is replaced and the session
  // unsubscribes. Nobody stays for it, and the old process is told to let it go. Carried to the
  // new process all the same, it was held there for nobody (no holder left to unsubscribe it).
  it('its subscription made again, taken back (unsubscribe) while the old process holds it: the new process is not subscribed for nobody', async () => {
    const dir = tmp();
    const gate = join(dir, 'gate');
    const env = { ERA: 'legacy', STATS_FILE: join(dir, 'stats-{pid}.json') };
    const statsOf = (pid: string) => JSON.parse(readFileSync(join(dir, `stats-${pid}.json`), 'utf8')) as Record<string, number>;
    const before = (plain = await startHub({ servers: { r: nodeServer(MUTABLE, [], env) } }, { dir }));
    await waitForReady(before.url, ['r']);
    const session = await legacySession(before.url);
    expect((await session.request(1, 'resources/subscribe', { uri: 'mut://doc' })).body?.result).toEqual({});
    expect(await before.stop()).toBe(0);
    // The restarted hub's first process of `r` holds its subscribes while the gate is missing.
    const gated = { ...env, LIST_GATE: gate, LIST_GATE_FIRST: '1', LIST_GATE_KINDS: 'resources/subscribe' };
    const hub = (plain = await startHub({ listen: { drainTimeoutMs: 20_000 }, servers: { r: nodeServer(MUTABLE, [], gated) } }, { dir }));
    await waitForReady(hub.url, ['r']);
    const pid1 = readFileSync(`${gate}.first`, 'utf8');
    const rpc = inSession(hub.url, session.sessionId);
    expect(await rpc(2, 'ping')).toEqual({});
    await expect.poll(() => statsOf(pid1)['resources/subscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
    await restart(hub);
    expect(await rpc(3, 'resources/unsubscribe', { uri: 'mut://doc' })).toEqual({});
    writeFileSync(gate, '');
    // Answered, and let go on the old process: nobody held it.
    await expect.poll(() => statsOf(pid1)['resources/unsubscribe'] ?? 0, { timeout: 10_000, interval: 20 }).toBe(1);
    expect(String(firstText(await rpc(4, 'tools/call', { name: 'r__touch', arguments: { uri: 'mut://doc', report: true } })))).toBe('told 0');
  }, 60_000);
});

describe('a modern server restarted on request', () => {
  it("keeps a legacy client's resources/subscribe and a modern client's listen stream subscribed: the new process's updates reach both", async () => {
    const hub = (plain = await startHub({ servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern' }) } }, { dir: tmp() }));
    await waitForReady(hub.url, ['m']);
    const legacyUpdates: string[] = [];
    const legacy = await legacyClient(hub, legacyUpdates);
    expect(await legacy.subscribeResource({ uri: 'mut://doc' })).toEqual({});
    const modernUpdates: string[] = [];
    const modern = await modernClient(hub, modernUpdates);
    const sub = await modern.listen({ resourceSubscriptions: ['mut://doc'] });
    closing.unshift(() => sub.close());
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['mut://doc']);
    expect((await fetch(new URL('/admin/servers/m/restart', hub.url), { method: 'POST' })).status).toBe(200);
    await waitForReady(hub.url, ['m']);
    // The hub listens on the new process as it is ready; a touch may come first. Touched until both heard one.
    await waitUntil(
      'both clients told of an update from the new process',
      async () => {
        await legacy.callTool({ name: 'm__touch', arguments: { uri: 'mut://doc' } });
        return legacyUpdates.length > 0 && modernUpdates.length > 0;
      },
      10_000,
    );
  }, 60_000);
});
