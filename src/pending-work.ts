/**
 * Work a close waits for before it drops its connections (an HTTP upstream's legacy handshake,
 * session DELETE and cancellations' POSTs; the connect bridge's forwarded messages): dropped
 * first, each would fail, leaving a session open on the server or a call running there unasked.
 * Each is kept until it settles, whichever way. (Not the hub's count of requests in flight,
 * router/inflight.ts, which a stop waits on with a deadline of its own.)
 */
export class PendingWork {
  private readonly under = new Set<Promise<void>>();

  get size(): number {
    return this.under.size;
  }

  /** Keeps `work` until it settles; what is returned settles with it and never rejects. */
  add(work: Promise<unknown>): Promise<void> {
    const done = work.then(
      () => undefined,
      () => undefined,
    );
    this.under.add(done);
    void done.then(() => this.under.delete(done));
    return done;
  }

  /** Settles once nothing is under way, what is added meanwhile included. */
  async drained(): Promise<void> {
    while (this.under.size > 0) await Promise.all(this.under);
  }

  /**
   * Settles once what is under way now is over, or `ms` has passed: a server that holds a
   * request open must not hold the close for good.
   */
  async within(ms: number): Promise<void> {
    if (this.under.size === 0) return;
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.under), new Promise<void>((r) => (t = setTimeout(r, ms)))]);
    clearTimeout(t);
  }
}
