/**
 * A resource read over a principal's own upstream credentials is that principal's, as the lists
 * its connection fetches are (docs/CATALOG.md): the hub neither hands it to another principal
 * from its read cache nor tells the reader's client it is public, whatever `cacheScope` the
 * server gave. The server checked the reader's account only; another principal's read must
 * reach it. Real built hub with API keys, a raw modern HTTP upstream that knows its callers by
 * their credentials, modern clients over loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import type { HttpFixture } from '../helpers/http-fixture.js';
import type { HubProcess } from '../helpers/hub-process.js';
import { perUserHub, stopPerUserHub } from './per-user-hub.js';
import { modernBody, modernHeaders, post, type Json, type RpcMessage } from '../helpers/wire.js';

const ALICE_KEY = 'sy_read-cache-alice-000000000000000000000000';
const BOB_KEY = 'sy_read-cache-bob-00000000000000000000000000';

let up: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  // Its shared documents are read by users alone: the shared account's read is not found. alice
  // reads with an account of her own; bob with the hub's (the shared one).
  ({ up, hub } = await perUserHub({ apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] }, ALICE_KEY, { env: { SHARED_DOCS: '1' } }));
}, 60_000);
afterAll(() => stopPerUserHub(hub, up));

const read = async (key: string, uri: string): Promise<RpcMessage> => {
  const r = await post(hub.url, modernBody(1, 'resources/read', { uri }), { ...modernHeaders('resources/read', uri), authorization: `Bearer ${key}` });
  if (!r.body) throw new Error(`${r.status} ${r.text}`);
  return r.body;
};

describe('a read over a principal’s own credentials', () => {
  it('is private to its client and not given to another principal from the cache', async () => {
    const mine = await read(ALICE_KEY, 'u://shared/q3');
    const result = mine.result as Json;
    expect(result, JSON.stringify(mine)).toMatchObject({ contents: [{ text: 'the q3 plan' }] });
    // The server said public; the hub's read of it used alice's account.
    expect(result.cacheScope).toBe('private');
    // bob's read reaches the server with the shared account, which may not read it.
    const his = await read(BOB_KEY, 'u://shared/q3');
    expect(his.result, JSON.stringify(his)).toBeUndefined();
    expect(his.error).toMatchObject({ code: -32602, data: { uri: 'u://shared/q3' } });
    // alice's own second read is served from her cache (fresh for the server's minute), still private.
    const again = (await read(ALICE_KEY, 'u://shared/q3')).result as Json;
    expect(again).toMatchObject({ contents: [{ text: 'the q3 plan' }], cacheScope: 'private' });
    expect(again.ttlMs as number).toBeGreaterThan(0);
  }, 30_000);
});
