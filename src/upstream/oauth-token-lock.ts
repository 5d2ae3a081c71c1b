/**
 * The lock by which processes over one login's token file (a daemon, a `switchyard stdio` hub)
 * take turns refreshing it, so that a rotating refresh token is spent once (see
 * oauth-token-store.ts for the file itself).
 */
import { closeSync, futimesSync, lstatSync, openSync, readFileSync, unlinkSync, writeFileSync, type Stats } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { makeStateDir } from '../paths.js';
import { takeOsLock, type OsLock } from '../os-lock.js';
import { holderRuns, processStart } from '../process-alive.js';
import { realFile } from './oauth-token-store.js';
import { monotonicNow } from '../monotonic.js';

/** How long a refresh lock may go untouched: past it (its holder hung or gone, on another host too), it is taken over. */
export const LOCK_STALE_MS = 30_000;
/** How long a refresh waits for another process's; that one's token request gives up after 10 s (OAUTH_REQUEST_TIMEOUT_MS). */
export const LOCK_WAIT_MS = 12_000;
const LOCK_POLL_MS = 25;
/**
 * How long another process's takeover step (takeOverStale, or a holder's release: a few syscalls
 * under the OS lock on <token file>.takeover) is waited for, however short the caller's wait: its
 * process may be descheduled in it on a loaded machine. Past it, that process is taken as
 * stopped there (SIGSTOP, a debugger), and the lock as held.
 */
export const TAKEOVER_STEP_MS = 1_000;
/** How often that step is looked at again while another process is in it: it is short. */
const STEP_POLL_MS = 5;
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
 * over, by one process at a time (takeOverStale). Resolves to its release, or undefined when
 * another holder kept it for `waitMs`. A folder where no lock can be created (read-only, full),
 * or where a stale one cannot be removed, has none: the refresh goes ahead alone, there being no
 * other way.
 *
 * The contract, between processes asking at once: at most one holds the lock (which one is
 * decided only by creating it, O_EXCL), and when its last holder is gone at least one of them
 * gets it, with any `waitMs`, 0 too (unless one of them stays in the takeover step past
 * TAKEOVER_STEP_MS: stopped there). Another process in the takeover step is no holder: it may be
 * a holder releasing a lock that is no longer its own (which leaves a dead holder's lock in
 * place), and two processes trying that step's OS lock at one instant can both be refused with
 * neither in it (SQLite's SHARED, RESERVED and PENDING locks on the way to EXCLUSIVE). So the
 * step is waited for and the lock looked at again: given up on at once, every process asking
 * with waitMs 0 could go away with nobody holding the lock (a refresh finding a crashed logout's
 * lock then failed, saying that logout was removing the login).
 */
export async function lockTokenFile(file: string, waitMs = LOCK_WAIT_MS, doing: LockWork = 'refresh'): Promise<(() => void) | undefined> {
  const lock = `${realFile(file)}.lock`;
  // On the monotonic clock: a wall clock stepped back an hour kept a refresh (and the calls
  // waiting for its token) waiting that hour for a live holder. A lock's age stays on the wall
  // clock: it is a file's mtime, which other processes set.
  const deadline = monotonicNow() + waitMs;
  /** Since when another process has been in the takeover step, as this one saw it. */
  let stepSince: number | undefined;
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
      const now = monotonicNow();
      if (stale === 'step') {
        stepSince ??= now;
        if (now >= Math.max(deadline, stepSince + TAKEOVER_STEP_MS)) return undefined;
        // Soon while the step may yet be a short one, and not in step with another process
        // polling too (both would be refused again each time); as for a holder past it.
        const pollMs = now - stepSince < TAKEOVER_STEP_MS ? STEP_POLL_MS * (0.5 + Math.random()) : LOCK_POLL_MS;
        await new Promise((r) => setTimeout(r, pollMs));
        continue;
      }
      stepSince = undefined;
      if (now >= deadline) return undefined;
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
      removeOwn(lock, mine);
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
 * The file whose OS lock (os-lock.ts) every removal of the lock `lock` runs under: a takeover
 * of a stale lock and a holder's release. `<token file>.takeover`, empty, never removed.
 */
function takeoverFile(lock: string): string {
  return `${lock.slice(0, -'.lock'.length)}.takeover`;
}

/**
 * Removes the lock if it is still this holder's (`mine`, its text). Only this lock: one taken
 * over meanwhile (judged stale by its age, as after a wall clock stepped forward) is its new
 * holder's, and removing it would let a third process refresh with the refresh token that
 * holder is spending. Under the takeover lock: read and removed by its path outside it, the
 * lock could be taken over between the two steps and the new holder's removed in its place.
 */
function removeOwn(lock: string, mine: string): void {
  let guard: OsLock | undefined;
  let guarded = true;
  try {
    guard = takeOsLock(takeoverFile(lock), TAKEOVER_STEP_MS);
  } catch {
    // No OS lock beside it (a folder made read-only since, a file system without locks): no
    // takeover there runs under one either, so the lock is removed as it was before them.
    guarded = false;
  }
  if (guarded && !guard) {
    // A takeover step that does not end (its process stopped in it): the lock is left, taken
    // over once its age passes LOCK_STALE_MS (its heartbeat has stopped), by this process at once.
    heldLocks.delete(lock);
    return;
  }
  try {
    if (readFileSync(lock, 'utf8') !== mine) return;
    heldLocks.delete(lock);
    unlinkSync(lock);
  } catch {
    heldLocks.delete(lock);
    // Gone already.
  } finally {
    guard?.release();
  }
}

/**
 * Removes a lock whose holder is gone. 'gone': it is (removed, or removed by its holder
 * meanwhile); 'held': it stands; 'step': the takeover lock was refused (another process is
 * taking it over or releasing its own, or was trying the takeover lock at this instant: looked at
 * again in a moment, as no holder); 'stuck': it is stale, and the folder does not let it be removed.
 *
 * Judging it stale and removing it are two steps: a process that judged the dead holder's lock
 * stale removed, in place of it, the fresh lock another had created since (after a third
 * removed the stale one), and two processes refreshed with one refresh token at once; checking
 * its inode, mtime and text again just before the removal only narrowed that gap. So the lock
 * is judged again and removed under the takeover lock (takeoverFile), as every removal of it
 * is: nothing else can remove it between the two, and which process holds it is decided only
 * by creating it.
 */
function takeOverStale(lock: string): 'gone' | 'held' | 'step' | 'stuck' {
  // A first look outside the takeover lock: a live holder is waited for without taking it.
  const seen = judge(lock);
  if (seen !== 'stale') return seen;
  let guard: OsLock | undefined;
  try {
    guard = takeOsLock(takeoverFile(lock));
  } catch {
    // No OS lock to be had beside it (a file system without POSIX locks, the file unusable): no
    // other process takes one there either. Taken as no lock at all ('stuck'), the stale lock
    // stayed, and every process refreshed at once from then on, each finding it stale again;
    // so it is removed as before the OS lock (removeUnguarded). A folder made read-only since
    // still keeps it ('stuck').
    return removeUnguarded(lock);
  }
  if (!guard) return 'step';
  try {
    const now = judge(lock);
    if (now !== 'stale') return now;
    unlinkSync(lock);
    return 'gone';
  } catch (err) {
    return removalFailed(err);
  } finally {
    guard.release();
  }
}

/**
 * takeOverStale without the takeover lock: the lock judged again, and removed only if it is still
 * the one judged (its inode, mtime and text: the inode number alone does not tell, a removed
 * file's being soon given again). That narrows the gap in which a fresh lock another process
 * created could be removed in place of the stale one; it does not close it, as the OS lock does.
 */
function removeUnguarded(lock: string): 'gone' | 'held' | 'stuck' {
  const seen = lockStat(lock);
  if (typeof seen === 'string') return seen;
  const text = lockText(lock);
  const verdict = judge(lock);
  if (verdict !== 'stale') return verdict;
  try {
    const now = lstatSync(lock);
    if (now.ino === seen.ino && now.mtimeMs === seen.mtimeMs && lockText(lock) === text) unlinkSync(lock);
    return 'gone';
  } catch (err) {
    return removalFailed(err);
  }
}

/**
 * A stale lock's removal failed: gone already, else a read-only folder keeps it for good ('stuck':
 * a refresh there failed at every turn, after the whole wait, where no lock can be taken at all).
 */
function removalFailed(err: unknown): 'gone' | 'held' | 'stuck' {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'gone' : code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'stuck' : 'held';
}

/** The lock file's own stat (not what a symlink by its name points to); 'gone' when it is not there, 'held' when it cannot be read. */
function lockStat(lock: string): Stats | 'gone' | 'held' {
  try {
    return lstatSync(lock);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'gone' : 'held';
  }
}

/** Whether the lock is there and left by a holder that is gone (or untouched for LOCK_STALE_MS). */
function judge(lock: string): 'gone' | 'held' | 'stale' {
  // The lock itself, not what it may point to: a symlink by its name pointing nowhere is no
  // ENOENT "gone" at each try (the loop spun on it synchronously, and the process hung).
  const st = lockStat(lock);
  if (typeof st === 'string') return st;
  // A folder by that name cannot be removed: waited for, not spun on.
  if (st.isDirectory()) return 'held';
  let holder: { pid?: unknown; host?: unknown; started?: unknown } = {};
  try {
    holder = (JSON.parse(lockText(lock)) as typeof holder | null) ?? {};
  } catch {
    // Not JSON (written half, or not at all), or no file to read: judged by its age.
  }
  const dead = holder.host === hostname() && typeof holder.pid === 'number' && (holder.pid === process.pid ? !heldLocks.has(lock) : !holderRuns(holder.pid, typeof holder.started === 'string' ? holder.started : undefined));
  return dead || Date.now() - st.mtimeMs >= LOCK_STALE_MS ? 'stale' : 'held';
}

/** The lock's text; '' when there is none to read (a folder, a symlink pointing nowhere). */
function lockText(lock: string): string {
  try {
    return readFileSync(lock, 'utf8');
  } catch {
    return '';
  }
}
