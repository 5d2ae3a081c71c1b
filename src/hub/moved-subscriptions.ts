/**
 * After a reload that changed servers, resource subscriptions whose URI's owner changed (its
 * server removed or renamed, the URI routed to another server now) are made again at the server
 * that has them now, for the same subscriber, and said updated once: keyed by server, they were
 * held for a server that was gone, and their clients heard nothing more, told nothing.
 */
import type { Logger } from '../log.js';
import type { Signal } from '../cancel.js';
import type { ServerHandle } from '../catalog/catalog.js';
import type { MovedSubscriptions } from '../downstream/core.js';
import { readyWithin } from '../upstream/ready-within.js';
import type { ReloadReport } from './reload.js';

/**
 * How long the servers a reload started are waited for before subscriptions are routed again:
 * a URI's new owner names it in its lists once it is ready. One that is not ready by then has no
 * URIs yet (a new id has no lists kept either), and what only it would have had is dropped.
 */
export const MOVED_WAIT_MS = 30_000;

export interface MovedSources {
  readonly handles: ReadonlyMap<string, ServerHandle>;
  /** Subscribes the endpoint's sessions and listen streams again to what `moved` names (Endpoint.resubscribeMoved). */
  resubscribeMoved(moved: MovedSubscriptions): Promise<{ sessions: number; listenStreams: number }>;
  /** UpstreamSubscriptions.takeMoved. */
  readonly takeMoved: MovedSubscriptions;
  readonly stop: Signal;
  readonly log: Logger;
}

/**
 * Whether a reload changed anything that may move a URI to another server: its servers, or the
 * groups (one that no longer shows a URI's server may show another that serves it).
 */
export function mayMoveUris(r: ReloadReport): boolean {
  return r.added.length + r.removed.length + r.restarted.length + r.updated.length > 0 || r.applied.includes('groups');
}

/** Carries the subscriptions a reload (`report`) moved; in the background, never rejects. */
export async function carryMovedSubscriptions(src: MovedSources, report: ReloadReport, waitMs = MOVED_WAIT_MS): Promise<void> {
  try {
    const fresh = [...report.added, ...report.restarted].map((id) => src.handles.get(id)).filter((h): h is ServerHandle => h !== undefined);
    await Promise.all(fresh.map((h) => readyWithin(h.upstream, waitMs, src.stop)));
    if (src.stop.aborted) return;
    const n = await src.resubscribeMoved(src.takeMoved);
    if (n.sessions + n.listenStreams > 0) src.log.info(n, 'config reload: resource subscriptions whose server changed made again where their URIs are now');
  } catch (err) {
    src.log.warn({ err: String((err as Error)?.message ?? err) }, 'config reload: resource subscriptions whose server changed not made again');
  }
}
