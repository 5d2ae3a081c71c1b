import { monotonicNow } from './monotonic.js';

/**
 * At most `max` log lines of one kind per window; the others are counted, and the next line
 * written says how many were left out (or leftOut() does, at the end). For warnings a peer sets
 * off at will, one per message it sends (a client's malformed response, a server's stdout junk):
 * 10,000 of them in two seconds were 10,000 lines.
 */
export class LogBudget {
  private windowStart = -Infinity;
  private used = 0;
  private skipped = 0;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly now: () => number = monotonicNow,
  ) {}

  /** Undefined: leave this line out. Otherwise write it, with `skipped` (left out since the last one written) if not 0. */
  take(): { skipped: number } | undefined {
    const t = this.now();
    if (t - this.windowStart >= this.windowMs) {
      this.windowStart = t;
      this.used = 0;
    }
    if (this.used >= this.max) {
      this.skipped++;
      return undefined;
    }
    this.used++;
    const skipped = this.skipped;
    this.skipped = 0;
    return { skipped };
  }

  /** How many were left out since the last line written, counted from now on afresh: for a last word. */
  leftOut(): number {
    const n = this.skipped;
    this.skipped = 0;
    return n;
  }
}
