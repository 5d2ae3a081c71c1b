/**
 * The circuit breaker of an HTTP upstream, reduced to what only it knows: which outcomes say the
 * server is unwell, and when enough of them in a row open the circuit. Opening and probing use
 * the connection lifecycle (Lifecycle.trip): an open circuit is a `restarting` (later `failed`)
 * upstream whose reconnect handshake is the half-open probe.
 */
import { CancelledError, RpcError, TimeoutError, TransportError } from '../protocol/errors.js';
import { OAuthError } from './oauth-client.js';

export type CircuitState = 'closed' | 'open' | 'half-open';

export type Evidence = 'healthy' | 'unwell' | 'none';

/** Statuses that answer for the request, not the server's health. */
const NOT_EVIDENCE = new Set([401, 403, 413, 414, 429, 431]);

/**
 * What one finished call says about the server. An answer, even a JSON-RPC error, is health;
 * a refused credential, a rate limit, a token that could not be had or a cancellation by our own
 * caller says nothing about it.
 */
export function evidenceOf(err: Error | undefined): Evidence {
  if (err === undefined || err instanceof RpcError) return 'healthy';
  if (err instanceof CancelledError) return 'none';
  // No token to be had (the authorization server refused the client, or is away) says nothing of the server itself.
  if (err instanceof OAuthError) return 'none';
  // A 429 is a server well enough to count the hub's requests: opening the circuit would end its
  // session and make every one of its tools unavailable, for a limit a caller's burst reached.
  // So is a request refused for its own size (413 body, 414 URI, 431 headers: a 2026-07-28
  // request repeats a long resource URI in Mcp-Name): one caller's oversized requests opened
  // the circuit for every caller.
  // An answer past the hub's limit of one message is an answer, too large for the hub: about
  // that request (a large file read), not the server, which answered.
  if (err instanceof TransportError) return err.oversized || (err.status !== undefined && NOT_EVIDENCE.has(err.status)) ? 'none' : 'unwell';
  // A deadline the caller chose shorter than the server's own is no sign the server is unwell:
  // otherwise one client with a tiny limit could open the circuit for everyone.
  if (err instanceof TimeoutError) return err.callers ? 'none' : 'unwell';
  return 'none';
}

/** Counts consecutive unwell outcomes; `record` is true the moment the threshold is reached. */
export class FailureStreak {
  private streak = 0;
  private last: string | undefined;
  private timeoutsOnly = true;

  constructor(readonly threshold: number) {}

  get count(): number {
    return this.streak;
  }

  /**
   * Every failure of the current streak was a call that got no answer within the server's own
   * limit: a circuit it opens is a server that takes calls without answering them (hung), not one
   * that failed them.
   */
  get onlyTimeouts(): boolean {
    return this.streak > 0 && this.timeoutsOnly;
  }

  /** The message of the last failure of the current streak. */
  get lastFailure(): string | undefined {
    return this.last;
  }

  /** `timedOut`: the failure is a call left unanswered within the server's own limit (onlyTimeouts). */
  record(e: Evidence, message?: string, timedOut = false): boolean {
    if (e === 'none') return false;
    if (e === 'healthy') {
      this.reset();
      return false;
    }
    this.last = message;
    if (this.streak === 0) this.timeoutsOnly = true;
    if (!timedOut) this.timeoutsOnly = false;
    return ++this.streak === this.threshold;
  }

  reset(): void {
    this.streak = 0;
    this.timeoutsOnly = true;
  }
}
