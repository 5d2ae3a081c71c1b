/**
 * Long calls answered as plain JSON are quiet until their answer: a proxy or load balancer
 * between the client and the hub cuts a response quiet for long (nginx and AWS ALB after 60 s by
 * default), and with it the answer of a call that went on running. A call still unanswered
 * after QUIET_TICK_MS to 2 × QUIET_TICK_MS is turned into an SSE stream (allowed in both eras:
 * digest §6.2, §6.3), which sends keep-alive comments and, in a legacy session, is resumable.
 *
 * One timer for all calls, not one per call: calls pass through two generations, and a tick
 * streams what is still in the older one. Watching a call costs an insert and a delete in an
 * IdTable (src/keyed-table.ts), by a number handed out at watch().
 *
 * Not a Set: a Set lives for a whole generation (5 s), long enough for V8 to promote its table
 * to the old generation, and from then on each rehash (one every ~16 calls at concurrency 16)
 * allocates the next table there too, while the table it replaces, dead but not collected
 * before the next full GC, still holds the answers it held. Through that dead table every
 * scavenge found those calls alive, so whole calls were promoted (~175 KB per scavenge at
 * concurrency 16, a promotion rate of 53 % against 3 %) until the tick replaced the Set: the
 * "bad mode" of test/integration/gc-promotion.test.ts in the hub's first seconds.
 */
import { IdTable } from '../keyed-table.js';

/** A generation's length: a call still quiet after one to two of these streams. */
export const QUIET_TICK_MS = 5_000;

/** An answer that can become a stream before its end (PostChannel). */
export interface QuietAnswer {
  /** Start streaming now if nothing was sent yet and its client is still there. */
  beginStream(): void;
}

export class QuietAnswers {
  private young = new IdTable<QuietAnswer>();
  private old = new IdTable<QuietAnswer>();
  private nextId = 1;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly tickMs = QUIET_TICK_MS) {}

  /** Watched from now on; the number is what unwatch() takes. */
  watch(a: QuietAnswer): number {
    const id = this.nextId++;
    this.young.set(id, a);
    this.timer ??= setInterval(() => this.tick(), this.tickMs).unref();
    return id;
  }

  /** Answered (or streaming already): no longer watched. Again, or an id never given: nothing. */
  unwatch(id: number): void {
    if (!this.young.delete(id)) this.old.delete(id);
  }

  /** Calls watched now (for tests and the status page). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  private tick(): void {
    const due = this.old;
    this.old = this.young;
    this.young = new IdTable();
    for (const a of due.values()) a.beginStream();
    if (this.old.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
