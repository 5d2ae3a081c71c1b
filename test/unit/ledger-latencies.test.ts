import { describe, expect, it } from 'vitest';
import { EXACT_LATENCIES, Latencies } from '../../src/ledger/latencies.js';

/** Nearest-rank percentile of the values, as `ledger stats` computed it from all of them. */
function exact(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1];
}

/** A deterministic spread over 1 µs .. 100 s (log-uniform), in ms. */
function spread(n: number): number[] {
  let x = 12345;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    // mulberry32: 32-bit integer steps, no float rounding.
    x = (x + 0x6d2b79f5) | 0;
    let r = Math.imul(x ^ (x >>> 15), 1 | x);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    out.push(10 ** (-3 + (8 * ((r ^ (r >>> 14)) >>> 0)) / 4294967296));
  }
  return out;
}

describe("ledger stats' latencies", () => {
  it('are exact, nearest-rank, up to EXACT_LATENCIES values', () => {
    const l = new Latencies();
    expect(l.percentile(0.5)).toBeNull();
    for (let i = 20; i >= 1; i--) l.add(i);
    expect([l.percentile(0.5), l.percentile(0.95)]).toEqual([10, 19]);
    const many = new Latencies();
    const values = spread(EXACT_LATENCIES);
    for (const v of values) many.add(v);
    expect(many.held).toBe(EXACT_LATENCIES);
    expect([many.percentile(0.5), many.percentile(0.95)]).toEqual([exact(values, 0.5), exact(values, 0.95)]);
  });

  it('hold no more values however many are added, and stay within 3 significant digits (or the µs)', () => {
    const l = new Latencies();
    const values = spread(200_000);
    const held: number[] = [];
    values.forEach((v, i) => {
      l.add(v);
      if ((i + 1) % 50_000 === 0) held.push(l.held);
    });
    // Past EXACT_LATENCIES the values are in a fixed-size histogram: nothing held per value.
    expect(held).toEqual([0, 0, 0, 0]);
    const sorted = [...values].sort((a, b) => a - b);
    for (const p of [0.5, 0.95, 0.99, 1]) {
      const want = exact(sorted, p);
      expect(Math.abs(l.percentile(p)! - want), `p${p * 100}`).toBeLessThanOrEqual(Math.max(want / 1000, 0.0005));
    }
  });

  it('keep the nearest rank past EXACT_LATENCIES, and a latency of 0', () => {
    // 10011 values: ranks 1..9510 are 1 ms, the rest 1000 ms; p95's nearest rank is 9511
    // (ceil(9510.45)), where a rounding rank (HDR's own) would say 1 ms.
    const l = new Latencies();
    for (let i = 0; i < 10_011; i++) l.add(i < 9510 ? 1 : 1000);
    expect(Math.abs(l.percentile(0.95)! - 1000)).toBeLessThanOrEqual(1);
    expect(l.percentile(0.5)).toBe(1);
    const zeros = new Latencies();
    for (let i = 0; i <= EXACT_LATENCIES; i++) zeros.add(i % 2 ? 0.25 : 0);
    expect(zeros.held).toBe(0);
    expect([zeros.percentile(0.5), zeros.percentile(1)]).toEqual([0, 0.25]);
  });
});
