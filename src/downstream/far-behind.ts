import type { Logger } from '../log.js';
import { META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import { changeKey, droppable, MAX_UNREAD_BYTES } from './sse.js';

/**
 * What a pipe writer (`switchyard stdio`'s stdout, `switchyard connect`'s) does with a message
 * while its client is more than MAX_UNREAD_BYTES behind: a flood of progress or log
 * notifications would all be held in memory for a client that does not read, so they are left
 * out, as on an HTTP answer stream (sse.ts); of change notifications (resources/updated,
 * list_changed), which each say only "it changed", the latest of each is held and written once
 * the client has read (an HTTP client's stream is cut instead, and it reconnects; a pipe cannot
 * be). Answers and requests to the client are always written. A listen stream's closing
 * response drops what is held for that stream: written after it, a notification would name a
 * subscription the client has seen end (a stop while the client is far behind did that).
 */
export class FarBehind {
  private dropped = 0;
  /** Change notifications held in this episode (a later one of the same key replaces one: `held` keeps the latest). */
  private heldCount = 0;
  private readonly held = new Map<string, { msg: object; subscription: unknown }>();
  /** Something was left out or held since the last 'drain': the episode was said. */
  private behind = false;

  /** `who` names the writer in the log: `stdout`, `connect`. */
  constructor(private readonly who: string) {}

  /** True when `msg` was left out or held, for a client `unread` bytes behind; false: write it. */
  takes(msg: object, unread: number, log: Logger): boolean {
    const ended = endedSubscription(msg);
    if (ended !== undefined) for (const [key, h] of this.held) if (h.subscription === ended) this.held.delete(key);
    if (unread <= MAX_UNREAD_BYTES) return false;
    if (droppable(msg)) {
      this.began(log, unread);
      this.dropped++;
      return true;
    }
    const key = changeKey(msg);
    if (key === undefined) return false;
    this.began(log, unread);
    this.heldCount++;
    this.held.set(key, { msg, subscription: (msg as { params?: { _meta?: Record<string, unknown> } }).params?._meta?.[META_SUBSCRIPTION_ID] });
    return true;
  }

  /**
   * Said as it begins, not only at 'drain': a client that never reads again never drains, and
   * its operator would not hear of it otherwise.
   */
  private began(log: Logger, unread: number): void {
    if (this.behind) return;
    this.behind = true;
    log.warn({ unread }, `${this.who}: the client is more than ${MAX_UNREAD_BYTES} bytes behind: progress and log notifications are left out, and of change notifications the latest of each is held, until it reads`);
  }

  /** At 'drain': says (once) how many were left out and held, and gives the held messages to write now. */
  drained(log: Logger): object[] {
    if (this.behind) {
      log.warn(
        { dropped: this.dropped, held: this.heldCount, written: this.held.size },
        `${this.who}: progress and log notifications left out while the client was more than ${MAX_UNREAD_BYTES} bytes behind`,
      );
      this.behind = false;
      this.dropped = 0;
      this.heldCount = 0;
    }
    const held = [...this.held.values()].map((h) => h.msg);
    this.held.clear();
    return held;
  }
}

/** The subscription a listen stream's closing response ends (its result's subscriptionId), or undefined for any other message. */
function endedSubscription(msg: object): unknown {
  const m = msg as { id?: unknown; method?: unknown; result?: { _meta?: Record<string, unknown> } };
  if (m.id === undefined || m.method !== undefined || typeof m.result !== 'object' || m.result === null) return undefined;
  return m.result._meta?.[META_SUBSCRIPTION_ID];
}
