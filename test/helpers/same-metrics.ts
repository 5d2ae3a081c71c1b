/**
 * Two prom-client registries render the same samples, as exposition text (types, help, every
 * sample's name, labels and value) and as JSON (getMetricsAsJSON): for metrics the hub keeps
 * without prom-client's own classes, checked against prom-client fed the same input.
 */
import type { Registry } from 'prom-client';
import { expect } from 'vitest';
import { parseExposition, type Sample } from './prometheus.js';

const key = (s: Sample): string => `${s.name}{${Object.entries(s.labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`).join(',')}}`;
const byKey = (samples: Sample[]): Map<string, number> => new Map(samples.map((s) => [key(s), s.value]));
const flat = async (r: Registry) =>
  (await r.getMetricsAsJSON()).flatMap((m) =>
    m.values.map((v) => [`${(v as { metricName?: string }).metricName ?? m.name}`, JSON.stringify(Object.entries({ ...v.labels }).sort()), v.value]),
  );

export async function expectSameMetrics(ours: Registry, theirs: Registry): Promise<void> {
  const [ta, tb] = [parseExposition(await ours.metrics()), parseExposition(await theirs.metrics())];
  expect(ta.types).toEqual(tb.types);
  expect(ta.help).toEqual(tb.help);
  const [sa, sb] = [byKey(ta.samples), byKey(tb.samples)];
  expect([...sa.keys()].sort()).toEqual([...sb.keys()].sort());
  for (const [k, v] of sb) expect(sa.get(k), k).toBeCloseTo(v, 9);
  expect((await flat(ours)).sort()).toEqual((await flat(theirs)).sort());
}
