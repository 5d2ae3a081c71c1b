/**
 * How many resource subscriptions one legacy session may hold, through the real built hub and
 * the real server-everything (its resource template makes any number of URIs subscribable):
 * past the cap a new URI is refused, one it holds is not, and unsubscribing makes room.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacySession, waitForReady, type Json } from '../helpers/wire.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

const CAP = 1_000;
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
