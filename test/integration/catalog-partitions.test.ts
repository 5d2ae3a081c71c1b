/**
 * Private list partitions end to end: two principals (API keys) whose upstream credentials
 * differ (`servers.<id>.credentials`) each get the private list the upstream gave their own
 * credential, fetched once each and cached apart; neither ever sees the other's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';

const ALICE_KEY = 'sy_alice-partition-key-0000000000000000000000000';
const BOB_KEY = 'sy_bob-partition-key-1111111111111111111111111111111';

describe('private list partitions by upstream authorization context', () => {
  let up: HttpFixture;
  let hub: HubProcess;
  beforeAll(async () => {
    up = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs');
    hub = await startHub({
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] },
      servers: {
        u: {
          url: up.url,
          credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } }, bob: { headers: { authorization: 'Bearer bob-upstream' } } },
        },
      },
    });
    await waitForReadyWith(hub.url, ['u'], ALICE_KEY);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  const list = async (key: string): Promise<Json> => {
    const r = await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
    if (!r.body?.result) throw new Error(`${r.status} ${r.text}`);
    return r.body.result;
  };
  const names = (r: Json) => (r.tools as Json[]).map((t) => String(t.name));

  it('each principal sees only the list of its own upstream credential, and it stays private', async () => {
    for (let i = 0; i < 3; i++) {
      const a = await list(ALICE_KEY);
      const b = await list(BOB_KEY);
      expect(names(a)).toEqual(['u__alice_only']);
      expect(names(b)).toEqual(['u__bob_only']);
      expect(a.cacheScope).toBe('private');
      expect(b.cacheScope).toBe('private');
    }
    const stats = (await (await fetch(new URL('/stats', up.url))).json()) as Record<string, number>;
    expect(stats.alice).toBe(1); // cached per partition for the upstream's ttlMs
    expect(stats.bob).toBe(1);
    // A tool of another principal's list cannot be called either.
    const call = await post(hub.url, modernBody(2, 'tools/call', { name: 'u__bob_only', arguments: {} }), {
      ...modernHeaders('tools/call', 'u__bob_only'),
      authorization: `Bearer ${ALICE_KEY}`,
    });
    expect(call.body?.error?.message).toMatch(/Unknown tool/);
  });
});
