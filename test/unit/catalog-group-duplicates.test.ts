/**
 * Two servers list the same resource URI (and template): the first in the config serves it at
 * /mcp, and a group without that server shows — and routes to — the next one's. Real Catalog
 * and Groups; stand-in upstream connections.
 */
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { Catalog } from '../../src/catalog/catalog.js';
import { Groups } from '../../src/catalog/filters.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

function server(id: string): any {
  const u: any = new EventEmitter();
  u.state = 'ready';
  u.capabilities = { resources: {} };
  u.request = async (m: string) =>
    m === 'resources/list'
      ? { resources: [{ uri: 'u://same', name: `same of ${id}` }] }
      : m === 'resources/templates/list'
        ? { resourceTemplates: [{ uriTemplate: 'u://t/{x}', name: `t of ${id}` }] }
        : {};
  return { id, config: serverConfig(id), upstream: u };
}

it("a group without the server that won a duplicate URI shows and routes to the next server's", async () => {
  const first = server('first'), second = server('second');
  const c = new Catalog(() => [first, second], new NameAssigner(), silentLogger, { groups: new Groups({ g: { servers: ['second'] } }) });
  const names = async (kind: 'resources' | 'resourceTemplates', group?: string) => (await c.aggregate(kind, { group })).items.map((i: any) => i.name);
  expect(await names('resources')).toEqual(['same of first']);
  expect(await names('resources', 'g')).toEqual(['same of second']);
  expect(await names('resourceTemplates', 'g')).toEqual(['t of second']);
  expect((await c.routeUri('u://same'))?.id).toBe('first');
  expect((await c.routeUri('u://same', { group: 'g' }))?.id).toBe('second');
  expect((await c.routeUri('u://t/1', { group: 'g' }))?.id).toBe('second');
  expect((await c.routeUri('u://t/1'))?.id).toBe('first');
  expect((await c.templateOwner('u://t/{x}', { group: 'g' }))?.id).toBe('second');
  c.close();
});
