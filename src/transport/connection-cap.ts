/**
 * How many client connections the hub's listener takes at once when the config does not say
 * (`listen.maxConnections`). Each is a file descriptor; so are the ledger's files, each stdio
 * upstream's pipes and each upstream connection. A flood of connections up to the process's
 * open-file limit left none for those: a stdio server killed meanwhile could not be started
 * again (spawn EMFILE, retried each second until descriptors are free), and a pending-file switch or a new
 * upstream connection would fail the same way until the flood ended. A reserve is kept for them.
 */
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

/** Descriptors kept for the hub's own files, processes and upstream connections (or a quarter of a small limit). */
const RESERVE = 256;

/** The soft open-file limit (Linux: /proc/self/limits), or undefined where it cannot be read or is unlimited. */
export function openFileLimit(limits = '/proc/self/limits'): number | undefined {
  try {
    const line = readFileSync(limits, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft && /^[0-9]+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The cap for an open-file limit of `limit`: the limit less the reserve, a quarter kept of a
 * small one, and less `alsoKept` (the admin listener's own connections, when it has one).
 */
export function defaultMaxConnections(limit = openFileLimit(), alsoKept = 0): number | undefined {
  if (limit === undefined) return undefined;
  return Math.max(1, shared(limit) - alsoKept);
}

/** What both listeners may hold of a limit: all of it less the reserve. */
function shared(limit: number): number {
  return limit - Math.min(RESERVE, Math.ceil(limit / 4));
}

/**
 * The admin listener's cap for an open-file limit of `limit`: ADMIN_MAX_CONNECTIONS, but at most a
 * quarter of what the MCP listener then gets (a fifth of what both may hold). A fixed 64 below a
 * limit of about 86 ate into the reserve kept for the ledger and upstreams (the MCP listener's
 * cap, floored at 1, could not give way).
 */
export function adminMaxConnections(limit = openFileLimit()): number {
  if (limit === undefined) return ADMIN_MAX_CONNECTIONS;
  return Math.max(1, Math.min(ADMIN_MAX_CONNECTIONS, Math.floor(shared(limit) / 5)));
}

/**
 * Connections past the cap being answered at once; past these, one more is closed unanswered:
 * a flood must not hold the descriptors the cap keeps, for the time an answer takes to go out.
 */
const MAX_REFUSING = 64;
/** How long a refused connection is kept for its answer to be read, at most. */
const REFUSAL_LINGER_MS = 2_000;
/** The 503 a refused connection is told, naming the setting whose cap it met. */
function refusal(setting: string): string {
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: `the hub has as many client connections open as it takes (${setting}): try again shortly` } });
  return 'HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: application/json\r\n' + `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * Connections the admin listener (listen.admin) takes at once: its own count, never the MCP
 * listener's, so a flood of MCP clients cannot lock the operator out. Few are needed (the CLI
 * opens one at a time, a status page a handful); the cap keeps a flood of the admin listener
 * itself from taking the descriptors, and comes out of the MCP listener's default cap. Less
 * under a small open-file limit (adminMaxConnections).
 */
export const ADMIN_MAX_CONNECTIONS = 64;

/**
 * The listener's cap on open client connections. One past it is answered 503 (Retry-After) and
 * closed: closed unanswered as it arrived (node's `maxConnections`), a request sent on it was
 * never failed by Node's fetch (undici, which the official SDK clients use), which waited on it
 * until the client's own timeout, a minute or more, where it should have been told to retry.
 */
export class ConnectionCap {
  private open = 0;
  private refusing = 0;
  private readonly refusal: string;

  constructor(
    readonly max: number,
    /** Each connection refused (`answered`: told 503, else closed unanswered in a flood). */
    private readonly refused: (answered: boolean) => void,
    /** The setting a refusal names. */
    setting = 'listen.maxConnections',
  ) {
    this.refusal = refusal(setting);
  }

  /** Whether `socket` is taken; if not, it is answered and closed here. */
  admit(socket: Socket): boolean {
    if (this.open < this.max) {
      this.open++;
      socket.once('close', () => this.open--);
      return true;
    }
    if (this.refusing >= MAX_REFUSING) {
      this.refused(false);
      socket.destroy();
      return false;
    }
    this.refused(true);
    this.refusing++;
    // At the latest then, however the client trickles bytes (an idle timeout would be reset by each).
    const linger = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS);
    socket.once('close', () => {
      clearTimeout(linger);
      this.refusing--;
    });
    socket.on('error', () => socket.destroy());
    // Its request is read and dropped: a socket closed with input unread is reset, and the
    // client may lose the answer with it. Closed once the client has read it and closed its side.
    socket.resume();
    socket.once('end', () => socket.destroy());
    socket.end(this.refusal);
    return false;
  }
}
