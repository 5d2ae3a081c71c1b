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
 * namespace: pid 0 there).
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
  return lockHolderIn(table, st.dev, st.ino);
}

/**
 * The pid that `table` (/proc/locks) names as holding a POSIX write lock of the file stat calls
 * `dev`, `ino`, other than this process. /proc/locks names a file by its file system's device,
 * which is not always the one stat reports: on overlayfs whose layers lie on different file
 * systems (as a container's may) stat reports its layer's, and on a btrfs subvolume the
 * subvolume's. No write lock named with the file's device, the write locks of its inode number
 * answer, if they are all of one device (another device's file may have that number too).
 */
export function lockHolderIn(table: string, dev: bigint, ino: bigint): number | undefined {
  // /proc/locks names the file `<major>:<minor>:<inode>`, major and minor in hex (glibc's dev_t split).
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  const id = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${ino}`;
  const inode = `:${ino}`;
  let named = false;
  // The write locks of its inode number named with another device: the pid of each device's first.
  const elsewhere = new Map<string, number | undefined>();
  for (const line of table.split('\n')) {
    // `1: POSIX  ADVISORY  WRITE 3568 fe:00:2343109 1073741824 1073742335`; a waiter's has `->`.
    const f = line.trim().split(/\s+/);
    if (f[1] !== 'POSIX' || f[3] !== 'WRITE' || !f[5]?.endsWith(inode)) continue;
    const n = Number(f[4]);
    const pid = Number.isInteger(n) && n > 0 && n !== process.pid ? n : undefined;
    if (f[5] === id) {
      if (pid !== undefined) return pid;
      named = true; // its holder's pid is not known here (another PID namespace): no other file's is
    } else if (elsewhere.get(f[5]) === undefined) elsewhere.set(f[5], pid);
  }
  return named || elsewhere.size !== 1 ? undefined : elsewhere.values().next().value;
}
