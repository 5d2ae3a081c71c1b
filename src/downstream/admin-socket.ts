/**
 * The admin listener's unix socket (listen.admin.path). On a loopback TCP port no address tells
 * the operator's CLI from any other local process; a socket file with mode 0600 does: only the
 * hub's user (and root) can connect. It is made in a folder of the hub's own (mode 0700), made
 * 0600 there, and only then linked at its path: it is never open to others, not even between
 * the bind and a chmod, and no process-wide umask is changed for it (a umask is the whole
 * process's: files and folders other code makes at that moment, on libuv's threads, would get
 * it too, a folder without its owner's x).
 */
import Database from 'better-sqlite3';
import { chmodSync, closeSync, linkSync, lstatSync, mkdtempSync, openSync, rmdirSync, unlinkSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { adminSocketPathProblem } from '../socket-path.js';
import { monotonicNow } from '../monotonic.js';

/** Why the admin socket cannot be had, in words to print as they are (`code` as the system's). */
export class AdminSocketError extends Error {
  constructor(
    message: string,
    readonly code: string,
    /** The hub that holds the path, when it said its pid. */
    readonly pid?: number,
  ) {
    super(message);
  }
}

/**
 * Held while a hub makes way for its socket and links it (and while it removes it at stop):
 * without it two hubs starting at once each found the same dead hub's socket refusing, and the
 * later one removed the earlier one's live socket as that stale file and linked its own. An
 * OS lock (SQLite's POSIX lock on `<path>.lock`, kept in this file's folder) is dropped by the
 * kernel however its process ends, so a hub killed while holding it blocks nobody; it is held
 * only for these few steps, so the file it leaves behind means nothing by itself.
 */
export function socketLockFile(path: string): string {
  return `${path}.lock`;
}

/** The lock of the socket at `path`, waited for (without blocking the event loop) up to `waitMs`; undefined when another process still holds it then. */
async function lockSocketPath(path: string, waitMs: number): Promise<Database.Database | undefined> {
  const file = socketLockFile(path);
  // Made 0600 here: SQLite would make it by the umask.
  try {
    closeSync(openSync(file, 'a', 0o600));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') throw new AdminSocketError(`the folder ${dirname(path)} is not there: create it, or set listen.admin.path to a path in a folder that is`, e.code);
    throw new AdminSocketError(`cannot open ${file}, the lock of the socket's path (${e.code ?? e.message}): ${e.code === 'EACCES' ? "another user's file? " : ''}set listen.admin.path to a path in a folder of the hub's user`, e.code ?? 'EIO');
  }
  const db = new Database(file, { timeout: 0 });
  try {
    for (const deadline = monotonicNow() + waitMs; ; await new Promise((r) => setTimeout(r, 20))) {
      try {
        // In the loop: reading the file's header for it waits on a holder's lock too.
        db.pragma('journal_mode = MEMORY'); // no -journal file beside it
        db.exec('BEGIN EXCLUSIVE');
        return db;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (!(typeof code === 'string' && code.startsWith('SQLITE_BUSY')) || monotonicNow() >= deadline) throw err;
      }
    }
  } catch (err) {
    db.close();
    if (typeof (err as { code?: unknown }).code === 'string' && (err as { code: string }).code.startsWith('SQLITE_BUSY')) return undefined;
    throw err;
  }
}

/**
 * The pid of the switchyard hub answering on the socket at `path`, as its /admin/servers says
 * (undefined when it does not say: authentication on, another program, no answer within 1 s).
 */
export function pidAt(path: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request({ socketPath: path, path: '/admin/servers', headers: { host: 'localhost' }, timeout: 1_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d.length + body.length > 1 << 20 ? '' : d));
      res.on('end', () => {
        try {
          const pid = (JSON.parse(body) as { pid?: unknown }).pid;
          resolve(res.statusCode === 200 && Number.isInteger(pid) ? (pid as number) : undefined);
        } catch {
          resolve(undefined);
        }
      });
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/** The error of a socket path another hub holds: EADDRINUSE, naming the path and, when it says, that hub's pid. */
async function inUse(path: string, what: string): Promise<Error> {
  const pid = await pidAt(path);
  return new AdminSocketError(pid === undefined ? what : `another switchyard hub (pid ${pid}) listens on ${path}`, 'EADDRINUSE', pid);
}

/**
 * The admin socket linked at `path` (listenPrivately), a stale socket there removed first
 * (clearStaleSocket), as one step no other hub of this build takes at the same time: of two
 * hubs starting at once on one path exactly one gets it, the other fails with EADDRINUSE.
 */
export async function takeSocketPath(path: string, listen: (at: string) => Promise<unknown>, waitMs = 3_000): Promise<AdminSocket> {
  const long = adminSocketPathProblem(path);
  if (long) throw new AdminSocketError(long, 'ENAMETOOLONG');
  const lock = await lockSocketPath(path, waitMs);
  if (!lock) throw await inUse(path, `another process holds ${socketLockFile(path)} (another hub starting or stopping on ${path}?)`);
  try {
    await clearStaleSocket(path);
    return await listenPrivately(path, listen);
  } finally {
    lock.close();
  }
}

/**
 * Make way for the socket at `path`: a socket file a hub that is not running left behind (a
 * crash, a kill -9) is removed, as nothing answers on it. Throws, with `code` EADDRINUSE, when
 * something answers there (another hub), and when the file there is not a socket (it is
 * someone's file, never removed here).
 *
 * Only a refused connection (ECONNREFUSED) says nobody listens: a listener too busy to take one
 * more (its backlog full: EAGAIN) or a socket this user may not open (another user's: EACCES)
 * is live, and removing it would take a running hub's socket from under it.
 */
export async function clearStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!isSocket) throw new AdminSocketError(`${path} is a file that is not a socket: it is left alone (move it, or set listen.admin.path to another path)`, 'EEXIST');
  const refused = await new Promise<string | undefined>((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(undefined);
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'unknown'));
  });
  if (refused === 'ENOENT') return; // gone meanwhile
  if (refused === undefined) throw await inUse(path, `something listens on ${path} (another hub?)`);
  if (refused === 'EACCES') throw new AdminSocketError(`${path} is a socket this user may not open (another user's?): it is left alone`, 'EACCES');
  if (refused !== 'ECONNREFUSED') throw new AdminSocketError(`something listens on ${path} but did not take a connection (${refused}: another hub, too busy?): it is left alone`, 'EADDRINUSE');
  unlinkSync(path);
}

/** The admin socket once linked at its path; `release()` removes it (if it is still this one). */
export interface AdminSocket {
  path: string;
  release(): Promise<void>;
}

/**
 * `listen(at)` on a socket made in a fresh folder beside `path` (mkdtemp: mode 0700 whatever
 * the umask), made 0600, then hard-linked at `path` (EEXIST when something took the path
 * meanwhile: never replaced) and the folder removed. The listener keeps its socket through the
 * link; as node no longer knows its path, release() (at stop) removes it.
 */
export async function listenPrivately(path: string, listen: (at: string) => Promise<unknown>): Promise<AdminSocket> {
  // A short name: a socket's path has a length limit (about 107 bytes).
  const dir = mkdtempSync(join(dirname(path), '.'));
  const inner = join(dir, 's');
  let linked = false;
  try {
    await listen(inner);
    chmodSync(inner, 0o600);
    try {
      linkSync(inner, path);
    } catch (err) {
      // Taken meanwhile by something that did not take the lock (an older build, another program).
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw await inUse(path, `something took ${path} while this hub made its socket (another hub?)`);
      throw err;
    }
    linked = true;
  } finally {
    try {
      unlinkSync(inner);
    } catch {
      // never bound (the listen failed)
    }
    rmdirSync(dir);
  }
  const { dev, ino } = lstatSync(path);
  return {
    path,
    release: async () => {
      if (!linked) return;
      linked = false;
      // Under the lock: a hub starting now may find this closed socket stale and link its own
      // there between the look and the unlink below.
      const lock = await lockSocketPath(path, 1_000).catch(() => undefined);
      try {
        const now = lstatSync(path);
        // Another hub's socket there now (this one's was removed by hand) is left to it.
        if (lock && now.dev === dev && now.ino === ino) unlinkSync(path);
      } catch {
        // gone already
      } finally {
        lock?.close();
      }
    },
  };
}
