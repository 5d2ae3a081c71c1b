import { unionCapabilities } from '../catalog/describe.js';
import type { ServerCapabilities } from '../protocol/types.js';
import type { UpstreamState } from '../upstream/types.js';

/** Where the capabilities a server last had outlive the hub process (the ledger). */
export interface CapabilityStore {
  get(server: string): ServerCapabilities | undefined;
  put(server: string, capabilities: ServerCapabilities): void;
  /** Only these servers' rows stay (the others were removed from the config). */
  retain(servers: ReadonlySet<string>): void;
}

/**
 * A server that is still starting and was never seen ready (a first run, or the ledger off) is
 * assumed to offer the list families: an empty list and a list_changed later are right either
 * way, while a session whose handshake left out `tools` would never ask for them.
 */
const ASSUMED: ServerCapabilities = Object.freeze({ tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } });

/**
 * The capabilities a server counts with in the hub's own: its own when it is ready; else what
 * it offered when last ready, in this process or (from the store) an earlier one; else, while
 * it starts, the list families. A server started afresh (`servers restart`, a reload) has a new
 * upstream object with no capabilities until it is ready.
 */
export class KnownCapabilities {
  private readonly store: CapabilityStore;

  /** Without a store (the ledger off), what servers offered is kept for this process only. */
  constructor(store?: CapabilityStore) {
    this.store = store ?? memoryStore();
  }

  /** A server became ready with these capabilities; stored when they differ from the last. */
  ready(server: string, own: ServerCapabilities): void {
    const caps = familiesOf(own);
    if (JSON.stringify(this.store.get(server) ?? null) !== JSON.stringify(caps)) this.store.put(server, caps);
  }

  /**
   * Servers no longer configured are forgotten: one added later under the same id may be
   * another server, and must not count with what this one offered.
   */
  retain(servers: ReadonlySet<string>): void {
    this.store.retain(servers);
  }

  of(server: string, state: UpstreamState, own: ServerCapabilities | undefined): ServerCapabilities | undefined {
    if (own) return own;
    const last = this.store.get(server);
    if (last) return last;
    return state === 'starting' || state === 'restarting' ? ASSUMED : undefined;
  }
}

function memoryStore(): CapabilityStore {
  const map = new Map<string, ServerCapabilities>();
  return {
    get: (server) => map.get(server),
    put: (server, caps) => void map.set(server, caps),
    retain(servers) {
      for (const id of map.keys()) if (!servers.has(id)) map.delete(id);
    },
  };
}

/**
 * Only what the hub's own capabilities are made of (a union of one): an upstream's
 * `experimental` or extension fields, of any size, are neither kept nor stored.
 */
export function familiesOf(c: ServerCapabilities): ServerCapabilities {
  return unionCapabilities([c], (x) => x);
}
