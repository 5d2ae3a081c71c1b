/**
 * Upstream caching hints the 2026-07-28 schema does not allow (a fractional or astronomically
 * large ttlMs) never reach a client as they are: the official v2 client validates results and
 * would reject the whole aggregated list, every server's tools with it, for one server's value.
 * Real built hub, two raw modern stdio fixtures, the official v2 client over loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernCall, waitForReady } from './ledger-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    servers: {
      frac: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '1200.5', CACHE_SCOPE: 'public', DOC_URI: 'frac://doc' }),
      huge: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '1e300', CACHE_SCOPE: 'public', DOC_URI: 'huge://doc' }),
      // 2025-11-25 servers that put a draft's hints on their answers anyway; the second one's reads the hub keeps a minute.
      draft: nodeServer(MUTABLE, [], { ERA: 'legacy', LEGACY_HINTS: '1', LIST_TTL_MS: '60000', CACHE_SCOPE: 'public', DOC_URI: 'draft://doc' }),
      kept: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', LEGACY_HINTS: '1', LIST_TTL_MS: '5000', CACHE_SCOPE: 'public', DOC_URI: 'kept://doc' }), cacheTtlMs: 60_000 },
    },
  });
  await waitForReady(hub.url, ['frac', 'huge', 'draft', 'kept']);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

describe('caching hints out of the schema', () => {
  it('a list and a read answer ttlMs as an integer of at least 0, and the official v2 client takes them', async () => {
    const raw = await modernCall(hub.url, 'l', 'tools/list');
    const ttl = raw.body?.result?.ttlMs as number;
    expect(Number.isInteger(ttl) && ttl >= 0 && ttl <= 1200).toBe(true);
    for (const uri of ['frac://doc', 'huge://doc']) {
      const read = await modernCall(hub.url, uri, 'resources/read', { uri });
      const t = read.body?.result?.ttlMs as number;
      expect(Number.isInteger(t) && t >= 0 && t <= 2 ** 31 - 1, `${uri}: ${t}`).toBe(true);
    }
    const c = new Client({ name: 'ttl-hints', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      const names = (await c.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['frac__echo', 'huge__echo']));
      expect((await c.readResource({ uri: 'frac://doc' })).contents).toHaveLength(1);
      expect((await c.readResource({ uri: 'huge://doc' })).contents).toHaveLength(1);
    } finally {
      await c.close();
    }
  });

  // A 2025-11-25 server's answer is private and kept only as long as the hub keeps it (docs/CATALOG.md):
  // its own ttlMs and cacheScope, which its era does not define, were passed on as the hub's, so a
  // client (or a cache behind the hub, for every user) kept "public for a minute" a read the hub
  // itself asks for again each time.
  it('a read of a legacy server carries the hub’s hints, not the ttlMs and cacheScope the server put on it', async () => {
    const read = async (uri: string) => (await modernCall(hub.url, uri, 'resources/read', { uri })).body?.result as Record<string, unknown>;
    const first = await read('draft://doc');
    expect(first.contents).toHaveLength(1);
    expect({ ttlMs: first.ttlMs, cacheScope: first.cacheScope }).toEqual({ ttlMs: 0, cacheScope: 'private' });
    // With cacheTtlMs the hub keeps it that long, and says so: at the first read as at a hit of it.
    const kept = await read('kept://doc');
    expect(kept.cacheScope).toBe('private');
    expect(kept.ttlMs).toBe(60_000);
    const hit = await read('kept://doc');
    expect(hit.cacheScope).toBe('private');
    expect(hit.ttlMs as number).toBeGreaterThan(5_000);
    expect(hit.ttlMs as number).toBeLessThanOrEqual(60_000);
  });
});
