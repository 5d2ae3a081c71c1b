/**
 * Sending a request again, only when that cannot run a write twice. The rule (issue 6):
 *  - the hub knows the upstream never saw the request (not ready, busy, connection refused,
 *    process not running when it was written), or that it refused it before running it and
 *    asks to be asked again (429, or 503 with a Retry-After: TransportError.refused): always safe;
 *  - the request may have reached the upstream (crash mid-call, 5xx, a dropped stream): only
 *    when it is idempotent — a read by protocol (everything but tools/call) or a tool that
 *    trusted configuration calls idempotent (decided by the router, passed as `idempotent`);
 *  - an answer (JSON-RPC error), a refused credential (401/403), a request refused for its
 *    size (413/414/431), a cancellation or a timeout: never.
 * Attempts are spaced by exponential backoff with jitter (or by a server's Retry-After, if
 * longer), all inside one time budget; while the upstream restarts, the next attempt waits for
 * it (within the budget).
 */
import { CancelledError, HubStoppingError, notSent, refusedUnapplied, RpcError, TimeoutError, TransportError, UpstreamUnavailableError } from '../protocol/errors.js';
import { reasonOf, unlessAborted, type Signal } from '../cancel.js';
import { onFailure } from '../on-failure.js';
import { monotonicNow } from '../monotonic.js';

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  /** Time all attempts of one request may take, waits included (ms). */
  budgetMs: number;
  /** tools/call only: the router found the tool idempotent by trusted configuration. */
  idempotent?: boolean;
}

const BASE_DELAY_MS = 100;
const MAX_DELAY_MS = 2_000;

/** The upstream surely did not see it. */
export function notDelivered(err: unknown): boolean {
  return (
    err instanceof UpstreamUnavailableError ||
    (err instanceof TransportError && err.notDelivered) ||
    ((err instanceof CancelledError || err instanceof TimeoutError || err instanceof HubStoppingError) && err.notSent)
  );
}

/**
 * Whether `method` may be sent again after an attempt that may have run: a read by protocol
 * (everything but tools/call), or a tool the router found idempotent. The transport asks this
 * too, of a request whose kept-alive connection was lost before its answer (http-client.ts).
 */
export function replayable(method: string, policy: { idempotent?: boolean } | undefined): boolean {
  return method !== 'tools/call' || policy?.idempotent === true;
}

/** Statuses that refuse the request as sent: sending it again changes nothing. */
const REFUSED_AS_SENT = new Set([401, 403, 413, 414, 431]);

/** Whether `err` allows another attempt of `method` under `policy`. */
export function mayRetry(err: unknown, method: string, policy: RetryPolicy): boolean {
  if (err instanceof RpcError || err instanceof CancelledError || err instanceof TimeoutError) return false;
  // A refused credential, or a request refused for its own size (413 body, 414 URI, 431
  // headers): the same request is refused the same way again.
  if (err instanceof TransportError && err.status !== undefined && REFUSED_AS_SENT.has(err.status)) return false;
  // An answer past the limit of one message (maxFrameBytes): the same request gets it again.
  if (err instanceof TransportError && err.oversized) return false;
  // Rate-limited (429) or asked to come back later (503 + Retry-After): refused before it ran,
  // so a write too may be sent again, once the wait it asks is over (retryAfter keeps to it).
  if (refusedUnapplied(err)) return true;
  // Busy (maxConcurrent and maxQueue full) is answered at once: the point of a bounded queue.
  // Retried, the refused calls waited out the backoff (150-450 ms by default, seconds with more
  // attempts) as a second queue past maxQueue, and could take a slot freed meanwhile.
  if (notDelivered(err)) return !(err instanceof UpstreamUnavailableError && (err.state === 'stopped' || err.state === 'failed' || err.state === 'busy'));
  if (!(err instanceof TransportError)) return false;
  return replayable(method, policy);
}

/** The wait before attempt `n + 1` (n ≥ 1): 100 ms doubling, ±50 % jitter, at most 2 s. */
export function backoffMs(n: number, random: () => number = Math.random): number {
  const exp = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (n - 1));
  return Math.round(exp * (0.5 + random()));
}

function sleep(ms: number, signal: Signal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new CancelledError(reasonOf(signal)));
    const onAbort = (): void => {
      clearTimeout(t);
      reject(new CancelledError(reasonOf(signal!)));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface RetryHooks {
  signal?: Signal;
  /**
   * The hub's stop: aborted as it begins. A wait between attempts (the backoff, the upstream's
   * restart) ends then with a HubStoppingError (notSent unless an attempt may have run): nothing
   * runs upstream meanwhile, and it held the drain, up to the retry budget, for a server that
   * the stop would close anyway.
   */
  stop?: Signal;
  /** Resolves true once the upstream is ready again (false: it will not be within `ms`). */
  whenReady: (ms: number) => Promise<boolean>;
  onRetry?: (attempt: number, delayMs: number, err: Error) => void;
  /** When the call must be over (its total limit): no attempt starts, nor wait lasts, past it. */
  until?: number;
  /** The clock of `until` (default monotonicNow). */
  now?: () => number;
  random?: () => number;
}

/**
 * Runs `attempt` until it succeeds or may not be repeated. When it gives up after an attempt
 * that may have run, the error it throws says so (never `notDelivered`), so the caller's
 * bookkeeping (idempotency keys) treats the call as possibly executed.
 */
export function withRetries<T>(method: string, policy: RetryPolicy, attempt: () => Promise<T>, h: RetryHooks): Promise<T> {
  const budget = (h.now ?? monotonicNow)() + policy.budgetMs;
  const deadline = h.until === undefined ? budget : Math.min(budget, h.until);
  // Only a failure enters the retry loop.
  return onFailure(attempt, (err) => retryAfter(err as Error, deadline, method, policy, attempt, h));
}

/** The retry loop, from the first attempt's failure `first`. */
async function retryAfter<T>(first: Error, deadline: number, method: string, policy: RetryPolicy, attempt: () => Promise<T>, h: RetryHooks): Promise<T> {
  const now = h.now ?? monotonicNow;
  let mayHaveRun = false;
  let err = first;
  for (let n = 1; ; n++) {
    if (n > 1) {
      try {
        return await attempt();
      } catch (e) {
        err = e as Error;
      }
    }
    if (!notDelivered(err) && !refusedUnapplied(err) && !(err instanceof RpcError)) mayHaveRun = true;
    const giveUp = (): Error =>
      mayHaveRun && (notDelivered(err) || refusedUnapplied(err)) ? new TransportError(`${err.message} (an earlier attempt may have run)`) : err;
    if (n >= policy.maxAttempts || !mayRetry(err, method, policy) || h.signal?.aborted) throw giveUp();
    // Never sooner than the server asked (Retry-After): a wait past the budget is no retry at all.
    const delay = Math.max(backoffMs(n, h.random), err instanceof TransportError ? (err.retryAfterMs ?? 0) : 0);
    if (now() + delay >= deadline) throw giveUp();
    h.onRetry?.(n, delay, err);
    // Cancelled between attempts: nothing was sent unless an earlier attempt may have run.
    const cancelled = (e: CancelledError): CancelledError => (mayHaveRun ? e : notSent(e));
    // Ended by the hub's stop between attempts: told so, and that an attempt may have run.
    const stopped = (): HubStoppingError => new HubStoppingError(!mayHaveRun);
    if (h.stop?.aborted) throw stopped();
    await unlessAborted(() => sleep(delay, h.signal), h.stop, () => undefined).catch((e: unknown) => {
      throw e instanceof CancelledError ? cancelled(e) : e;
    });
    if (h.stop?.aborted) throw stopped();
    // A caller that went away while the upstream reconnects is not held for it (up to the retry
    // budget, with its client's session slot) only to be told then that it was cancelled.
    const ready = await unlessAborted(() => unlessAborted(() => h.whenReady(deadline - now()), h.signal, () => false), h.stop, () => false);
    if (h.signal?.aborted) throw cancelled(new CancelledError(reasonOf(h.signal)));
    if (h.stop?.aborted) throw stopped();
    if (!ready) throw giveUp();
  }
}
