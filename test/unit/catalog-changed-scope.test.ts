/**
 * A list found changed when its cached entry expired is told as that server's change, and a
 * principal's own list's as that principal's only: the downstream edges then tell only the
 * clients of that principal, and of groups that show that server. Real Catalog; stand-in
 * upstream connections (modern, ttlMs 1 s) and a fake clock.
 */
import { EventEmitter } from 'node:events';
import pino from 'pino';
import { expect, it } from 'vitest';
import { Catalog, SHARED_ONLY } from '../../src/catalog/catalog.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { silentLogger } from '../../src/log.js';
import { MODERN } from '../../src/protocol/era.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function fake(): any {
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.era = MODERN;
  u.capabilities = { tools: {} };
  u.tools = ['a'];
  u.request = async (m: string) => (m === 'tools/list' ? { tools: u.tools.map((name: string) => ({ name, inputSchema: { type: 'object' } })), ttlMs: 1000, cacheScope: 'private' } : {});
  return u;
}

it("an expired list found changed is told with its server, and a principal's own list with that principal", async () => {
  let t = 1_000_000;
  const main = fake(), p = fake();
  const h: any = { id: 's', config: serverConfig('s'), upstream: main };
  const c = new Catalog(() => [h], new NameAssigner(), silentLogger, {
    now: () => t,
    connection: (_h, pr) => (pr === 'P' ? { credential: 'principal:P', upstream: p } : { credential: '', upstream: main }),
  });
  const told: unknown[][] = [];
  c.on('changed', (...args) => told.push(args));
  const names = async (principal?: string) => (await c.aggregate('tools', { principal })).items.map((i: any) => i.name);
  expect(await names('P')).toEqual(['s__a']);
  expect(await names()).toEqual(['s__a']);

  p.tools = ['a', 'b'];
  t += 2000;
  await names('P'); // stale: served once, refreshed behind
  await expect.poll(() => told, { timeout: 1000, interval: 10 }).toEqual([['tools', 'P', 's']]);
  expect(await names('P')).toEqual(['s__a', 's__b']);

  main.tools = ['c'];
  t += 2000;
  await names();
  await expect.poll(() => told.length, { timeout: 1000, interval: 10 }).toBe(2);
  // Of the server's own connection's list alone: not told to principals listed from their own.
  expect(told[1]).toEqual(['tools', undefined, 's', SHARED_ONLY]);
  c.close();
});

it('a notification an upstream names as a property of every object (toString, constructor, __proto__) is no list change, and no failure', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'error' }, { write: (l: string) => void lines.push(l) });
  const main = fake();
  const h: any = { id: 's', config: serverConfig('s'), upstream: main };
  let plugins = 0;
  const c = new Catalog(() => [h], new NameAssigner(), log, { plugins: { notification: async () => (plugins++, true) } as any });
  c.watchConnection(h, main);
  for (const method of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf']) main.emit('notification', { method });
  main.emit('notification', { method: 'notifications/tools/list_changed' });
  // Handled in order: once the list change reached the plugins, the five before it were done with.
  await expect.poll(() => plugins, { timeout: 2000, interval: 10 }).toBeGreaterThan(0);
  await new Promise((r) => setImmediate(r));
  expect(lines).toEqual([]);
  expect(plugins).toBe(1);
  c.close();
});
