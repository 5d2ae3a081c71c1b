/**
 * A reader-writer gate for a legacy stdio upstream. Such a server's requests to the client
 * (elicitation, sampling, roots) carry nothing that says which call caused them, so a call
 * whose client could be asked runs alone ("exclusive"), while calls that cannot be asked share
 * the upstream. Waiters are served in arrival order, so neither kind starves.
 */
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

  /** Waits for its turn, runs `fn`, and leaves when `fn`'s promise settles. */
  async run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    if (!this.tryEnter(exclusive)) await new Promise<void>((go) => this.queue.push({ exclusive, go }));
    try {
      return await fn();
    } finally {
      this.leave(exclusive);
    }
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
    while (this.queue.length > 0 && this.canEnter(this.queue[0].exclusive)) {
      const w = this.queue.shift()!;
      this.take(w.exclusive);
      w.go();
    }
  }
}
