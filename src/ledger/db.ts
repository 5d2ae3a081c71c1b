import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { LedgerVersionError, loadMigrations, migrate, schemaVersion } from './migrate.js';

export const DEFAULT_LEDGER_PATH = './data/ledger.db';

/**
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, on the
 * thread that committed: on the hub's event loop, at concurrency 32, it stalled every call in
 * flight for the length of the copy. The ingest thread (ingest-worker.ts) runs PASSIVE
 * checkpoints every 100 ms instead, which never block a writer; but only a writer can rewind
 * the WAL, and only once every frame is copied, so writers keep an automatic checkpoint at a
 * larger threshold: by the time it fires, nearly everything is copied. The WAL file is
 * truncated to JOURNAL_SIZE_LIMIT when it rewinds.
 */
export const WRITER_AUTOCHECKPOINT_PAGES = 8000;
export const JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;

export interface OpenDbOptions {
  path: string;
  /** Read-only: no migration, no recovery; safe next to a running hub (WAL readers never block it). */
  readonly?: boolean;
  migrationsDir?: string;
  now?: () => number;
}

/**
 * Opens (and for writers, creates and migrates) the ledger file.
 * WAL + synchronous=NORMAL: a commit is in the WAL file (the OS page cache) before
 * COMMIT returns, so it survives the process being SIGKILLed; only a power loss or kernel
 * crash can drop the last commits. That is the durability the hub promises.
 */
export function openLedgerDb(opts: OpenDbOptions): Database.Database {
  const path = resolve(opts.path);
  const migrations = loadMigrations(opts.migrationsDir);
  if (opts.readonly) {
    if (!existsSync(path)) throw new Error(`no ledger database at ${path}`);
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      const v = schemaVersion(db);
      if (v > migrations.length) throw new LedgerVersionError(v, migrations.length);
      if (v === 0) throw new Error(`${path} is not a Switchyard ledger (no schema version)`);
      if (v < migrations.length) {
        throw new Error(
          `ledger database is at schema version ${v}, older than this Switchyard (${migrations.length}); start the hub once (or run a writing ledger command such as prune) to upgrade it`,
        );
      }
      return db;
    } catch (err) {
      db.close();
      throw err;
    }
  }
  mkdirSync(dirname(path), { recursive: true });
  const created = !existsSync(path);
  const db = new Database(path);
  try {
    // Audit rows name principals and may hold (redacted) bodies: owner-only. SQLite gives
    // the -wal/-shm files the same mode.
    if (created) chmodSync(path, 0o600);
    configureWriter(db);
    migrate(db, migrations, opts.now);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * A second writing connection to a ledger the hub has opened (and so migrated) already: the
 * ingest thread's. No migration, so it never waits for the write lock to start.
 */
export function openLedgerWriter(path: string): Database.Database {
  const db = new Database(path, { fileMustExist: true });
  try {
    configureWriter(db);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

function configureWriter(db: Database.Database): void {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // The ingest thread copies the WAL in the background; this threshold is the writer's
  // backstop and the point where it rewinds the WAL (see WRITER_AUTOCHECKPOINT_PAGES).
  db.pragma(`wal_autocheckpoint = ${WRITER_AUTOCHECKPOINT_PAGES}`);
  db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
  // Another process (the CLI pruning) may hold the write lock briefly.
  db.pragma('busy_timeout = 5000');
}
