/**
 * The hub learns of an approval made by another process (the CLI) by polling `PRAGMA
 * data_version`. A re-read that fails must not use up the version change: otherwise the
 * approval stays unseen until some unrelated commit moves the version again.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { PinRecord } from '../../src/catalog/pins.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { approvePins, readPins } from '../../src/ledger/pins.js';
import { closeAndRemove, tempDir } from './ledger-helpers.js';

function pending(tool: string): PinRecord {
  return {
    server: 's',
    tool,
    hash: 'a'.repeat(64),
    variants: [],
    bodyHash: 'b'.repeat(64),
    definition: '{"name":"x"}',
    pendingHash: 'c'.repeat(64),
    pendingBodyHash: 'd'.repeat(64),
    pendingDefinition: '{"name":"x","description":"changed"}',
    pendingReason: 'changed',
    renamedFrom: null,
    firstSeenMs: 1,
    approvedMs: 1,
    approvedBy: 'first-seen',
    pendingSinceMs: 2,
  };
}

describe('pin store: approvals by another process', () => {
  let ledger: Ledger | undefined;
  let t: ReturnType<typeof tempDir> | undefined;
  afterEach(async () => {
    await closeAndRemove(ledger, t);
    ledger = undefined;
  });

  async function storeWithPending(): Promise<ReturnType<Ledger['pinStore']>> {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const store = ledger.pinStore();
    store.put(pending('echo'));
    // The put is written by the group commit; wait until another connection sees the row.
    const other = new Database(t.db, { readonly: true });
    try {
      for (let i = 0; i < 200 && readPins(other).length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(readPins(other)).toHaveLength(1);
    } finally {
      other.close();
    }
    store.poll(); // whatever the hub's own threads committed so far
    return store;
  }

  function approveElsewhere(): void {
    const cli = new Database(t!.db);
    try {
      expect(approvePins(cli, readPins(cli), 5)).toHaveLength(1);
    } finally {
      cli.close();
    }
  }

  it('sees the approval at the next poll and tells its listeners', async () => {
    const store = await storeWithPending();
    const told: PinRecord[][] = [];
    store.onExternalChange((c) => told.push(c));
    expect(store.poll()).toBe(false); // nothing new
    approveElsewhere();
    expect(store.poll()).toBe(true);
    expect(store.get('s', 'echo')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    expect(told).toHaveLength(1);
    expect(told[0]![0]).toMatchObject({ tool: 'echo', approvedBy: 'cli' });
  });

  it('a re-read that fails is tried again at the next poll, with nothing else committed between', async () => {
    const store = await storeWithPending();
    approveElsewhere();
    // The database connection the store reads through (the ledger's own): fail one re-read,
    // as a busy or otherwise refused read would.
    const db = (store as unknown as { db: Database.Database }).db;
    const prepare = db.prepare.bind(db);
    let failed = 0;
    db.prepare = ((sql: string) => {
      if (failed === 0 && sql.includes('FROM tool_pins')) {
        failed++;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      return prepare(sql);
    }) as typeof db.prepare;
    try {
      expect(store.poll()).toBe(false);
      expect(failed).toBe(1);
      expect(store.get('s', 'echo')?.pendingHash).toBe('c'.repeat(64)); // not seen yet
      expect(store.poll()).toBe(true);
      expect(store.get('s', 'echo')).toMatchObject({ hash: 'c'.repeat(64), pendingHash: null, approvedBy: 'cli' });
    } finally {
      db.prepare = prepare;
    }
  });
});
