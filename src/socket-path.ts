/**
 * A unix socket's path has a length limit (sun_path: 108 bytes on Linux, 104 on macOS and the
 * BSDs, the last one the terminating NUL). Node does not say when a path is over it: a listen
 * cuts the path short and binds there, a connect cuts it short too and finds nothing (ENOENT).
 * A hub given a longer admin socket path started, and no CLI could reach it ("no daemon is
 * running"). So the length is checked where a path is given, and said in bytes.
 */
import { dirname, join } from 'node:path';

/** The longest path a unix socket can have here, in bytes. */
export const SOCKET_PATH_MAX = process.platform === 'linux' ? 107 : 103;

/** Why no unix socket can be at (or reached at) `path`, or undefined. */
export function socketPathProblem(path: string): string | undefined {
  const n = Buffer.byteLength(path);
  if (n <= SOCKET_PATH_MAX) return undefined;
  return `${path} is ${n} bytes, longer than a unix socket's path can be (${SOCKET_PATH_MAX} bytes): give a shorter path (a folder nearer the root, such as $XDG_RUNTIME_DIR or /tmp/<name>)`;
}

/** Where admin-socket.ts first binds the socket at `path` (mkdtemp's six characters as X). */
export function adminBindPath(path: string): string {
  return join(dirname(path), '.XXXXXX', 's');
}

/**
 * socketPathProblem of the admin socket at `path` (absolute): the path itself, and the one in a
 * folder beside it where the hub binds it first (admin-socket.ts), longer than a short name.
 */
export function adminSocketPathProblem(path: string): string | undefined {
  const own = socketPathProblem(path);
  if (own) return own;
  const bind = adminBindPath(path);
  const n = Buffer.byteLength(bind);
  if (n <= SOCKET_PATH_MAX) return undefined;
  return `${path}: the hub binds the socket first in a folder beside it, at ${bind} (${n} bytes), longer than a unix socket's path can be (${SOCKET_PATH_MAX} bytes): give a shorter path (a folder nearer the root, such as $XDG_RUNTIME_DIR or /tmp/<name>)`;
}
