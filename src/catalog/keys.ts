/** The keys the catalog files its lists, listen streams and resource records under. */
import type { ListKind } from './lists.js';
import type { PartRecord } from './part.js';
import { principalConn, principalOfConn } from './principal-conn.js';
import { uriKey } from './uri-key.js';

/** The key of a server's list in one authorization context ('' = the server's own), in `parts`. */
export function partKey(serverId: string, credential: string, kind: ListKind): string {
  return `${serverId}\0${credential}\0${kind}`;
}

/** The ListenManager key of a principal's own connection to a server (its main one's is the server id). */
export function principalListenKey(serverId: string, principal: string): string {
  return `${serverId}\0${principal}`;
}

/** The server of a ListenManager key. */
export function serverOfListenKey(key: string): string {
  const i = key.indexOf('\0');
  return i < 0 ? key : key.slice(0, i);
}

/** The connection of a ListenManager key, as router/subscriptions.ts names it: '' the server's own, principalConn() a principal's. */
export function connOfListenKey(key: string): string {
  const i = key.indexOf('\0');
  return i < 0 ? '' : principalConn(key.slice(i + 1));
}

/** Resource records' URI keys, computed once per record (records live as long as their list). */
const recordKeys = new WeakMap<PartRecord, string>();

export function recordKey(r: PartRecord): string {
  let k = recordKeys.get(r);
  if (k === undefined) {
    k = uriKey(r.upstreamName);
    recordKeys.set(r, k);
  }
  return k;
}

/** The listen stream of a server's connection `conn` (a subscriptions `conn`: '' the server's own). */
export function listenKeyOf(serverId: string, conn: string): string {
  return conn === '' ? serverId : principalListenKey(serverId, principalOfConn(conn));
}
