/**
 * An update of a resource that one principal's list hides (a plugin flags it there) still
 * reaches the subscribers of a principal whose own list shows it: the catalog drops only
 * updates of resources every list it holds hides. Real Catalog; stand-in upstream connections
 * that answer resources/list, and a plugin that hides what it is told to.
 */
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function fake(desc: string): any {
  const u: any = new EventEmitter();
  u.state = 'ready'; u.era = undefined; u.capabilities = { resources: { listChanged: true, subscribe: true } };
  u.request = async (m: string) => (m === 'resources/list' ? { resources: [{ uri: 'u://x', name: 'x', description: desc }] } : {});
  return u;
}
/** A catalog of one server: its main connection and Q's show u://x; P's list hides it (a plugin flags it there). */
function catalog(): { c: Catalog; h: any; main: any; q: any } {
  const main = fake('fine'), p = fake('BAD'), q = fake('fine');
  const h: any = { id: 's', config: serverConfig('s'), upstream: main };
  const plugins: any = {
    list: async (_k: string, _s: unknown, items: any[]) => ({ items, flags: new Map(), hidden: new Map(items.map((it, i): [number, string | undefined] => [i, it.description === 'BAD' ? 'plugin' : undefined]).filter(([, v]) => v)) }),
    notification: async () => true,
  };
  // Pins only warn: each connection lists its own description of u://x, and the hiding under
  // test is the plugin's (a description other than the pinned one would be held back too).
  const c = new Catalog(() => [h], new NameAssigner(), silentLogger, {
    policy: { pinning: 'warn' },
    plugins,
    connection: (_h, pr) => (pr === 'P' ? { credential: 'principal:P', upstream: p } : pr === 'Q' ? { credential: 'principal:Q', upstream: q } : { credential: '', upstream: main }),
  });
  c.watch(h);
  return { c, h, main, q };
}

it('an update of a URI one principal sees is not dropped because another principal\'s list hides it', async () => {
  const { c, h, q } = catalog();
  c.watchConnection(h, q, 'Q');
  const uris = (a: any) => a.items.map((i: any) => i.uri);
  expect(uris(await c.aggregate('resources', { principal: 'Q' }))).toEqual(['u://x']);
  expect(uris(await c.aggregate('resources', { principal: 'P' }))).toEqual([]);
  expect(uris(await c.aggregate('resources', { principal: 'Q' }))).toEqual(['u://x']);
  const got: unknown[] = [];
  c.on('resourceUpdated', (u) => got.push(u));
  q.emit('notification', { method: 'notifications/resources/updated', params: { uri: 'u://x' } });
  await new Promise((r) => setTimeout(r, 50));
  // Said on Q's own connection: for the subscriptions made there (src/router/subscriptions.ts).
  expect(got).toEqual([{ server: 's', uri: 'u://x', principal: 'Q' }]);
  c.close();
});

it('the same holds for another spelling of the URI, and an update every list hides is dropped in any spelling', async () => {
  const { c, main } = catalog();
  const got: unknown[] = [];
  c.on('resourceUpdated', (u) => got.push(u));
  const update = async (uri: string) => {
    main.emit('notification', { method: 'notifications/resources/updated', params: { uri } });
    await new Promise((r) => setTimeout(r, 50));
  };
  // Only P's list is held, and it hides u://x: no spelling of it gets through.
  expect((await c.aggregate('resources', { principal: 'P' })).items).toEqual([]);
  await update('u://%78');
  await update('U://x');
  expect(got).toEqual([]);
  // Q's list shows it: Q's subscribers hear of it, however the upstream spells it.
  expect((await c.aggregate('resources', { principal: 'Q' })).items.map((i: any) => i.uri)).toEqual(['u://x']);
  await update('u://%78');
  expect(got).toEqual([{ server: 's', uri: 'u://%78' }]);
  c.close();
});
