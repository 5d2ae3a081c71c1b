import type { ServerCapabilities } from '../protocol/types.js';
import type { Catalog, ServerHandle } from './catalog.js';

/**
 * How the aggregate describes itself: the capabilities and instructions advertised downstream,
 * and each server's line in /healthz. Pure functions over the server handles.
 */

/** How loaded a server is and how it fails: in /healthz and /admin/servers alike. */
export interface ServerLoad {
  inFlight: number;
  queued: number;
  failMode: 'open' | 'closed';
  /** HTTP upstreams: closed, open or half-open. */
  circuit?: string;
}

/** One server in /healthz. */
export interface ServerHealth extends ServerLoad {
  id: string;
  state: string;
  era: string | null;
  tools: number;
  /** ISO time of the last state change. */
  since: string;
  lastError: string | null;
  /** Why a list of a ready server failed last (the hub shows none of it meanwhile). */
  listError: string | null;
  restarts: number;
}

export function serverLoad(h: ServerHandle): ServerLoad {
  const u = h.upstream;
  const out: ServerLoad = { inFlight: u.load.active, queued: u.load.queued, failMode: h.config.failMode };
  const circuit = (u as { circuit?: string }).circuit;
  if (circuit !== undefined) out.circuit = circuit;
  return out;
}

/**
 * The union over every upstream whose capabilities are known. `listChanged` is always on:
 * upstreams come and go, and the hub tells clients when they do.
 */
export function unionCapabilities<T>(servers: Iterable<T>, capsOf: (s: T) => ServerCapabilities | undefined): ServerCapabilities {
  const caps: ServerCapabilities = {};
  let subscribe = false;
  for (const s of servers) {
    const c = capsOf(s);
    if (!c) continue;
    if (c.tools) caps.tools = { listChanged: true };
    if (c.prompts) caps.prompts = { listChanged: true };
    if (c.resources) {
      caps.resources = { listChanged: true };
      if (c.resources.subscribe) subscribe = true;
    }
    if (c.logging) caps.logging = {};
    if (c.completions) caps.completions = {};
  }
  if (caps.resources && subscribe) caps.resources.subscribe = true;
  return caps;
}

/**
 * Each upstream's instructions, prefixed with its server id: of the servers `shows` (those of
 * the client's group), less those `withheld` leaves out (poisoning checks, src/catalog/
 * instructions.ts).
 */
export function mergedInstructions(
  handles: Iterable<ServerHandle>,
  shows: (id: string) => boolean = () => true,
  withheld: (id: string, text: string) => boolean = () => false,
): string | undefined {
  const parts: string[] = [];
  for (const h of handles) {
    const text = h.upstream.instructions;
    if (text && shows(h.id) && !withheld(h.id, text)) parts.push(`[${h.id}] ${text}`);
  }
  return parts.length ? parts.join('\n\n') : undefined;
}

/** `groups`: a caller limited to these tool groups, whose count is of the tools they show. */
export function serverHealth(h: ServerHandle, catalog: Catalog, groups?: Iterable<string>): ServerHealth {
  const u = h.upstream;
  return {
    id: h.id,
    state: u.state,
    era: u.era ?? null,
    tools: catalog.toolCount(h.id, groups),
    since: new Date(u.since).toISOString(),
    lastError: u.lastError ?? null,
    listError: catalog.listError(h.id) ?? null,
    restarts: u.restarts,
    ...serverLoad(h),
  };
}
