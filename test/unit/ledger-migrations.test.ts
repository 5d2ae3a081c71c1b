import { copyFileSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { openLedgerDb } from '../../src/ledger/db.js';
import { defaultMigrationsDir, LedgerVersionError, loadMigrations, migrate, schemaVersion } from '../../src/ledger/migrate.js';
import { begin, end, tempDir } from './ledger-helpers.js';

const all = loadMigrations();
let t: ReturnType<typeof tempDir>;
afterEach(() => t?.cleanup());

function tablesOf(path: string): string[] {
  const db = new Database(path, { readonly: true });
  const names = (db.prepare(`SELECT name FROM sqlite_master WHERE type IN ('table','index') AND name NOT LIKE 'sqlite_%' ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
  db.close();
  return names;
}

describe('ledger migrations', () => {
  it('ships at least two numbered migrations found from the source tree', () => {
    expect(all.length).toBeGreaterThanOrEqual(2);
    expect(all.map((m) => m.version)).toEqual(all.map((_, i) => i + 1));
    expect(defaultMigrationsDir()).toMatch(/migrations$/);
  });

  it('migrates an empty file to the newest version and records each step', async () => {
    t = tempDir();
    const ledger = Ledger.open({ path: join(t.dir, 'sub', 'dir', 'ledger.db') });
    await ledger.record(begin(), end());
    await ledger.close();
    const db = new Database(join(t.dir, 'sub', 'dir', 'ledger.db'), { readonly: true });
    expect(schemaVersion(db)).toBe(all.length);
    expect((db.prepare('SELECT version FROM schema_version ORDER BY version').all() as { version: number }[]).map((r) => r.version)).toEqual(
      all.map((m) => m.version),
    );
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
    expect(statSync(join(t.dir, 'sub', 'dir', 'ledger.db')).mode & 0o777).toBe(0o600);
  });

  // Every earlier version k (0 = empty file, created by applying only the first k files).
  for (let k = 0; k < all.length; k++) {
    it(`upgrades a database at version ${k} and keeps its rows`, async () => {
      t = tempDir();
      const raw = new Database(t.db);
      raw.pragma('journal_mode = WAL');
      migrate(raw, all.slice(0, k));
      expect(schemaVersion(raw)).toBe(k);
      if (k >= 1) {
        raw.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, outcome) VALUES (1, 'r', 'p', 'e', 'tools/list', 'in_flight')`).run();
      }
      raw.close();

      const ledger = Ledger.open({ path: t.db });
      await ledger.record(begin({ principal: 'after-upgrade' }), end());
      const rows = ledger.query({ limit: 10 });
      expect(rows.map((r) => r.principal).sort()).toEqual(k >= 1 ? ['after-upgrade', 'p'] : ['after-upgrade']);
      if (k >= 1) expect(rows.find((r) => r.principal === 'p')?.outcome).toBe('unknown');
      expect(ledger.verify().ok).toBe(true);
      await ledger.close();

      const db = new Database(t.db, { readonly: true });
      expect(schemaVersion(db)).toBe(all.length);
      db.close();
      // Same schema as a database created fresh.
      const fresh = tempDir();
      Ledger.open({ path: fresh.db }).close();
      expect(tablesOf(t.db)).toEqual(tablesOf(fresh.db));
      fresh.cleanup();
    });
  }

  it('refuses a database newer than the code with a clear error', () => {
    t = tempDir();
    Ledger.open({ path: t.db }).close();
    const raw = new Database(t.db);
    raw.prepare('INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)').run(all.length + 5, 'future', 0);
    raw.close();
    const expected = `ledger database is at schema version ${all.length + 5} but this Switchyard only knows up to ${all.length}; upgrade Switchyard`;
    expect(() => Ledger.open({ path: t.db })).toThrowError(LedgerVersionError);
    expect(() => Ledger.open({ path: t.db })).toThrowError(expected);
    expect(() => LedgerReader.open({ path: t.db })).toThrowError(expected);
  });

  it('a failing migration leaves the file at its previous version', () => {
    t = tempDir();
    const dir = join(t.dir, 'migs');
    mkdirSync(dir);
    copyFileSync(join(defaultMigrationsDir(), '0001_init.sql'), join(dir, '0001_init.sql'));
    const raw = new Database(t.db);
    migrate(raw, loadMigrations(dir));
    raw.close();
    for (const m of all.slice(1)) writeFileSync(join(dir, `${String(m.version).padStart(4, '0')}_${m.name}.sql`), m.sql);
    writeFileSync(join(dir, `${String(all.length + 1).padStart(4, '0')}_broken.sql`), 'CREATE TABLE ok_part (x);\nTHIS IS NOT SQL;');
    expect(() => Ledger.open({ path: t.db, migrationsDir: dir })).toThrowError(/migration \d{4}_broken\.sql failed/);
    const db = new Database(t.db, { readonly: true });
    expect(schemaVersion(db)).toBe(1);
    expect(db.prepare(`SELECT name FROM sqlite_master WHERE name = 'ok_part'`).get()).toBeUndefined();
    db.close();
  });

  it('rejects a migrations folder with a gap in the numbering', () => {
    t = tempDir();
    writeFileSync(join(t.dir, '0001_a.sql'), 'SELECT 1;');
    writeFileSync(join(t.dir, '0003_c.sql'), 'SELECT 1;');
    expect(() => loadMigrations(t.dir)).toThrowError(/without gaps/);
  });

  it('read-only open refuses a missing file and an older schema, but the audit trail of an older one is read as it is', () => {
    t = tempDir();
    expect(() => LedgerReader.open({ path: t.db })).toThrowError(/no ledger database/);
    const raw = new Database(t.db);
    migrate(raw, all.slice(0, 1));
    raw.close();
    expect(() => openLedgerDb({ path: t.db, readonly: true })).toThrowError(/older than this Switchyard/);
    // The audit and chain_state tables are as 0001 made them: a reader of them needs no upgrade.
    const reader = LedgerReader.open({ path: t.db });
    expect(reader.query({})).toEqual([]);
    expect(reader.verify().ok).toBe(true);
    reader.close();
    const db = new Database(t.db, { readonly: true });
    expect(schemaVersion(db)).toBe(1);
    db.close();
  });
});
