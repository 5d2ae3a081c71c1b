/**
 * `/healthz` tells a key limited to tool groups how many tools each server of its groups shows.
 * That count is of the lists anyone shares, never of another principal's private list: it came
 * from the tools aggregate built last, whoever's it was, so a principal with upstream credentials
 * of its own listing just before told a group key the size of that private list. Real built hub
 * with API keys, the modern HTTP fixture whose lists depend on the caller's credential.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import type { HttpFixture } from '../helpers/http-fixture.js';
import type { HubProcess } from '../helpers/hub-process.js';
import { perUserHub, stopPerUserHub } from './per-user-hub.js';
import { modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';

const ALICE_KEY = 'sy_health-counts-alice-0000000000000000000000';
const BOB_KEY = 'sy_health-counts-bob-000000000000000000000000';

let up: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  // alice lists with an account of her own; bob with the hub's (the shared one).
  ({ up, hub } = await perUserHub(
    { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY), groups: ['g'] }] },
    ALICE_KEY,
    { config: { groups: { g: { servers: ['u'] } } } },
  ));
}, 60_000);
afterAll(() => stopPerUserHub(hub, up));

const list = async (url: string, key: string): Promise<string[]> => {
  const r = await post(url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
  return ((r.body?.result as Json).tools as { name: string }[]).map((t) => t.name);
};

describe('a tool group key’s /healthz', () => {
  it("counts the tools it is shown, not those of another principal's private list listed since", async () => {
    const bobs = await list(`${hub.url}/g`, BOB_KEY);
    expect(bobs).toEqual(['u__shared_only']);
    for (let i = 0; i < 2; i++) await fetch(`${up.url.replace(/\/mcp$/, '')}/grow?user=alice`, { method: 'POST' });
    expect(await list(hub.url, ALICE_KEY)).toHaveLength(3);
    const health = (await (await fetch(new URL('/healthz', hub.url), { headers: { authorization: `Bearer ${BOB_KEY}` } })).json()) as { servers: Json[] };
    expect(health.servers).toMatchObject([{ id: 'u', tools: bobs.length }]);
  }, 30_000);
});
