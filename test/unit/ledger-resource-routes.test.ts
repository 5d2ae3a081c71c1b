import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir> | undefined;
afterEach(() => t?.cleanup());

describe('ledger resource route store', () => {
  it('keeps each server’s routes per kind across reopen, writes only a change, and reads a row edited into nonsense as none', async () => {
    t = tempDir();
    const a = Ledger.open({ path: t.db });
    const store = a.resourceRouteStore();
    store.put('s', 'resources', { shown: ['u://a', 'u://b'], hidden: ['u://x'] });
    store.put('s', 'resourceTemplates', { shown: ['u://t/{id}'], hidden: [] });
    store.put('bad', 'resources', { shown: ['u://c'], hidden: [] });
    await a.whenCommitted();
    const writes = a.commitCounters().writes;
    store.put('s', 'resources', { shown: ['u://a', 'u://b'], hidden: ['u://x'] });
    await a.whenCommitted();
    expect(a.commitCounters().writes).toBe(writes);
    store.put('s', 'resources', { shown: ['u://a'], hidden: ['u://x'] });
    await a.close();

    const raw = new Database(t.db);
    raw.prepare(`UPDATE resource_routes SET shown = '{"no":1}', hidden = 'not json' WHERE server = 'bad'`).run();
    raw.close();
    const b = Ledger.open({ path: t.db });
    expect(b.resourceRouteStore().get('s', 'resources')).toEqual({ shown: ['u://a'], hidden: ['u://x'] });
    expect(b.resourceRouteStore().get('s', 'resourceTemplates')).toEqual({ shown: ['u://t/{id}'], hidden: [] });
    expect(b.resourceRouteStore().get('bad', 'resources')).toEqual({ shown: [], hidden: [] });
    expect(b.resourceRouteStore().get('other', 'resources')).toBeUndefined();
    await b.close();
  });

  it('drops the routes of servers no longer configured, both kinds, rows included', async () => {
    t = tempDir();
    const a = Ledger.open({ path: t.db });
    a.resourceRouteStore().put('gone', 'resources', { shown: ['g://a'], hidden: [] });
    a.resourceRouteStore().put('gone', 'resourceTemplates', { shown: ['g://t/{id}'], hidden: [] });
    a.resourceRouteStore().put('kept', 'resources', { shown: ['k://a'], hidden: [] });
    a.resourceRouteStore().retain(new Set(['kept']));
    expect(a.resourceRouteStore().get('gone', 'resources')).toBeUndefined();
    await a.close();
    const b = Ledger.open({ path: t.db });
    expect([b.resourceRouteStore().get('gone', 'resources'), b.resourceRouteStore().get('gone', 'resourceTemplates')]).toEqual([undefined, undefined]);
    expect(b.resourceRouteStore().get('kept', 'resources')).toEqual({ shown: ['k://a'], hidden: [] });
    await b.close();
  });
});
