/**
 * A reload that renames a server, removes it, or routes one of its URIs to another server now:
 * the resource subscriptions clients made to that URI are made again at the server that has it
 * now, and each subscriber is told it updated once (a change while it moved was not heard). A URI
 * that routes nowhere now is dropped; a listen stream told it was watched ends, gracefully. The
 * real built hub, its config file edited (the file watch reloads it), the stdio fixture
 * test/fixtures/catalog/mutable-server.mjs of either era, an SDK v1 subscriber
 * (resources/subscribe) and an SDK v2 listener (subscriptions/listen).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { firstText, waitForReady } from '../helpers/wire.js';
import { resourceWatchers } from '../helpers/resource-watchers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const DOC = 'mut://doc';
const MOVED = 'resource subscriptions whose server changed made again';
let hub: HubProcess | undefined;
const closing: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close().catch(() => undefined);
  await hub?.stop();
  hub = undefined;
});

/** A legacy client subscribed to DOC and a modern one listening to it; what each heard. */
const subscribers = (url: string) => resourceWatchers(url, DOC, closing);

describe('subscriptions whose URI changed owner on a reload', () => {
  for (const era of ['legacy', 'modern'] as const)
    it(`a ${era} server renamed: subscribed again under its new id, said updated once, and its updates heard`, async () => {
      const server = nodeServer(MUTABLE, [], { ERA: era });
      hub = await startHub({ servers: { a: server } });
      await waitForReady(hub.url, ['a']);
      const s = await subscribers(hub.url);
      // Heard while it is `a`; a marker said now comes alone.
      await s.legacy.callTool({ name: 'a__touch', arguments: { uri: DOC } });
      await expect.poll(s.heard, { timeout: 5000, interval: 20 }).toEqual([1, 1]);
      setSection(hub, 'servers', { c: server });
      await loggedTimes(hub, 'config reloaded', 1);
      await waitForReady(hub.url, ['c']);
      // The gap's signal: a change while it moved was heard by nobody.
      await expect.poll(s.heard, { timeout: 15_000, interval: 20 }).toEqual([2, 2]);
      await loggedTimes(hub, MOVED, 1);
      // `c` holds the subscription (a legacy server says so), and what it says is heard.
      const told = firstText(await s.legacy.callTool({ name: 'c__touch', arguments: { uri: DOC, report: true } }));
      if (era === 'legacy') expect(told).toBe('told 1');
      await expect.poll(s.heard, { timeout: 5000, interval: 20 }).toEqual([3, 3]);
      expect({ legacy: s.legacyHeard, modern: s.modernHeard }).toEqual({ legacy: [DOC, DOC, DOC], modern: [DOC, DOC, DOC] });
      expect(JSON.parse(hub.logs.find((l) => l.includes(MOVED))!)).toMatchObject({ sessions: 1, listenStreams: 1 });
      // The legacy client's unsubscribe lets go of it where it is now.
      expect(await s.legacy.unsubscribeResource({ uri: DOC })).toEqual({});
      if (era === 'legacy') expect(firstText(await s.legacy.callTool({ name: 'c__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
      await s.sub.close();
      if (era === 'legacy') await expect.poll(async () => firstText(await s.legacy.callTool({ name: 'c__touch', arguments: { uri: DOC, report: true } })), { timeout: 5000, interval: 50 }).toBe('told 0');
    }, 60_000);

  it('a server added ahead of the one that served the URI takes it: moved there, and let go at the old one', async () => {
    const server = nodeServer(MUTABLE, [], { ERA: 'legacy' });
    hub = await startHub({ servers: { b: server } });
    await waitForReady(hub.url, ['b']);
    const s = await subscribers(hub.url);
    expect(firstText(await s.legacy.callTool({ name: 'b__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
    await expect.poll(s.heard, { timeout: 5000, interval: 20 }).toEqual([1, 1]);
    // Listed first, `a` is the URI's owner now (ties go to the server listed first).
    setSection(hub, 'servers', { a: server, b: server });
    await loggedTimes(hub, 'config reloaded', 1);
    await waitForReady(hub.url, ['a', 'b']);
    await expect.poll(s.heard, { timeout: 15_000, interval: 20 }).toEqual([2, 2]);
    await loggedTimes(hub, MOVED, 1);
    expect(firstText(await s.legacy.callTool({ name: 'a__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
    await expect.poll(s.heard, { timeout: 5000, interval: 20 }).toEqual([3, 3]);
    // `b` was told to let it go: what it says of DOC now reaches nobody.
    await expect.poll(async () => firstText(await s.legacy.callTool({ name: 'b__touch', arguments: { uri: DOC, report: true } })), { timeout: 5000, interval: 50 }).toBe('told 0');
  }, 60_000);

  it('a server removed, its URI served by no other: a listen stream told it was watched ends, gracefully', async () => {
    hub = await startHub({ servers: { a: nodeServer(MUTABLE, [], { ERA: 'legacy' }), b: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'mut://other' }) } });
    await waitForReady(hub.url, ['a', 'b']);
    const s = await subscribers(hub.url);
    setSection(hub, 'servers', { b: nodeServer(MUTABLE, [], { ERA: 'legacy', DOC_URI: 'mut://other' }) });
    await loggedTimes(hub, 'config reloaded', 1);
    expect(await Promise.race([s.sub.closed, new Promise((r) => setTimeout(() => r('still open'), 10_000))])).toBe('graceful');
    // The legacy session cannot be told; its subscription is dropped, and nothing else is said.
    expect(s.heard()).toEqual([0, 0]);
    await loggedTimes(hub, MOVED, 1, 15_000);
  }, 60_000);

  it("a group no longer showing the URI's server, another it shows serving it: moved there; the hub's other clients keep theirs", async () => {
    const server = nodeServer(MUTABLE, [], { ERA: 'legacy' });
    hub = await startHub({ servers: { a: server, b: server }, groups: { g: { servers: ['a', 'b'] } } });
    await waitForReady(hub.url, ['a', 'b']);
    const inGroup = await subscribers(hub.url.replace(/\/mcp$/, '/mcp/g'));
    const all = await subscribers(hub.url);
    await expect.poll(async () => firstText(await all.legacy.callTool({ name: 'a__touch', arguments: { uri: DOC, report: true } })), { timeout: 5000, interval: 50 }).toBe('told 1');
    await expect.poll(() => [...inGroup.heard(), ...all.heard()], { timeout: 5000, interval: 20 }).toEqual([1, 1, 1, 1]);
    setSection(hub, 'groups', { g: { servers: ['b'] } });
    await loggedTimes(hub, 'config reload: groups replaced', 1);
    // The group's subscribers hear the gap's signal, the others nothing: theirs did not move.
    await expect.poll(() => [...inGroup.heard(), ...all.heard()], { timeout: 10_000, interval: 20 }).toEqual([2, 2, 1, 1]);
    await loggedTimes(hub, MOVED, 1);
    expect(JSON.parse(hub.logs.find((l) => l.includes(MOVED))!)).toMatchObject({ sessions: 1, listenStreams: 1 });
    expect(firstText(await inGroup.legacy.callTool({ name: 'b__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
    await expect.poll(() => [...inGroup.heard(), ...all.heard()], { timeout: 5000, interval: 20 }).toEqual([3, 3, 1, 1]);
    // `a` still holds it for the hub's other clients.
    expect(firstText(await all.legacy.callTool({ name: 'a__touch', arguments: { uri: DOC, report: true } }))).toBe('told 1');
    await expect.poll(() => [...inGroup.heard(), ...all.heard()], { timeout: 5000, interval: 20 }).toEqual([3, 3, 2, 2]);
  }, 60_000);
});
