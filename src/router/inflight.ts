/**
 * Requests the hub is working on, so that a stopping hub can let them finish (up to a
 * deadline) before it closes the upstreams under them.
 */
export class InFlight {
  private n = 0;
  private waiters = new Set<() => void>();

  get count(): number {
    return this.n;
  }

  /** A request begins; leave() once it has ended, whichever way. */
  enter(): void {
    this.n++;
  }

  /**
   * The last request leaving wakes the waiters only after the work its end queued (the answer's
   * write: the routing leaves in a finally, before its caller resumes) has run: a stop woken at
   * once closed the listeners, destroying the connection, a few jobs before that answer was written.
   */
  leave(): void {
    if (--this.n > 0 || this.waiters.size === 0) return;
    setImmediate(() => {
      if (this.n === 0) for (const w of [...this.waiters]) w();
    });
  }

  /** Resolves true once nothing is in flight (and what the last one's end queued has run), false if `ms` passed first. */
  idle(ms: number): Promise<boolean> {
    if (this.n === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const finish = (ok: boolean): void => {
        clearTimeout(t);
        this.waiters.delete(w);
        resolve(ok);
      };
      const w = (): void => finish(true);
      const t = setTimeout(() => finish(false), ms);
      this.waiters.add(w);
    });
  }
}
