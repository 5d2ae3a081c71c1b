/**
 * The lock by which processes over one login's token file (a daemon, a `switchyard stdio` hub)
 * take turns refreshing it, so that a rotating refresh token is spent once (see
 * oauth-token-store.ts for the file itself).
 */
import { closeSync, futimesSync, lstatSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, type Stats } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { makeStateDir } from '../paths.js';
import { holderRuns, processStart } from '../process-alive.js';
import { realFile } from './oauth-token-store.js';
import { monotonicNow } from '../monotonic.js';

/** How long a refresh lock may go untouched: past it (its holder hung or gone, on another host too), it is taken over. */
export const LOCK_STALE_MS = 30_000;
/** How long a refresh waits for another process's; that one's token request gives up after 10 s (OAUTH_REQUEST_TIMEOUT_MS). */
export const LOCK_WAIT_MS = 12_000;
const LOCK_POLL_MS = 25;
/** How often a held lock is touched (its mtime set to now): well within LOCK_STALE_MS, so a live holder's lock never looks stale. */
export const LOCK_HEARTBEAT_MS = LOCK_STALE_MS / 3;
/** The locks this process holds: one naming this pid and not among them is a crashed predecessor's (pid 1 in a container, each time). */
const heldLocks = new Set<string>();

/** What a lock's holder does with the login: said in its lock, so that a refresh waiting for it can say what it waits for. */
export type LockWork = 'refresh' | 'login' | 'logout';

/**
 * The lock of the token file's refresh, shared by every process over that file (a daemon, a
 * `switchyard stdio` hub): the file `<token file>.lock`, created O_EXCL, naming its holder's
 * pid, host and start time, and touched every LOCK_HEARTBEAT_MS while held. One whose holder is
 * gone (that pid is no process of this host, or one started at another time than the holder: a
 * crashed holder's pid used again) or that was last touched over LOCK_STALE_MS ago is taken
 * over. Resolves to its release, or undefined when another holder kept it for `waitMs`. A folder
 * where no lock can be created (read-only, full), or where a stale one cannot be removed, has
 * none: the refresh goes ahead alone, there being no other way.
 */
export async function lockTokenFile(file: string, waitMs = LOCK_WAIT_MS, doing: LockWork = 'refresh'): Promise<(() => void) | undefined> {
  const lock = `${realFile(file)}.lock`;
  // On the monotonic clock: a wall clock stepped back an hour kept a refresh (and the calls
  // waiting for its token) waiting that hour for a live holder. A lock's age stays on the wall
  // clock: it is a file's mtime, which other processes set.
  const deadline = monotonicNow() + waitMs;
  for (;;) {
    let fd: number;
    try {
      makeStateDir(dirname(file), 0o700);
      fd = openSync(lock, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return () => undefined;
      const stale = takeOverStale(lock);
      // A stale lock the folder does not let go of (made read-only since) is as no lock at all.
      if (stale === 'stuck') return () => undefined;
      if (stale === 'gone') continue;
      if (monotonicNow() >= deadline) return undefined;
      await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
      continue;
    }
    // A nonce tells this lock from one created after it at the same path (the inode number of a
    // removed file is soon given again).
    let mine = JSON.stringify({ pid: process.pid, host: hostname(), started: processStart(process.pid), doing, nonce: randomBytes(8).toString('hex') });
    try {
      writeFileSync(fd, mine);
    } catch {
      // Held all the same; an empty lock is judged by its age alone.
      mine = '';
    }
    heldLocks.add(lock);
    // Touched while held: its age says how long ago its holder was last seen at work, not how
    // long it has held the lock. A holder that works past LOCK_STALE_MS (a logout revoking at a
    // slow authorization server, a refresh and its write) keeps it; one hung or gone stops
    // touching it, and is taken over once that is LOCK_STALE_MS ago. The descriptor, not the
    // path: a lock taken over and created again by another process is never touched by this one.
    const heartbeat = setInterval(() => {
      try {
        const now = new Date();
        futimesSync(fd, now, now);
      } catch {
        // A file system that does not let its times be set: judged by its age, as before.
      }
    }, LOCK_HEARTBEAT_MS);
    heartbeat.unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      clearInterval(heartbeat);
      closeSync(fd);
      // Only this lock: one taken over meanwhile (judged stale by its age, as after a wall clock
      // stepped forward) is its new holder's, and removing it would let a third process refresh
      // with the refresh token that holder is spending.
      try {
        if (readFileSync(lock, 'utf8') !== mine) return;
        heldLocks.delete(lock);
        rmSync(lock, { force: true });
      } catch {
        heldLocks.delete(lock);
        // Gone already.
      }
    };
  }
}

/** Who holds the lock of the token file and since when it was last touched, as far as its text says; undefined when there is no lock. */
export function lockHolder(file: string): { pid?: number; host?: string; doing?: LockWork; ageMs: number } | undefined {
  const lock = `${realFile(file)}.lock`;
  let st: Stats;
  try {
    st = lstatSync(lock);
  } catch {
    return undefined;
  }
  let holder: { pid?: unknown; host?: unknown; doing?: unknown } = {};
  try {
    holder = (JSON.parse(lockText(lock)) as typeof holder | null) ?? {};
  } catch {
    // Not JSON: no holder to name.
  }
  return {
    ...(typeof holder.pid === 'number' ? { pid: holder.pid } : {}),
    // A host name's characters only: the text is said on the user's terminal.
    ...(typeof holder.host === 'string' && /^[A-Za-z0-9._-]{1,253}$/.test(holder.host) ? { host: holder.host } : {}),
    ...(holder.doing === 'refresh' || holder.doing === 'login' || holder.doing === 'logout' ? { doing: holder.doing } : {}),
    ageMs: Math.max(0, Date.now() - st.mtimeMs),
  };
}

/** " (pid N on H)" of the lock's holder, as far as its lock says; '' when it says nothing. */
export function lockHolderText(file: string): string {
  const h = lockHolder(file);
  const who = [h?.pid !== undefined ? `pid ${h.pid}` : '', h?.host !== undefined ? `on ${h.host}` : ''].filter((x) => x).join(' ');
  return who ? ` (${who})` : '';
}

/**
 * Removes a lock whose holder is gone. 'gone': it is (removed, or removed by its holder
 * meanwhile); 'held': it stands; 'stuck': it is stale, and the folder does not let it be removed.
 */
function takeOverStale(lock: string): 'gone' | 'held' | 'stuck' {
  // The lock itself, not what it may point to: a symlink by its name pointing nowhere is no
  // ENOENT "gone" at each try (the loop spun on it synchronously, and the process hung).
  let st: Stats;
  try {
    st = lstatSync(lock);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'gone' : 'held';
  }
  const text = lockText(lock);
  let holder: { pid?: unknown; host?: unknown; started?: unknown } = {};
  try {
    holder = (JSON.parse(text) as typeof holder | null) ?? {};
  } catch {
    // Not JSON (written half, or not at all), or no file to read: judged by its age.
  }
  const dead = holder.host === hostname() && typeof holder.pid === 'number' && (holder.pid === process.pid ? !heldLocks.has(lock) : !holderRuns(holder.pid, typeof holder.started === 'string' ? holder.started : undefined));
  if (!dead && Date.now() - st.mtimeMs < LOCK_STALE_MS) return 'held';
  // Only the lock judged stale, not one a faster process took over and created since. Its inode
  // number alone does not tell (a removed file's is soon given again, and the fresh lock was
  // removed, letting two processes refresh at once); its mtime and text (a nonce) do.
  try {
    const now = lstatSync(lock);
    if (now.ino === st.ino && now.mtimeMs === st.mtimeMs && lockText(lock) === text) {
      // A folder by that name cannot be removed: waited for, not spun on.
      if (now.isDirectory()) return 'held';
      unlinkSync(lock);
    }
    return 'gone';
  } catch (err) {
    // Gone already; else a read-only folder keeps it for good: a refresh there failed at every
    // turn, after the whole wait, where no lock can be taken at all.
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'gone' : code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'stuck' : 'held';
  }
}

/** The lock's text; '' when there is none to read (a folder, a symlink pointing nowhere). */
function lockText(lock: string): string {
  try {
    return readFileSync(lock, 'utf8');
  } catch {
    return '';
  }
}
