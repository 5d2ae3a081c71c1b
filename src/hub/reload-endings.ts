/**
 * What a reload ends downstream: the sessions and listen streams of credentials it revoked or
 * narrowed, and of groups it removed, and the live feed's viewers on any key change. (What it
 * replaces upstream, servers and their connections, is hub/reload.ts's.)
 */
import type { Logger } from '../log.js';
import { lostEndpoint } from '../config/reload.js';
import type { AdminRoutes } from '../downstream/admin.js';
import type { Endpoint } from '../downstream/endpoint.js';

/** The sessions and streams a reload may end. */
export type EndedByReload = Pick<Endpoint, 'endSessionsOf' | 'endSessionsOfGroups'> & { readonly listen: Pick<Endpoint['listen'], 'endStreamsOf' | 'endStreamsOfGroups'> };

/**
 * API keys were replaced: what the revoked ones opened ends. `principals`: those left with no
 * key; `keys`: the hashes of the keys removed; `narrowed`: kept keys' hashes → the groups left to
 * them (what they opened elsewhere ends). `admin`: the operator's routes, once a listener has them.
 */
export function endRevoked(endpoint: EndedByReload, admin: AdminRoutes | undefined, log: Logger, principals: ReadonlySet<string>, keys: ReadonlySet<string>, narrowed: ReadonlyMap<string, ReadonlySet<string>>): void {
  // Any key change: a viewer's socket, or a ticket not yet used, does not say which credential opened it.
  admin?.events.dropViewers();
  admin?.tickets.revokeAll();
  const lost = lostEndpoint(keys, narrowed);
  const ended = endpoint.endSessionsOf(principals, keys, lost);
  const streams = endpoint.listen.endStreamsOf(principals, lost);
  if (ended || streams) log.info({ sessions: ended, listenStreams: streams, principals: [...principals] }, 'config reload: sessions and streams of revoked credentials ended');
}

/** Groups were replaced: the sessions and streams of those `gone` says were removed end. */
export function endRemovedGroups(endpoint: EndedByReload, log: Logger, gone: (group: string) => boolean): void {
  const ended = endpoint.endSessionsOfGroups(gone);
  const streams = endpoint.listen.endStreamsOfGroups(gone);
  if (ended || streams) log.info({ sessions: ended, listenStreams: streams }, 'config reload: sessions and streams of removed groups ended');
}
