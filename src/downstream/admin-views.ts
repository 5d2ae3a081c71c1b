/**
 * The operator's views of a running hub (upstreams, catalog), shared by the admin routes,
 * the status page and the CLI. Plain JSON-able objects: the wire format of /admin/servers and
 * /admin/tools.
 */
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import { serverLoad, type ServerLoad } from '../catalog/describe.js';
import type { InstructionsVerdict } from '../catalog/instructions.js';
import { candidateName, reservedName, type NameMode } from '../catalog/names.js';
import type { ListKind } from '../catalog/lists.js';
import type { PartRecord } from '../catalog/part.js';
import type { OwnDown } from '../auth/upstream-pool.js';

/** One server in /admin/servers, with its calls in flight and queued, failMode and circuit (ServerLoad). */
export interface ServerView extends ServerLoad {
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
  /** While lastError stands: what the process's stderr said last that reads like why (stdio). */
  stderr: string | null;
  /** Why a list of the server failed last, until one succeeds (older daemons do not say). */
  listError?: string | null;
  /** Epoch ms of the last state change. */
  since: number;
  trust: string;
  /**
   * The principals' own connections to it (processPerPrincipal, own credentials) that are down
   * now, with why; only when there are any (older daemons never say).
   */
  ownDown?: OwnDown[];
  /**
   * When the server gave instructions: whether clients get them (false: withheld under
   * `policy.poisoning: "block"`), their poisoning flags ("poisoning:markup") and the details.
   */
  instructions?: { shown: boolean; flags: string[]; details?: { code: string; message: string; field: string }[] };
}

/** lastError, with the stderr reason after it when there is one (for the CLI's lines); else a list's failure. */
export function errorWithStderr(s: Pick<ServerView, 'lastError' | 'stderr' | 'listError'>): string | null {
  if (s.lastError === null) return s.listError ?? null;
  return s.stderr ? `${s.lastError} (stderr: ${s.stderr})` : s.lastError;
}

/** The first principal's own connection that is down, and how many more (for the CLI's lines). */
export function ownDownText(s: Pick<ServerView, 'ownDown'>): string | null {
  const [first, ...more] = s.ownDown ?? [];
  if (first === undefined) return null;
  const why = first.stderr ? `${first.lastError} (stderr: ${first.stderr})` : first.lastError;
  const others = more.length ? ` (and ${more.length} more principal${more.length > 1 ? 's' : ''}' own)` : '';
  return `principal "${first.principal}"'s own connection ${first.state}: ${why}${others}`;
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
  /** The annotations the hub sends and acts on (trusted server or config, else conservative). */
  annotations?: unknown;
  /** e.g. "renamed:collision", "renamed:sanitized", "renamed:too-long", "renamed:reserved", "quarantined", "quarantined:schema", "pin:changed", "poisoning:markup". */
  flags: string[];
  /** What the upstream itself claimed (untrusted display data). */
  claimedAnnotations?: unknown;
  /** "server" (trusted), "conservative" (untrusted) or "config". */
  annotationSource?: string;
  /** The pinned definition: "approved", or "changed" / "renamed" waiting for `switchyard tools approve`. */
  pin?: { state: string; hash: string; renamedFrom?: string };
  /** Listed, but every call is refused (ESCHEMA): why its schemas cannot be used, as a call found. */
  schemaQuarantine?: string;
  /** false: clients do not see it (with `hidden` saying why); listed only with ?all=1. */
  visible?: boolean;
  hidden?: string;
  /** Every detailed flag: code, message, category, field, plugin. */
  details?: { code: string; message: string; category?: string; field?: string; plugin?: string }[];
}

export function serverViews(
  handles: Iterable<ServerHandle>,
  cacheTools: (id: string) => number | undefined,
  instructionsOf: (h: ServerHandle) => InstructionsVerdict | undefined = () => undefined,
  listErrorOf: (id: string) => string | undefined = () => undefined,
  ownDownOf: (id: string) => OwnDown[] = () => [],
): ServerView[] {
  const out: ServerView[] = [];
  for (const h of handles) {
    const u = h.upstream;
    const info = u.serverInfo;
    const verdict = instructionsOf(h);
    const ownDown = ownDownOf(h.id);
    const instructions = verdict && {
      shown: !verdict.withheld,
      flags: verdict.flags.map((f) => `poisoning:${f.code}`),
      ...(verdict.flags.length ? { details: verdict.flags.map((f) => ({ ...f })) } : {}),
    };
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
      stderr: u.lastError !== undefined && u.lastStderr !== undefined ? u.lastStderr : null,
      listError: listErrorOf(h.id) ?? null,
      since: u.since,
      trust: h.config.trust,
      ...(ownDown.length ? { ownDown } : {}),
      ...(instructions ? { instructions } : {}),
      ...serverLoad(h),
    });
  }
  return out;
}

/** Why a hub name differs from `<prefix>__<name>`, or undefined when it does not. */
export function renameReason(h: ServerHandle, upstreamName: string, hubName: string, mode: NameMode): string | undefined {
  const c = candidateName(h.id, h.config.prefix, upstreamName, mode);
  if (c.name === hubName) return c.reason;
  const r = reservedName(h.id, h.config.prefix, upstreamName, mode);
  return r.name === hubName ? r.reason : 'collision';
}

/**
 * The tool list with where each tool comes from and what is odd about it: what clients see
 * (of one group, if given), or with `all` every tool the hub knows, held-back ones included.
 */
export async function toolViews(
  catalog: Catalog,
  mode: NameMode,
  filter: { server?: string; group?: string; all?: boolean } = {},
  /** Why calls to a tool are refused because its schemas cannot be used (SchemaValidator.flagged). */
  schemaQuarantine: (hubName: string) => string | undefined = () => undefined,
): Promise<ToolView[]> {
  const out: ToolView[] = [];
  for (const { hubName: name, server, record: r, visible, inGroup } of await catalog.toolRecords({ group: filter.group })) {
    if ((!visible && !filter.all) || !inGroup) continue;
    if (filter.server && server.id !== filter.server) continue;
    const item = r.item;
    const refused = schemaQuarantine(name);
    const v: ToolView = itemView(name, server, r, visible, renameReason(server, r.upstreamName, name, mode), refused, (t) => {
      if (r.upstream.annotations !== undefined) t.claimedAnnotations = r.upstream.annotations;
      if (r.annotationSource) t.annotationSource = r.annotationSource;
    });
    if (item.inputSchema !== undefined) v.inputSchema = item.inputSchema;
    if (item.outputSchema !== undefined) v.outputSchema = item.outputSchema;
    if (item.annotations !== undefined) v.annotations = item.annotations;
    out.push(v);
  }
  return out;
}

/**
 * A prompt, resource or resource template in `/admin/tools?kind=…` (`switchyard tools --kind`):
 * a tool's view without what only tools have (annotations, schemas). `name` is the name clients
 * see (a prompt's hub name; a resource's URI, a template's uriTemplate, as listed).
 */
export type ItemView = Pick<ToolView, 'name' | 'server' | 'upstreamName' | 'era' | 'trust' | 'title' | 'description' | 'flags' | 'pin' | 'visible' | 'hidden' | 'details'>;

/** The items of a kind other than tools, as toolViews lists tools (same filter: group, server, all). */
export async function itemViews(catalog: Catalog, kind: Exclude<ListKind, 'tools'>, mode: NameMode, filter: { server?: string; group?: string; all?: boolean } = {}): Promise<ItemView[]> {
  const out: ItemView[] = [];
  for (const { hubName: name, server, record: r, visible, inGroup } of await catalog.records(kind, { group: filter.group })) {
    if ((!visible && !filter.all) || !inGroup) continue;
    if (filter.server && server.id !== filter.server) continue;
    // Prompts are named as tools are; resources keep their URIs (another server's first is "shadowed").
    const renamed = kind === 'prompts' ? renameReason(server, r.upstreamName, name, mode) : undefined;
    const v = itemView(name, server, r, visible, renamed);
    if (!visible && !r.hidden) v.hidden = 'shadowed: a server listed before it in the config has this URI';
    out.push(v);
  }
  return out;
}

/**
 * What tools and other items show alike: names, server, flags (renamed, pin, hidden, each
 * detailed flag), pin, title; a tool's refused schemas (`schemaQuarantine`) and its own fields
 * (`toolOnly`) in their places.
 */
function itemView(name: string, server: ServerHandle, r: PartRecord, visible: boolean, renamed: string | undefined, schemaQuarantine?: string, toolOnly?: (v: ToolView) => void): ToolView {
  const flags: string[] = [];
  if (renamed) flags.push(`renamed:${renamed}`);
  if (r.pin && r.pin.state !== 'approved') flags.push(`pin:${r.pin.state}`);
  if (!visible) flags.push(r.hidden?.startsWith('quarantined') ? 'quarantined' : 'hidden');
  if (schemaQuarantine) flags.push('quarantined:schema');
  for (const f of r.flags) if (f.category !== 'pinning') flags.push(`${f.category ?? 'flag'}:${f.code}`);
  const v: ToolView = { name, server: server.id, upstreamName: r.upstreamName, era: server.upstream.era ?? null, trust: server.config.trust, flags, visible };
  if (r.hidden) v.hidden = r.hidden;
  if (schemaQuarantine) v.schemaQuarantine = schemaQuarantine;
  if (r.pin) v.pin = { state: r.pin.state, hash: r.pin.hash, ...(r.pin.renamedFrom ? { renamedFrom: r.pin.renamedFrom } : {}) };
  toolOnly?.(v);
  if (r.flags.length) v.details = r.flags.map((f) => ({ ...f }));
  if (typeof r.item.title === 'string') v.title = r.item.title;
  if (typeof r.item.description === 'string') v.description = r.item.description;
  return v;
}
