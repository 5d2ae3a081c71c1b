/** A list change is said at once, then at most once more per window, however many came. */
export const LIST_CHANGE_WINDOW_MS = 250;

/**
 * Coalesces a burst of list changes into what clients need to hear: the first change of a key
 * (kind, principal, server) at once; any further ones in the next window as one more, at its
 * end, and so on. An upstream sending 2,000 tools/list_changed in a second costs each client a
 * handful of notifications, not 2,000 writes, and the last change is always said after it came.
 */
export class ChangeCoalescer<A extends unknown[]> {
  private readonly windows = new Map<string, { again?: A; timer: NodeJS.Timeout }>();

  constructor(
    private readonly say: (...args: A) => void,
    private readonly windowMs = LIST_CHANGE_WINDOW_MS,
    /** How the changes of one window combine (default: the latest stands for all). */
    private readonly merge: (earlier: A, later: A) => A = (_earlier, later) => later,
  ) {}

  change(key: string, ...args: A): void {
    const w = this.windows.get(key);
    if (w) {
      w.again = w.again ? this.merge(w.again, args) : args;
      return;
    }
    this.say(...args);
    this.open(key);
  }

  private open(key: string): void {
    const timer = setTimeout(() => {
      const w = this.windows.get(key);
      this.windows.delete(key);
      if (w?.again) {
        this.say(...w.again);
        this.open(key);
      }
    }, this.windowMs);
    timer.unref();
    this.windows.set(key, { timer });
  }

  /** Stops: what waits for a window's end is not said. */
  close(): void {
    for (const w of this.windows.values()) clearTimeout(w.timer);
    this.windows.clear();
  }
}
