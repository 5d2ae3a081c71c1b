/** How long a client may keep a list the hub gives it, and whether it is anyone's or one principal's. */
import type { ServerCapabilities } from '../protocol/types.js';
import type { Built } from './aggregate.js';
import type { Groups } from './filters.js';
import { LIST_RETRY_MS, type ListCache } from './list-cache.js';
import { offers, type ListKind } from './lists.js';
import type { ServerHandle } from './types.js';

/**
 * The most freshness a list lacking a server it shows (down, or its list failed) is given: the
 * next list may have that server's items, but not before the hub asks it again (a failed list
 * LIST_RETRY_MS after it failed; a server restarting within seconds, a failed one once a minute).
 * At 0, for as long as the server stayed down, a modern client keeping lists by their ttlMs
 * listed again at every turn.
 */
export const LACKING_TTL_MS = LIST_RETRY_MS;

export interface ListHintsOptions {
  groups: Groups;
  cache: ListCache;
  servers: () => readonly ServerHandle[];
  /** CatalogOptions.capabilitiesOf: what a server offers, ready or not. */
  capabilitiesOf?: (h: ServerHandle) => ServerCapabilities | undefined;
}

/** A server left out of lists of this kind only until it is back: not ready, not stopped, and offering the kind (capabilitiesOf). */
function isDown(h: ServerHandle, kind: ListKind, capabilitiesOf: ListHintsOptions['capabilitiesOf']): boolean {
  const state = h.upstream.state;
  return state !== 'ready' && state !== 'stopped' && offers(capabilitiesOf ? capabilitiesOf(h) : h.upstream.capabilities, kind);
}

/** The ttlMs and cache scope of what a group shows of an aggregate (Aggregate's hints). */
export function listHints(kind: ListKind, b: Built, group: string | undefined, o: ListHintsOptions): { ttlMs: number; scope: 'public' | 'private' } {
  let ttlMs = Infinity;
  let untilNotified = false;
  let scope: 'public' | 'private' = 'public';
  for (const p of b.parts) {
    // A group's list is made of the servers it shows: another server's list neither dates it nor makes it private.
    if (!o.groups.showsServer(group, p.h.id)) continue;
    const left = o.cache.remainingMs(p.e);
    if (Number.isFinite(left)) ttlMs = Math.min(ttlMs, left);
    else untilNotified = true;
    // A list fetched with a principal's own credentials is that principal's.
    if (p.e.scope === 'private' || p.conn.credential !== '') scope = 'private';
  }
  // Nothing but a notification revalidates a part kept until list_changed: a client that does
  // not listen must ask again, however long the other parts stay fresh. Nor may a list that
  // lacks a server whose list failed be kept long, or one that lacks a server that is down
  // (restarting, or failed and retried) and offered this list when it was up: the next list
  // may have its items (clients are told when it is back, but only those that listen hear it).
  const lacking = b.failed.some((id) => o.groups.showsServer(group, id)) || o.servers().some((h) => isDown(h, kind, o.capabilitiesOf) && o.groups.showsServer(group, h.id));
  if (untilNotified) ttlMs = 0;
  else if (lacking) ttlMs = Math.min(ttlMs, LACKING_TTL_MS);
  else if (!Number.isFinite(ttlMs)) ttlMs = 0;
  return { ttlMs, scope };
}
