/**
 * A reader-writer gate for a legacy stdio upstream. Such a server's requests to the client
 * (elicitation, sampling, roots) carry nothing that says which call caused them, so a call
 * whose client could be asked runs alone ("exclusive"), while calls that cannot be asked share
 * the upstream. Waiters are served in arrival order, so neither kind starves.
 */
import type { Signal } from '../cancel.js';

/** How long a waiter may wait, and what it is refused with when it stops waiting. */
export interface GateWait {
  signal?: Signal;
  /** Most time in the queue (the caller's remaining time). */
  ms?: number;
  onAbort(): Error;
  onTimeout(ms: number): Error;
}

export class CallGate {
  private shared = 0;
  private exclusive = false;
  private readonly queue: { exclusive: boolean; go: () => void }[] = [];

  /**
   * Enters at once when nobody waits and the gate lets this kind in; the caller must then
   * leave() exactly once when its call ends (rpc-base does it when the call settles).
   */
  tryEnter(exclusive: boolean): boolean {
    if (this.queue.length > 0 || !this.canEnter(exclusive)) return false;
    this.take(exclusive);
    return true;
  }

  /**
   * Waits for its turn, runs `fn`, and leaves when `fn`'s promise settles. A caller that
   * cancels, or whose time is up, leaves the queue without running (a call that waits here is
   * still the caller's: its deadline and its cancellation hold).
   */
  async run<T>(exclusive: boolean, fn: () => Promise<T>, wait?: GateWait): Promise<T> {
    if (!this.tryEnter(exclusive)) await this.wait(exclusive, wait);
    try {
      return await fn();
    } finally {
      this.leave(exclusive);
    }
  }

  private wait(exclusive: boolean, w: GateWait | undefined): Promise<void> {
    if (w?.signal?.aborted) return Promise.reject(w.onAbort());
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (): void => {
        if (timer) clearTimeout(timer);
        w?.signal?.removeEventListener('abort', onAbort);
      };
      const waiter = {
        exclusive,
        go: () => {
          done();
          resolve();
        },
      };
      const drop = (err: Error): void => {
        const i = this.queue.indexOf(waiter);
        if (i < 0) return; // let in meanwhile: it runs
        this.queue.splice(i, 1);
        done();
        reject(err);
        this.admit(); // those behind it may go now
      };
      const onAbort = (): void => drop(w!.onAbort());
      w?.signal?.addEventListener('abort', onAbort);
      if (w?.ms !== undefined) timer = setTimeout(() => drop(w.onTimeout(w.ms!)), Math.max(0, w.ms));
      this.queue.push(waiter);
    });
  }

  private canEnter(exclusive: boolean): boolean {
    return exclusive ? !this.exclusive && this.shared === 0 : !this.exclusive;
  }

  private take(exclusive: boolean): void {
    if (exclusive) this.exclusive = true;
    else this.shared++;
  }

  leave(exclusive: boolean): void {
    if (exclusive) this.exclusive = false;
    else this.shared--;
    this.admit();
  }

  private admit(): void {
    while (this.queue.length > 0 && this.canEnter(this.queue[0].exclusive)) {
      const w = this.queue.shift()!;
      this.take(w.exclusive);
      w.go();
    }
  }
}
