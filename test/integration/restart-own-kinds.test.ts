/**
 * A server some principals reach with credentials of their own (their own connections, their
 * own lists) restarted: clients are told of the lists that could show it (those its main
 * connection offered or offers, and those some list of it was held of, in any partition), not
 * of every kind. A tools-only server had every client told that tools, prompts and resources
 * changed at each restart or reload of it, and an IDE listed all three again. Real built hub
 * with API-key auth; a modern HTTP server whose lists differ per credential
 * (test/fixtures/catalog/per-user-http.mjs, tools only); the official v1 client per principal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { sha256Hex } from '../helpers/auth.js';
import type { HttpFixture } from '../helpers/http-fixture.js';
import type { HubProcess } from '../helpers/hub-process.js';
import { perUserHub, stopPerUserHub } from './per-user-hub.js';
import { streamWatchingFetch } from '../helpers/wire.js';

const KEYS = {
  alice: 'sy_restart-own-kinds-alice-00000000000000',
  bob: 'sy_restart-own-kinds-bob-0000000000000000',
  ops: 'sy_restart-own-kinds-ops-0000000000000000',
};

let up: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  const apiKeys = [
    { principal: 'alice', sha256: sha256Hex(KEYS.alice) },
    { principal: 'bob', sha256: sha256Hex(KEYS.bob) },
    { principal: 'ops', sha256: sha256Hex(KEYS.ops), scopes: ['switchyard:admin'] },
  ];
  ({ up, hub } = await perUserHub({ apiKeys }, KEYS.alice));
}, 60_000);
afterAll(() => stopPerUserHub(hub, up));

type Told = { tools: number; prompts: number; resources: number };

async function client(key: string): Promise<{ c: ClientV1; told: Told }> {
  const told: Told = { tools: 0, prompts: 0, resources: 0 };
  const c = new ClientV1({ name: 'restart-own-kinds', version: '1.0.0' });
  c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told.tools++);
  c.setNotificationHandler(PromptListChangedNotificationSchema, async () => void told.prompts++);
  c.setNotificationHandler(ResourceListChangedNotificationSchema, async () => void told.resources++);
  const watch = streamWatchingFetch();
  await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch, requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await watch.streamOpen;
  return { c, told };
}

describe('a tools-only server with principals of its own, restarted', () => {
  it('is told as a tools list change, not of prompts and resources', async () => {
    const alice = await client(KEYS.alice);
    const bob = await client(KEYS.bob);
    try {
      expect((await alice.c.listTools()).tools.map((t) => t.name)).toEqual(['u__alice_only']);
      expect((await bob.c.listTools()).tools.map((t) => t.name)).toEqual(['u__shared_only']);
      const r = await fetch(new URL('/admin/servers/u/restart', hub.url), { method: 'POST', headers: { authorization: `Bearer ${KEYS.ops}` } });
      expect(r.status).toBe(200);
      await expect.poll(() => Math.min(alice.told.tools, bob.told.tools), { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
      // No event stands for a notice not sent: past the 250 ms window the restart's notices share.
      await new Promise((res) => setTimeout(res, 600));
      for (const t of [alice.told, bob.told]) expect([t.prompts, t.resources]).toEqual([0, 0]);
      expect((await alice.c.listTools()).tools.map((t) => t.name)).toEqual(['u__alice_only']);
    } finally {
      await alice.c.close();
      await bob.c.close();
    }
  }, 60_000);
});
