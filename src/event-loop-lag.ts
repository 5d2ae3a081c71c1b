/**
 * Event-loop lag for /metrics, under the names and types prom-client's default collector uses
 * (`nodejs_eventloop_lag{,_min,_max,_mean,_stddev,_p50,_p90,_p99}_seconds`, gauges), at a tenth
 * of its cost at rest. prom-client samples with monitorEventLoopDelay every 10 ms: 100 wake-ups a
 * second, most of what an idle hub spends, and what it records is the time between two ticks,
 * interval included (an idle hub read 0.01 s). Here a sample is how late a timer fired past its
 * due time: an idle hub reads about 0, a stalled loop its stall.
 *
 * The timer ticks every QUIET_MS while the loop is quiet, and every BUSY_MS while it has work
 * (it is awake then anyway). Lateness alone understates a stall by up to the tick (it began
 * somewhere between two ticks): after a quiet tick, the stall that makes the next one late is
 * read instead as the time the loop was busy since (eventLoopUtilization: busy is all but the
 * time spent waiting for events), which, the loop having been quiet, is that stall and the work
 * that led to it. While the loop is busy, busy time is many callbacks: lateness is kept.
 *
 * Nobody reads the samples but a scrape, so the timer runs only while something scrapes: the
 * first scrape starts it and it stops SCRAPED_MS after the last one. A hub nobody scrapes (a
 * developer's laptop) is not woken by it at all; the first scrape of a run shows no lag yet.
 */
import { createHistogram, performance, type EventLoopUtilization, type RecordableHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** The tick while the loop is quiet: 10 wake-ups a second at rest. */
export const QUIET_MS = 100;
/** The tick while the loop has work (as prom-client's): a stall then reads within this of its length. */
export const BUSY_MS = 10;
/** How long the timer keeps sampling after a scrape: well past any scrape interval Prometheus is given. */
export const SCRAPED_MS = 10 * 60_000;
/** A tick this late (ms) found the loop stuck at its due time. */
const STALL_MS = 5;
/** A tick's interval with less busy time than this (ms) was quiet (a tick, a poll of the pins). */
const QUIET_BUSY_MS = 1;

export class EventLoopLag {
  /** Samples since the last scrape, in nanoseconds (recorded values must be at least 1). */
  private readonly hist: RecordableHistogram = createHistogram();
  /** Set while sampling (something scraped within `scrapedMs`). */
  private timer: NodeJS.Timeout | undefined;
  private period = QUIET_MS;
  private scrapedAt = 0;
  private lastAt = performance.now();
  private lastElu: EventLoopUtilization = performance.eventLoopUtilization();
  /** The last tick's interval was quiet. */
  private quiet = true;
  /** The latest sample, in seconds. */
  private latest = 0;

  constructor(
    registry: Registry,
    prefix: string,
    private readonly scrapedMs = SCRAPED_MS,
  ) {
    const registers = [registry];
    const h = this.hist;
    const self = this;
    // Registered first, as prom-client's: a scrape reads the metrics in order, so the one whose
    // collect sets them all must come before the others (or they show the previous scrape's).
    new Gauge({
      name: prefix + 'nodejs_eventloop_lag_seconds',
      help: `The latest event loop delay sampled (delay beyond a timer's due time, sampled every ${BUSY_MS} to ${QUIET_MS} ms), in seconds`,
      registers,
      // A scrape sooner than a sample after the last one keeps the values it showed.
      collect() {
        self.scraped();
        this.set(self.latest);
        if (h.count === 0) return;
        min.set(h.min / 1e9);
        max.set(h.max / 1e9);
        mean.set(h.mean / 1e9);
        stddev.set(h.stddev / 1e9);
        p50.set(h.percentile(50) / 1e9);
        p90.set(h.percentile(90) / 1e9);
        p99.set(h.percentile(99) / 1e9);
        h.reset();
      },
    });
    const gauge = (name: string, help: string) => new Gauge({ name: prefix + name, help, registers });
    const min = gauge('nodejs_eventloop_lag_min_seconds', 'The smallest event loop delay sampled since the last scrape');
    const max = gauge('nodejs_eventloop_lag_max_seconds', 'The largest event loop delay sampled since the last scrape: a stall of the loop, about its length');
    const mean = gauge('nodejs_eventloop_lag_mean_seconds', 'The mean of the event loop delays sampled since the last scrape');
    const stddev = gauge('nodejs_eventloop_lag_stddev_seconds', 'The standard deviation of the event loop delays sampled since the last scrape');
    const p50 = gauge('nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the event loop delays sampled since the last scrape');
    const p90 = gauge('nodejs_eventloop_lag_p90_seconds', 'The 90th percentile of the event loop delays sampled since the last scrape');
    const p99 = gauge('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the event loop delays sampled since the last scrape');
  }

  /** The timer is running (tests). */
  get sampling(): boolean {
    return this.timer !== undefined;
  }

  /** Stops sampling (the hub stops). */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private scraped(): void {
    this.scrapedAt = performance.now();
    if (this.timer) return;
    this.period = QUIET_MS;
    this.quiet = true;
    this.lastAt = this.scrapedAt;
    this.lastElu = performance.eventLoopUtilization();
    this.timer = setTimeout(() => this.tick(), this.period).unref();
  }

  private tick(): void {
    const now = performance.now();
    if (now - this.scrapedAt > this.scrapedMs) {
      this.timer = undefined;
      this.latest = 0;
      return;
    }
    const elu = performance.eventLoopUtilization();
    const busy = elu.active - this.lastElu.active;
    const late = Math.max(0, now - this.lastAt - this.period);
    const lag = this.quiet && late >= STALL_MS ? Math.max(late, Math.min(busy, now - this.lastAt)) : late;
    this.quiet = busy < QUIET_BUSY_MS;
    const period = this.quiet ? QUIET_MS : BUSY_MS;
    this.lastAt = now;
    this.lastElu = elu;
    this.latest = lag / 1000;
    this.hist.record(Math.max(1, Math.round(lag * 1e6)));
    if (period === this.period) this.timer!.refresh();
    else this.timer = setTimeout(() => this.tick(), (this.period = period)).unref();
  }
}
