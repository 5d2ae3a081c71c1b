/**
 * Where a legacy upstream's `notifications/elicitation/complete` goes once the call that carried
 * its URL-mode elicitation has ended. The server's out-of-band step (a sign-in, a payment) is
 * often finished after the call: always after a -32042 (URLElicitationRequired), which ends the
 * call before the user even opens the URL, and often after an `elicitation/create` the client
 * accepted (accept only means the user agreed to open it). The 2025-11-25 client uses the
 * notification to retry the request that got the -32042 or to move its UI on (digest §5.2); one
 * the hub dropped once the call ended left the client to guess, or to wait for good.
 */
import { URL_ELICITATION_REQUIRED, RpcError } from '../protocol/errors.js';
import { monotonicNow } from '../monotonic.js';
import type { Pending } from './pending-call.js';

type Notify = (params: Record<string, unknown>) => void;

/**
 * How many ended calls' elicitationIds are kept, and for how long: a user takes minutes at a
 * URL; a server that never completes its steps must not grow the hub's memory.
 */
export const KEPT_COMPLETIONS = 256;
export const KEPT_COMPLETION_MS = 15 * 60_000;

/** The elicitationIds of a -32042's URL steps, or none. */
function stepIds(err: Error | undefined): string[] {
  if (!(err instanceof RpcError) || err.code !== URL_ELICITATION_REQUIRED) return [];
  const list = (err.data as { elicitations?: unknown } | undefined)?.elicitations;
  if (!Array.isArray(list)) return [];
  const ids: string[] = [];
  for (const e of list) if (e && typeof e === 'object' && typeof (e as { elicitationId?: unknown }).elicitationId === 'string') ids.push((e as { elicitationId: string }).elicitationId);
  return ids;
}

export class UrlCompletions {
  /** By elicitationId, oldest first (a Map keeps insertion order). */
  private readonly kept = new Map<string, { notify: Notify; at: number }>();

  /**
   * `p` ended (`err`: how, if it failed): the URL-mode elicitations it relayed, and the URL
   * steps of its -32042, are completed to its client from now on. Only a call whose client can
   * be told (a legacy one: CallOptions.onElicitationComplete).
   */
  ended(p: Pending, err: Error | undefined): void {
    const notify = p.opts?.onElicitationComplete;
    if (notify === undefined) return;
    const ids = stepIds(err);
    if (p.urlElicitations) for (const id of p.urlElicitations) ids.push(id);
    if (ids.length === 0) return;
    const at = monotonicNow();
    for (const id of ids) {
      this.kept.delete(id);
      this.kept.set(id, { notify, at });
    }
    while (this.kept.size > KEPT_COMPLETIONS) this.kept.delete(this.kept.keys().next().value!);
  }

  /** The client to tell that elicitation `id` completed (once: a second notification for it is the server's repeat), if kept. */
  take(id: string): Notify | undefined {
    const k = this.kept.get(id);
    if (k === undefined) return undefined;
    this.kept.delete(id);
    return monotonicNow() - k.at > KEPT_COMPLETION_MS ? undefined : k.notify;
  }
}
