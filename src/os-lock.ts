/**
 * A lock the OS keeps between processes: SQLite's exclusive POSIX lock on a file that stays
 * there, empty, and is never removed. The kernel drops it when its process ends, however it
 * ends, so a holder killed while holding it leaves nothing behind for the others to judge old
 * and remove; and as the file is never removed, every process locks the same file. (A lock
 * file created O_EXCL and removed by its path when judged stale is not that: two processes
 * that judged it stale removed it in turn, the second removing the fresh one a third had made.)
 */
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';

/** A held OS lock; `release` gives it back. */
export interface OsLock {
  release(): void;
}

/**
 * Takes the OS lock of `file` (made owner-only if it is not there: SQLite would make it 0644),
 * waiting up to `waitMs` for another holder (blocking: it is for steps of a few syscalls).
 * Undefined when another process holds it still. Throws what creating the file or SQLite says
 * otherwise (a read-only folder, a file system without locks).
 *
 * Within one process SQLite keeps its connections' locks apart itself, but closing any other
 * descriptor of the file drops the process's POSIX lock on it: hold it over synchronous steps
 * only, so that nothing else here opens the file meanwhile (as this function does).
 */
export function takeOsLock(file: string, waitMs = 0): OsLock | undefined {
  closeSync(openSync(file, 'a', 0o600));
  const db = new Database(file, { timeout: waitMs });
  try {
    db.pragma('journal_mode = MEMORY'); // no -journal file beside it
    db.exec('BEGIN EXCLUSIVE'); // nothing is written: the file stays empty
  } catch (err) {
    db.close();
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) return undefined;
    throw err;
  }
  // Closing ends its transaction: the lock is given back.
  return { release: () => db.close() };
}

/**
 * The pid of the process holding the OS lock of `file` (its SQLite EXCLUSIVE lock: POSIX write
 * locks), as Linux's /proc/locks names it, so that a wait for it that runs out can say whom it
 * waited for. Undefined where /proc does not say (another system, a holder in another PID
 * namespace: pid 0 there), or where the file's device is not the one the kernel names.
 */
export function osLockHolder(file: string): number | undefined {
  let st: { dev: bigint; ino: bigint };
  let table: string;
  try {
    st = statSync(file, { bigint: true });
    table = readFileSync('/proc/locks', 'utf8');
  } catch {
    return undefined;
  }
  // /proc/locks names the file `<major>:<minor>:<inode>`, major and minor in hex (glibc's dev_t split).
  const major = ((st.dev >> 8n) & 0xfffn) | ((st.dev >> 32n) & ~0xfffn);
  const minor = (st.dev & 0xffn) | ((st.dev >> 12n) & ~0xffn);
  const id = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${st.ino}`;
  for (const line of table.split('\n')) {
    // `1: POSIX  ADVISORY  WRITE 3568 fe:00:2343109 1073741824 1073742335`; a waiter's has `->`.
    const f = line.trim().split(/\s+/);
    if (f[1] !== 'POSIX' || f[3] !== 'WRITE' || f[5] !== id) continue;
    const pid = Number(f[4]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid) return pid;
  }
  return undefined;
}
