/**
 * A request whose route was looked up (a list fetched, every server's aggregate built) while
 * `servers restart` or a reload replaced its server: the route it got may name the old connection,
 * which drains the calls it was sent and nothing more, or miss the server altogether. Nothing is
 * recorded or sent yet, so the hub routes it again from the start (Dispatch.route,
 * hub/dispatch.ts), as a request that came after the replacement: it waits for the new
 * connection's first start, or is refused as unavailable, like any call to a server starting.
 * Only requests whose route took an await look; the usual call, routed by the aggregate built
 * last, cannot have been routed across a replacement (Catalog.forget drops it, and no build
 * across the replacement of a server it took a list from is kept: builds.ts).
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { UpstreamUnavailableError } from '../protocol/errors.js';
import type { CallContext } from './context.js';
import { toolFilter } from '../catalog/filters.js';

/** Times one request is routed again; past them it goes on with what it has (a replaced connection is refused at sending). */
export const MAX_REROUTES = 3;

/** The request may be routed again (it has not been MAX_REROUTES times yet). */
export function reroutesLeft(ctx: CallContext): boolean {
  return (ctx.rerouted ?? 0) < MAX_REROUTES;
}

/** Thrown by the router before anything of a request is recorded or sent; Dispatch.route (hub/dispatch.ts) routes it again. */
export class RouteReplacedError extends Error {
  override readonly name = 'RouteReplacedError';
  /** The server the route named, replaced since; undefined when the route found none. */
  constructor(readonly server?: string) {
    super(server === undefined ? 'a server was replaced while the request was routed' : `server "${server}" was replaced while the request was routed`);
  }
}

/**
 * Throws RouteReplacedError when the route's server was replaced, reconfigured or removed while
 * the route was looked up (its handle is not its server's now: every such change puts a new
 * handle in place, or none). Another server's replacement leaves the route as good as it was:
 * during a reload that restarts one server, the calls to the others are not routed again (each a
 * list round more). A route that found no server may have missed the one replaced (its list was
 * the old process's, or not there yet): routed again when any server was (Catalog.generation
 * moved from `before`).
 */
export function rerouteIfReplaced(before: number, now: number, routedTo: ServerHandle | undefined, current: ((id: string) => ServerHandle | undefined) | undefined, ctx: CallContext): void {
  if (!reroutesLeft(ctx)) return;
  if (routedTo !== undefined && current !== undefined) {
    if (current(routedTo.id) !== routedTo) throw new RouteReplacedError(routedTo.id);
  } else if (before !== now) throw new RouteReplacedError(routedTo?.id);
}

/**
 * Whether `server`'s connection is not its server's any more (replaced since the request was
 * routed, while its row was written): the old one only drains what it was sent. A reload that
 * changed only settings keeps the connection (and the request goes on).
 */
export function connectionReplaced(server: ServerHandle, current: ((id: string) => ServerHandle | undefined) | undefined): boolean {
  return current !== undefined && current(server.id)?.upstream !== server.upstream;
}

/**
 * Why a request routed to a connection replaced since was not sent (safe to send again), or,
 * `routedAgain`, the row of one the hub routes again itself (a legacy resources/subscribe).
 */
export function replacedError(server: ServerHandle, routedAgain = false): UpstreamUnavailableError {
  return new UpstreamUnavailableError(server.id, 'replaced', `restarted, reconfigured or removed after this request was routed; not sent, ${routedAgain ? 'routed again' : 'send it again'}`);
}

/**
 * Whether a reload that kept `server`'s connection changed its settings (a new handle) so that it
 * no longer shows the tool `upstreamName` under the name the request was routed by: denied, not
 * allowed, or another prefix. The usual call, its handle unchanged, looks no further.
 */
export function unshownSince(server: ServerHandle, current: ((id: string) => ServerHandle | undefined) | undefined, upstreamName: string): boolean {
  const now = current?.(server.id);
  if (now === undefined || now === server) return false;
  return now.config.prefix !== server.config.prefix || !toolFilter(now.config.tools)(upstreamName);
}
