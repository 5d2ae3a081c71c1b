import type { ServerConfig } from '../config/types.js';
import type { Upstream } from '../upstream/types.js';

/** The catalog's boundary types (src/catalog/catalog.ts re-exports them). */

/** One configured upstream as the catalog sees it. */
export interface ServerHandle {
  readonly id: string;
  readonly config: ServerConfig;
  readonly upstream: Upstream;
}

/** Who is asking: selects the upstream authorization context and the tool group. */
export interface View {
  principal?: string;
  /** A configured group (endpoint path `/mcp/<group>`); undefined = everything. */
  group?: string;
}

/** The hub's view of one list family across every upstream. */
export interface Aggregate {
  items: Record<string, unknown>[];
  /** Smallest remaining freshness of the parts (ms). */
  ttlMs: number;
  scope: 'public' | 'private';
  /** Identifies this version of the aggregate, for cursors. */
  snapshot: string;
}

export interface Routed<T = Record<string, unknown>> {
  server: ServerHandle;
  upstreamName: string;
  /** The item as the upstream listed it. */
  item: T;
  /** Tools: the annotations the hub stands behind (trusted server or config, else conservative). */
  annotations?: Record<string, unknown>;
  hubName: string;
  /**
   * Listed over a principal's own connection (its credentials, its own process): that
   * principal's alone, so what is remembered of it (hub/shown-routes.ts) is remembered for it alone.
   */
  own?: boolean;
}

/** The connection and authorization context a principal's requests to a server use. */
export interface Connection {
  /** '' = the server's own configured credentials (shared by every principal). */
  credential: string;
  upstream: Upstream;
}
