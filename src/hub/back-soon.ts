/**
 * A modern client's retry of an `input_required` (it carries the requestState of a round) to a
 * server that is restarting: after a crash a stdio server is back within a second or so (the
 * first backoff is 250 ms), and the user has answered the round's questions already. Refused at
 * once, as a first call is ("unavailable": RELIABILITY.md), the answer is lost unless the client
 * retries again by itself, which clients do not do for a tool error: the model calls the tool
 * anew and the user is asked again. So such a retry waits a little for the server to be ready
 * again (RETRY_WAIT_MS at most, and no longer than the call's own timeout: readyWithin), then is routed as
 * any call, refused if the server is still down. Only a modern upstream's round: its state is in
 * the requestState, which the restarted process takes; a legacy upstream's parked call ended
 * with the process. A first call is still refused at once (it has nothing to lose), and a server
 * `failed` (a crash loop) or `stopped` is not waited for. The same for every request that has
 * rounds (ROUND_METHODS): a `resources/read` or `prompts/get` that asked its user carries an
 * answer as a tool call's retry does, and was refused at once while a tool call's waited.
 */
import type { Upstream } from '../upstream/types.js';
import { MODERN } from '../protocol/era.js';

/** The requests that go in `input_required` rounds (completion/complete has none): their retries wait. */
export const ROUND_METHODS: ReadonlySet<string> = new Set(['tools/call', 'resources/read', 'prompts/get']);

/** The longest a retry waits for its server to be back. */
export const RETRY_WAIT_MS = 5_000;

/**
 * Down for now, and on its way back: a crash's restart under way (not its first start, which
 * first-start.ts waits for: starting with no attempt failed yet). Any connection: the server's
 * own, or a principal's own (processPerPrincipal, own credentials), which restarts by itself.
 */
export function backSoon(u: Upstream): boolean {
  const s = u.state;
  return u.era === MODERN && (s === 'restarting' || (s === 'starting' && u.lastError !== undefined));
}
