/**
 * The event-loop lag collector (src/event-loop-lag.ts) on this process's own loop: a stall reads
 * as its length whether it comes from rest (ticks 100 ms apart) or while the loop has work
 * (ticks 10 ms apart), not its length less the tick; it samples only while something scrapes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { EventLoopLag } from '../../src/event-loop-lag.js';
import { Metrics } from '../../src/metrics.js';
import { metricValue } from '../helpers/prometheus.js';

const STALL_MS = 250;
let lag: EventLoopLag | undefined;
afterEach(() => lag?.close());

const spin = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

/** The largest lag sampled, scraping until it shows at least `atLeast` s or 1 s passed. */
async function maxLag(reg: Registry, atLeast: number): Promise<number> {
  let max = 0;
  for (const end = Date.now() + 1000; max < atLeast && Date.now() < end; await new Promise((r) => setTimeout(r, 20)))
    max = Math.max(max, metricValue(await reg.metrics(), 't_nodejs_eventloop_lag_max_seconds'));
  return max;
}

describe('EventLoopLag', () => {
  it("keeps prom-client's default process metrics, names and types, with its own lag gauges in place of prom-client's", async () => {
    const theirs = new Registry();
    collectDefaultMetrics({ register: theirs, prefix: 'switchyard_process_' });
    const m = new Metrics({ servers: () => [], cacheStats: () => ({ hits: 0, misses: 0, staleServed: 0 }), ledgerCounters: () => undefined, openSessions: () => 0 });
    try {
      const types = (text: string) => text.split('\n').filter((l) => l.startsWith('# TYPE switchyard_process_')).sort();
      const ours = types(await m.text());
      expect(ours).toEqual(types(await theirs.metrics()));
      expect(ours).toContain('# TYPE switchyard_process_nodejs_eventloop_lag_p99_seconds gauge');
      // The lag gauges are the hub's: prom-client's would carry its help text.
      expect(await m.text()).not.toContain('The 99th percentile of the recorded event loop delays.');
    } finally {
      m.close();
    }
  });

  it('reads a stall from rest as its length', async () => {
    const reg = new Registry();
    lag = new EventLoopLag(reg, 't_');
    await reg.metrics(); // sampling starts
    await new Promise((r) => setTimeout(r, 250)); // quiet: ticks 100 ms apart
    await reg.metrics();
    spin(STALL_MS);
    const max = await maxLag(reg, (STALL_MS - 5) / 1000);
    expect(max).toBeGreaterThanOrEqual((STALL_MS - 5) / 1000);
    expect(max).toBeLessThan(0.5);
  });

  it('reads a stall amid other work as its length (ticks 10 ms apart then)', async () => {
    const reg = new Registry();
    lag = new EventLoopLag(reg, 't_');
    await reg.metrics(); // sampling starts
    // 2 ms of work every 3 ms: the loop is busy, ticks come 10 ms apart.
    let working = true;
    const work = () => {
      spin(2);
      if (working) setTimeout(work, 1);
    };
    work();
    await new Promise((r) => setTimeout(r, 200));
    await reg.metrics();
    spin(STALL_MS);
    await new Promise((r) => setTimeout(r, 100));
    working = false;
    const max = await maxLag(reg, (STALL_MS - 15) / 1000);
    expect(max).toBeGreaterThanOrEqual((STALL_MS - 15) / 1000);
    expect(max).toBeLessThan(0.5); // a sanity bound: the machine may hold this process up too
  });

  it('samples only while something scrapes: from the first scrape until scrapedMs after the last', async () => {
    const reg = new Registry();
    lag = new EventLoopLag(reg, 't_', 300);
    await new Promise((r) => setTimeout(r, 150));
    expect(lag.sampling).toBe(false); // nobody scraped: the loop is not woken for it
    await reg.metrics();
    expect(lag.sampling).toBe(true);
    // Scraped every 100 ms, it keeps sampling past the 300 ms that one scrape would keep it.
    const start = performance.now();
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await reg.metrics();
      expect(lag.sampling).toBe(true);
    }
    const scrapedAt = performance.now();
    expect(scrapedAt - start).toBeGreaterThan(300);
    let stoppedAt = 0;
    for (const end = scrapedAt + 2000; !stoppedAt && performance.now() < end; await new Promise((r) => setTimeout(r, 20)))
      if (!lag.sampling) stoppedAt = performance.now();
    expect(stoppedAt).toBeGreaterThan(0); // stopped within ~300 ms (plus a tick) of the last scrape
    expect(stoppedAt - scrapedAt).toBeGreaterThanOrEqual(290);
    // Scraped again, it starts again, and what it reads is the loop's lag, about 0 at rest.
    await reg.metrics();
    expect(lag.sampling).toBe(true);
    await new Promise((r) => setTimeout(r, 250));
    expect(metricValue(await reg.metrics(), 't_nodejs_eventloop_lag_min_seconds')).toBeLessThan(0.05);
  });
});
