import { chmodSync, existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { makeStateDir } from '../paths.js';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { LedgerVersionError, loadMigrations, migrate, schemaVersion } from './migrate.js';

export const DEFAULT_LEDGER_PATH = './data/ledger.db';

/** ledger.idempotencyTtl's default: a day (the hub's store and `ledger keys` alike). */
export const DEFAULT_KEY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, on the
 * thread that committed: on the hub's event loop, at concurrency 32, it stalled every call in
 * flight for the length of the copy. The ingest thread (ingest-worker.ts) runs PASSIVE
 * checkpoints every 500 ms instead, which never block a writer; but only a writer can rewind
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
  /**
   * A writer that only works on a ledger there is (the CLI's prune): a missing file is refused
   * as a reader refuses it, never created (nor its folder), and a database that is not a ledger
   * is not made one. Migrating an older ledger is still done.
   */
  mustExist?: boolean;
  /**
   * The live process that writes this ledger (its lock's holder, as "pid N, switchyard start"),
   * when the one opening it is another (the CLI beside a running hub). A ledger older than this
   * code is then not upgraded: its hub is of an older Switchyard, which refuses a newer schema,
   * so it could not start again on it after a stop or a crash.
   */
  heldBy?: string;
  /**
   * Read-only: a ledger an older Switchyard wrote is read as it is, not refused. For readers of
   * the audit trail (the audit and chain_state tables, unchanged since 0001) and of tables whose
   * older forms they take (tool_pins, see readPins): a newer CLI beside a running older hub
   * (which must not be upgraded under it), an evidence copy taken from one (which must not be
   * written at all), doctor before the first start of a newer hub.
   */
  readsOlder?: boolean;
}

/** A ledger an older hub writes, which this Switchyard would have to upgrade to write. */
export class LedgerHeldOlderError extends Error {
  override readonly name = 'LedgerHeldOlderError';
  constructor(dbVersion: number, codeVersion: number, holder: string) {
    super(
      `ledger database is at schema version ${dbVersion}, older than this Switchyard (${codeVersion}), and a hub of that older Switchyard writes it (${holder}); ` +
        'it is not upgraded under that hub, which could then not start on it again: use that hub\'s own switchyard command, or stop the hub and start this version\'s (which upgrades it)',
    );
  }
}

/** SQLite says "disk I/O error" for a folder given as the database: say what it is. */
function notAFolder(path: string): void {
  if (existsSync(path) && statSync(path).isDirectory()) throw new Error(`${path} is a folder, not a ledger database (give the file, such as ${join(path, 'ledger.db')})`);
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
    notAFolder(path);
    const db = openReadOnly(path);
    try {
      db.pragma('busy_timeout = 5000');
      const v = schemaVersion(db);
      if (v > migrations.length) throw new LedgerVersionError(v, migrations.length);
      if (v === 0) throw new Error(`${path} is not a Switchyard ledger (no schema version)`);
      if (v < migrations.length && !opts.readsOlder) {
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
  if (opts.mustExist && !existsSync(path)) throw new Error(`no ledger database at ${path}`);
  notAFolder(path);
  if (!opts.mustExist) makeStateDir(dirname(path));
  const created = !existsSync(path);
  loadSqliteWithUris();
  // fileMustExist: a file removed since the check above is not created either.
  const db = new Database(path, { fileMustExist: opts.mustExist === true });
  try {
    if (opts.mustExist && schemaVersion(db) === 0) throw new Error(`${path} is not a Switchyard ledger (no schema version)`);
    // Audit rows name principals and may hold (redacted) bodies: owner-only. SQLite gives
    // the -wal/-shm files the same mode.
    if (created) chmodSync(path, 0o600);
    configureWriter(db);
    const v = schemaVersion(db);
    if (opts.heldBy !== undefined && v > 0 && v < migrations.length) throw new LedgerHeldOlderError(v, migrations.length, opts.heldBy);
    migrate(db, migrations, opts.now);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** The errors of a first read that could not create or use the -shm file (see openReadOnly). */
const NO_SHM = new Set<unknown>(['SQLITE_CANTOPEN', 'SQLITE_READONLY_DIRECTORY', 'SQLITE_READONLY_CANTINIT']);

/**
 * A reading connection. A WAL database is read through its -shm file, which the first reader
 * creates when the last connection removed it on closing: where that cannot be written (an
 * evidence copy on read-only media, a folder the reader may not write) SQLite cannot open it
 * (at the first read: SQLITE_CANTOPEN on a read-only file system, SQLITE_READONLY_DIRECTORY in
 * a folder without write permission). No one writes such a copy, so it is then opened
 * immutable: read without -shm, -wal or locks. Never first: on a ledger a hub is writing,
 * immutable would miss what is still in the WAL. A copy whose -wal holds commits (its hub did
 * not close it) would lose them the same way, and is refused saying so.
 */
function openReadOnly(path: string): Database.Database {
  loadSqliteWithUris();
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').get(); // the first read opens the WAL's files
    return db;
  } catch (err) {
    db.close();
    if (!NO_SHM.has((err as { code?: unknown }).code)) throw err;
    if (fileSize(`${path}-wal`) > 0) {
      throw new Error(
        `cannot read ${path} here: its -wal file holds commits not yet in the database (its hub did not close it), which SQLite reads only where it can write beside them; copy it with its -wal to a folder that can be written, and read it there`,
      );
    }
    try {
      return new Database(`${pathToFileURL(path).href}?immutable=1`, { readonly: true, fileMustExist: true });
    } catch {
      throw err; // the first error says more
    }
  }
}

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

let urisLoaded = false;

/**
 * better-sqlite3 is built with URI filenames off; its native part turns them on (for the whole
 * process, once) when it loads with SQLITE_USE_URI=1 in the environment. openReadOnly needs one
 * (`?immutable=1`), so the first open here, whichever it is, loads it that way, and the
 * variable is put back at once: the servers the hub spawns inherit its environment. Ledger paths are absolute, so none is
 * taken for a URI (only names starting `file:` are).
 */
function loadSqliteWithUris(): void {
  if (urisLoaded) return;
  urisLoaded = true;
  const before = process.env.SQLITE_USE_URI;
  process.env.SQLITE_USE_URI = '1';
  try {
    new Database(':memory:').close();
  } finally {
    if (before === undefined) delete process.env.SQLITE_USE_URI;
    else process.env.SQLITE_USE_URI = before;
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
