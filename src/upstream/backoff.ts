/**
 * When to try an upstream again after it crashed or could not start: exponential backoff with
 * jitter, and a crash-loop limit after which the upstream is `failed` and retried slowly.
 * Time is passed in, so the policy is tested without a clock.
 */
export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
  /** This many failures within windowMs puts the upstream in `failed`. */
  crashLimit: number;
  windowMs: number;
  /** Retry interval while `failed`. */
  failedRetryMs: number;
  /** Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]. */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = {
  baseMs: 250,
  maxMs: 30_000,
  crashLimit: 5,
  windowMs: 60_000,
  failedRetryMs: 60_000,
  jitter: 0.2,
};

export class RestartPolicy {
  private readonly opts: BackoffOptions;
  private failures: number[] = [];
  private failed = false;
  /** Times in a row the server was taken down as hung (onHung), none served well since (onServedWell). */
  private hung = 0;

  constructor(opts: Partial<BackoffOptions> = {}, private readonly random: () => number = Math.random) {
    this.opts = { ...DEFAULT_BACKOFF, ...opts };
  }

  /** Record a failure at `now`: how long to wait, and whether the crash-loop limit is reached. */
  onFailure(now: number): { delayMs: number; failed: boolean } {
    const o = this.opts;
    this.failures = this.failures.filter((t) => now - t < o.windowMs);
    this.failures.push(now);
    if (this.failed || this.failures.length >= o.crashLimit) {
      this.failed = true;
      return { delayMs: o.failedRetryMs, failed: true };
    }
    const exp = Math.min(o.maxMs, o.baseMs * 2 ** (this.failures.length - 1));
    const scale = 1 - o.jitter + 2 * o.jitter * this.random();
    return { delayMs: Math.max(0, Math.round(exp * scale)), failed: false };
  }

  /**
   * A start that failed for the hub's own want, not the server's: nothing is counted. Tried
   * again after `retryMs` (jittered), or at the slow interval of a server already `failed`.
   */
  onHubShort(retryMs: number): { delayMs: number; failed: boolean } {
    if (this.failed) return { delayMs: this.opts.failedRetryMs, failed: true };
    const scale = 1 - this.opts.jitter + 2 * this.opts.jitter * this.random();
    return { delayMs: Math.round(retryMs * scale), failed: false };
  }

  /**
   * A server taken down for being hung (alive, but its calls or the hub's checks left
   * unanswered), not for crashing: not counted toward the crash-loop limit, which is for a
   * process that cannot start or keeps dying (a hung one with a short timeoutMs reached it within
   * a minute, and `failed` had it retried once a minute, as one that cannot start). Its own
   * backoff instead: baseMs, doubling at each hang in a row, at most maxMs, so a server that
   * hangs again after every restart is not restarted in a tight loop, and one that stays hung
   * is tried about every maxMs (plus its timeout) for as long as it does. onServedWell starts it over.
   */
  onHung(): { delayMs: number; failed: boolean } {
    const o = this.opts;
    const exp = Math.min(o.maxMs, o.baseMs * 2 ** this.hung++);
    const scale = 1 - o.jitter + 2 * o.jitter * this.random();
    return { delayMs: Math.max(0, Math.round(exp * scale)), failed: false };
  }

  /** The server answered its calls again (its probation ended): its next hang waits baseMs again. */
  onServedWell(): void {
    this.hung = 0;
  }

  /** The upstream came up: leave `failed`; recent failures still count toward the limit. */
  onReady(): void {
    this.failed = false;
  }
}
