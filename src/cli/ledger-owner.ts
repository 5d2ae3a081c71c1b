/**
 * The lock file says which process writes a ledger by its pid, and a pid means something only
 * in its own PID namespace: a hub in a container and one beside it (or in another container on
 * the same volume) each saw the other's pid as gone, took the lock over, and both wrote the
 * ledger. So the holder also keeps an OS lock, which the kernel sees from every namespace and
 * drops when the process ends, however it ends: an exclusive SQLite lock (POSIX fcntl) on
 * `<ledger>.owner`, taken with the lock file and held for the life of the process.
 */
import { closeSync, openSync } from 'node:fs';
import Database from 'better-sqlite3';

/** This process's hold, kept open (and so locked) until it exits. */
let held: Database.Database | undefined;

/** The owner file of the ledger whose real path is `real`. */
export function ownerFile(real: string): string {
  return `${real}.owner`;
}

function busy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Takes the OS lock of the ledger at `real`; false when another process holds it. The lock
 * stays until this process exits (EXCLUSIVE locking mode never gives back a lock it wrote with).
 */
export function takeOwnerLock(real: string): boolean {
  if (held) return true;
  // Made owner-only first, as every file beside the ledger is (SQLite would make it 0644): it
  // names the pid that writes the ledger for as long as the lock is taken.
  closeSync(openSync(ownerFile(real), 'a', 0o600));
  // A contender's look (ownerLockHeldElsewhere) holds a shared lock for an instant: waited for.
  const db = new Database(ownerFile(real), { timeout: 1_000 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = MEMORY'); // no -journal file beside the ledger
    db.exec('CREATE TABLE IF NOT EXISTS owner (pid INTEGER)');
    db.prepare('INSERT INTO owner (pid) VALUES (?)').run(process.pid);
    db.exec('DELETE FROM owner');
  } catch (err) {
    db.close();
    if (busy(err)) return false;
    throw err;
  }
  held = db;
  return true;
}

/** Gives the OS lock back (a process done with the ledger before it exits; the lock file is the caller's). */
export function releaseOwnerLock(): void {
  held?.close();
  held = undefined;
}

/** Another process (in any PID namespace) holds the OS lock of the ledger at `real`. */
export function ownerLockHeldElsewhere(real: string): boolean {
  if (held) return false;
  let db: Database.Database;
  try {
    db = new Database(ownerFile(real), { timeout: 0, fileMustExist: true });
  } catch {
    return false; // no owner file: no hub of this build holds it
  }
  try {
    db.prepare('SELECT count(*) FROM sqlite_master').get();
    return false;
  } catch (err) {
    return busy(err);
  } finally {
    db.close();
  }
}
