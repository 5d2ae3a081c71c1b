/**
 * A resource update a server says while the hub is not subscribed to it (the server down,
 * restarted, replaced, or slow to acknowledge a subscription its client was answered) is lost:
 * the hub tells the resource's subscribers it updated once it is watched, whatever era the server
 * comes back speaking. The real built hub, the stdio fixture
 * test/fixtures/catalog/mutable-server.mjs of either era, an SDK v1 subscriber
 * (resources/subscribe) and an SDK v2 listener (subscriptions/listen).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { firstText, waitForReady } from '../helpers/wire.js';
import { resourceWatchers } from '../helpers/resource-watchers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const DOC = 'mut://doc';
let hub: HubProcess | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
  await hub?.stop();
  hub = undefined;
});

/** A legacy client subscribed to DOC and a modern one listening to it; what each heard. */
const subscribers = (url: string) => resourceWatchers(url, DOC, closing);

describe('subscribers after a gap, the server back in another era', () => {
  it('a modern server replaced by a legacy one on reload: subscribed again with resources/subscribe, then said updated to both subscribers', async () => {
    const servers = (era: string) => ({ m: nodeServer(MUTABLE, [], { ERA: era }) });
    hub = await startHub({ servers: servers('modern') });
    await waitForReady(hub.url, ['m']);
    const s = await subscribers(hub.url);
    // Nothing is said while it stands: a marker said now comes alone.
    await s.legacy.callTool({ name: 'm__touch', arguments: { uri: DOC } });
    await expect.poll(() => [s.legacyHeard.length, s.modernHeard.length], { timeout: 5000, interval: 20 }).toEqual([1, 1]);
    setSection(hub, 'servers', servers('legacy'));
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['m']);
    // The update a change made between the two servers would have had.
    await expect.poll(() => [s.legacyHeard.length, s.modernHeard.length], { timeout: 10_000, interval: 20 }).toEqual([2, 2]);
    // The legacy server holds the subscription, so a change of it now is said, and heard.
    expect(firstText(await s.legacy.callTool({ name: 'm__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
    await expect.poll(() => [s.legacyHeard.length, s.modernHeard.length], { timeout: 5000, interval: 20 }).toEqual([3, 3]);
    expect({ legacy: s.legacyHeard, modern: s.modernHeard }).toEqual({ legacy: [DOC, DOC, DOC], modern: [DOC, DOC, DOC] });
    await loggedTimes(hub, 'subscribed again after a gap', 1);
  }, 60_000);
});

describe('a subscriber answered before the server watched its resource', () => {
  it('a modern server too slow to acknowledge within the 2 s a listen stream waits: said updated once it does', async () => {
    hub = await startHub({ servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern', PID_TAG: '1', LIST_TTL_MS: '60000' }) } });
    await waitForReady(hub.url, ['m']);
    const modern = new ClientV2({ name: 'modern-watcher', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(hub.url)));
    closing.push(() => modern.close());
    const heard: string[] = [];
    modern.setNotificationHandler('notifications/resources/updated', async (n) => void heard.push(String(n.params.uri)));
    // Listed (kept a minute), so the URI is routed without asking the server.
    expect((await modern.listResources()).resources.map((r) => r.uri)).toContain(DOC);
    const pid = Number(/@(\d+)$/.exec(String(firstText(await modern.callTool({ name: 'm__echo', arguments: { text: 'pid' } }))))?.[1]);
    expect(pid).toBeGreaterThan(0);
    // The server stopped (as a busy one would be) while the hub's stream asking for DOC waits
    // for its acknowledgement: the hub answers the client after 2 s, DOC honoured unchecked.
    process.kill(pid, 'SIGSTOP');
    let sub: Awaited<ReturnType<ClientV2['listen']>>;
    try {
      sub = await modern.listen({ resourceSubscriptions: [DOC] });
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    closing.unshift(() => sub.close());
    expect(sub.honoredFilter.resourceSubscriptions).toEqual([DOC]);
    // Its acknowledgement, come at last, honours DOC: a change before it was heard by nobody.
    await expect.poll(() => heard, { timeout: 10_000, interval: 20 }).toEqual([DOC]);
    // Once: a marker said now comes alone.
    await modern.callTool({ name: 'm__touch', arguments: { uri: DOC } });
    await expect.poll(() => heard.length, { timeout: 5000, interval: 20 }).toBe(2);
    expect(heard).toEqual([DOC, DOC]);
  }, 60_000);
});
