import type { PartRecord } from './part.js';
import { uriKey } from './uri-key.js';

export type RouteKind = 'resources' | 'resourceTemplates';

/**
 * The resource URIs (or templates) a server's own list last showed, and the keys of those it
 * hid: enough to say that a URI is that server's while it is down, after a restart of the hub.
 */
export interface ResourceRoutes {
  shown: string[];
  /** uriKey()s of hidden resources: a template of the server must not route them either. */
  hidden: string[];
}

/** Where routes outlive the hub process (the ledger). */
export interface ResourceRouteStore {
  get(server: string, kind: RouteKind): ResourceRoutes | undefined;
  put(server: string, kind: RouteKind, routes: ResourceRoutes): void;
  /** Only these servers' routes stay (the others were removed from the config). */
  retain(servers: ReadonlySet<string>): void;
}

/**
 * A list of tens of thousands of files is not worth keeping whole: past this many, the first
 * ones are kept (the rest are "not found" while the server is down after a restart).
 */
export const MAX_STORED_ROUTES = 5_000;

export function isRouteKind(kind: string): kind is RouteKind {
  return kind === 'resources' || kind === 'resourceTemplates';
}

export function routesOf(records: readonly PartRecord[], kind: RouteKind, max = Infinity): ResourceRoutes {
  const shown: string[] = [];
  const hidden: string[] = [];
  for (const r of records) {
    if (!r.hidden) {
      if (shown.length < max) shown.push(r.upstreamName);
    } else if (kind === 'resources' && hidden.length < max) hidden.push(uriKey(r.upstreamName));
  }
  return { shown, hidden };
}
