/**
 * Which connection and config record of a server the catalog goes by now: a reload or `servers
 * restart` replaces a server's connection (the old one drains its calls, and may still speak),
 * and a reload that changes only settings puts a new record in place over the same connection.
 */
import type { Upstream } from '../upstream/types.js';
import type { ServerHandle } from './types.js';

/** The principal's own connection to h open now (CatalogOptions.ownConnection). */
export type OwnConnection = (h: ServerHandle, principal: string) => Upstream | undefined;

/**
 * Whether `upstream` is a connection to h that another took the place of (a reload, `servers
 * restart`), still open while its calls drain. A server's: it is not the server's connection in
 * use. A principal's own: the principal has another open (none open: it is not replaced, its
 * lists lapse with it). Per notification gap or state change, never per call.
 */
export function replacedConnection(
  servers: readonly ServerHandle[],
  ownConnection: OwnConnection | undefined,
  h: ServerHandle,
  upstream: Upstream,
  principal: string | undefined,
): boolean {
  if (principal === undefined) return servers.find((x) => x.id === h.id)?.upstream !== upstream;
  const now = ownConnection?.(h, principal);
  return now !== undefined && now !== upstream;
}

/**
 * The server's record as the config has it now: a reload that changes a server's settings but
 * not its connection (trust, names, tools allow/deny) puts a new record in place, and what was
 * wired when the server was added must judge its lists by that one, not the first.
 */
export function currentRecord(servers: readonly ServerHandle[], h: ServerHandle): ServerHandle {
  const now = servers.find((x) => x.id === h.id);
  return now !== undefined && now.upstream === h.upstream ? now : h;
}
