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
  /**
   * The hub's own request (a subscription renewed, a task cancelled): it waits whatever the
   * queue holds (its wait bounded by `waitMs` alone), and takes no place of maxQueue's, which
   * bounds the calls waiting for clients. The slot it gets is the hub's own (see ownActive): it
   * gives it back with leave(true).
   */
  own?: boolean;
}

const RESOLVED = Promise.resolve();

interface Waiter {
  go: () => void;
  fail: (e: Error) => void;
  /** Served, timed out or cancelled: leave() skips it. */
  gone: boolean;
}

/** Entries the queue no longer needs (served, or left early) are cut off once there are this many. */
const COMPACT_AT = 1024;

export class Limiter {
  private active = 0;
  /**
   * Waiters in order, from `head` on; one that left early stays until leave() passes it or
   * tidy() cuts it off. An array, not a Set: a Set churned at every call keeps calls alive in
   * V8's old generation (see src/keyed-table.ts).
   */
  private queue: (Waiter | undefined)[] = [];
  private head = 0;
  private waiting = 0;
  /** Of those, the hub's own (WaitOptions.own): not counted against maxQueue. */
  private ownWaiting = 0;
  /**
   * Slots held by the hub's own requests, on whichever connection shares this limiter (each
   * principal's own connection to a server shares the server's: src/auth/upstream-pool.ts). A
   * client's call may wait for each of them past maxQueue: with maxConcurrent 1 and maxQueue 0 it
   * was refused "busy" while the hub renewed a subscription. Counted here, not by each connection
   * of its own requests: a call on B's connection was refused while the hub's request on A's held
   * the one slot.
   */
  private ownActive = 0;

  constructor(
    private readonly maxActive: number = Infinity,
    private readonly maxQueue: number = 0,
  ) {}

  get load(): { active: number; queued: number } {
    return { active: this.active, queued: this.waiting };
  }

  /**
   * Takes a free slot at once when one is free and nobody waits: the caller then must leave()
   * exactly once when its request ends. The usual call needs no promise of its own this way
   * (rpc-base releases the slot when the call settles).
   */
  tryEnter(own = false): boolean {
    if (this.active >= this.maxActive || this.waiting > 0) return false;
    this.active++;
    if (own) this.ownActive++;
    return true;
  }

  /** Gives back a slot taken by tryEnter() or enter() (`own` as they were told): the first waiter gets it. */
  leave(own = false): void {
    if (own) this.ownActive--;
    const next = this.waiting > 0 ? this.next() : undefined;
    if (next) next.go();
    else this.active--;
  }

  /** The first waiter still waiting, taken off the queue (its slot emptied: nothing keeps it). */
  private next(): Waiter | undefined {
    const q = this.queue;
    while (this.head < q.length) {
      const w = q[this.head]!;
      q[this.head++] = undefined;
      if (!w.gone) return w;
    }
    return undefined;
  }

  /** After a waiter left: the queue's used head, and waiters that left early, are cut off in bulk. */
  private tidy(): void {
    if (this.waiting === 0) {
      if (this.queue.length > 0) this.queue = [];
      this.head = 0;
      return;
    }
    const inQueue = this.queue.length - this.head;
    if (inQueue - this.waiting >= COMPACT_AT && inQueue >= 2 * this.waiting) {
      this.queue = this.queue.slice(this.head).filter((w) => !w!.gone);
      this.head = 0;
    } else if (this.head >= COMPACT_AT && this.head * 2 >= this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Resolves holding a slot, after waiting for one if need be; the caller then must leave()
   * exactly once, where its request settles, so no async wrapper is built around each waiting
   * request (docs/BENCHMARKS.md, the twentieth and twenty-first rounds). Rejects with LimitError
   * when the queue is full or the wait exceeds `waitMs`, and with `onAbort()` when the caller
   * gives up while waiting.
   */
  enter(o: WaitOptions = {}): Promise<void> {
    if (this.active >= this.maxActive) return this.wait(o);
    this.active++;
    if (o.own === true) this.ownActive++;
    return RESOLVED;
  }

  private wait(o: WaitOptions): Promise<void> {
    const own = o.own === true;
    // Past maxQueue, a place for each slot the hub's own requests hold: the client's call may wait for those.
    if (!own && this.waiting - this.ownWaiting >= this.maxQueue + this.ownActive) {
      return Promise.reject(new LimitError('full', `${this.active} requests in flight and ${this.waiting} waiting`));
    }
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const cleanup = (): void => {
        if (w.gone) return;
        w.gone = true;
        this.waiting--;
        if (own) this.ownWaiting--;
        this.tidy();
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
          if (own) this.ownActive++;
          resolve();
        },
        fail: (e) => {
          cleanup();
          reject(e);
        },
        gone: false,
      };
      this.queue.push(w);
      this.waiting++;
      if (own) this.ownWaiting++;
      if (o.waitMs !== undefined && Number.isFinite(o.waitMs)) {
        timer = setTimeout(() => w.fail(new LimitError('waited', `no free slot within ${o.waitMs} ms (${this.active} requests in flight)`)), o.waitMs);
      }
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
