/**
 * UnlabelledHistogram against prom-client itself: any sequence of observations (and resets of
 * the registry between them) renders, as text and as JSON, the samples prom-client's Histogram
 * without labels renders fed the same values (as metrics.ts fed the ledger's commit times
 * before). And the in-flight gauge, now a number read when scraped, counts as its Gauge did.
 */
import fc from 'fast-check';
import { Histogram, Registry, type Metric } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics.js';
import { UnlabelledHistogram } from '../../src/unlabelled-histogram.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';
import { parseExposition } from '../helpers/prometheus.js';
import { expectSameMetrics } from '../helpers/same-metrics.js';

const BOUNDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const NAME = 'commit_seconds';
const HELP = 'commit';

/** An observation, or a reset of the registry (null). */
type Step = number | null;

function ours(steps: Step[]): Registry {
  const registry = new Registry();
  const h = new UnlabelledHistogram(BOUNDS);
  registry.registerMetric(h.metric(NAME, HELP) as unknown as Metric);
  for (const s of steps) if (s === null) registry.resetMetrics();
  else h.observe(s);
  return registry;
}

function promClient(steps: Step[]): Registry {
  const registry = new Registry();
  const h = new Histogram({ name: NAME, help: HELP, buckets: BOUNDS, registers: [registry] });
  for (const s of steps) if (s === null) registry.resetMetrics();
  else h.observe(s);
  return registry;
}

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 8, arbitrary: fc.oneof(fc.constantFrom(...BOUNDS, 0), fc.double({ min: 0, max: 5, noNaN: true, noDefaultInfinity: true })) },
  { weight: 1, arbitrary: fc.constant(null) },
);

describe('UnlabelledHistogram (the ledger commit time without prom-client on the call path)', () => {
  it('renders what prom-client renders for the same observations and resets, as text and as JSON', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
        await expectSameMetrics(ours(steps), promClient(steps));
      }),
      { numRuns: 200 },
    );
  });

  it('leaves out a value that is not a finite number', async () => {
    const r = ours([0.002, Number.NaN, Infinity]);
    const count = parseExposition(await r.metrics()).samples.find((s) => s.name === `${NAME}_count`);
    expect(count?.value).toBe(1);
  });
});

describe('switchyard_calls_in_flight', () => {
  it('counts calls started and not yet observed finished', async () => {
    const m = new Metrics({
      servers: () => [],
      cacheStats: () => ({ hits: 0, misses: 0, staleServed: 0 }),
      ledgerCounters: () => undefined,
      openSessions: () => 0,
    });
    const inFlight = async () => parseExposition(await m.text()).samples.find((s) => s.name === 'switchyard_calls_in_flight')?.value;
    try {
      expect(await inFlight()).toBe(0);
      m.callStarted();
      m.callStarted();
      expect(await inFlight()).toBe(2);
      const b = { method: 'tools/call', server: 'a', hubName: 'a__x' } as AuditBegin;
      m.observeCall(b, { outcome: 'ok', latencyMs: 1 } as AuditEnd, true);
      expect(await inFlight()).toBe(1);
      // Not counted as begun (callStarted was not called for it): the gauge is left alone.
      m.observeCall(b, { outcome: 'ok', latencyMs: 1 } as AuditEnd, false);
      expect(await inFlight()).toBe(1);
    } finally {
      m.close();
    }
  });
});
