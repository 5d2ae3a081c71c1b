/**
 * Which connection a principal's requests to a server go over, asked without making one: its
 * own (processPerPrincipal, its own credentials, a legacy URL server's per-principal session) or
 * the server's main one. The catalog, the router, the hub's waits and its subscriptions ask the
 * same questions of the same pool, so they are answered here once.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import type { PrincipalUpstreams } from '../auth/upstream-pool.js';
import type { Upstream } from '../upstream/types.js';

/** What these questions look at in the upstream pool. */
export type ConnectionPool = Pick<PrincipalUpstreams, 'isolated' | 'existing' | 'knownBeforeReady'>;

/**
 * The connection this principal's calls to `h` use, as far as it is known without making one:
 * its own (processPerPrincipal, own credentials), which may restart after a crash while the
 * server's is ready, or the server's. A retry there waited for nothing, and was refused.
 * Undefined for an own one not open: an unsubscribe (Router.release) then starts none.
 */
export function usedBy(pool: ConnectionPool, h: ServerHandle, principal: string): Upstream | undefined {
  return pool.isolated(h, principal) ? pool.existing(h, principal) : h.upstream;
}

/**
 * Whether `principal`'s calls to `h` go over a connection of its own that needs nothing of h's
 * main one: a processPerPrincipal process, or its own credentials (not a legacy URL server's
 * per-principal session, which the main connection's era decides).
 */
export function standsAlone(pool: ConnectionPool, h: ServerHandle, principal: string): boolean {
  return pool.knownBeforeReady(h, principal) && pool.isolated(h, principal);
}

/** Whether this principal's calls to a stdio server would go to a process of its own not started yet (as the catalog's standsAlone: not started while the server's is down). */
export function startsOwnProcess(pool: ConnectionPool, h: ServerHandle, principal: string): boolean {
  return !h.config.url && pool.isolated(h, principal) && pool.existing(h, principal) === undefined;
}

/** standsAlone, and that connection is open and ready: h's main connection being down does not stop its calls. */
export function ownReady(pool: ConnectionPool, h: ServerHandle, principal: string): boolean {
  return standsAlone(pool, h, principal) && pool.existing(h, principal)?.state === 'ready';
}
