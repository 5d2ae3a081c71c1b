/**
 * Long calls answered as plain JSON are quiet until their answer: a proxy or load balancer
 * between the client and the hub cuts a response quiet for long (nginx and AWS ALB after 60 s by
 * default), and with it the answer of a call that went on running. A call still unanswered
 * after QUIET_TICK_MS to 2 × QUIET_TICK_MS is turned into an SSE stream (allowed in both eras:
 * digest §6.2, §6.3), which sends keep-alive comments and, in a legacy session, is resumable.
 *
 * One timer for all calls, not one per call: calls pass through two generations, and a tick
 * streams what is still in the older one. Watching a call costs a Set insert and delete.
 */

/** A generation's length: a call still quiet after one to two of these streams. */
export const QUIET_TICK_MS = 5_000;

/** An answer that can become a stream before its end (PostChannel). */
export interface QuietAnswer {
  /** Start streaming now if nothing was sent yet and its client is still there. */
  beginStream(): void;
}

export class QuietAnswers {
  private young = new Set<QuietAnswer>();
  private old = new Set<QuietAnswer>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly tickMs = QUIET_TICK_MS) {}

  watch(a: QuietAnswer): void {
    this.young.add(a);
    this.timer ??= setInterval(() => this.tick(), this.tickMs).unref();
  }

  /** Answered (or streaming already): no longer watched. */
  unwatch(a: QuietAnswer): void {
    if (!this.young.delete(a)) this.old.delete(a);
  }

  /** Calls watched now (for tests and the status page). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  private tick(): void {
    const due = this.old;
    this.old = this.young;
    this.young = new Set();
    for (const a of due) a.beginStream();
    if (this.old.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
