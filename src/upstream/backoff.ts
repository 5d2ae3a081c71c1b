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

  /** The upstream came up: leave `failed`; recent failures still count toward the limit. */
  onReady(): void {
    this.failed = false;
  }
}
