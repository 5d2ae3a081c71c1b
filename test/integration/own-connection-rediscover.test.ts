/**
 * A principal's own connection to a modern server asks `server/discover` again once its answer
 * is stale, as the server's main connection does: a redeploy that adds a family (prompts) was
 * seen on the main connection only, so the principal's own listen stream never asked for that
 * family's changes, and a change of the principal's own prompts, said by the server, was not
 * heard: its list stayed as it was for its ttlMs (a minute here, an hour for many servers), its
 * clients not told. Real catalog; real modern stdio upstreams (the main process and the
 * principal's own one, as with processPerPrincipal: test/fixtures/catalog/mutable-server.mjs).
 */
import { afterEach, expect, it } from 'vitest';
import { Catalog, type Connection, type ServerHandle } from '../../src/catalog/catalog.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { principalConn } from '../../src/catalog/principal-conn.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig, sleep, startMutable, type Fixture } from './catalog-helpers.js';
import { waitFor } from './upstream-helpers.js';

let fixtures: Fixture[] = [];
let catalog: Catalog | undefined;
afterEach(async () => {
  catalog?.close();
  await Promise.allSettled(fixtures.map((f) => f.upstream.close()));
  fixtures = [];
});

it("a family a redeploy adds is seen on a principal's own connection too: its changes there are heard, and told to that principal", async () => {
  const env = { DISCOVER_CAPS: JSON.stringify({ tools: {} }), PROMPTS: '1', LIST_TTL_MS: '60000', CACHE_SCOPE: 'private' };
  const main = await startMutable('u', env, silentLogger, { rediscoverMinMs: 200 });
  const own = await startMutable('u', env, silentLogger, { rediscoverMinMs: 200 });
  fixtures.push(main, own);
  const h: ServerHandle = { id: 'u', config: serverConfig('u'), upstream: main.upstream } as ServerHandle;
  const c = (catalog = new Catalog(() => [h], new NameAssigner(), silentLogger, {
    listAtReady: () => false,
    splits: () => true,
    connection: (_h, pr): Connection => (pr === 'alice' ? { credential: principalConn('alice'), upstream: own.upstream } : { credential: '', upstream: main.upstream }),
    ownConnection: (_h, pr) => (pr === 'alice' ? own.upstream : undefined),
  }));
  c.watch(h);
  c.watchConnection(h, own.upstream, 'alice'); // as the pool does for each connection it makes
  const told: [string, string | undefined][] = [];
  c.on('changed', (kind: string, principal?: string) => void told.push([kind, principal]));
  const alice = { principal: 'alice' };
  expect((await c.aggregate('prompts', alice)).items).toEqual([]);

  // Redeployed (both processes): prompts now. Nothing is said; the discover answers are stale.
  const caps = { tools: {}, prompts: { listChanged: true } };
  for (const f of [main, own]) await f.upstream.request('tools/call', { name: 'rediscover', arguments: { capabilities: caps } });
  await sleep(250);
  await c.aggregate('tools', alice);
  await waitFor(() => main.upstream.capabilities?.prompts !== undefined, 2000, "the main connection's discover asked again");
  await waitFor(() => own.upstream.capabilities?.prompts !== undefined, 2000, "alice's own connection's discover asked again");
  expect((await c.aggregate('prompts', alice)).items.map((p) => p.name)).toEqual(['u__greet']);
  // Her own listen stream now asks for prompt changes (opened again with the new filter).
  await waitFor(() => (own.stats()['subscriptions/listen'] ?? 0) >= 2, 2000, "alice's listen stream opened again");

  // Her own process's prompt changes, said on her stream: her list is fetched again, she is told.
  told.length = 0;
  const listed = own.stats()['prompts/list'] ?? 0;
  await own.upstream.request('tools/call', { name: 'mutate', arguments: { op: 'prompt', def: { name: 'greet', description: 'Greets, anew', arguments: [{ name: 'who' }] } } });
  await waitFor(() => told.some(([k, p]) => k === 'prompts' && p === 'alice'), 3000, 'alice told her prompts changed');
  // Fetched again, and the changed prompt held back for approval (pinning: block), not served as it was.
  expect((await c.aggregate('prompts', alice)).items).toEqual([]);
  expect(own.stats()['prompts/list']).toBe(listed + 1);
}, 30_000);
