/**
 * CallSeries against prom-client itself: any sequence of finished calls renders, in the
 * registry's text and JSON, the same samples as prom-client's Counter and Histogram fed the
 * same calls (the way metrics.ts fed them before).
 */
import fc from 'fast-check';
import { Counter, Histogram, Registry, type Metric } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CallSeries } from '../../src/call-series.js';
import { expectSameMetrics } from '../helpers/same-metrics.js';

const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const OK = new Set(['ok', 'replayed']);
const NAMES = {
  calls: { name: 'calls_total', help: 'calls' },
  errors: { name: 'errors_total', help: 'errors' },
  duration: { name: 'duration_seconds', help: 'duration' },
};

interface Call {
  method: string;
  server: string;
  tool: string;
  outcome: string;
  seconds: number;
}

function ours(calls: Call[]): Registry {
  const registry = new Registry();
  const series = new CallSeries(BOUNDS, OK);
  for (const m of series.metrics(NAMES)) registry.registerMetric(m as unknown as Metric);
  for (const c of calls) series.observe(c.method, c.server, c.tool, c.outcome, c.seconds);
  return registry;
}

function promClient(calls: Call[]): Registry {
  const registry = new Registry();
  const registers = [registry];
  const labelNames = ['method', 'server', 'tool', 'outcome'];
  const calls_ = new Counter({ ...NAMES.calls, labelNames, registers });
  const errors = new Counter({ ...NAMES.errors, labelNames, registers });
  const duration = new Histogram({ ...NAMES.duration, labelNames: ['method', 'server', 'tool'], buckets: BOUNDS, registers });
  for (const { method, server, tool, outcome, seconds } of calls) {
    calls_.inc({ method, server, tool, outcome });
    if (Number.isFinite(seconds)) duration.observe({ method, server, tool }, seconds);
    if (!OK.has(outcome)) errors.inc({ method, server, tool, outcome });
  }
  return registry;
}


const call = fc.record({
  method: fc.constantFrom('tools/call', 'prompts/get', 'tools/list', 'other'),
  server: fc.constantFrom('', 'a', 'b"quoted"', 'c\\d'),
  tool: fc.constantFrom('', 'a__x', 'b__y\nz'),
  outcome: fc.constantFrom('ok', 'replayed', 'tool_error', 'rpc_error', 'timeout'),
  seconds: fc.oneof(fc.constantFrom(...BOUNDS, 0, 61, Number.NaN, Infinity), fc.double({ min: 0, max: 100, noNaN: true })),
});

describe('CallSeries (calls, errors and durations without per-call label hashing)', () => {
  it('renders what prom-client renders for the same calls, as text and as JSON', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(call, { maxLength: 40 }), async (calls) => {
        await expectSameMetrics(ours(calls), promClient(calls));
      }),
      { numRuns: 150 },
    );
  });

  it('counts calls without a finite duration, and leaves them out of the histogram', async () => {
    const r = ours([{ method: 'tools/call', server: 'a', tool: 'a__x', outcome: 'timeout', seconds: Number.NaN }]);
    const text = await r.metrics();
    expect(text).toContain('calls_total{method="tools/call",server="a",tool="a__x",outcome="timeout"} 1');
    expect(text).toContain('errors_total{method="tools/call",server="a",tool="a__x",outcome="timeout"} 1');
    expect(text).not.toContain('duration_seconds_count');
  });

  it('starts over when the registry resets its metrics', async () => {
    const r = ours([{ method: 'tools/call', server: 'a', tool: 'a__x', outcome: 'ok', seconds: 0.002 }]);
    expect(await r.metrics()).toContain('duration_seconds_bucket{le="0.0025",method="tools/call",server="a",tool="a__x"} 1');
    r.resetMetrics();
    expect(await r.metrics()).not.toContain('calls_total{');
  });
});
