import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { NameAssigner } from '../../src/catalog/names.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { loadMigrations, migrate, schemaVersion } from '../../src/ledger/migrate.js';
import { tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
afterEach(() => t?.cleanup());

const servers = (order: string[]) => order.map((id) => ({ id, prefix: 'x', names: ['echo', 'add'] }));

describe('ledger name store', () => {
  it('keeps assignments across reopen; a put is committed by the group commit', async () => {
    t = tempDir();
    const a = Ledger.open({ path: t.db });
    const store = a.nameStore();
    expect(store.get('s', 'tool', 'echo')).toBeUndefined();
    store.put('s', 'tool', 'echo', 's__echo');
    store.put('s', 'prompt', 'echo', 's__echo_p');
    expect(store.get('s', 'tool', 'echo')).toBe('s__echo'); // visible at once
    await a.whenCommitted();
    const before = a.commitCounters().writes;
    store.put('s', 'tool', 'echo', 's__echo'); // unchanged: no write
    await a.whenCommitted();
    expect(a.commitCounters().writes).toBe(before);
    store.put('s', 'tool', 'echo', 's__echo_abc123'); // changed: overwritten
    await a.close();

    const b = Ledger.open({ path: t.db });
    expect(b.nameStore().get('s', 'tool', 'echo')).toBe('s__echo_abc123');
    expect(b.nameStore().get('s', 'prompt', 'echo')).toBe('s__echo_p');
    expect(b.nameStore().get('other', 'tool', 'echo')).toBeUndefined();
    expect(b.nameStore().size).toBe(2);
    // Loaded rows are indexed by hub name too (a call naming a tool of a server that is down).
    expect(b.nameStore().owners('tool', 's__echo_abc123')).toEqual([{ server: 's', upstreamName: 'echo' }]);
    expect(b.nameStore().owners('tool', 's__echo')).toEqual([]);
    await b.close();
  });

  it('a NameAssigner backed by it keeps names when a colliding server is inserted before another', async () => {
    t = tempDir();
    const first = Ledger.open({ path: t.db });
    const n1 = new NameAssigner({ store: first.nameStore() }).assign('tool', servers(['old']));
    expect(n1.names.get('old')?.get('echo')).toBe('x__echo');
    await first.close();

    const second = Ledger.open({ path: t.db });
    const n2 = new NameAssigner({ store: second.nameStore() }).assign('tool', servers(['new', 'old']));
    expect(n2.names.get('old')?.get('echo')).toBe('x__echo');
    expect(n2.names.get('new')?.get('echo')).toMatch(/^x__echo_[0-9a-f]{8}$/);
    await second.close();

    // Control: without the stored names the newcomer, first in config order, takes the name.
    const fresh = new NameAssigner().assign('tool', servers(['new', 'old']));
    expect(fresh.names.get('new')?.get('echo')).toBe('x__echo');
  });

  it('a database at schema version 2 gains the names table on upgrade', async () => {
    t = tempDir();
    const all = loadMigrations();
    const raw = new Database(t.db);
    migrate(raw, all.slice(0, 2));
    expect(raw.prepare(`SELECT name FROM sqlite_master WHERE name = 'names'`).get()).toBeUndefined();
    raw.close();
    const l = Ledger.open({ path: join(t.dir, 'ledger.db') });
    l.nameStore().put('s', 'tool', 'a', 's__a');
    await l.close();
    const db = new Database(t.db, { readonly: true });
    expect(schemaVersion(db)).toBe(all.length);
    expect(db.prepare('SELECT server, kind, upstream_name, hub_name FROM names').all()).toEqual([
      { server: 's', kind: 'tool', upstream_name: 'a', hub_name: 's__a' },
    ]);
    db.close();
  });
});
