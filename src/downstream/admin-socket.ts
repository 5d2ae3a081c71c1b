/**
 * The admin listener's unix socket (listen.admin.path). On a loopback TCP port no address tells
 * the operator's CLI from any other local process; a socket file with mode 0600 does: only the
 * hub's user (and root) can connect. It is made in a folder of the hub's own (mode 0700), made
 * 0600 there, and only then linked at its path: it is never open to others, not even between
 * the bind and a chmod, and no process-wide umask is changed for it (a umask is the whole
 * process's: files and folders other code makes at that moment, on libuv's threads, would get
 * it too, a folder without its owner's x).
 */
import { chmodSync, linkSync, lstatSync, mkdtempSync, rmdirSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';

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
  if (!isSocket) throw Object.assign(new Error(`${path} is a file that is not a socket: it is left alone (move it, or set listen.admin.path to another path)`), { code: 'EEXIST' });
  const refused = await new Promise<string | undefined>((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(undefined);
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'unknown'));
  });
  if (refused === 'ENOENT') return; // gone meanwhile
  if (refused === undefined) throw Object.assign(new Error(`something listens on ${path} (another hub?)`), { code: 'EADDRINUSE' });
  if (refused === 'EACCES') throw Object.assign(new Error(`${path} is a socket this user may not open (another user's?): it is left alone`), { code: 'EACCES' });
  if (refused !== 'ECONNREFUSED') throw Object.assign(new Error(`something listens on ${path} but did not take a connection (${refused}: another hub, too busy?): it is left alone`), { code: 'EADDRINUSE' });
  unlinkSync(path);
}

/** The admin socket once linked at its path; `release()` removes it (if it is still this one). */
export interface AdminSocket {
  path: string;
  release(): void;
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
    linkSync(inner, path);
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
    release: () => {
      if (!linked) return;
      linked = false;
      try {
        const now = lstatSync(path);
        // Another hub's socket there now (this one's was removed by hand) is left to it.
        if (now.dev === dev && now.ino === ino) unlinkSync(path);
      } catch {
        // gone already
      }
    },
  };
}
