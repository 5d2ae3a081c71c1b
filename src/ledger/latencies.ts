import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/**
 * The most latencies a group keeps one by one (64 KiB of numbers, about what one histogram takes
 * once its values spread). Below it percentiles are exact; past it the values move into a histogram
 * and the group holds no more memory however many rows follow. Not a histogram from the first row:
 * an HDR histogram takes ~11 KiB resident even for one value (~60 KiB once there are 70 000 of
 * them, measured on Node 20), so a ledger of many small groups (`resources/read` of thousands of
 * uris) took far more than their 8 bytes a call that way.
 */
export const EXACT_LATENCIES = 8192;

/** Significant digits of a percentile once a group's latencies are in a histogram. */
export const HISTOGRAM_FIGURES = 3;

/**
 * One group's latencies, for `ledger stats`' nearest-rank percentiles in bounded memory: exact for
 * the first EXACT_LATENCIES values, then to HISTOGRAM_FIGURES significant digits (or the
 * microsecond, whichever is coarser) from Node's HDR histogram.
 */
export class Latencies {
  private exact: number[] | null = [];
  private hist: RecordableHistogram | null = null;

  add(ms: number): void {
    if (this.exact) {
      this.exact.push(ms);
      if (this.exact.length <= EXACT_LATENCIES) return;
      this.hist = createHistogram({ figures: HISTOGRAM_FIGURES });
      for (const v of this.exact) record(this.hist, v);
      this.exact = null;
      return;
    }
    record(this.hist!, ms);
  }

  /** Latencies kept one by one: at most EXACT_LATENCIES, whatever was added. */
  get held(): number {
    return this.exact?.length ?? 0;
  }

  /** Nearest-rank percentile (p in 0..1) in ms; null without values. Sorts the exact values in place. */
  percentile(p: number): number | null {
    if (this.exact) {
      const sorted = this.exact.sort((a, b) => a - b);
      if (sorted.length === 0) return null;
      return sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1];
    }
    const h = this.hist!;
    const rank = Math.max(1, Math.ceil(p * h.count));
    // HDR picks rank floor(q·count + 0.5) for percentile q: ask for the one whose rank is ours
    // (nearest-rank, as the exact values), not one below it when p·count has a small fraction.
    const q = Math.min(100, ((rank - 0.25) / h.count) * 100);
    return (h.percentile(q) - 1) / 1000;
  }
}

/** In whole µs, shifted by one: HDR records integers from 1, and a latency may be 0 (the hub's own refusals). */
function record(h: RecordableHistogram, ms: number): void {
  const us = Math.round(ms * 1000);
  h.record((Number.isNaN(us) ? 0 : Math.min(Number.MAX_SAFE_INTEGER - 1, Math.max(0, us))) + 1);
}
