/**
 * Which calls in flight a server's `notifications/message` is told to: the attribution of a
 * log line that names no call, kept apart from the connection so that who may hear another's
 * line reads in one place. A pure function of the calls in flight and what the connection has
 * carried (UpstreamBase.servedFor).
 */
import type { IdTable } from '../keyed-table.js';
import { hubsOwn, type Pending } from './pending-call.js';

const NO_CALLS: Pending[] = [];

/**
 * Which calls a `notifications/message` goes to: the one whose answer stream carried it (`via`);
 * else the calls in flight (`calls`) that could be its own (on a `modern` connection those that
 * asked for logs; on a legacy one, where logging is session-wide, every caller's call). A line
 * about another user's call (sent after its answer, or from work it started) must not reach
 * whoever happens to call next, so with other principals' calls once carried on the connection
 * (`servedFor` null) a line goes to a lone call only (modern), or to none (legacy). While it has
 * carried one principal's calls alone, the line is that principal's whichever call it is about:
 * it goes to each of those in flight, once per legacy session (logScope), as a legacy server's
 * session-wide line goes to its one client; dropped, a server's lines vanished whenever its
 * calls overlapped.
 */
export function logTargets(calls: IdTable<Pending>, via: Pending | undefined, modern: boolean, servedFor: string | null | undefined): Pending[] {
  if (via !== undefined) return calls.get(via.id) === via && via.opts?.onLog ? [via] : NO_CALLS;
  if (!modern && servedFor === null) return NO_CALLS;
  let found: Pending[] | undefined;
  let lone: Pending | undefined;
  for (const p of calls.values()) {
    // The hub's own requests (a health check's ping, a list) are no calls a line could be about:
    // a server busy with a call answers a ping sent meanwhile after it, so one waits at its end.
    if (modern ? p.opts?.logLevel === undefined : p.internal || p.listen || hubsOwn(p)) continue;
    if (lone === undefined) {
      lone = p;
      continue;
    }
    if (typeof servedFor !== 'string') return NO_CALLS;
    found ??= [lone];
    found.push(p);
  }
  if (found === undefined) return lone?.opts?.onLog ? [lone] : NO_CALLS;
  const scopes = new Set<string>();
  return found.filter((p) => {
    if (!p.opts?.onLog) return false;
    const scope = p.opts.logScope;
    if (scope === undefined) return true;
    if (scopes.has(scope)) return false;
    scopes.add(scope);
    return true;
  });
}

/**
 * Whether a log line that came on `via`'s answer stream after its answer still goes to its
 * caller: only to a legacy session's (logScope set), whose lines are session-wide in its era.
 */
export function lateLogTarget(via: Pending): boolean {
  return via.opts?.onLog !== undefined && via.opts.logScope !== undefined;
}
