/**
 * A request whose route was looked up (a list fetched, every server's aggregate built) while
 * `servers restart` or a reload replaced a server: the route it got may name the old connection,
 * which drains the calls it was sent and nothing more, or miss the server altogether. Nothing is
 * recorded or sent yet, so the hub routes it again from the start (Hub.route), as a request that
 * came after the replacement: it waits for the new connection's first start, or is refused as
 * unavailable, like any call to a server starting. Only requests whose route took an await look;
 * the usual call, routed by the aggregate built last, cannot have been routed across a
 * replacement (Catalog.forget drops it, and no build across one is kept).
 */
import type { ServerHandle } from '../catalog/catalog.js';
import type { CallContext } from './context.js';

/** Times one request is routed again; past them it goes on with what it has. */
export const MAX_REROUTES = 3;

/** Thrown by the router before anything of a request is recorded or sent; Hub.route routes it again. */
export class RouteReplacedError extends Error {
  override readonly name = 'RouteReplacedError';
}

/**
 * Throws RouteReplacedError when a server was replaced or reconfigured (Catalog.generation moved
 * from `before`) while the route was looked up, or the route's handle is not its server's now.
 */
export function rerouteIfReplaced(before: number, now: number, routedTo: ServerHandle | undefined, current: ((id: string) => ServerHandle | undefined) | undefined, ctx: CallContext): void {
  if ((ctx.rerouted ?? 0) >= MAX_REROUTES) return;
  if (before !== now || (routedTo !== undefined && current !== undefined && current(routedTo.id) !== routedTo)) throw new RouteReplacedError();
}

