/**
 * The admin listener's unix socket (listen.admin.path). On a loopback TCP port no address tells
 * the operator's CLI from any other local process; a socket file with mode 0600 does: only the
 * hub's user (and root) can connect. Made under a umask that leaves it so from the moment it
 * exists, not only once a chmod after it catches up.
 */
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';

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

/** `listen(path)` (which binds before it returns) under a umask that leaves the socket to the hub's user alone. */
export async function listenPrivately<T>(path: string, listen: (path: string) => Promise<T>): Promise<T> {
  const before = process.umask(0o177);
  let listening: Promise<T>;
  try {
    listening = listen(path);
  } finally {
    process.umask(before);
  }
  const at = await listening;
  // Whatever the platform made of the umask, the mode is 0600 before the first request is read.
  chmodSync(path, 0o600);
  return at;
}
