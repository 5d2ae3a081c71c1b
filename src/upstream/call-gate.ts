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

  async run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    // The usual case enters at once, without awaiting a settled promise.
    if (this.queue.length === 0 && this.canEnter(exclusive)) this.take(exclusive);
    else await new Promise<void>((go) => this.queue.push({ exclusive, go }));
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

  private leave(exclusive: boolean): void {
    if (exclusive) this.exclusive = false;
    else this.shared--;
    while (this.queue.length > 0 && this.canEnter(this.queue[0].exclusive)) {
      const w = this.queue.shift()!;
      this.take(w.exclusive);
      w.go();
    }
  }
}
