/**
 * Renames are judged against the names a list of the same partition had: the pins of a server
 * whose principals may have connections of their own hold every principal's tools, and one of
 * alice's private list is not gone from the server's own (it made carol's first list quarantine
 * the server's own tool as a "rename" of alice's, for good). A server with one partition keeps
 * judging its first list after a start by the pins alone (a rename made while the hub was down).
 * Real Catalog and pin store; stand-in connections answering tools/list.
 */
import { EventEmitter } from 'node:events';
import { expect, it } from 'vitest';
import { Catalog, type Connection } from '../../src/catalog/catalog.js';
import type { CatalogEvent } from '../../src/catalog/part.js';
import { NameAssigner } from '../../src/catalog/names.js';
import { MemoryPinStore } from '../../src/catalog/pins.js';
import { silentLogger } from '../../src/log.js';
import { serverConfig } from '../integration/catalog-helpers.js';

/** A connection whose list is one tool `name`, of the body every test tool here shares. */
function lists(name: () => string): any {
  const up: any = new EventEmitter();
  up.state = 'ready';
  up.era = undefined;
  up.capabilities = { tools: { listChanged: true } };
  up.request = async (m: string) => (m === 'tools/list' ? { tools: [{ name: name(), description: 'Reads the inbox', inputSchema: { type: 'object' } }] } : {});
  return up;
}

function catalog(store: MemoryPinStore, h: any, split: { alice: any } | undefined, events: CatalogEvent[]): Catalog {
  return new Catalog(() => [h], new NameAssigner(), silentLogger, {
    pins: store,
    report: (e) => events.push(e),
    ...(split && {
      listAtReady: () => false,
      connection: (_h: unknown, principal: string | undefined): Connection =>
        principal === 'alice' ? { credential: 'principal:alice', upstream: split.alice } : { credential: '', upstream: h.upstream },
    }),
  });
}

const names = async (c: Catalog, principal?: string) => ((await c.aggregate('tools', { principal })).items as any[]).map((t) => t.name);
const quarantined = (events: CatalogEvent[]) => events.filter((e) => e.kind === 'quarantined');

it("a server with principals' own lists: a tool of alice's is no rename source for the server's own list, in this process or the next", async () => {
  const h: any = { id: 'u', config: serverConfig('u'), upstream: lists(() => 'shared_tool') };
  const alice = lists(() => 'alice_tool');
  const store = new MemoryPinStore();
  const events: CatalogEvent[] = [];
  const c = catalog(store, h, { alice }, events);
  expect(await names(c, 'alice')).toEqual(['u__alice_tool']);
  expect(await names(c, 'carol')).toEqual(['u__shared_tool']);
  expect(quarantined(events)).toEqual([]);

  // The next process (same pins), alice's pin only: carol lists first.
  const store2 = new MemoryPinStore();
  store2.put(store.get('u', 'alice_tool')!);
  const c2 = catalog(store2, h, { alice }, events);
  expect(await names(c2, 'carol')).toEqual(['u__shared_tool']);
  expect(quarantined(events)).toEqual([]);
});

it('a server with one partition: a rename made while the hub was down is caught at its first list after a start', async () => {
  let name = 'read_inbox';
  const h: any = { id: 'u', config: serverConfig('u'), upstream: lists(() => name) };
  const store = new MemoryPinStore();
  const events: CatalogEvent[] = [];
  expect(await names(catalog(store, h, undefined, events))).toEqual(['u__read_inbox']);
  name = 'delete_inbox';
  // A new process over the same pins.
  expect(await names(catalog(store, h, undefined, events))).toEqual([]);
  expect(quarantined(events)).toMatchObject([{ tool: 'delete_inbox', reason: 'renamed', renamedFrom: 'read_inbox' }]);
});
