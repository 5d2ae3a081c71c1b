/**
 * The per-call series of /metrics (calls, errors, duration), counted without prom-client on the
 * call's path. A prom-client child re-hashes its label set on every inc() and observe(); here a
 * call finds its series through three map lookups on strings it already has, and bumps numbers.
 * The prom-client registry still renders them: each metric below has the shape its get() and
 * getForPromString() expect (the same values prom-client's Counter and Histogram give, tested
 * against them in test/unit/call-series.test.ts).
 */

interface Series {
  readonly labels: { method: string; server: string; tool: string };
  /** Calls by outcome, in the order outcomes first appeared. */
  readonly outcomes: Map<string, number>;
  /** Observations per bucket (not cumulative); one past the last bound is +Inf only. */
  readonly buckets: number[];
  sum: number;
  count: number;
}

interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
  sharedLabels?: Record<string, string>;
}

/** What prom-client's Registry reads from a metric. */
export interface RegistryMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: 'sum' }>;
  reset(): void;
}

export interface CallSeriesNames {
  calls: { name: string; help: string };
  errors: { name: string; help: string };
  duration: { name: string; help: string };
}

/** The bucket a value falls in: the first whose bound it does not pass (bounds.length: +Inf only). */
export function bucketOf(bounds: readonly number[], value: number): number {
  let i = 0;
  while (i < bounds.length && value > bounds[i]!) i++;
  return i;
}

export class CallSeries {
  private readonly table = new Map<string, Map<string, Map<string, Series>>>();
  private readonly all: Series[] = [];

  constructor(
    private readonly bounds: readonly number[],
    /** Outcomes that are not errors. */
    private readonly ok: ReadonlySet<string>,
  ) {}

  /** One finished call; `seconds` undefined (or not finite) counts the call but not its duration. */
  observe(method: string, server: string, tool: string, outcome: string, seconds: number | undefined): void {
    const s = this.series(method, server, tool);
    s.outcomes.set(outcome, (s.outcomes.get(outcome) ?? 0) + 1);
    if (seconds === undefined || !Number.isFinite(seconds)) return;
    s.buckets[bucketOf(this.bounds, seconds)]!++;
    s.sum += seconds;
    s.count++;
  }

  private series(method: string, server: string, tool: string): Series {
    let byServer = this.table.get(method);
    if (!byServer) this.table.set(method, (byServer = new Map()));
    let byTool = byServer.get(server);
    if (!byTool) byServer.set(server, (byTool = new Map()));
    let s = byTool.get(tool);
    if (!s) {
      s = { labels: { method, server, tool }, outcomes: new Map(), buckets: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
      byTool.set(tool, s);
      this.all.push(s);
    }
    return s;
  }

  private reset(): void {
    this.table.clear();
    this.all.length = 0;
  }

  /** The three metrics to register: calls and errors (counters), duration (histogram). */
  metrics(names: CallSeriesNames): [RegistryMetric, RegistryMetric, RegistryMetric] {
    const counter = (n: { name: string; help: string }, errorsOnly: boolean): RegistryMetric => ({
      ...n,
      type: 'counter',
      aggregator: 'sum',
      get: async () => ({ ...n, type: 'counter', aggregator: 'sum', values: this.counts(errorsOnly) }),
      reset: () => this.reset(),
    });
    const d = names.duration;
    const duration: RegistryMetric & { getForPromString(): Promise<unknown> } = {
      ...d,
      type: 'histogram',
      aggregator: 'sum',
      // Like prom-client: the series' labels after `le` in the text, merged into one set for JSON.
      getForPromString: async () => ({ ...d, type: 'histogram', aggregator: 'sum', values: this.histogram(d.name) }),
      get: async () => ({
        ...d,
        type: 'histogram',
        aggregator: 'sum',
        values: this.histogram(d.name).map((v) => ({ value: v.value, metricName: v.metricName, labels: { ...v.labels, ...v.sharedLabels } })),
      }),
      reset: () => this.reset(),
    };
    return [counter(names.calls, false), counter(names.errors, true), duration];
  }

  private counts(errorsOnly: boolean): MetricValue[] {
    const out: MetricValue[] = [];
    for (const s of this.all) {
      for (const [outcome, value] of s.outcomes) {
        if (errorsOnly && this.ok.has(outcome)) continue;
        out.push({ value, labels: { ...s.labels, outcome } });
      }
    }
    return out;
  }

  private histogram(name: string): MetricValue[] {
    const out: MetricValue[] = [];
    for (const s of this.all) {
      if (s.count === 0) continue;
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.buckets[i]!;
        out.push({ value: acc, labels: { le: this.bounds[i]! }, metricName: `${name}_bucket`, sharedLabels: s.labels });
      }
      out.push({ value: s.count, labels: { le: '+Inf' }, metricName: `${name}_bucket`, sharedLabels: s.labels });
      out.push({ value: s.sum, labels: {}, metricName: `${name}_sum`, sharedLabels: s.labels });
      out.push({ value: s.count, labels: {}, metricName: `${name}_count`, sharedLabels: s.labels });
    }
    return out;
  }
}
