/**
 * `/healthz` for a key limited to tool groups counts each server's tools its groups show, from
 * the shared tools list. That list was built only at some client's tools/list: the count was 0
 * until a client had listed, and, after a server's tools changed, stayed as of the last list.
 * Now it is built from the lists the hub holds as soon as every ready server's tools are listed,
 * and again at each change, with nothing fetched for it (a health check may poll often). Real
 * built hub with API keys; two raw legacy stdio upstreams (test/fixtures/catalog/mutable-server.mjs);
 * the official v1 client on the group's endpoint.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const ALICE_KEY = 'sy_group-counts-alice-000000000000000000000';
const BOB_KEY = 'sy_group-counts-bob-00000000000000000000000';
const dir = mkdtempSync(join(tmpdir(), 'health-group-counts-'));
const stats = join(dir, 'a.json');
const listsAsked = () => (JSON.parse(readFileSync(stats, 'utf8')) as Record<string, number>)['tools/list'] ?? 0;

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY), groups: ['g'] }] },
    groups: { g: { servers: ['a'], deny: ['a__leak'] } },
    servers: {
      a: nodeServer(MUTABLE, [], { ERA: 'legacy', STATS_FILE: stats }),
      b: nodeServer(MUTABLE, [], { ERA: 'legacy' }),
    },
  });
  await waitForReadyWith(hub.url, ['a', 'b'], ALICE_KEY);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const bobsHealth = async (): Promise<Json[]> =>
  ((await (await fetch(new URL('/healthz', hub.url), { headers: { authorization: `Bearer ${BOB_KEY}` } })).json()) as { servers: Json[] }).servers;

describe('a tool group key’s /healthz counts', () => {
  it('are of the shared list once its servers are ready, before any client listed, and follow a change with nothing fetched for them', async () => {
    // No client has listed tools: the group shows a's tools but `leak`.
    await expect.poll(bobsHealth, { timeout: 5_000, interval: 50 }).toMatchObject([{ id: 'a', tools: 4 }]);

    // What bob's client is shown is what was counted.
    const c = new ClientV1({ name: 'health-group-counts', version: '1.0.0' });
    await c.connect(new TransportV1(new URL(`${hub.url}/g`), { requestInit: { headers: { authorization: `Bearer ${BOB_KEY}` } } }));
    try {
      const names = (await c.listTools()).tools.map((t) => t.name).sort();
      expect(names).toHaveLength(4);
      expect(names.every((n) => n.startsWith('a__') && n !== 'a__leak')).toBe(true);
    } finally {
      await c.close();
    }

    // a's tools change (alice calls; nobody lists): bob's count follows.
    const reply = await post(hub.url, modernBody(2, 'tools/call', { name: 'a__mutate', arguments: { op: 'add', def: { name: 'fresh', inputSchema: { type: 'object' } } } }), {
      ...modernHeaders('tools/call', 'a__mutate'),
      authorization: `Bearer ${ALICE_KEY}`,
    });
    expect(reply.body?.result).toMatchObject({ content: [{ text: 'mutated' }] });
    await expect.poll(bobsHealth, { timeout: 5_000, interval: 50 }).toMatchObject([{ id: 'a', tools: 5 }]);

    // Polled often, /healthz asks the upstream for nothing.
    const asked = listsAsked();
    for (let i = 0; i < 20; i++) expect(await bobsHealth()).toMatchObject([{ id: 'a', tools: 5 }]);
    expect(listsAsked()).toBe(asked);
  }, 60_000);
});
