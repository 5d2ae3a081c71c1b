/**
 * When an upstream's next health check runs (a `url` server idle, a stdio process silent: see
 * each transport's checkHealth). One check pending at a time; unref'd, so it keeps no process
 * alive; armed when the server becomes ready and again after each check; dropped at close, and
 * armed again from now when a reload changes the interval.
 */
export class HealthTimer {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly check: () => void) {}

  /** The check in `inMs` (`ms`, the interval, by default); none when `ms` is 0 (checks off) or one is pending. */
  arm(ms: number, inMs = ms): void {
    if (ms <= 0 || this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.check();
    }, inMs);
    this.timer.unref();
  }

  drop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
