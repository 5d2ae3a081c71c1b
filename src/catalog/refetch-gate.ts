import { monotonicNow } from '../monotonic.js';

/** The least time between two refetches of one list that its server said changed. */
export const REFETCH_INTERVAL_MS = 1_000;

interface Slot {
  /** The latest job asked for and not started: it stands for every one asked before it. */
  pending?: () => Promise<unknown>;
  running: boolean;
  /** Waiting for the interval since the last start to pass. */
  timer?: NodeJS.Timeout;
  startedAt: number;
}

/**
 * Rate-limits the work a server's list_changed sets off (invalidate the list, fetch it again),
 * per key (server, list kinds, partition): the first at once; then at most one running and one
 * waiting, started no sooner than `intervalMs` after the one before. An upstream sending
 * list_changed every millisecond costs a fetch a second, not a thousand, and the last change
 * is always acted on after it came. (ChangeCoalescer does the same for what clients are told.)
 */
export class RefetchGate {
  private readonly slots = new Map<string, Slot>();

  constructor(
    private readonly intervalMs = REFETCH_INTERVAL_MS,
    private readonly now: () => number = monotonicNow,
  ) {}

  run(key: string, job: () => Promise<unknown>): void {
    let s = this.slots.get(key);
    if (!s) this.slots.set(key, (s = { running: false, startedAt: -Infinity }));
    s.pending = job;
    this.pump(key, s);
  }

  private pump(key: string, s: Slot): void {
    if (s.running || s.timer) return;
    if (!s.pending) {
      this.slots.delete(key); // idle, and the interval is over
      return;
    }
    const wait = s.startedAt + this.intervalMs - this.now();
    if (wait > 0) return this.waitFor(key, s, wait);
    const job = s.pending;
    s.pending = undefined;
    s.running = true;
    s.startedAt = this.now();
    const done = (): void => {
      s.running = false;
      // Kept until its interval is over, so that the next change waits for it.
      this.waitFor(key, s, Math.max(0, s.startedAt + this.intervalMs - this.now()));
    };
    let p: Promise<unknown>;
    try {
      p = job();
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(done, done);
  }

  private waitFor(key: string, s: Slot, ms: number): void {
    s.timer = setTimeout(() => {
      s.timer = undefined;
      this.pump(key, s);
    }, ms);
    s.timer.unref();
  }

  /** Stops: what waits is not run. */
  close(): void {
    for (const s of this.slots.values()) clearTimeout(s.timer);
    this.slots.clear();
  }
}
