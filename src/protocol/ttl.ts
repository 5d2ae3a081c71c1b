/**
 * A caching hint's `ttlMs` as the 2026-07-28 schema allows it: an integer of at least 0
 * (digest §3.3). Upstreams send fractions, negatives, 1e300 or nothing; a client SDK that
 * validates results rejects the whole list for one such value. Past MAX_TTL_MS (about 24.8
 * days, also the longest timer Node keeps) a hint says "a long time" and is held to that.
 */
export const MAX_TTL_MS = 2 ** 31 - 1;

export function cacheTtl(v: unknown): number {
  if (typeof v !== 'number' || !(v > 0)) return 0; // NaN, negatives, absent
  return v >= MAX_TTL_MS ? MAX_TTL_MS : Math.floor(v);
}
