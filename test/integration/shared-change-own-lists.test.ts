/**
 * A list change said on a server's main (shared) connection is of that connection's list: a
 * principal whose list of the server comes from its own connection (its own upstream
 * credentials) was told of it too, and listed again for nothing. Now only the clients whose
 * list has the shared one's part are told; a change said on a principal's own connection still
 * reaches that principal's clients alone. Real built hub with API-key auth; a modern HTTP
 * server whose lists differ per credential (test/fixtures/catalog/per-user-http.mjs); the
 * official v1 client (GET stream) and v2 client (listen stream) for each principal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { sha256Hex } from '../helpers/auth.js';
import type { HttpFixture } from '../helpers/http-fixture.js';
import type { HubProcess } from '../helpers/hub-process.js';
import { perUserHub, stopPerUserHub } from './per-user-hub.js';
import { streamWatchingFetch } from '../helpers/wire.js';

const ALICE_KEY = 'sy_shared-change-alice-000000000000000000';
const BOB_KEY = 'sy_shared-change-bob-00000000000000000000';

let up: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  ({ up, hub } = await perUserHub({ apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] }, ALICE_KEY));
}, 60_000);
afterAll(() => stopPerUserHub(hub, up));

interface Watcher {
  v1: ClientV1;
  v2: ClientV2;
  told: { legacy: number; modern: number };
  names(): Promise<string[]>;
  close(): Promise<void>;
}

async function watcher(key: string): Promise<Watcher> {
  const headers = { authorization: `Bearer ${key}` };
  const told = { legacy: 0, modern: 0 };
  const v1 = new ClientV1({ name: 'shared-change-v1', version: '1.0.0' });
  v1.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told.legacy++);
  const watch = streamWatchingFetch();
  await v1.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch, requestInit: { headers } }));
  await watch.streamOpen;
  const v2 = new ClientV2({ name: 'shared-change-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await v2.connect(new TransportV2(new URL(hub.url), { requestInit: { headers } }));
  v2.setNotificationHandler('notifications/tools/list_changed', async () => void told.modern++);
  const sub = await v2.listen({ toolsListChanged: true });
  return {
    v1,
    v2,
    told,
    names: async () => (await v1.listTools()).tools.map((t) => t.name).sort(),
    close: async () => {
      await sub.close();
      await v2.close();
      await v1.close();
    },
  };
}

describe("a change said on a server's shared connection", () => {
  it("is told to the clients whose list has the shared part, not to a principal listed from its own connection", async () => {
    const alice = await watcher(ALICE_KEY);
    const bob = await watcher(BOB_KEY);
    try {
      expect(await alice.names()).toEqual(['u__alice_only']);
      expect(await bob.names()).toEqual(['u__shared_only']);
      // Whatever the servers' start said is behind us: counted from here.
      const a0 = { ...alice.told };
      const b0 = { ...bob.told };

      // The shared account's list grows (said on the hub's main listen stream): bob is told,
      // and lists it; alice's own list is the same, and she is told nothing.
      await fetch(new URL('/grow?user=shared', up.url), { method: 'POST' });
      await expect.poll(() => bob.told, { timeout: 10_000 }).toEqual({ legacy: b0.legacy + 1, modern: b0.modern + 1 });
      expect(await bob.names()).toEqual(['u__shared_grown_1', 'u__shared_only']);
      // Then alice's own list grows (said on her own connection's stream): she is told, bob is not.
      await fetch(new URL('/grow?user=alice', up.url), { method: 'POST' });
      await expect.poll(() => alice.told, { timeout: 10_000 }).toEqual({ legacy: a0.legacy + 1, modern: a0.modern + 1 });
      expect(await alice.names()).toEqual(['u__alice_grown_1', 'u__alice_only']);
      // Nothing more came to either (the shared change, told to alice, would have come before hers).
      expect(alice.told).toEqual({ legacy: a0.legacy + 1, modern: a0.modern + 1 });
      expect(bob.told).toEqual({ legacy: b0.legacy + 1, modern: b0.modern + 1 });
    } finally {
      await alice.close();
      await bob.close();
    }
  }, 60_000);
});
