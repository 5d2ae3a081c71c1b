/**
 * One hub process per ledger file. The ledger hands out row ids in memory and marks rows left
 * in flight as unknown when it opens, so two hubs writing one file (two `switchyard stdio`
 * windows on one config, or one next to the daemon) would fail each other's calls. A lock file
 * next to the database (its real path: symlinks resolved) says who writes it; a lock whose
 * process is gone is taken over.
 */
import { accessSync, closeSync, constants, openSync, readFileSync, readlinkSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { makeStateDir } from '../paths.js';
import { osLockHolder, takeOsLock, type OsLock } from '../os-lock.js';
import type { HubConfig } from '../config/types.js';
import { ChainStateGoneError } from '../ledger/chain.js';
import { realLedgerPath } from '../ledger/real-path.js';
import { ownerLockHeldElsewhere, releaseOwnerLock, takeOwnerLock } from './ledger-owner.js';
import { holderRuns, processStart } from '../process-alive.js';
import { monotonicNow } from '../monotonic.js';

/** The ledger cannot be written by this process: said in one line, exit 2. */
export class LedgerLockError extends Error {}

export class LedgerBusyError extends LedgerLockError {
  constructor(
    readonly path: string,
    readonly holder: { pid: number; command?: string },
  ) {
    super(
      `the ledger ${path} is in use by another switchyard process (pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''}). ` +
        'Share that daemon with `switchyard connect`, or give this config its own ledger.path.',
    );
  }
}

/**
 * Another process has been in the takeover step (judging a gone holder's lock and removing it, a
 * few syscalls) for the whole wait: stopped in it (SIGSTOP, a debugger), most likely. A
 * LedgerBusyError: the ledger is not this process's, and the step's process is its likely next holder.
 */
export class LedgerTakeoverStuckError extends LedgerBusyError {
  constructor(path: string, holder: { pid: number; command?: string }, waitedMs: number) {
    super(path, holder);
    const who = holder.pid > 0 ? `pid ${holder.pid}` : 'whose pid this system does not say';
    this.message =
      `the ledger ${path} is being taken over from a switchyard process that has gone by another switchyard process (${who}), ` +
      `which has been in that step of a few syscalls for ${waitedMs} ms: it may be stopped (SIGSTOP, a debugger). Resume or end it, then start again.`;
  }
}

/** A ledger `start` and `stdio` could not create or write (ledgerUnwritable's reason). */
export class LedgerUnusableError extends LedgerLockError {}

/**
 * The database file has other names (hard links). Each name has its own lock file, and SQLite
 * keys its -wal and -shm files by name too, so a hub writing through another name would not
 * meet this one's lock and would write beside it: rows lost, indexes corrupt.
 */
export class LedgerLinkedError extends LedgerLockError {
  constructor(
    readonly path: string,
    readonly links: number,
  ) {
    super(
      `the ledger ${path} has ${links} names (hard links): a hub writing it under another name would not meet this one's lock and would corrupt it. ` +
        'Remove the other names (give each config its own ledger.path, or use a symlink, which the lock follows).',
    );
  }
}

/** Who holds a lock: its process, and (Linux) when that process started. */
interface Holder {
  pid: number;
  command?: string;
  /** `<boot id>:<start time in clock ticks>` of the holder, where /proc tells it (processStart). */
  started?: string;
  /** The holder's PID namespace, where /proc tells it: its pid means nothing in another one. */
  pidns?: string;
}

/**
 * The holder is still the process that took the lock: alive, and, when the lock says when that
 * process started and /proc can say when the one with its pid did, the same. A hub killed
 * before a reboot (or a container's restart) leaves its pid in the lock, and that pid may be
 * another program's now: taken as the holder, it kept every hub from starting on the ledger
 * until the lock file was removed by hand.
 */
function holderAlive(holder: Holder, real?: string): boolean {
  if (seenAlive(holder)) return true;
  // A holder in another PID namespace (a container) is not seen: its OS lock tells.
  return real !== undefined && holder.pidns !== undefined && holder.pidns !== pidNamespace() && ownerLockHeldElsewhere(real);
}

/** This process's PID namespace, as Linux names it (`pid:[4026531836]`); undefined elsewhere. */
function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

/** As this process's PID namespace sees it (another container's hub is not seen: ledger-owner.ts). */
function seenAlive(holder: Holder): boolean {
  return holderRuns(holder.pid, holder.started) && (holder.started !== undefined || runsCommand(holder));
}

/**
 * A lock without `started` was written by a build from before it (or where /proc says nothing).
 * Its pid may be another program's since that hub died (killed before a reboot, or long ago),
 * which kept a newer hub from starting on the ledger, said to be in use by "another switchyard
 * process", until the lock was removed by hand. Where /proc shows the process's arguments, it is
 * the holder only if they hold the lock's subcommand (`switchyard start`: start), as a hub's
 * (node …/main.js start …) do; a program that happens to have it is still taken for the holder.
 */
function runsCommand(holder: Holder): boolean {
  const sub = holder.command?.split(' ').at(-1);
  if (!sub) return true;
  let args: string[];
  try {
    args = readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return true; // /proc says nothing: alive is all that is known
  }
  return args.includes(sub);
}

function mtime(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function readHolder(file: string): Holder | undefined {
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown; command?: unknown; started?: unknown; pidns?: unknown };
    if (typeof v.pid !== 'number') return undefined;
    const str = (x: unknown) => (typeof x === 'string' ? x : undefined);
    return { pid: v.pid, command: str(v.command), started: str(v.started), pidns: str(v.pidns) };
  } catch {
    return undefined; // being written right now, or garbage: treated as stale below
  }
}


/** The live process holding the writer lock of the ledger at `dbPath`, if any. */
export function ledgerWriter(dbPath: string): { pid: number; command?: string } | undefined {
  const real = realLedgerPath(dbPath);
  const holder = readHolder(`${real}.lock`);
  if (holder && holderAlive(holder, real)) return { pid: holder.pid, command: holder.command };
  const older = olderHolder(dbPath, realLedgerPath(dbPath));
  return older && { pid: older.pid, command: older.command };
}

/**
 * Builds from before the lock followed symlinks took it under the path they were given: a hub of
 * such a build on a config whose ledger.path is a symlink to the database holds `<that path>.lock`,
 * not the real path's, and a newer hub on the same config wrote beside it (and upgraded the file
 * under it). Its live holder there is looked at (never created or taken over here).
 */
function olderHolder(dbPath: string, real: string): Holder | undefined {
  const given = resolve(dbPath);
  if (given === real) return undefined;
  const holder = readHolder(`${given}.lock`);
  return holder && holder.pid !== process.pid && holderAlive(holder) ? holder : undefined;
}

/** The live process holding the writer lock of the ledger at `dbPath`, as "pid N, command"; undefined if none. */
export function ledgerWriterText(dbPath: string): string | undefined {
  const holder = ledgerWriter(dbPath);
  return holder && `pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''}`;
}

/**
 * Why `lockLedger` and the ledger's opening would fail for this process at `dbPath`, found
 * without creating, locking or changing anything (for `doctor`): the folder cannot be created
 * or written (the lock, the database and its -wal file are made there), or the database is
 * there but read-only. Undefined when start can write it. The lock's holder is ledgerWriter's.
 */
export function ledgerUnwritable(dbPath: string): string | undefined {
  const dir = dirname(resolve(dbPath));
  // The nearest folder that is there: the one start's mkdir -p creates the rest in.
  let there = dir;
  for (;;) {
    const st = statOrUndefined(there);
    if (st && !st.isDirectory()) return there === dir ? `${dir} is not a folder: the ledger cannot be created in it` : `${there} is not a folder: the ledger's folder ${dir} cannot be created in it`;
    if (st) break;
    const up = dirname(there);
    if (up === there) return `no part of ${dir} exists`;
    there = up;
  }
  if (there !== dir && !accessible(there, constants.W_OK | constants.X_OK)) return `cannot create the ledger's folder ${dir}: ${there} is not writable for this user`;
  if (there !== dir) return undefined; // created empty by start: nothing in it to check
  const real = realLedgerPath(dbPath);
  const realDir = dirname(real);
  if (!accessible(realDir, constants.W_OK | constants.X_OK)) return `the ledger's folder ${realDir} is not writable for this user (the lock, the database and its -wal file are created there)`;
  if (statOrUndefined(real) && !accessible(real, constants.R_OK | constants.W_OK)) return `the ledger ${real} is not writable for this user`;
  return undefined;
}

function statOrUndefined(path: string): ReturnType<typeof statSync> | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined; // not there, or a file in its way (ENOTDIR): its parent is looked at next
  }
}

/** access(2): the real user's rights, as root without CAP_DAC_OVERRIDE has them too. */
function accessible(path: string, mode: number): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}

/** An unreadable lock younger than this may be one being written this instant. */
const WRITING_MS = 2_000;

/** Whether the lock at `file` is left by a process that is gone (or is an old unreadable file). */
function stale(file: string): boolean {
  const holder = readHolder(file);
  if (holder) return !holderAlive(holder, file.slice(0, -'.lock'.length));
  let since: number;
  try {
    since = statSync(file).mtimeMs;
  } catch {
    // Gone: nothing to remove. A lock created after this look (creating needs no takeover
    // lock) must not be removed for a judgement of the file that was not there.
    return false;
  }
  return Date.now() - since >= WRITING_MS;
}

/**
 * Removes the lock at `file` if it is stale, as one step among every process taking it over.
 * Judging it stale and removing it are two steps: a process that judged the dead hub's lock
 * stale could remove, in place of it, the lock another had just created, and both would write.
 * So both steps run under the takeover lock (takeoverLock), and the lock is judged again there;
 * which process holds the lock is decided only by creating it. Returns false when another
 * process is taking over (look again in a moment).
 */
function takeOver(file: string): boolean {
  const guard = takeoverLock(file);
  if (!guard) return false;
  try {
    if (stale(file)) unlinkQuietly(file);
  } finally {
    guard.release();
  }
  return true;
}

/**
 * The takeover step's lock: an OS lock (os-lock.ts: SQLite's POSIX lock, as on `<ledger>.owner`) on
 * `<ledger>.takeover`, a file that stays there empty and is never removed. Undefined when
 * another process holds it.
 *
 * It was a file created O_EXCL for the step and removed after it; one left by a process that
 * died in the step was removed by its path once old. Two processes that had both found it old
 * removed it in turn, the second removing, in its place, the fresh one a third had just made:
 * then two judged and removed the lock at once, and two held it. An OS lock is dropped by the
 * kernel when its process ends, however it ends, so nothing is left to remove, and the file is
 * never removed, so every process locks the same file: only one at a time is in the step.
 */
function takeoverLock(file: string): OsLock | undefined {
  return takeOsLock(takeoverFile(file));
}

function takeoverFile(lock: string): string {
  return `${lock.slice(0, -'.lock'.length)}.takeover`;
}

/**
 * How long another process's takeover step is waited for at least, however short the caller's
 * wait (0 for a contender that waits for no live holder): the step is a few syscalls, but its
 * process may be descheduled in it on a loaded machine, and then the lock it takes over is its own.
 */
const TAKEOVER_STEP_MS = 1_000;

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // someone else removed it first
  }
}

/** Creates the lock naming this process; false when it exists. Only this decides who holds it. */
function create(file: string, command: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    writeSync(fd, JSON.stringify({ pid: process.pid, command, started: processStart(process.pid), pidns: pidNamespace() }));
  } finally {
    closeSync(fd);
  }
  process.once('exit', () => {
    if (readHolder(file)?.pid === process.pid) unlinkSync(file);
  });
  return true;
}

/**
 * Takes the writer lock of the config's ledger (nothing when the ledger is off), waiting up to
 * `waitMs` for a live holder to go away (a client's short-lived probe process, a restart), and
 * as long, or TAKEOVER_STEP_MS if longer, for another process's takeover of a gone holder's lock
 * (not told: the step is a few syscalls); `waiting` is told once when it starts to wait, and for
 * whom. Released when this process exits. Throws LedgerBusyError (LedgerTakeoverStuckError for
 * the takeover), LedgerUnusableError (a ledger it could not create or write), or
 * LedgerLinkedError when the database has other names.
 */
export async function lockLedger(config: HubConfig, command: string, waitMs: number, waiting?: (holder: { pid: number; command?: string }) => void): Promise<void> {
  if (!config.ledger.enabled) return;
  const db = ledgerDbPath(config);
  // On the monotonic clock: a wall clock stepped back an hour kept a starting hub waiting that
  // hour for a live holder. A lock file's age (WRITING_MS, staleness) stays on the wall clock: mtimes.
  const deadline = monotonicNow() + waitMs;
  // Said as doctor says it, where mkdir or SQLite would give an errno (ENOTDIR) or "disk I/O error".
  const unusable = ledgerUnwritable(db);
  if (unusable !== undefined) throw new LedgerUnusableError(`ledger.path ${config.ledger.path}: ${unusable}`);
  try {
    makeStateDir(dirname(db));
  } catch (err) {
    // What access(2) could not foresee (a file system that takes no folder, as /proc; a read-only mount): the folder named, not an errno alone.
    const e = err as NodeJS.ErrnoException;
    if (typeof e.code !== 'string') throw err;
    throw new LedgerUnusableError(`ledger.path ${config.ledger.path}: cannot create its folder ${e.path ?? dirname(db)} (${e.code})`);
  }
  // Keyed by the file itself: a ledger.path that is a symlink to another config's ledger
  // must meet that hub's lock, or two hubs write one database.
  const real = realLedgerPath(db);
  const file = `${real}.lock`;
  let told = false;
  /** Since when another process has held the takeover step, as this one saw it. */
  let takeoverSince: number | undefined;
  const waitFor = (holder: { pid: number; command?: string }): Promise<void> => {
    if (!told) waiting?.({ pid: holder.pid, command: holder.command });
    told = true;
    return sleep(100);
  };
  for (;;) {
    const older = olderHolder(db, real);
    if (older) {
      if (monotonicNow() >= deadline) throw new LedgerBusyError(`${db} (${real})`, { pid: older.pid, command: older.command });
      await waitFor(older);
      continue;
    }
    if (create(file, command)) {
      if (takeOwnerLock(real)) return refuseLinked(real, file);
      // The lock file was gone, but a hub in another PID namespace holds the ledger.
      unlinkQuietly(file);
      const foreign = { pid: 0, command: 'a switchyard process in another PID namespace (a container)' };
      if (monotonicNow() >= deadline) throw new LedgerBusyError(real === db ? db : `${db} (${real})`, foreign);
      await waitFor(foreign);
      continue;
    }
    const holder = readHolder(file);
    if (holder && holderAlive(holder, real)) {
      // Taken over while it was looked at (the OS lock is the new holder's): look again.
      const now = readHolder(file);
      if (now?.pid !== holder.pid || now.started !== holder.started) continue;
      // Another container's hub may have this process's pid (1, say): its start time tells.
      if (holder.pid === process.pid && holder.started === processStart(process.pid)) return refuseLinked(real, file);
      if (monotonicNow() >= deadline) throw new LedgerBusyError(real === db ? db : `${db} (${real})`, { pid: holder.pid, command: holder.command });
      await waitFor(holder);
    } else if (!holder && Date.now() - mtime(file) < WRITING_MS) {
      await sleep(50); // being written this instant, most likely
    } else if (takeOver(file)) {
      takeoverSince = undefined;
    } else {
      // Another process is in the takeover step. It waited without a deadline here: a process
      // stopped in the step (SIGSTOP) kept every hub starting on the ledger waiting until it was
      // resumed or killed, whatever --ledger-wait-ms said.
      const now = monotonicNow();
      takeoverSince ??= now;
      if (now >= Math.max(deadline, takeoverSince + TAKEOVER_STEP_MS)) {
        const pid = osLockHolder(takeoverFile(file)) ?? 0;
        throw new LedgerTakeoverStuckError(real === db ? db : `${db} (${real})`, { pid, command: 'taking over the lock of a process that has gone' }, now - takeoverSince);
      }
      await sleep(10);
    }
  }
}

/** Why the database at `dbPath` must not be written (it has other names), or undefined. */
export function linkedLedger(dbPath: string): LedgerLinkedError | undefined {
  const real = realLedgerPath(dbPath);
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(real);
  } catch {
    return undefined; // not created yet: SQLite makes it, with one name
  }
  // A folder's links are its entries: not names of a database (opening it says what it is).
  return st.isFile() && st.nlink > 1 ? new LedgerLinkedError(real, st.nlink) : undefined;
}

/** Holding the lock of `real`: refused, and the lock given back, if the database has other names. */
function refuseLinked(real: string, lock: string): void {
  const linked = linkedLedger(real);
  if (!linked) return;
  unlinkQuietly(lock);
  releaseOwnerLock();
  throw linked;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * What SQLite said of the ledger while the hub opened it, when it is the disk's doing (full, an
 * I/O error, a database that is no database), or a ledger without its chain state: undefined
 * for any other error, which is the config's. `start` and `stdio` exit 1 for these, not 2 blaming the config file.
 */
export function ledgerTrouble(err: unknown, config: HubConfig): string | undefined {
  if (err instanceof ChainStateGoneError) return `the ledger ${ledgerDbPath(config)}: ${err.message}`;
  const code = (err as { code?: unknown } | null)?.code;
  if (!config.ledger.enabled || typeof code !== 'string' || !/^SQLITE_(FULL|IOERR|CORRUPT|NOTADB|CANTOPEN|READONLY|NOMEM|PROTOCOL)/.test(code)) return undefined;
  const db = ledgerDbPath(config);
  return `the ledger ${db} could not be opened: ${(err as Error).message} (${code})`;
}

/** The config's ledger file, its `ledger.path` taken from the config file's folder. */
export function ledgerDbPath(config: HubConfig): string {
  return resolve(config.file ? dirname(config.file) : process.cwd(), config.ledger.path);
}
