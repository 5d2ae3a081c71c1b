/**
 * Resource subscriptions held upstream for downstream clients: a legacy upstream that restarts
 * is asked again for what it forgot, and a group endpoint limits a modern listen stream's
 * subscriptions as it limits reads. A change of resources and templates is said once. Real fixture upstreams, the real built hub, the SDK v2 client.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { dirname, join } from 'node:path';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, heardSoFar, modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { descendants, serverHealth, waitForState, waitUntil } from './faults-helpers.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { waitForRows } from './ledger-helpers.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const QUIET_STATS = join(mkdtempSync(join(tmpdir(), 'switchyard-quiet-')), 'stats.json');
/** While it exists, `sleepy` does not start (start-delay.mjs). */
const SLEEPY_HOLD = join(dirname(QUIET_STATS), 'sleepy-hold');
/** The same for `flaky`. */
const FLAKY_HOLD = join(dirname(QUIET_STATS), 'flaky-hold');
/** The same for `pinned`. */
const PINNED_HOLD = join(dirname(QUIET_STATS), 'pinned-hold');
const LULL_STATS = join(dirname(QUIET_STATS), 'lull.json');
let hub: HubProcess;
let subs: HttpFixture;
let narrow: HttpFixture;

beforeAll(async () => {
  // Its unsubscribes are slow on the network: a subscribe sent after one could overtake it.
  // So are its notifications/initialized, before which a session refuses calls (as Python's do).
  [subs, narrow] = await Promise.all([
    startHttpFixture('test/fixtures/servers/legacy-http-subs.mjs', { UNSUBSCRIBE_HOLD_MS: '300', INITIALIZED_HOLD_MS: '400', STRICT_INITIALIZED: '1' }),
    startHttpFixture('test/fixtures/servers/legacy-http-subs.mjs', { DOC_URI: 'narrow://a,narrow://b,narrow://c' }),
  ]);
  hub = await startHub({
    groups: { onlyMod: { servers: ['mod'] } },
    servers: {
      // Legacy Streamable HTTP: its subscriptions belong to the hub's session there.
      web: { url: subs.url },
      // The same, one request at a time and none waiting for a slot.
      narrow: { url: narrow.url, maxConcurrent: 1, maxQueue: 0 },
      // The marker argument finds this process among the hub's children.
      leg: nodeServer(MUTABLE, ['--marker-leg'], { ERA: 'legacy', DOC_URI: 'leg://doc' }),
      mod: nodeServer(MUTABLE, [], { ERA: 'modern', DOC_URI: 'mod://doc' }),
      // Slow to start, so a restart leaves it down for a second and a half.
      slow: { command: process.execPath, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), join(ROOT, MUTABLE)], env: { ERA: 'legacy', DOC_URI: 'slow://doc', TEMPLATE: 'slow://t/{name}', START_DELAY_MS: '1500' } },
      // Its `hang` never answered; the server's own limit on a call 300 ms (its handshake's 5 s).
      stuck: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'stuck://doc', TOOLS: JSON.stringify([{ name: 'hang', inputSchema: { type: 'object' } }]) }), timeoutMs: 5000, maxTotalTimeoutMs: 300 },
      // Never answers resources/unsubscribe (nor its `hang`); no health check: only calls may take it down.
      quiet: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'quiet://doc', UNSUBSCRIBE_SILENT: '1', STATS_FILE: QUIET_STATS, TOOLS: JSON.stringify([{ name: 'hang', inputSchema: { type: 'object' } }]) }), timeoutMs: 300, healthCheckMs: 0 },
      // Subscribes and unsubscribes in 0.6 s each, one request at a time and none waiting for a
      // slot; a call refused busy is not tried again (it would be: it surely never ran).
      lull: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'lull://doc', SUBSCRIBE_DELAY_MS: '600', UNSUBSCRIBE_DELAY_MS: '600', STATS_FILE: LULL_STATS }), maxConcurrent: 1, maxQueue: 0, retry: { maxAttempts: 1, budgetMs: 0 }, healthCheckMs: 0 },
    },
  });
  await waitForReady(hub.url, ['leg', 'mod', 'web', 'narrow', 'slow', 'stuck', 'quiet', 'lull']);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
  await subs?.stop();
  await narrow?.stop();
  rmSync(dirname(QUIET_STATS), { recursive: true, force: true });
});

/** The mutable fixture, started 0.7 s after its process. */
function slowStart(env: Record<string, string>): Record<string, unknown> {
  return { command: process.execPath, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), join(ROOT, MUTABLE)], env: { START_DELAY_MS: '700', ...env } };
}

async function client(path = '/mcp'): Promise<ClientV2> {
  const c = new ClientV2({ name: 'subs', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await c.connect(new TransportV2(new URL(path, hub.url)));
  return c;
}

describe('resource subscriptions', () => {
  it('a legacy upstream that restarted is subscribed again: updates keep coming', async () => {
    const c = await client();
    const updates: string[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const changed = { tools: 0, resources: 0 };
    c.setNotificationHandler('notifications/tools/list_changed', async () => void changed.tools++);
    c.setNotificationHandler('notifications/resources/list_changed', async () => void changed.resources++);
    const sub = await c.listen({ resourceSubscriptions: ['leg://doc'], toolsListChanged: true, resourcesListChanged: true });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['leg://doc']);
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc' } });
    await expect.poll(() => updates.length, { timeout: 2000, interval: 20 }).toBe(1);

    const leg = descendants(hub.proc.pid!).find((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--marker-leg'));
    expect(leg).toBeDefined();
    process.kill(leg!, 'SIGKILL');
    await waitForState(hub.url, 'leg', ['restarting', 'starting', 'failed']).catch(() => undefined);
    await waitForState(hub.url, 'leg', ['ready']);
    await waitUntil('the new leg process', async () => descendants(hub.proc.pid!).some((p) => p !== leg && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--marker-leg')) || undefined);

    // The fixture announces only URIs it was asked to subscribe to, as real servers do: touched
    // until the new process says it told a subscriber (the hub's subscribe reached it), whose
    // update then arrives. Not a fixed wait after each touch: on a loaded machine it came later.
    await waitUntil('the new process subscribed again', async () => firstText(await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc', report: true } })) === 'told 1' || undefined, 5_000);
    await expect.poll(() => updates.length, { timeout: 5000, interval: 20 }).toBeGreaterThan(1);
    // Each state change of the upstream is one change of every list: said once per family
    // (resources and their templates share resources/list_changed).
    expect(changed.tools).toBeGreaterThan(0);
    expect(changed.resources).toBe(changed.tools);
    await sub.close();
    await c.close();
  });

  it('a legacy HTTP upstream whose session the hub renewed is subscribed again in the new session', async () => {
    const c = await client();
    const updates: string[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const sub = await c.listen({ resourceSubscriptions: ['subs://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['subs://doc']);
    const touch = async () => JSON.stringify((await c.callTool({ name: 'web__touch', arguments: { uri: 'subs://doc' } })).content);
    expect(await touch()).toContain('told 1');
    await expect.poll(() => updates.length, { timeout: 2000, interval: 20 }).toBe(1);

    // The server ends the hub's session (as an expiry would): the next call meets a 404, and
    // the hub opens a new session. Subscriptions were the old session's. The server ends it a
    // moment after answering: until the session's tag changes, a touch would still be the old one's.
    const me = async (): Promise<string | undefined> => {
      const r = await c.callTool({ name: 'web__me', arguments: {} });
      return r.isError ? undefined : JSON.stringify(r.content);
    };
    const before = await me();
    expect(before).toBeDefined();
    await c.callTool({ name: 'web__forget', arguments: {} });
    await waitUntil('a new session', async () => {
      const now = await me();
      return now !== undefined && now !== before ? true : undefined;
    }, 5_000);
    await waitUntil('the new session subscribed again', async () => ((await touch()).includes('told 1') ? true : undefined), 5_000);
    await expect.poll(() => updates.length, { timeout: 2000, interval: 20 }).toBeGreaterThan(1);
    await sub.close();
    await c.close();
  });

  it('a legacy HTTP upstream (maxConcurrent 1, maxQueue 0) whose session the hub renewed is subscribed again to every URI: the renewals wait for the one slot in turn', async () => {
    const uris = ['narrow://a', 'narrow://b', 'narrow://c'];
    const c = await client();
    const updates: string[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const subs = [];
    for (const uri of uris) {
      const sub = await c.listen({ resourceSubscriptions: [uri] });
      expect(sub.honoredFilter.resourceSubscriptions).toEqual([uri]);
      subs.push(sub);
    }
    const told = async (uri: string) => JSON.stringify((await c.callTool({ name: 'narrow__touch', arguments: { uri } })).content);
    for (const uri of uris) expect(await told(uri)).toContain('told 1');
    await expect.poll(() => updates.length, { timeout: 2000, interval: 20 }).toBe(3);
    // The server ends the hub's session: the hub opens a new one and renews the three at once.
    // Before, the first took the slot, the second waited for the hub's own request, and the
    // third was refused "busy" (maxQueue 0): the server never told of that URI again.
    // The session's tag, once answered (not refused busy while the hub's renewals hold the slot).
    const me = async (): Promise<string | undefined> => {
      const r = await c.callTool({ name: 'narrow__me', arguments: {} });
      return r.isError ? undefined : JSON.stringify(r.content);
    };
    const first = await me();
    expect(first).toBeDefined();
    await c.callTool({ name: 'narrow__forget', arguments: {} });
    await waitUntil('a new session', async () => {
      const now = await me();
      return now !== undefined && now !== first ? true : undefined;
    }, 5_000);
    await waitUntil('the new session subscribed again to every URI', async () => {
      for (const uri of uris) if (!(await told(uri)).includes('told 1')) return undefined;
      return true;
    }, 5_000);
    expect(hub.logs.filter((l) => l.includes('resource subscription not renewed') && l.includes('narrow://'))).toEqual([]);
    for (const sub of subs) await sub.close();
    await c.close();
  });

  it("a legacy HTTP upstream's unsubscribe still on its way when another client subscribes to that URI: the subscribe goes after it, and the server holds it", async () => {
    const legacy = async (name: string) => {
      const c = new ClientV1({ name, version: '1.0.0' });
      await c.connect(new TransportV1(new URL(hub.url)));
      const updates: string[] = [];
      c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
      return { c, updates };
    };
    const text = async (c: ClientV1, name: string, args: Record<string, unknown> = {}) => firstText(await c.callTool({ name, arguments: args }));
    const a = await legacy('unsub-a');
    const b = await legacy('unsub-b');
    expect(await a.c.subscribeResource({ uri: 'subs://doc' })).toEqual({});
    expect(await text(a.c, 'web__touch', { uri: 'subs://doc' })).toBe('told 1');
    const held = Number(await text(a.c, 'web__held'));
    // a, the last subscriber, lets go: the hub unsubscribes upstream, and the server holds that POST.
    const unsubscribed = a.c.unsubscribeResource({ uri: 'subs://doc' });
    await waitUntil('the unsubscribe held by the server', async () => (Number(await text(b.c, 'web__held')) > held ? true : undefined), 5_000);
    // Sent at once, b's subscribe reached the server first, the unsubscribe then ended it, and b,
    // told {}, heard no more.
    expect(await b.c.subscribeResource({ uri: 'subs://doc' })).toEqual({});
    expect(await unsubscribed).toEqual({});
    expect(await text(b.c, 'web__touch', { uri: 'subs://doc' })).toBe('told 1');
    await expect.poll(() => b.updates, { timeout: 2000, interval: 20 }).toEqual(['subs://doc']);
    expect(a.updates).toEqual(['subs://doc']);
    await b.c.unsubscribeResource({ uri: 'subs://doc' });
    await a.c.close();
    await b.c.close();
  });

  it('a call sent while the hub renews its legacy HTTP session goes to the new session only once its notifications/initialized was taken (a strict server refuses it before)', async () => {
    const c = await client();
    let stderr = '';
    const heard = (d: Buffer): void => void (stderr += d.toString());
    subs.proc.stderr!.on('data', heard);
    const held = (): number => stderr.split('holding notifications/initialized').length - 1;
    const me = async (): Promise<unknown> => firstText(await c.callTool({ name: 'web__me', arguments: {} }));
    try {
      const before = await me();
      await c.callTool({ name: 'web__forget', arguments: {} });
      await waitUntil('the session forgotten', async () => stderr.includes('session forgotten') || undefined, 5_000);
      const n = held();
      // Meets the 404: the hub renews the session, and this call waits for that.
      const first = me();
      await waitUntil("the new session's notifications/initialized held", async () => held() > n || undefined, 5_000);
      // Sent meanwhile. On the new session at once, it came before notifications/initialized and was refused.
      const second = me();
      const [a, b] = await Promise.all([first, second]);
      expect(a).not.toBe(before);
      expect(b).toBe(a);
    } finally {
      subs.proc.stderr!.off('data', heard);
      await c.close();
    }
  });

  it("a client's roots change said while the hub renews its legacy HTTP session reaches the server, on the new session once it is open", async () => {
    const c = new ClientV1({ name: 'roots-renewal', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    c.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work' }] }));
    await c.connect(new TransportV1(new URL(hub.url)));
    let stderr = '';
    const heard = (d: Buffer): void => void (stderr += d.toString());
    subs.proc.stderr!.on('data', heard);
    const held = (): number => stderr.split('holding notifications/initialized').length - 1;
    const tool = async (name: string): Promise<unknown> => firstText(await c.callTool({ name, arguments: {} }));
    try {
      const changes = Number(await tool('web__roots_changed'));
      await tool('web__forget');
      await waitUntil('the session forgotten', async () => stderr.includes('session forgotten') || undefined, 5_000);
      const n = held();
      const renewed = tool('web__me');
      await waitUntil("the new session's notifications/initialized held", async () => held() > n || undefined, 5_000);
      // Said on the session that is gone (the new one not yet the calls'), it was lost.
      await c.sendRootsListChanged();
      await renewed;
      await waitUntil('the server hears of the change', async () => Number(await tool('web__roots_changed')) > changes || undefined, 5_000);
    } finally {
      subs.proc.stderr!.off('data', heard);
      await c.close();
    }
  });

  it("restarted for calls left unanswered, a server is subscribed again by the hub: that answer is the hub's own, and does not end its probation", async () => {
    const c = await client();
    await c.listen({ resourceSubscriptions: ['stuck://doc'] });
    const hang = (n: number) => Promise.all(Array.from({ length: n }, () => c.callTool({ name: 'stuck__hang', arguments: {} }).catch((e: unknown) => e)));
    await hang(3);
    const back = await waitUntil('restarted for calls left unanswered', async () => {
      const s = await serverHealth(hub.url, 'stuck');
      return s.restarts >= 1 && s.state === 'ready' ? s : undefined;
    });
    expect(back.lastError).toMatch(/^3 calls in a row got no answer/);
    // Subscribed again as it came back (answered at once), then its call left unanswered: on
    // probation, down again. Before, that subscribe's answer counted as a call answered and
    // ended the probation (and the growing delay between its restarts): three more timeouts each time.
    await hang(1);
    const again = await waitUntil('down again at once', async () => {
      const s = await serverHealth(hub.url, 'stuck');
      return s.restarts >= 2 ? s : undefined;
    }, 5_000);
    expect(again.lastError).toMatch(/^a call got no answer within its timeout \(300 ms\) again/);
    await c.close();
  });

  it("a legacy session's end unsubscribes for it, the hub's own request: unanswered, it is no call left unanswered", async () => {
    const before = (await serverHealth(hub.url, 'quiet')).restarts;
    const c = new ClientV1({ name: 'quiet-subs', version: '1.0.0' });
    const transport = new TransportV1(new URL('/mcp', hub.url));
    await c.connect(transport);
    expect((await c.listResources()).resources.map((r) => r.uri)).toContain('quiet://doc');
    expect(await c.subscribeResource({ uri: 'quiet://doc' })).toEqual({});
    await transport.terminateSession();
    await c.close();
    const unsubscribes = (): number => {
      try {
        return (JSON.parse(readFileSync(QUIET_STATS, 'utf8')) as Record<string, number>)['resources/unsubscribe'] ?? 0;
      } catch {
        return 0;
      }
    };
    await expect.poll(unsubscribes, { timeout: 5_000 }).toBe(1);
    // Its slot is given back once it times out (300 ms); then two calls time out. Counted, the
    // unsubscribe made them three in a row, and the server was taken down as hung.
    await expect.poll(async () => (await serverHealth(hub.url, 'quiet')).inFlight, { timeout: 5_000, interval: 50 }).toBe(0);
    const m = await client();
    for (let i = 0; i < 2; i++) expect(JSON.stringify((await m.callTool({ name: 'quiet__hang', arguments: {} })).content)).toMatch(/within 300 ms/);
    await m.close();
    const s = await serverHealth(hub.url, 'quiet');
    expect(s.lastError ?? '').not.toMatch(/in a row/);
    expect(s.state).toBe('ready');
    expect(s.restarts).toBe(before);
  });

  // The hub's own requests take a slot but leave room for a client's call (maxQueue): with
  // maxQueue 0, a call made while the hub let go of a subscription nobody held was refused busy.
  it("a subscribe its legacy session gave up while the server made it is let go upstream by the hub's own request: a client's call meanwhile waits for the slot, not refused busy", async () => {
    const count = (method: string): number => {
      try {
        return (JSON.parse(readFileSync(LULL_STATS, 'utf8')) as Record<string, number>)[method] ?? 0;
      } catch {
        return 0;
      }
    };
    const caller = await client();
    const c = new ClientV1({ name: 'lull-subs', version: '1.0.0' });
    await c.connect(new TransportV1(new URL('/mcp', hub.url)));
    try {
      const subscribing = c.subscribeResource({ uri: 'lull://doc' });
      await expect.poll(() => count('resources/subscribe'), { timeout: 5_000, interval: 20 }).toBe(1);
      // Given up while the server makes it (0.6 s): nobody holds it once made, and the hub unsubscribes.
      expect(await c.unsubscribeResource({ uri: 'lull://doc' })).toEqual({});
      expect(await subscribing).toEqual({});
      await expect.poll(() => count('resources/unsubscribe'), { timeout: 5_000, interval: 20 }).toBe(1);
      // That unsubscribe holds the server's one slot for 0.6 s.
      const r = await caller.callTool({ name: 'lull__add', arguments: { a: 2, b: 3 } });
      expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
      expect(r.content).toEqual([{ type: 'text', text: '5' }]);
    } finally {
      await c.close();
      await caller.close();
    }
  });

  it('an update naming a sub-resource of a subscribed URI reaches its subscribers', async () => {
    const c = await client();
    const updates: string[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const sub = await c.listen({ resourceSubscriptions: ['leg://doc', 'mod://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['leg://doc', 'mod://doc']);
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc/part' } });
    await c.callTool({ name: 'mod__touch', arguments: { uri: 'mod://doc/part' } });
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://docs' } }); // a longer name, not below it
    // Said after it by the same server on the same way: once this one is here, leg://docs would be too.
    await c.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc/later' } });
    await expect.poll(() => [...updates].sort(), { timeout: 5000, interval: 20 }).toEqual(['leg://doc/later', 'leg://doc/part', 'mod://doc/part']);
    await new Promise((r) => setTimeout(r, 200)); // and a while longer, whatever the order
    expect(updates).not.toContain('leg://docs');
    await sub.close();
    await c.close();
  });

  it('a restart on request keeps a legacy client subscribed, and it may subscribe or unsubscribe while the upstream is down', async () => {
    const c = new ClientV1({ name: 'legacy-subs', version: '1.0.0' });
    await c.connect(new TransportV1(new URL('/mcp', hub.url)));
    const updates: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    expect((await c.listResources()).resources.map((r) => r.uri)).toContain('slow://doc');
    // `servers restart` starts a fresh connection; so does a reload that changed the server.
    const restart = async () => {
      expect((await fetch(new URL('/admin/servers/slow/restart', hub.url), { method: 'POST' })).status).toBe(200);
      expect((await waitForState(hub.url, 'slow', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
    };
    /** `told 1` when the server holds a subscription to slow://doc, so an update was sent. */
    const touch = async () => firstText(await c.callTool({ name: 'slow__touch', arguments: { uri: 'slow://doc', report: true } }));
    // The hub asks the new process for the subscription as it becomes ready; a touch may come
    // first. Touched until the server says it told its subscriber; that update then arrives.
    const anUpdate = async (what: string) => {
      const before = updates.length;
      await waitUntil(what, async () => (await touch()) === 'told 1' || undefined, 5_000);
      await expect.poll(() => updates.length, { timeout: 5000, interval: 20 }).toBeGreaterThan(before);
    };

    expect(await c.subscribeResource({ uri: 'slow://doc' })).toEqual({});
    // Held throughout: made again with slow://doc's in one pass (UpstreamSubscriptions.resubscribe) down one pipe.
    expect(await c.subscribeResource({ uri: 'slow://t/kept' })).toEqual({});
    await anUpdate('an update before the restart');
    await restart();
    await waitForState(hub.url, 'slow', ['ready']);
    await anUpdate('an update after the restart');

    await restart();
    expect(await c.unsubscribeResource({ uri: 'slow://doc' })).toEqual({});
    await waitForState(hub.url, 'slow', ['ready']);
    // Once the kept URI is subscribed again, any subscribe of slow://doc that pass made had come first.
    let keptTold = 0; // updates of the kept URI the server sent
    const kept = async () => {
      const told = firstText(await c.callTool({ name: 'slow__touch', arguments: { uri: 'slow://t/kept', report: true } }));
      if (told === 'told 1') keptTold++;
      return told;
    };
    await waitUntil('the kept URI subscribed again', async () => (await kept()) === 'told 1' || undefined, 5_000);
    const before = updates.filter((u) => u === 'slow://doc').length;
    expect(await touch()).toBe('told 0');
    // Its update, said after that touch down the same way, is here: slow://doc's would be too.
    expect(await kept()).toBe('told 1');
    // And one more for each restart, said once the new process holds it again (a change made
    // while none held it was not said).
    await expect.poll(() => updates.filter((u) => u === 'slow://t/kept').length, { timeout: 5000, interval: 20 }).toBe(keptTold + 2);
    expect(updates.filter((u) => u === 'slow://doc').length).toBe(before);

    await restart();
    expect(await c.subscribeResource({ uri: 'slow://doc' })).toEqual({});
    await waitForState(hub.url, 'slow', ['ready']);
    await anUpdate('an update once the upstream is back');
    await c.close();
  }, 30_000);

  it('a listen stream opened while the upstream is down honours its URI, and gets its updates once it is back', async () => {
    const c = await client();
    const updates: string[] = [];
    c.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    expect((await c.listResources()).resources.map((r) => r.uri)).toContain('slow://doc');
    expect((await fetch(new URL('/admin/servers/slow/restart', hub.url), { method: 'POST' })).status).toBe(200);
    // Started afresh, its era is not known: the listen waits for it a while (up to 2 s, as
    // for a modern server's acknowledgement), and it is back in 1.5 s.
    const listening = c.listen({ resourceSubscriptions: ['slow://doc', 'slow://never-listed'] });
    expect((await waitForState(hub.url, 'slow', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
    const sub = await listening;
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['slow://doc']);
    await waitForState(hub.url, 'slow', ['ready']);
    // Touched until the server says it told its subscriber (the hub's subscribe reached it); that update then arrives.
    await waitUntil('the upstream subscribed once back', async () => firstText(await c.callTool({ name: 'slow__touch', arguments: { uri: 'slow://doc', report: true } })) === 'told 1' || undefined, 5_000);
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('slow://doc');
    await sub.close();
    await c.close();
  }, 30_000);

  it('a group endpoint honours only the subscriptions of its own servers', async () => {
    const c = await client('/mcp/onlyMod');
    const sub = await c.listen({ resourceSubscriptions: ['leg://doc', 'mod://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['mod://doc']);
    await sub.close();
    await c.close();
  });

  it("a group reloaded to hide a server: its clients' subscriptions there bring no more updates (legacy and modern)", async () => {
    const updates = { legacy: [] as string[], modern: [] as string[], root: [] as string[] };
    const v1 = new ClientV1({ name: 'group-v1', version: '1.0.0' });
    await v1.connect(new TransportV1(new URL('/mcp/onlyMod', hub.url)));
    v1.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.legacy.push(n.params.uri));
    await v1.subscribeResource({ uri: 'mod://doc' });
    const v2 = await client('/mcp/onlyMod');
    v2.setNotificationHandler('notifications/resources/updated', async (n) => void updates.modern.push(String(n.params.uri)));
    const sub = await v2.listen({ resourceSubscriptions: ['mod://doc'] });
    const root = await client();
    root.setNotificationHandler('notifications/resources/updated', async (n) => void updates.root.push(String(n.params.uri)));
    const rootSub = await root.listen({ resourceSubscriptions: ['mod://doc'] });
    const reloads = hub.logs.filter((l) => l.includes('config reload: groups replaced')).length;
    try {
      await root.callTool({ name: 'mod__touch', arguments: { uri: 'mod://doc' } });
      await expect.poll(() => [updates.legacy.length, updates.modern.length, updates.root.length], { timeout: 2000, interval: 20 }).toEqual([1, 1, 1]);

      setSection(hub, 'groups', { onlyMod: { servers: ['leg'] } });
      await loggedTimes(hub, 'config reload: groups replaced', reloads + 1);
      // The legacy client now holds a URI of the group's new server: told of it after mod's
      // update, its session shows that update would have reached it by then.
      expect(await v1.subscribeResource({ uri: 'leg://doc' })).toEqual({});
      await root.callTool({ name: 'mod__touch', arguments: { uri: 'mod://doc' } });
      await root.callTool({ name: 'leg__touch', arguments: { uri: 'leg://doc' } });
      await expect.poll(() => [updates.root.length, updates.legacy.includes('leg://doc')], { timeout: 5000, interval: 20 }).toEqual([2, true]);
      await new Promise((r) => setTimeout(r, 200)); // and a while longer, whatever the order (the modern stream's too)
      expect(updates.legacy).toEqual(['mod://doc', 'leg://doc']);
      expect(updates.modern).toEqual(['mod://doc']);
    } finally {
      setSection(hub, 'groups', { onlyMod: { servers: ['mod'] } });
      await loggedTimes(hub, 'config reload: groups replaced', reloads + 2);
      await Promise.all([sub.close(), rootSub.close()]);
      await Promise.all([v1.close(), v2.close(), root.close()]);
    }
  });
});

describe('resource subscriptions of principals with upstream connections of their own', () => {
  const ALICE = 'sy_alice-subs-key-000000000000000000000000000000000';
  const BOB = 'sy_bob-subs-key-11111111111111111111111111111111111';
  let up: HttpFixture;
  let perUser: HttpFixture;
  let authed: HubProcess;
  /** What `mod` was sent: its requests by method, and listenBytes (mutable-server.mjs). */
  const modStats = join(mkdtempSync(join(tmpdir(), 'subs-stats-')), 'mod.json');
  const statsOfMod = (): Record<string, number> => JSON.parse(readFileSync(modStats, 'utf8')) as Record<string, number>;
  beforeAll(async () => {
    up = await startHttpFixture('test/fixtures/servers/legacy-http-subs.mjs');
    perUser = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs', { RESOURCES: '1' });
    // Authentication on: each principal talks to a legacy HTTP server over a session of its own,
    // and to a modern one with its own credentials.
    authed = await startHub({
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE) }, { principal: 'bob', sha256: sha256Hex(BOB) }] },
      servers: {
        web: { url: up.url },
        pu: { url: perUser.url, credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } }, bob: { headers: { authorization: 'Bearer bob-upstream' } } } },
        // Modern, shared by every principal: one listen filter for all of them.
        mod: nodeServer(MUTABLE, [], { ERA: 'modern', TEMPLATE: 'mod://doc/{id}', STATS_FILE: modStats }),
      },
    });
    await waitForReadyWith(authed.url, ['web', 'pu', 'mod'], ALICE);
  }, 60_000);
  afterAll(async () => {
    await authed?.stop();
    await up?.stop();
    await perUser?.stop();
  });

  const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  async function session(key: string) {
    const auth = { authorization: `Bearer ${key}` };
    const init = await post(authed.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'subs', version: '1' } } }, { ...JSON_HEADERS, ...auth });
    const h = { ...JSON_HEADERS, ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await post(authed.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    const ac = new AbortController();
    const get = await fetch(authed.url, { headers: { ...h, accept: 'text/event-stream' }, signal: ac.signal });
    const heard = heardSoFar(get);
    let id = 1;
    return {
      call: (method: string, params: Record<string, unknown> = {}) => post(authed.url, { jsonrpc: '2.0', id: id++, method, params }, h),
      updates: () => heard().split('notifications/resources/updated').length - 1,
      heard,
      end: async () => {
        ac.abort();
        await fetch(authed.url, { method: 'DELETE', headers: h });
      },
    };
  }
  const told = async (s: Awaited<ReturnType<typeof session>>) => String(firstText((await s.call('tools/call', { name: 'web__touch', arguments: { uri: 'subs://doc' } })).body?.result));

  it("each principal's subscription is made on its own upstream session, its updates come from there, and each is ended there", async () => {
    const alice = await session(ALICE);
    const bob = await session(BOB);
    expect((await alice.call('resources/subscribe', { uri: 'subs://doc' })).body?.result).toEqual({});
    expect((await bob.call('resources/subscribe', { uri: 'subs://doc' })).body?.result).toEqual({});
    // Two upstream sessions are subscribed: alice's and bob's own.
    expect(await told(bob)).toBe('told 2');
    await expect.poll(() => [alice.updates(), bob.updates()], { timeout: 3000 }).toEqual([1, 1]);
    await alice.end();
    await bob.end();
    // Every subscriber gone: nothing stays subscribed upstream (polled: the hub's unsubscribes
    // follow the sessions' ends, on a loaded machine later than the fixed 300 ms it waited).
    const carol = await session(ALICE);
    await waitUntil('no upstream session subscribed', async () => (await told(carol)) === 'told 0' || undefined, 5_000);
    await carol.end();
  });

  it("to a modern server with credentials, a principal subscribes in its own connection's listen stream: watched as that user, told to that user's clients", async () => {
    const alice = await session(ALICE);
    const bob = await session(BOB);
    expect((await alice.call('resources/read', { uri: 'u://alice/doc' })).body?.result).toMatchObject({ contents: [{ text: "alice's doc" }] });
    // The server watches a user's resources for that user only: under the hub's own (shared)
    // credentials it would leave them out, and the client would be refused.
    expect((await alice.call('resources/subscribe', { uri: 'u://alice/doc' })).body).toMatchObject({ result: {} });
    const ac = new AbortController();
    const res = await fetch(authed.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${BOB}` },
      body: JSON.stringify(modernBody('l-pu', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['u://bob/doc'] } })),
      signal: ac.signal,
    });
    const bobStream = heardSoFar(res);
    await expect.poll(() => bobStream().includes('acknowledged')).toBe(true);
    expect(bobStream()).toContain('u://bob/doc'); // honoured
    const stats = async () => ((await (await fetch(new URL('/stats', perUser.url))).json()) as { subscribed: Record<string, string[]> }).subscribed;
    await expect.poll(async () => [(await stats()).alice, (await stats()).bob], { timeout: 3000 }).toEqual([['u://alice/doc'], ['u://bob/doc']]);
    expect((await stats()).shared ?? []).toEqual([]);
    // An update said on alice's connection reaches alice's session, not bob's clients.
    await fetch(new URL('/touch?user=alice', perUser.url), { method: 'POST' });
    await expect.poll(() => alice.updates(), { timeout: 3000 }).toBe(1);
    await fetch(new URL('/touch?user=bob', perUser.url), { method: 'POST' });
    await expect.poll(() => bobStream().split('notifications/resources/updated').length - 1, { timeout: 3000 }).toBe(1);
    expect([alice.updates(), bob.updates()]).toEqual([1, 0]);
    expect(bobStream()).not.toContain('u://alice/doc');
    // Unsubscribed, and bob's stream gone: each connection's filter lets its URI go.
    expect((await alice.call('resources/unsubscribe', { uri: 'u://alice/doc' })).body).toMatchObject({ result: {} });
    ac.abort();
    await expect.poll(async () => [(await stats()).alice, (await stats()).bob], { timeout: 3000 }).toEqual([[], []]);
    await alice.end();
    await bob.end();
  });

  it('sequential subscribes and unsubscribes to a shared modern server cost upstream about N log N, not N squared, and an unsubscribed URI is told to nobody', async () => {
    const N = 64;
    const uri = (who: string, i: number) => `mod://doc/${who}-seq-${String(i).padStart(4, '0')}-`.padEnd(100, 'x');
    // What the N URIs weigh once.
    const once = N * (uri('alice', 0).length + 3);
    // Each awaited by its client, as an IDE opening (or closing) files one by one: no two in one re-listen.
    const sequential = async (who: string, s: Awaited<ReturnType<typeof session>>, method: string) => {
      const before = statsOfMod();
      const t0 = performance.now();
      for (let i = 0; i < N; i++) expect((await s.call(method, { uri: uri(who, i) })).body, `${method} #${i}`).toMatchObject({ result: {} });
      const ms = performance.now() - t0;
      const after = statsOfMod();
      const listens = after['subscriptions/listen']! - (before['subscriptions/listen'] ?? 0);
      const bytes = after.listenBytes! - (before.listenBytes ?? 0);
      console.log(`${who}: ${N} sequential ${method}, ${listens} listen streams, ${bytes} bytes (${(bytes / once).toFixed(1)}x the URIs once), ${ms.toFixed(0)} ms`);
      return { listens, bytes };
    };
    const alice = await session(ALICE);
    const bob = await session(BOB);
    const a = await sequential('alice', alice, 'resources/subscribe');
    // Bob's subscribes to the same connection: its filter holds Alice's URIs too.
    const b = await sequential('bob', bob, 'resources/subscribe');
    const gone = await sequential('alice', alice, 'resources/unsubscribe');
    // Each subscribe was one re-listen with the whole filter: Alice's 36 times the URIs'
    // weight, Bob's (Alice's in the filter too) 100 times; now about log2 N times each.
    expect(a.listens).toBeLessThanOrEqual(N + 1);
    expect(b.listens).toBeLessThanOrEqual(N + 1);
    expect(a.bytes).toBeLessThan(12 * once);
    expect(b.bytes).toBeLessThan(12 * once);
    // A URI unsubscribed stays in its stream until that stream holds more of them than wanted
    // ones (then it is opened again without them): not the whole filter again at each.
    expect(gone.bytes).toBeLessThan(12 * once);
    // Unsubscribed, Alice's URIs reach her no more, whichever stream still names them; Bob's do.
    // Alice then holds one more: touched after hers, it shows her stream was open meanwhile.
    expect((await alice.call('resources/subscribe', { uri: uri('alice', N) })).body).toMatchObject({ result: {} });
    await bob.call('tools/call', { name: 'mod__touch', arguments: { uri: uri('alice', 1) } });
    await bob.call('tools/call', { name: 'mod__touch', arguments: { uri: uri('bob', 1) } });
    await waitUntil('the update of the URI alice holds', async () => {
      await bob.call('tools/call', { name: 'mod__touch', arguments: { uri: uri('alice', N) } });
      return alice.heard().includes(uri('alice', N)) || undefined;
    }, 5_000);
    await expect.poll(() => bob.updates(), { timeout: 5000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 200)); // and a while longer, whatever the order
    expect(alice.heard()).not.toContain(uri('alice', 1));
    expect(alice.updates()).toBe(alice.heard().split(uri('alice', N)).length - 1); // each of the URI she holds, no other
    await alice.end();
    await bob.end();
  });

  it("one principal's share of a shared modern server's listen filter is bounded (64 KiB of URIs): past it its subscriptions are refused, another's are not", async () => {
    // Eight URIs of 8192 characters fill alice's share; each re-listen sends the whole filter.
    const long = (who: string, n: number) => `mod://doc/${who}${n}-`.padEnd(8192, 'x');
    const alice = await session(ALICE);
    const bob = await session(BOB);
    for (let i = 0; i < 8; i++) expect((await alice.call('resources/subscribe', { uri: long('a', i) })).body, `#${i}`).toMatchObject({ result: {} });
    const over = (await alice.call('resources/subscribe', { uri: long('a', 8) })).body;
    expect(over?.error?.code).toBe(-32602);
    expect(over?.error?.message).toContain('the most the hub puts in its listen filter for one user');
    // One she holds is not refused.
    expect((await alice.call('resources/subscribe', { uri: long('a', 0) })).body).toMatchObject({ result: {} });
    // Her listen stream's acknowledgement leaves such a URI out (and keeps one she holds).
    const listen = async (key: string, uris: string[]) => {
      const ac = new AbortController();
      const res = await fetch(authed.url, {
        method: 'POST',
        headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${key}` },
        body: JSON.stringify(modernBody('l-share', 'subscriptions/listen', { notifications: { resourceSubscriptions: uris } })),
        signal: ac.signal,
      });
      const heard = heardSoFar(res);
      await expect.poll(() => heard().includes('acknowledged')).toBe(true);
      const ack = JSON.parse(heard().split('\n').find((l) => l.startsWith('data:'))!.slice(5));
      return { honoured: ack.params.notifications.resourceSubscriptions as string[] | undefined, close: () => ac.abort() };
    };
    const aliceStream = await listen(ALICE, [long('a', 2), long('a', 10)]);
    expect(aliceStream.honoured).toEqual([long('a', 2)]);
    // Bob's room is his own, by either way of subscribing.
    expect((await bob.call('resources/subscribe', { uri: long('b', 0) })).body).toMatchObject({ result: {} });
    const bobStream = await listen(BOB, [long('b', 1), long('b', 2)]);
    expect(bobStream.honoured).toEqual([long('b', 1), long('b', 2)]);
    // Unsubscribed, a URI makes room again.
    expect((await alice.call('resources/unsubscribe', { uri: long('a', 1) })).body).toMatchObject({ result: {} });
    expect((await alice.call('resources/subscribe', { uri: long('a', 11) })).body).toMatchObject({ result: {} });
    // Sessions and streams that end give their share back.
    aliceStream.close();
    bobStream.close();
    await alice.end();
    await bob.end();
    const again = await session(ALICE);
    await expect.poll(async () => (await again.call('resources/subscribe', { uri: long('a', 12) })).body?.result, { timeout: 3000 }).toEqual({});
    await again.end();
  });

  it('a session that ends in the middle of a burst of subscribes leaves none of them held', async () => {
    // Eight URIs of 8000 characters fill bob's share of mod's listen filter: one left held by a
    // session that is gone would refuse a later one of his for good.
    const long = (tag: string, n: number) => `mod://doc/${tag}${n}-`.padEnd(8000, 'x');
    for (let round = 0; round < 3; round++) {
      const s = await session(BOB);
      const burst = Array.from({ length: 8 }, (_, i) => s.call('resources/subscribe', { uri: long(`r${round}-`, i) }).catch(() => undefined));
      await new Promise((r) => setTimeout(r, 5 * round));
      await s.end();
      await Promise.all(burst);
    }
    const again = await session(BOB);
    for (let i = 0; i < 8; i++) expect((await again.call('resources/subscribe', { uri: long('after', i) })).body, `#${i}`).toMatchObject({ result: {} });
    await again.end();
  });

  it("a modern client's listen stream subscribes on its principal's own upstream session too", async () => {
    const ac = new AbortController();
    const res = await fetch(authed.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${ALICE}` },
      body: JSON.stringify(modernBody('l-1', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['subs://doc'] } })),
      signal: ac.signal,
    });
    const heard = heardSoFar(res);
    await expect.poll(() => heard().includes('acknowledged')).toBe(true);
    expect(heard()).toContain('subs://doc'); // honoured
    const alice = await session(ALICE);
    const text = async (name: string, args: Record<string, unknown> = {}) => String(firstText((await alice.call('tools/call', { name, arguments: args })).body?.result));
    // alice's calls and her stream's subscription share her own upstream session.
    expect(await text('web__whose', { uri: 'subs://doc' })).toBe(await text('web__me'));
    ac.abort();
    await alice.end();
  });
});

describe("a modern upstream's listen acknowledgement", () => {
  let yes: HttpFixture;
  let no: HttpFixture;
  let h2: HubProcess;
  beforeAll(async () => {
    yes = await startHttpFixture('test/fixtures/catalog/modern-subs-http.mjs', { DOC_URI: 'yes://doc' });
    no = await startHttpFixture('test/fixtures/catalog/modern-subs-http.mjs', { DOC_URI: 'no://doc', NOSUBS: '1' });
    h2 = await startHub({
      servers: {
        yes: { url: yes.url },
        no: { url: no.url },
        // Declares resources.subscribe, but answers subscriptions/listen -32601. Slow to start
        // (as is `late`, which listens), so a restart leaves it down for a while.
        deaf: slowStart({ ERA: 'modern', DOC_URI: 'deaf://doc', LISTEN_REFUSED: '1' }),
        late: slowStart({ ERA: 'modern', DOC_URI: 'late://doc', TEMPLATE: 'late://t/{name}' }),
        // Starts at once, but not while SLEEPY_HOLD exists; its acknowledgements leave its URI out.
        sleepy: slowStart({ ERA: 'modern', DOC_URI: 'sleepy://doc', LISTEN_LEAVES_OUT: 'sleepy://doc', START_DELAY_MS: '0', START_HOLD_FILE: SLEEPY_HOLD }),
        // Legacy; each process refuses the first resources/subscribe of each URI.
        flaky: slowStart({ ERA: 'legacy', DOC_URI: 'flaky://doc', SUBSCRIBE_FAILS_MS: '0', START_DELAY_MS: '0', START_HOLD_FILE: FLAKY_HOLD }),
        // Legacy by its config (era), and a subscribe waits for it as long as its calls would.
        pinned: { ...slowStart({ ERA: 'legacy', DOC_URI: 'pinned://doc', START_DELAY_MS: '0', START_HOLD_FILE: PINNED_HOLD }), era: '2025-11-25', timeoutMs: 30_000 },
      },
    });
    await waitForReady(h2.url, ['yes', 'no', 'deaf', 'late', 'sleepy', 'flaky', 'pinned']);
  }, 60_000);
  afterAll(async () => {
    await h2?.stop();
    await Promise.all([yes?.stop(), no?.stop()]);
  });

  it('decides which resource subscriptions a client is told are honoured: the URI the server left out is not', async () => {
    const c = new ClientV2({ name: 'ack', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new TransportV2(new URL(h2.url)));
    await c.listTools();
    await c.listResources();
    const sub = await c.listen({ resourceSubscriptions: ['yes://doc', 'no://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['yes://doc']);
    await sub.close();
    await c.close();
  });

  it("decides a legacy client's resources/subscribe: the URI the server left out is refused, not answered {}", async () => {
    const c = new ClientV1({ name: 'ack-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h2.url)));
    await c.listResources();
    await expect(c.subscribeResource({ uri: 'yes://doc' })).resolves.toEqual({});
    await expect(c.subscribeResource({ uri: 'no://doc' })).rejects.toThrow(/does not watch no:\/\/doc for updates/);
    await c.close();
  });

  it('a server that refuses to listen at all honours no subscription: a client is not told {} to wait for updates that never come', async () => {
    const c = new ClientV1({ name: 'deaf-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h2.url)));
    await c.listResources();
    await expect(c.subscribeResource({ uri: 'deaf://doc' })).rejects.toThrow(/does not watch deaf:\/\/doc for updates/);
    await c.close();
    const m = new ClientV2({ name: 'deaf-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h2.url)));
    const sub = await m.listen({ resourceSubscriptions: ['yes://doc', 'deaf://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['yes://doc']);
    await sub.close();
    await m.close();
  });

  it("a legacy client's subscribe while the server restarts waits for it: refused when it does not listen, made when it does", async () => {
    const c = new ClientV1({ name: 'restart-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h2.url)));
    const updates: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    await c.listResources();
    for (const id of ['deaf', 'late']) {
      expect((await fetch(new URL(`/admin/servers/${id}/restart`, h2.url), { method: 'POST' })).status).toBe(200);
      expect((await waitForState(h2.url, id, ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
      const asked = c.subscribeResource({ uri: `${id}://doc` });
      // Answered {} at once, as if it would be watched: deaf never says a resource changed.
      if (id === 'deaf') await expect(asked).rejects.toThrow(/does not watch deaf:\/\/doc for updates/);
      else await expect(asked).resolves.toEqual({});
      expect((await waitForState(h2.url, id, ['ready'], 100)).state).toBe('ready');
    }
    await c.callTool({ name: 'late__touch', arguments: { uri: 'late://doc' } });
    await expect.poll(() => updates, { timeout: 2000, interval: 20 }).toEqual(['late://doc']);
    await c.close();
  }, 15_000);

  it("a modern client's listen stream opened while a modern server restarts waits for it a while: a URI it does not watch is not said to be honoured", async () => {
    const m = new ClientV2({ name: 'restart-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h2.url)));
    await m.listResources();
    for (const id of ['deaf', 'late']) expect((await fetch(new URL(`/admin/servers/${id}/restart`, h2.url), { method: 'POST' })).status).toBe(200);
    for (const id of ['deaf', 'late']) expect((await waitForState(h2.url, id, ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
    // Honoured both at once: deaf never says a resource changed.
    const sub = await m.listen({ resourceSubscriptions: ['deaf://doc', 'late://doc'] });
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['late://doc']);
    await sub.close();
    await m.close();
    for (const id of ['deaf', 'late']) await waitForState(h2.url, id, ['ready']);
  }, 15_000);

  it("a modern client's listen stream told a URI is honoured while its server was down ends, gracefully, once the server is back and does not watch it: listening again, it is told so", async () => {
    const m = new ClientV2({ name: 'sleepy-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h2.url)));
    await m.listResources();
    const uris = ['sleepy://doc', 'yes://doc'];
    writeFileSync(SLEEPY_HOLD, '');
    let sub;
    try {
      expect((await fetch(new URL('/admin/servers/sleepy/restart', h2.url), { method: 'POST' })).status).toBe(200);
      expect((await waitForState(h2.url, 'sleepy', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
      // Down past the wait for it (2 s): held, and said to be, as a legacy client's subscribe is answered {}.
      sub = await m.listen({ resourceSubscriptions: uris });
    } finally {
      rmSync(SLEEPY_HOLD, { force: true });
    }
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(uris);
    // Back, its acknowledgement leaves the URI out. An acknowledgement is not taken back: the
    // stream ends as the hub ends one (its request answered), and was kept open before.
    expect(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r('still open'), 10_000))])).toBe('graceful');
    expect((await waitForState(h2.url, 'sleepy', ['ready'], 100)).state).toBe('ready');
    const again = await m.listen({ resourceSubscriptions: uris });
    expect(again.honoredFilter.resourceSubscriptions).toEqual(['yes://doc']);
    await again.close();
    await m.close();
  }, 20_000);

  it("so does one whose legacy server, back, refuses to subscribe again: listening again, the client's URI is subscribed anew", async () => {
    const m = new ClientV2({ name: 'flaky-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h2.url)));
    await m.listResources();
    writeFileSync(FLAKY_HOLD, '');
    let sub;
    try {
      expect((await fetch(new URL('/admin/servers/flaky/restart', h2.url), { method: 'POST' })).status).toBe(200);
      expect((await waitForState(h2.url, 'flaky', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
      // Known to be legacy: held at once, made when it is back (UpstreamSubscriptions.resubscribe).
      sub = await m.listen({ resourceSubscriptions: ['flaky://doc'] });
    } finally {
      rmSync(FLAKY_HOLD, { force: true });
    }
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['flaky://doc']);
    expect(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r('still open'), 10_000))])).toBe('graceful');
    const updates: string[] = [];
    m.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const again = await m.listen({ resourceSubscriptions: ['flaky://doc'] });
    expect(again.honoredFilter.resourceSubscriptions).toEqual(['flaky://doc']);
    await m.callTool({ name: 'flaky__touch', arguments: { uri: 'flaky://doc' } });
    await expect.poll(() => updates, { timeout: 2000, interval: 20 }).toEqual(['flaky://doc']);
    await again.close();
    await m.close();
  }, 20_000);

  it("a server whose config fixes its era as legacy is known to be legacy while it restarts: a subscribe is held at once, not after waiting for it, and made when it is back", async () => {
    const c = new ClientV1({ name: 'pinned-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h2.url)));
    const updates: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    await c.listResources();
    const m = new ClientV2({ name: 'pinned-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h2.url)));
    await m.listResources();
    writeFileSync(PINNED_HOLD, '');
    let sub;
    try {
      expect((await fetch(new URL('/admin/servers/pinned/restart', h2.url), { method: 'POST' })).status).toBe(200);
      expect((await waitForState(h2.url, 'pinned', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
      // A fresh connection has no era until its handshake: the subscribe waited for the server
      // (here held) up to its timeoutMs, the listen stream for 2 s, as for a server that may be modern.
      const asked = c.subscribeResource({ uri: 'pinned://doc' });
      expect(await Promise.race([asked, new Promise((r) => setTimeout(() => r('still waiting'), 10_000))])).toEqual({});
      const t0 = performance.now();
      sub = await m.listen({ resourceSubscriptions: ['pinned://doc'] });
      // Held at once (the wait it was spared is 2 s).
      expect(performance.now() - t0).toBeLessThan(1_800);
    } finally {
      rmSync(PINNED_HOLD, { force: true });
    }
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['pinned://doc']);
    await waitForState(h2.url, 'pinned', ['ready']);
    // Made upstream when it was back (UpstreamSubscriptions.resubscribe): its update reaches the
    // legacy client, besides the one said as the subscription was made (nothing watched it while
    // the server was down: a change then was not heard), which may come before or after it.
    await c.callTool({ name: 'pinned__touch', arguments: { uri: 'pinned://doc' } });
    await expect.poll(() => updates, { timeout: 5_000, interval: 20 }).toEqual(['pinned://doc', 'pinned://doc']);
    await sub.close();
    await m.close();
    await c.close();
  }, 30_000);

  it('a subscribe cancelled while it waits for the server to be back holds nothing', async () => {
    const c = new ClientV1({ name: 'cancel-v1', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h2.url)));
    const updates: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    await c.listResources();
    expect((await fetch(new URL('/admin/servers/late/restart', h2.url), { method: 'POST' })).status).toBe(200);
    expect((await waitForState(h2.url, 'late', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
    const ac = new AbortController();
    const asked = c.subscribeResource({ uri: 'late://doc' }, { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    await expect(asked).rejects.toThrow();
    await waitForState(h2.url, 'late', ['ready']);
    // A URI of its, subscribed now: its updates come down the way late://doc's would.
    expect(await c.subscribeResource({ uri: 'late://t/mark' })).toEqual({});
    await waitUntil('the mark watched', async () => (await c.callTool({ name: 'late__touch', arguments: { uri: 'late://t/mark' } }), updates.includes('late://t/mark') || undefined), 5_000);
    // Still subscribed after all, the client would hear of a resource it did not subscribe to:
    // not by the time an update said after it (of a sub-resource of the mark) is here.
    await c.callTool({ name: 'late__touch', arguments: { uri: 'late://doc' } });
    await c.callTool({ name: 'late__touch', arguments: { uri: 'late://t/mark/last' } });
    await expect.poll(() => updates, { timeout: 5000, interval: 20 }).toContain('late://t/mark/last');
    expect(updates.filter((u) => !u.startsWith('late://t/mark'))).toEqual([]);
    await c.close();
  }, 15_000);

  it('refuses every one of several legacy clients subscribing together, not only the first', async () => {
    const clients = await Promise.all(
      [1, 2, 3].map(async (n) => {
        const c = new ClientV1({ name: `ack-v1-${n}`, version: '1.0.0' });
        await c.connect(new TransportV1(new URL(h2.url)));
        return c;
      }),
    );
    const answers = await Promise.allSettled(clients.map((c) => c.subscribeResource({ uri: 'no://doc' })));
    expect(answers.map((a) => a.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const c of clients) await c.close();
  });
});

describe('what resources/subscribe and unsubscribe promise', () => {
  let h3: HubProcess;
  const stats = (file: string) => (): Record<string, number> => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
    } catch {
      return {};
    }
  };
  let secondStats: () => Record<string, number>;
  let flakyStats: () => Record<string, number>;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-subs-'));
    secondStats = stats(join(dir, 'second.json'));
    flakyStats = stats(join(dir, 'flaky.json'));
    h3 = await startHub(
      {
        servers: {
          // The examples declare no resources.subscribe: neither says that a resource changed.
          notes: nodeServer('examples/legacy-notes.mjs'),
          clock: nodeServer('examples/modern-clock.mjs'),
          // Earlier in the config than `second`: once it lists shared://doc too, the URI is its own.
          first: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'first://doc', TAG: ' (first)' }),
          second: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'shared://doc', TEMPLATE: 'second://t/{name}', TAG: ' (second)', STATS_FILE: join(dir, 'second.json') }),
          // Its first subscribe of each URI fails, a second and a half after it was asked.
          flaky: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'flaky://doc', TEMPLATE: 'flaky://t/{name}', SUBSCRIBE_FAILS_MS: '1500', STATS_FILE: join(dir, 'flaky.json') }),
        },
      },
      { dir },
    );
    await waitForReady(h3.url, ['notes', 'clock', 'first', 'second', 'flaky']);
  }, 60_000);
  afterAll(async () => {
    await h3?.stop();
  });

  async function legacyClient(name: string): Promise<{ c: ClientV1; updates: string[] }> {
    const c = new ClientV1({ name, version: '1.0.0' });
    await c.connect(new TransportV1(new URL(h3.url)));
    const updates: string[] = [];
    c.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => void updates.push(n.params.uri));
    return { c, updates };
  }

  it('refuses a URI whose server does not offer resources.subscribe (legacy or modern), and its ledger row says so', async () => {
    const { c } = await legacyClient('no-subscribe');
    expect((await c.listResources()).resources.map((r) => r.uri)).toEqual(expect.arrayContaining(['notes://index', 'clock://zones']));
    for (const [uri, server] of [
      ['notes://index', 'notes'],
      ['clock://zones', 'clock'],
    ] as const) {
      const err = (await c.subscribeResource({ uri }).catch((e: unknown) => e)) as { code?: number; message?: string };
      expect(err.code).toBe(-32602);
      expect(err.message).toContain(`the upstream does not watch ${uri} for updates (server "${server}" does not offer resources.subscribe)`);
      const rows = await waitForRows(join(h3.dir, 'ledger.db'), { tool: uri }, (r) => r.some((x) => x.method === 'resources/subscribe'));
      expect(rows.filter((x) => x.method === 'resources/subscribe').map((x) => [x.outcome, x.errorCode, x.server])).toEqual([['rpc_error', -32602, server]]);
    }
    await c.close();
  });

  it("an unsubscribe ends the subscription where it was made, though another server has become the URI's owner since", async () => {
    const { c, updates } = await legacyClient('moved-owner');
    expect(await c.subscribeResource({ uri: 'shared://doc' })).toEqual({});
    expect(await c.subscribeResource({ uri: 'second://t/kept' })).toEqual({});
    await c.callTool({ name: 'second__touch', arguments: { uri: 'shared://doc' } });
    await expect.poll(() => updates.length, { timeout: 3000, interval: 20 }).toBe(1);

    // `first` starts listing shared://doc: a read of it goes there from now on.
    await c.callTool({ name: 'first__touch', arguments: { uri: 'shared://doc', listed: true } });
    await waitUntil('first owns shared://doc', async () => JSON.stringify(await c.readResource({ uri: 'shared://doc' })).includes('(first)') || undefined, 5_000);

    expect(await c.unsubscribeResource({ uri: 'shared://doc' })).toEqual({});
    // `second`, where it was made, is told: nothing it says of shared://doc reaches the client any more.
    await expect.poll(() => secondStats()['resources/unsubscribe'] ?? 0, { timeout: 3000, interval: 20 }).toBe(1);
    // It holds no subscription there (an update it said after this one is here: this one would be too).
    expect(firstText(await c.callTool({ name: 'second__touch', arguments: { uri: 'shared://doc', report: true } }))).toBe('told 0');
    await c.callTool({ name: 'second__touch', arguments: { uri: 'second://t/kept' } });
    await expect.poll(() => updates, { timeout: 3000, interval: 20 }).toContain('second://t/kept');
    expect(updates).toEqual(['shared://doc', 'second://t/kept']);
    await c.close();
  });

  it('a subscriber who comes while the first upstream subscribe is made waits for it: when it fails, it makes its own', async () => {
    const a = await legacyClient('flaky-a');
    const b = await legacyClient('flaky-b');
    const first = a.c.subscribeResource({ uri: 'flaky://doc' }).then(() => 'subscribed', (e: Error) => e.message);
    await waitUntil('the first subscribe upstream', async () => (flakyStats()['resources/subscribe'] ?? 0) >= 1 || undefined, 5_000);
    const second = b.c.subscribeResource({ uri: 'flaky://doc' });
    expect(await first).toMatch(/transient failure subscribing to flaky:\/\/doc/);
    expect(await second).toEqual({});
    // b's own attempt: the upstream holds its subscription, so its updates come.
    expect(flakyStats()['resources/subscribe']).toBe(2);
    await b.c.callTool({ name: 'flaky__touch', arguments: { uri: 'flaky://doc' } });
    await expect.poll(() => b.updates, { timeout: 3000, interval: 20 }).toEqual(['flaky://doc']);
    expect(a.updates).toEqual([]);
    await a.c.close();
    await b.c.close();
  });

  it("a modern listen stream that comes while a legacy client's upstream subscribe is made waits for it too", async () => {
    const a = await legacyClient('flaky-listen-a');
    const uri = 'flaky://t/listen';
    const before = flakyStats()['resources/subscribe'] ?? 0;
    const first = a.c.subscribeResource({ uri }).then(() => 'subscribed', (e: Error) => e.message);
    await waitUntil('the first subscribe upstream', async () => (flakyStats()['resources/subscribe'] ?? 0) > before || undefined, 5_000);
    const m = new ClientV2({ name: 'flaky-listen-m', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h3.url)));
    const updates: string[] = [];
    m.setNotificationHandler('notifications/resources/updated', async (n) => void updates.push(String(n.params.uri)));
    const sub = await m.listen({ resourceSubscriptions: [uri] });
    expect(await first).toMatch(/transient failure/);
    expect(sub.honoredFilter.resourceSubscriptions).toEqual([uri]);
    expect(flakyStats()['resources/subscribe']).toBe(before + 2);
    await m.callTool({ name: 'flaky__touch', arguments: { uri } });
    await expect.poll(() => updates, { timeout: 3000, interval: 20 }).toEqual([uri]);
    await sub.close();
    await m.close();
    await a.c.close();
  });

  it("a listen stream's upstream subscribe that fails leaves nobody counted: a legacy client that came meanwhile makes its own", async () => {
    const uri = 'flaky://t/stream-first';
    const before = flakyStats()['resources/subscribe'] ?? 0;
    const m = new ClientV2({ name: 'flaky-stream-first', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h3.url)));
    const listening = m.listen({ resourceSubscriptions: [uri] });
    await waitUntil('the first subscribe upstream', async () => (flakyStats()['resources/subscribe'] ?? 0) > before || undefined, 5_000);
    const b = await legacyClient('flaky-stream-first-b');
    expect(await b.c.subscribeResource({ uri })).toEqual({});
    const sub = await listening;
    expect(sub.honoredFilter.resourceSubscriptions ?? []).toEqual([]);
    expect(flakyStats()['resources/subscribe']).toBe(before + 2);
    await b.c.callTool({ name: 'flaky__touch', arguments: { uri } });
    await expect.poll(() => b.updates, { timeout: 3000, interval: 20 }).toEqual([uri]);
    await sub.close();
    await m.close();
    await b.c.close();
  });
});

describe('a modern server that comes back while the hub builds the resources list', () => {
  let h3: HubProcess;
  beforeAll(async () => {
    h3 = await startHub({
      servers: {
        // Its resources list takes 2.5 s, every time (kept 0 ms): a list built while `back`
        // restarts takes that long, and `back` is ready before it is done.
        dawdle: nodeServer(MUTABLE, [], { ERA: 'modern', DOC_URI: 'dawdle://doc', LIST_DELAY_KINDS: 'resources/list', LIST_DELAY_MS: '2500' }),
        back: slowStart({ ERA: 'modern', DOC_URI: 'back://doc' }),
      },
    });
    await waitForReady(h3.url, ['dawdle', 'back']);
  }, 60_000);
  afterAll(async () => {
    await h3?.stop();
  });

  it("routes its URI to it: a listen stream opened then is told it is honoured, a read is answered (neither the list, begun while it was down, nor what is down named it)", async () => {
    const m = new ClientV2({ name: 'back-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await m.connect(new TransportV2(new URL(h3.url)));
    expect((await fetch(new URL('/admin/servers/back/restart', h3.url), { method: 'POST' })).status).toBe(200);
    expect((await waitForState(h3.url, 'back', ['starting', 'restarting'], 1_000)).state).not.toBe('ready');
    const [sub, read] = await Promise.all([m.listen({ resourceSubscriptions: ['back://doc'] }), m.readResource({ uri: 'back://doc' })]);
    expect(sub.honoredFilter.resourceSubscriptions).toEqual(['back://doc']);
    expect(read.contents[0]).toMatchObject({ uri: 'back://doc' });
    await sub.close();
    await m.close();
  }, 20_000);
});
