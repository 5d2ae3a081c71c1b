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

  leave(): void {
    if (--this.n > 0) return;
    for (const w of [...this.waiters]) w();
  }

  /** Resolves true once nothing is in flight, false if `ms` passed first. */
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
