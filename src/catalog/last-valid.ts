/**
 * Whether a read may be routed by the resources (templates) aggregate built last, without asking
 * any server for its list again (Catalog.routeUri, hidesAny, templateOwner).
 */
import { MODERN } from '../protocol/era.js';
import type { Built, Part } from './aggregate.js';
import type { AggregateBuilds } from './builds.js';
import { readyServers } from './builds.js';
import type { ListChanges } from './changes.js';
import type { ListCache } from './list-cache.js';
import { declaresListChanged } from './lists.js';
import type { PartStore } from './part-store.js';
import type { RouteKind } from './resource-routes.js';
import type { Connection, ServerHandle } from './types.js';
import type { ListenManager } from './upstream-listen.js';
import { listenKeyOf } from './keys.js';

export interface LastValidOptions {
  builds: AggregateBuilds;
  parts: PartStore;
  cache: ListCache;
  changes: ListChanges;
  listens: ListenManager;
  servers: () => readonly ServerHandle[];
  /** CatalogOptions.connection. */
  connection?: (h: ServerHandle, principal: string | undefined) => Connection | Promise<Connection>;
  /** CatalogOptions.standsAlone. */
  standsAlone?: (h: ServerHandle, principal: string, ready: boolean) => boolean;
}

/**
 * The resources (or templates) aggregate built last for this principal (its authorization
 * contexts: see build's memo key), when building it now would make the same of it, without
 * asking any server for its list: the ready servers that offer the kind are those it has
 * parts of, in the same order (none came back, none left, none failed to list, none down that
 * this principal's own connection would list instead), under the same config record, pins,
 * policy and plugins (pinGen), over the connections this principal's calls use now; and each
 * part's list is the one its cache holds, fresh (a build would serve it as it is), or else
 * (kept 0 ms, or past its ttl) asked for after the last moment its server's lists may have
 * changed unheard (ListChanges.resourcesChangedAt), over a connection whose list changes the hub hears
 * now. Otherwise undefined: the caller builds, as every read did (a read waited for every
 * server's list, the slowest one's too, and refetched each kept 0 ms).
 */
export async function lastValid(kind: RouteKind, principal: string | undefined, o: LastValidOptions): Promise<Built | undefined> {
  const mk = o.builds.lastKey(kind, principal);
  const last = mk === undefined ? undefined : o.builds.memo(mk);
  if (!last || last.failed.length !== 0) return undefined;
  const parts = last.parts;
  // The connections first: what follows is checked after the last await, as of the answer.
  if (o.connection)
    for (const p of parts) {
      const conn = await o.connection(p.h, principal);
      if (conn.credential !== p.conn.credential || conn.upstream !== p.conn.upstream) return undefined;
    }
  if (o.builds.memo(mk!) !== last || last.parts !== parts) return undefined;
  const ready = readyServers(o.servers(), kind);
  if (ready.length !== parts.length) return undefined;
  for (let i = 0; i < parts.length; i++) if (!partHolds(kind, parts[i]!, ready[i]!, o)) return undefined;
  const standsAlone = o.standsAlone;
  if (principal !== undefined && standsAlone && o.servers().some((h) => h.upstream.state !== 'ready' && h.upstream.state !== 'stopped' && standsAlone(h, principal, false))) return undefined;
  return last;
}

/** Whether a build now would take part `p` as it is, for the ready server `h` in its place (lastValid). */
function partHolds(kind: RouteKind, p: Part, h: ServerHandle, o: LastValidOptions): boolean {
  if (p.h !== h || p.pinGen !== o.parts.pinGen || p.conn.upstream.state !== 'ready') return false;
  const e = o.cache.peek(p.key);
  if (!e || e.version !== p.e.version || e.retryAt !== undefined) return false;
  const shared = `${h.id}\0${kind}`;
  if (p.conn.credential !== '') {
    // A principal's connection given the shared public list keeps it only while a build would
    // give it that list; one with a list of its own, only while it would not.
    if (p.key === shared) return o.parts.sharedFor(shared) === e;
    if (o.parts.sharedFor(shared)) return false;
  }
  if (o.cache.isFresh(e)) return true;
  return (e.askedAt ?? -1) >= o.changes.resourcesChangedAt(h.id) && hearsResourceChanges(h, p.conn, o.listens);
}

/**
 * Whether a change of the server's resource lists on this connection would be heard: a modern
 * connection's listen stream says them (acknowledged), a legacy one declared listChanged and
 * has the stream that carries it.
 */
function hearsResourceChanges(h: ServerHandle, conn: Connection, listens: ListenManager): boolean {
  const up = conn.upstream;
  if (up.era === MODERN) return listens.hearsListChanges(listenKeyOf(h.id, conn.credential), 'resourcesListChanged');
  return declaresListChanged(up.capabilities, 'resources') && up.hearsNotifications !== false;
}
