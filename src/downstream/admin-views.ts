/**
 * The operator's views of a running hub (upstreams, catalog), shared by the admin routes,
 * the status page and the CLI. Plain JSON-able objects: the wire format of /admin/servers and
 * /admin/tools.
 */
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import { candidateName, type NameMode } from '../catalog/names.js';

export interface ServerView {
  id: string;
  transport: 'stdio' | 'http';
  state: string;
  era: string | null;
  protocolVersion: string | null;
  serverInfo: { name?: string; version?: string } | null;
  /** Tools in the cache (null: not listed yet). */
  tools: number | null;
  restarts: number;
  lastError: string | null;
  /** Epoch ms of the last state change. */
  since: number;
  trust: string;
}

export interface ToolView {
  /** The name clients see. */
  name: string;
  server: string;
  upstreamName: string;
  era: string | null;
  trust: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
  /** e.g. "renamed:collision", "renamed:sanitized", "renamed:too-long", "quarantined". */
  flags: string[];
}

export function serverViews(handles: Iterable<ServerHandle>, cacheTools: (id: string) => number | undefined): ServerView[] {
  const out: ServerView[] = [];
  for (const h of handles) {
    const u = h.upstream;
    const info = u.serverInfo;
    out.push({
      id: h.id,
      transport: h.config.url ? 'http' : 'stdio',
      state: u.state,
      era: u.era ?? null,
      protocolVersion: u.protocolVersion ?? null,
      serverInfo: info ? { name: info.name, version: info.version } : null,
      tools: cacheTools(h.id) ?? null,
      restarts: u.restarts,
      lastError: u.lastError ?? null,
      since: u.since,
      trust: h.config.trust,
    });
  }
  return out;
}

/** Why a hub name differs from `<prefix>__<name>`, or undefined when it does not. */
export function renameReason(h: ServerHandle, upstreamName: string, hubName: string, mode: NameMode): string | undefined {
  const c = candidateName(h.id, h.config.prefix, upstreamName, mode);
  if (c.name !== hubName) return 'collision';
  return c.reason;
}

/** The aggregated tool list with where each tool comes from and what is odd about it. */
export async function toolViews(catalog: Catalog, mode: NameMode, filter: { server?: string } = {}): Promise<ToolView[]> {
  const agg = await catalog.aggregate('tools');
  const out: ToolView[] = [];
  for (const item of agg.items) {
    const name = String(item.name);
    const routed = await catalog.resolveTool(name);
    if (!routed) continue;
    if (filter.server && routed.server.id !== filter.server) continue;
    const flags: string[] = [];
    const reason = renameReason(routed.server, routed.upstreamName, name, mode);
    if (reason) flags.push(`renamed:${reason}`);
    // Flags a future catalog stage may attach to an item (pins, description checks).
    const extra = (item as { _flags?: unknown })._flags;
    if (Array.isArray(extra)) for (const f of extra) if (typeof f === 'string') flags.push(f);
    const v: ToolView = {
      name,
      server: routed.server.id,
      upstreamName: routed.upstreamName,
      era: routed.server.upstream.era ?? null,
      trust: routed.server.config.trust,
      flags,
    };
    if (typeof item.title === 'string') v.title = item.title;
    if (typeof item.description === 'string') v.description = item.description;
    if (item.inputSchema !== undefined) v.inputSchema = item.inputSchema;
    if (item.outputSchema !== undefined) v.outputSchema = item.outputSchema;
    if (item.annotations !== undefined) v.annotations = item.annotations;
    out.push(v);
  }
  return out;
}
