/**
 * The server a hub name or resource URI is of, told without building any aggregate: the ready
 * server a tool or prompt name can only be of, or the server that is down behind a name or URI
 * (Catalog.readyOwner, downItem, downResource).
 */
import type { ServerHandle, View } from './types.js';
import { toolFilter, type Groups } from './filters.js';
import { offers } from './lists.js';
import { templateMatcher } from './uri-template.js';
import type { NameAssigner } from './names.js';
import type { PartPolicy, PartRecord } from './part.js';
import type { PinStore } from './pins.js';
import { routesOf, type ResourceRouteStore, type ResourceRoutes, type RouteKind } from './resource-routes.js';
import { uriKey } from './uri-key.js';
import { partKey } from './keys.js';

/** The lists the catalog holds of each server, by partKey (PartStore.judged). */
type LastParts = ReadonlyMap<string, { records: Promise<PartRecord[]> }>;

/**
 * The ready server, shown to `group`, that a hub tool or prompt name can only be of
 * (NameAssigner.soleOwner) and that offers the kind; its list is not looked at (it may not
 * list the name, or hide it: ownerItem says).
 */
export function readyOwner(
  servers: readonly ServerHandle[],
  names: NameAssigner,
  groups: Groups,
  kind: 'tools' | 'prompts',
  hubName: string,
  group?: string,
): ServerHandle | undefined {
  const owner = names.soleOwner(kind === 'tools' ? 'tool' : 'prompt', hubName, servers.map((h) => ({ id: h.id, prefix: h.config.prefix })));
  const h = owner && servers.find((x) => x.id === owner.server);
  return h && h.upstream.state === 'ready' && offers(h.upstream.capabilities, kind) && groups.showsServer(group, h.id) ? h : undefined;
}

/**
 * The server that is down behind a tool or prompt name no list of this process shows now: the
 * name is stored for it (ledger names), is still its name under its prefix, and would be shown
 * to this view once it is back (the group; for a tool also allow/deny and an approved pin). A
 * client that kept a list (a 2026 client caches it by ttlMs, or it came from an earlier hub
 * process) then hears "unavailable" rather than "unknown" while that server starts. What
 * plugins or poisoning checks hide is decided on a list and cannot be known here: such an item
 * is named unavailable too, and refused either way. `shared`, when it says (a server some
 * principals reach with credentials of their own): only a name its own connection's list had in
 * this process, since the names and pins stored for it may be of a principal's private list, and
 * another principal was told such a tool is "unavailable" where a name it was never shown is "unknown".
 */
export function downItem(
  servers: readonly ServerHandle[],
  names: NameAssigner,
  groups: Groups,
  pins: PinStore,
  pinning: PartPolicy['pinning'],
  kind: 'tools' | 'prompts',
  hubName: string,
  view: View = {},
  shared?: (h: ServerHandle, upstreamName: string) => boolean | undefined,
): { server: ServerHandle; upstreamName: string } | undefined {
  if (servers.every((h) => h.upstream.state === 'ready')) return undefined;
  const owners = names.storedOwners(kind === 'tools' ? 'tool' : 'prompt', hubName, servers.map((h) => ({ id: h.id, prefix: h.config.prefix })));
  const byId = (id: string) => servers.find((h) => h.id === id)!;
  // A server that is up and holds the name too (one that was down when a tool moved) is the
  // catalog's to route: its list decides.
  if (owners.some((o) => byId(o.server).upstream.state === 'ready')) return undefined;
  const owner = owners[0];
  const h = owner && byId(owner.server);
  if (!h || !groups.includes(view.group, kind, h.id, hubName, owner.upstreamName, h.config.prefix)) return undefined;
  const found = { server: h, upstreamName: owner.upstreamName };
  if (kind === 'tools' && !toolFilter(h.config.tools)(owner.upstreamName)) return undefined;
  if (shared?.(h, owner.upstreamName) === false) return undefined;
  const pin = pins.get(h.id, owner.upstreamName);
  // A prompt not pinned yet (listed only by a build that did not pin prompts) is as it was: unavailable.
  if (kind === 'prompts' ? pin?.hash === null : !pin || pin.hash === null) return undefined;
  return pinning === 'block' && pin !== undefined && pin.pendingHash !== null ? undefined : found;
}

/**
 * The server that is down behind a resource URI its last lists showed to this view (the URI
 * itself, or a template it matches), in this process or, kept by the route store, an earlier
 * one: a read hears "unavailable" rather than "not found" while it starts again.
 */
export async function downResource(
  servers: readonly ServerHandle[],
  groups: Groups,
  parts: LastParts,
  store: ResourceRouteStore | undefined,
  uri: string,
  view: View = {},
  exactOnly = false,
): Promise<ServerHandle | undefined> {
  for (const h of servers) {
    if (h.upstream.state === 'ready' || !groups.includes(view.group, 'resources', h.id, uri)) continue;
    const listed = await lastRoutes(parts, store, h, 'resources');
    if (listed?.hidden.length && listed.hidden.includes(uriKey(uri))) continue;
    if (listed?.shown.includes(uri)) return h;
    if (exactOnly) continue;
    const templates = await lastRoutes(parts, store, h, 'resourceTemplates');
    // The template itself (a completion reference names it) or a URI it matches.
    if (templates?.shown.some((t) => t === uri || templateMatcher(t)?.test(uri))) return h;
  }
  return undefined;
}

/**
 * What a server's list showed as its own connection last fetched it: in this process, else
 * (a restarted hub) as the route store kept it.
 */
async function lastRoutes(parts: LastParts, store: ResourceRouteStore | undefined, h: ServerHandle, kind: RouteKind): Promise<ResourceRoutes | undefined> {
  const records = await parts.get(partKey(h.id, '', kind))?.records.catch(() => undefined);
  return records ? routesOf(records, kind) : store?.get(h.id, kind);
}
