import type { Signal } from '../cancel.js';

/**
 * Back-pressure for one upstream: at most `maxActive` requests in flight and at most `maxQueue`
 * waiting, first come first served. Beyond that a request is refused at once, so a stuck server
 * costs its callers a clear "busy" answer instead of unbounded memory and waiting. A waiter
 * leaves the queue when its caller cancels or when it has waited `waitMs`.
 */
export class LimitError extends Error {
  override readonly name = 'LimitError';
  constructor(
    readonly reason: 'full' | 'waited',
    message: string,
  ) {
    super(message);
  }
}

export interface WaitOptions {
  signal?: Signal;
  waitMs?: number;
  onAbort?: () => Error;
}

const RESOLVED = Promise.resolve();

interface Waiter {
  go: () => void;
  fail: (e: Error) => void;
}

export class Limiter {
  private active = 0;
  private readonly waiting = new Set<Waiter>();

  constructor(
    private readonly maxActive: number = Infinity,
    private readonly maxQueue: number = 0,
  ) {}

  get load(): { active: number; queued: number } {
    return { active: this.active, queued: this.waiting.size };
  }

  /**
   * Takes a free slot at once when one is free and nobody waits: the caller then must leave()
   * exactly once when its request ends. The usual call needs no promise of its own this way
   * (rpc-base releases the slot when the call settles).
   */
  tryEnter(): boolean {
    if (this.active >= this.maxActive || this.waiting.size > 0) return false;
    this.active++;
    return true;
  }

  /** Gives back a slot taken by tryEnter() or enter(): the first waiter gets it. */
  leave(): void {
    const next = this.waiting.values().next();
    if (next.done) {
      this.active--;
      return;
    }
    next.value.go();
  }

  /**
   * Resolves holding a slot, after waiting for one if need be; the caller then must leave()
   * exactly once, where its request settles (no async wrapper around the request: with one per
   * waiting call the hub's garbage collector was in its bad mode far more often, see
   * docs/BENCHMARKS.md, the twentieth round). Rejects
   * with LimitError when the queue is full or the wait exceeds `waitMs`, and with `onAbort()`
   * when the caller gives up while waiting.
   */
  enter(o: WaitOptions = {}): Promise<void> {
    if (this.active >= this.maxActive) return this.wait(o);
    this.active++;
    return RESOLVED;
  }

  private wait(o: WaitOptions): Promise<void> {
    if (this.waiting.size >= this.maxQueue) {
      return Promise.reject(new LimitError('full', `${this.active} requests in flight and ${this.waiting.size} waiting`));
    }
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const cleanup = (): void => {
        this.waiting.delete(w);
        if (timer) clearTimeout(timer);
        o.signal?.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        cleanup();
        reject(o.onAbort ? o.onAbort() : new Error('aborted'));
      };
      const w: Waiter = {
        // The slot is handed over by leave(): `active` is not decremented and re-incremented.
        go: () => {
          cleanup();
          resolve();
        },
        fail: (e) => {
          cleanup();
          reject(e);
        },
      };
      this.waiting.add(w);
      if (o.waitMs !== undefined && Number.isFinite(o.waitMs)) {
        timer = setTimeout(() => w.fail(new LimitError('waited', `no free slot within ${o.waitMs} ms (${this.active} requests in flight)`)), o.waitMs);
      }
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
