/**
 * What clients hear of the catalog's changes: its 'resourceUpdated' and 'changed' events said
 * again as the hub's 'resourceUpdated' and 'listChanged' (HubCore.events), which the endpoint
 * sends to the sessions and streams each concerns.
 */
import type { EventEmitter } from 'node:events';
import type { Catalog } from '../catalog/catalog.js';
import { principalConn } from '../catalog/principal-conn.js';
import { SHARED_ONLY } from '../catalog/shared-only.js';
import type { Subscriptions } from '../router/subscriptions.js';
import { ChangeCoalescer } from './change-coalescer.js';

/**
 * A list change: its kind, the principal whose own list it is (undefined: everyone's), the
 * servers whose parts changed (undefined: the whole list), when the last change it stands
 * for was made (performance.now()), whether each was of those servers' own connections'
 * lists alone (SHARED_ONLY: not told to a principal whose list of them is its own), and the
 * endpoint groups whose lists changed (undefined: any).
 */
type ListChange = [kind: string, principal: string | undefined, servers: readonly string[] | undefined, at: number, sharedOnly: boolean, groups: readonly string[] | undefined];

/** Relays `catalog`'s changes to `events` from now on; the returned coalescer's close() ends the windows still open (the hub's stop). */
export function relayCatalogChanges(catalog: Pick<Catalog, 'on' | 'groups' | 'listsOwn'>, subs: Pick<Subscriptions, 'subscribers'>, events: EventEmitter): { close(): void } {
  // Said on a principal's own connection: for the subscriptions made on that connection only.
  // A subscription outlives a reload of `groups`: a client whose group no longer shows the
  // server is not told of its resources (seenBy), as it could no longer subscribe to them.
  catalog.on('resourceUpdated', (u: { server: string; uri: string; principal?: string; meta?: Record<string, unknown> }) =>
    events.emit('resourceUpdated', {
      uri: u.uri,
      meta: u.meta,
      subscribers: subs.subscribers(u.server, u.uri, u.principal === undefined ? '' : principalConn(u.principal)),
      seenBy: (group?: string) => catalog.groups.showsServer(group, u.server),
    }),
  );
  // `principal`: a change of that principal's own list only (its own upstream connection).
  // `servers`: changes of those servers' parts only, which clients of a group without any of
  // them do not see (undefined: of the whole list). One key per kind and principal, not per
  // server: a burst of changes (an upstream's storm of list_changed, or forty servers coming
  // ready after a start or a reload) reaches each client as a few, not one per server.
  // `at`: what is said at a window's end may be of changes made before a client's session began,
  // which every list it can fetch already shows (session-table.ts: listsFrom). Not whole
  // milliseconds (monotonicNow): the server whose readiness ends the start-up grace is ready in
  // the very millisecond the handshake it held is answered.
  // `sharedOnly`: a session of a principal whose lists of those servers are all its own (its
  // credentials upstream) is not told: its list did not change (Catalog.listsOwn; a change of
  // its own is said on its own connection, to it alone).
  const union = (a: readonly string[] | undefined, b: readonly string[] | undefined) => (a === undefined || b === undefined ? undefined : [...new Set([...a, ...b])]);
  const listChanges = new ChangeCoalescer<ListChange>(
    (kind: string, principal: string | undefined, servers: readonly string[] | undefined, at: number, sharedOnly: boolean, groups: readonly string[] | undefined) =>
      events.emit(
        'listChanged',
        kind,
        principal,
        servers === undefined && groups === undefined
          ? undefined
          : (group: string | undefined, who?: string) =>
              (groups === undefined || (group !== undefined && groups.includes(group))) &&
              (servers === undefined || servers.some((s) => catalog.groups.showsServer(group, s) && !(sharedOnly && who !== undefined && catalog.listsOwn(kind, who, s)))),
        at,
      ),
    undefined,
    (earlier, later) => [later[0], later[1], union(earlier[2], later[2]), later[3], earlier[4] && later[4], union(earlier[5], later[5])],
  );
  catalog.on('changed', (kind: string, principal?: string, server?: string, scope?: string, groups?: readonly string[]) =>
    listChanges.change(JSON.stringify([kind, principal ?? null]), kind, principal, server === undefined ? undefined : [server], performance.now(), scope === SHARED_ONLY, groups),
  );
  return listChanges;
}
