/**
 * How many resource subscriptions one legacy session may hold, through the real built hub and
 * the real server-everything (its resource template makes any number of URIs subscribable):
 * past the cap a new URI is refused, one it holds is not, and unsubscribing makes room.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heardSoFar, legacySession, modernBody, modernHeaders, waitForReady, type Json } from '../helpers/wire.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

const CAP = 1_000;
const LONGEST = 8192;
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { ev: nodeServer('node_modules/@modelcontextprotocol/server-everything/dist/index.js', ['stdio']) } });
  await waitForReady(hub.url, ['ev']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

const uri = (n: number) => `demo://resource/dynamic/text/${n}`;

describe('resource subscriptions of one legacy session', () => {
  it(`are at most ${CAP}: a new URI past them is refused, a held one is not, an unsubscribe makes room`, async () => {
    const s = await legacySession(hub.url);
    for (let i = 0; i < CAP; i += 25) {
      const rs = await Promise.all(Array.from({ length: 25 }, (_, k) => s.request(i + k + 1, 'resources/subscribe', { uri: uri(i + k) })));
      for (const r of rs) expect(r.body?.result, r.text).toEqual({});
    }
    const over = await s.request(5000, 'resources/subscribe', { uri: uri(CAP) });
    expect((over.body?.error as Json | undefined)?.code).toBe(-32602);
    expect((over.body?.error as Json).message).toContain(`holds ${CAP} resource subscriptions`);
    expect((await s.request(5001, 'resources/subscribe', { uri: uri(0) })).body?.result).toEqual({});
    expect((await s.request(5002, 'resources/unsubscribe', { uri: uri(1) })).body?.result).toEqual({});
    expect((await s.request(5003, 'resources/subscribe', { uri: uri(CAP) })).body?.result).toEqual({});
    // Another session has room of its own.
    const other = await legacySession(hub.url);
    expect((await other.request(1, 'resources/subscribe', { uri: uri(CAP + 1) })).body?.result).toEqual({});
  }, 60_000);
});

describe('a URI subscribed to', () => {
  // A template matches an id of any length: a thousand URIs of a request body each were kept, in
  // the session's table, upstream and in its ledger row, written whole again at each subscribe.
  const sized = (n: number) => `demo://resource/dynamic/text/${'7'.repeat(n - uri(0).length + 1)}`;

  it(`is at most ${LONGEST} characters long: a legacy subscribe of a longer one is refused, a listen stream does not honour it`, async () => {
    expect(sized(LONGEST)).toHaveLength(LONGEST);
    const s = await legacySession(hub.url);
    expect((await s.request(1, 'resources/subscribe', { uri: sized(LONGEST) })).body?.result).toEqual({});
    const over = await s.request(2, 'resources/subscribe', { uri: sized(LONGEST + 1) });
    expect((over.body?.error as Json | undefined)?.code).toBe(-32602);
    expect((over.body?.error as Json).message).toContain(`at most ${LONGEST} characters`);

    const ac = new AbortController();
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: modernHeaders('subscriptions/listen'),
      body: JSON.stringify(modernBody('l-1', 'subscriptions/listen', { notifications: { resourceSubscriptions: [uri(7), sized(LONGEST + 1)] } })),
      signal: ac.signal,
    });
    const heard = heardSoFar(res);
    await expect.poll(() => heard().includes('acknowledged')).toBe(true);
    const ack = JSON.parse(heard().split('\n').find((l) => l.startsWith('data:'))!.slice(5));
    expect(ack.params.notifications.resourceSubscriptions).toEqual([uri(7)]);
    ac.abort();
  });
});
