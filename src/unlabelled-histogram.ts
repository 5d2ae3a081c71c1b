/**
 * A histogram without labels, observed without prom-client: its Histogram's observe() checks
 * its argument, hashes the empty label set and looks the bound up as a property key on every
 * observation (~2.5k instructions, the ledger's commit time on every call: docs/BENCHMARKS.md,
 * the sixty-fifth session); here a scan of the bounds and three additions. Registered in a
 * prom-client Registry it renders as prom-client's would (the shape CallSeries gives its
 * histogram; tested against prom-client in test/unit/unlabelled-histogram.test.ts).
 */
import { bucketOf, type RegistryMetric } from './call-series.js';

interface Counts {
  /** Observations per bucket (not cumulative); one past the last bound is +Inf only. */
  readonly buckets: number[];
  sum: number;
  count: number;
}

export class UnlabelledHistogram {
  /** None after the registry reset it, until the next observation (as prom-client's). */
  private counts: Counts | undefined;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = this.fresh();
  }

  /** A value that is not a finite number is left out (prom-client's would throw). */
  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const c = (this.counts ??= this.fresh());
    c.buckets[bucketOf(this.bounds, value)]!++;
    c.sum += value;
    c.count++;
  }

  metric(name: string, help: string): RegistryMetric {
    const values = () => {
      const c = this.counts;
      if (!c) return [];
      const out: { value: number; labels: Record<string, string | number>; metricName: string; sharedLabels: Record<string, string> }[] = [];
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += c.buckets[i]!;
        out.push({ value: acc, labels: { le: this.bounds[i]! }, metricName: `${name}_bucket`, sharedLabels: {} });
      }
      out.push({ value: c.count, labels: { le: '+Inf' }, metricName: `${name}_bucket`, sharedLabels: {} });
      out.push({ value: c.sum, labels: {}, metricName: `${name}_sum`, sharedLabels: {} });
      out.push({ value: c.count, labels: {}, metricName: `${name}_count`, sharedLabels: {} });
      return out;
    };
    const m: RegistryMetric & { getForPromString(): Promise<unknown> } = {
      name,
      help,
      type: 'histogram',
      aggregator: 'sum',
      getForPromString: async () => ({ name, help, type: 'histogram', aggregator: 'sum', values: values() }),
      get: async () => ({ name, help, type: 'histogram', aggregator: 'sum', values: values().map((v) => ({ value: v.value, metricName: v.metricName, labels: { ...v.labels } })) }),
      reset: () => {
        this.counts = undefined;
      },
    };
    return m;
  }

  private fresh(): Counts {
    return { buckets: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }
}
