import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Database } from 'better-sqlite3';

/** The database was written by a newer Switchyard than this one. */
export class LedgerVersionError extends Error {
  override readonly name = 'LedgerVersionError';
  constructor(
    readonly dbVersion: number,
    readonly codeVersion: number,
  ) {
    super(
      `ledger database is at schema version ${dbVersion} but this Switchyard only knows up to ${codeVersion}; upgrade Switchyard`,
    );
  }
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

const FILE = /^(\d{4})_([A-Za-z0-9_-]+)\.sql$/;

/**
 * The shipped migrations folder. Compiled code runs from dist/src/ledger/, tests run the
 * sources from src/ledger/; both sit under the package root, at different depths.
 */
export function defaultMigrationsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [resolve(here, '../../../migrations'), resolve(here, '../../migrations')];
  for (const dir of candidates) if (existsSync(join(dir, '0001_init.sql'))) return dir;
  throw new Error(`ledger migrations not found (looked in ${candidates.join(', ')})`);
}

/** Reads NNNN_name.sql files; versions must run 1, 2, 3 … without gaps or repeats. */
export function loadMigrations(dir: string = defaultMigrationsDir()): Migration[] {
  const list: Migration[] = [];
  for (const f of readdirSync(dir).sort()) {
    const m = FILE.exec(f);
    if (!m) continue;
    list.push({ version: Number(m[1]), name: m[2], sql: readFileSync(join(dir, f), 'utf8') });
  }
  list.forEach((mig, i) => {
    if (mig.version !== i + 1) {
      throw new Error(`ledger migrations in ${dir} must be numbered 0001, 0002, … without gaps; found ${String(mig.version).padStart(4, '0')}_${mig.name}.sql at position ${i + 1}`);
    }
  });
  if (list.length === 0) throw new Error(`no ledger migrations in ${dir}`);
  return list;
}

/** Whether the database has table `name` (an older ledger may lack a later migration's). */
export function hasTable(db: Database, name: string): boolean {
  return db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(name) !== undefined;
}

/** Schema version recorded in the database; 0 for a fresh file. */
export function schemaVersion(db: Database): number {
  if (!hasTable(db, 'schema_version')) return 0;
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as { v: number | null };
  return row.v ?? 0;
}

/**
 * Applies the migrations the database lacks, all in one transaction (a failure leaves the
 * file exactly as it was). Refuses a database newer than the code. Returns the version.
 */
export function migrate(db: Database, migrations: Migration[], now: () => number = Date.now): number {
  const newest = migrations.length;
  const run = db.transaction(() => {
    db.exec(`CREATE TABLE IF NOT EXISTS schema_version (
      version    INTEGER PRIMARY KEY,
      name       TEXT    NOT NULL,
      applied_ms INTEGER NOT NULL
    )`);
    const current = schemaVersion(db);
    if (current > newest) throw new LedgerVersionError(current, newest);
    const record = db.prepare('INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)');
    for (const m of migrations.slice(current)) {
      try {
        db.exec(m.sql);
      } catch (err) {
        throw new Error(`ledger migration ${String(m.version).padStart(4, '0')}_${m.name}.sql failed: ${(err as Error).message}`);
      }
      record.run(m.version, m.name, now());
    }
    return newest;
  });
  // IMMEDIATE: take the write lock up front so two processes opening at once serialize.
  return run.immediate();
}
