import { createHash } from 'node:crypto';
import { monotonicNow } from '../monotonic.js';
import { GlobTable, type OtherNames } from './glob.js';

/** One token bucket: `burst` tokens at most, refilled at `perSecond`. */
export interface BucketSpec {
  burst: number;
  perSecond: number;
}

/** `policy.rateLimit`: per principal (every request) and per principal and tool (tools/call). */
export interface RateLimitSpec {
  perPrincipal?: BucketSpec;
  perTool?: BucketSpec;
  /** Overrides `perTool` for hub tool names matching the glob (first match wins); a renamed tool's base name is matched too, and by a glob without `__` its upstream name. */
  tools?: Record<string, BucketSpec>;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Longest tool name a bucket is keyed by as it is; a longer one by its digest. The name is the
 * client's own `params.name`, as long as a request body may be: kept as a key, each distinct one
 * held its megabytes until the buckets were swept (at SWEEP_AT of them). No hub name is longer
 * (names.mode "spec" allows 128 characters), so such a name never names a tool anyway.
 */
const KEYED_NAME_MAX = 128;

function toolKey(tool: string): string {
  return tool.length <= KEYED_NAME_MAX ? tool : `#${createHash('sha256').update(tool).digest('base64url')}`;
}

/** Past this many live buckets, full ones (equivalent to absent) are swept. */
const SWEEP_AT = 50_000;

/** Token buckets keyed by string; `take` answers how long to wait when a bucket is empty. */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = monotonicNow) {}

  /** Take one token: 0 when granted, otherwise the milliseconds until one is available. */
  take(key: string, spec: BucketSpec): number {
    const t = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      if (this.buckets.size >= SWEEP_AT) this.sweep(t, spec);
      b = { tokens: spec.burst, at: t };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(spec.burst, b.tokens + ((t - b.at) / 1000) * spec.perSecond);
      b.at = t;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return spec.perSecond > 0 ? Math.ceil(((1 - b.tokens) / spec.perSecond) * 1000) : Infinity;
  }

  get size(): number {
    return this.buckets.size;
  }

  private sweep(t: number, spec: BucketSpec): void {
    for (const [k, b] of this.buckets) if (b.tokens + ((t - b.at) / 1000) * spec.perSecond >= spec.burst) this.buckets.delete(k);
    // Still too many (a flood of distinct keys): forget the oldest half rather than grow.
    if (this.buckets.size >= SWEEP_AT) {
      let n = this.buckets.size / 2;
      for (const k of this.buckets.keys()) {
        if (n-- <= 0) break;
        this.buckets.delete(k);
      }
    }
  }
}

export type RateVerdict = { ok: true } | { ok: false; retryAfterMs: number; limit: 'principal' | 'tool' };

/** The hub's rate limits; `check` takes a token from every bucket that applies. */
export class RateLimiter {
  private readonly buckets: TokenBuckets;
  private readonly toolTable: GlobTable<BucketSpec>;

  constructor(
    private readonly spec: RateLimitSpec = {},
    private readonly now: () => number = monotonicNow,
    buckets?: TokenBuckets,
  ) {
    this.buckets = buckets ?? new TokenBuckets(now);
    this.toolTable = new GlobTable(spec.tools ?? {});
  }

  /**
   * The limits of a reloaded `policy` over the buckets this one filled: a reload neither refills
   * nor drains what a principal has taken (a bucket holds at most the new burst, and fills at the
   * new rate from then on). New buckets each time, any policy edit (a `confirm` glob added)
   * gave every principal its whole burst again. Keyed by principal and tool, not by spec, a
   * bucket carries over whichever limit now applies to it.
   */
  withSpec(spec: RateLimitSpec = {}): RateLimiter {
    const next = new RateLimiter(spec, this.now, this.buckets);
    // No limit left: nothing will read them, so they are not kept.
    return next.enabled ? next : new RateLimiter(spec, this.now);
  }

  get enabled(): boolean {
    return Boolean(this.spec.perPrincipal || this.spec.perTool || this.toolTable.size);
  }

  /** Whether a limit depends on the tool's name (`tools` globs): only then is a renamed tool's base name looked up. */
  get byName(): boolean {
    return this.toolTable.size > 0;
  }

  /** Whether some `tools` glob meets upstream names (GlobTable.readsUpstream). */
  get readsUpstream(): boolean {
    return this.toolTable.readsUpstream;
  }

  /** Whether the upstream name of the tool called `tool` could choose its limit (GlobTable.readsUpstreamOf). */
  readsUpstreamOf(tool: string): boolean {
    return this.toolTable.readsUpstreamOf(tool);
  }

  /**
   * `other`: the tool's upstream name and its name before the hub renamed it, which the `tools`
   * globs meet too (as a group's deny and `policy.confirm` do); its bucket is still the hub name's.
   */
  check(principal: string, tool?: string, other?: OtherNames): RateVerdict {
    const p = this.spec.perPrincipal;
    if (p) {
      const wait = this.buckets.take(`p\0${principal}`, p);
      if (wait > 0) return { ok: false, retryAfterMs: wait, limit: 'principal' };
    }
    if (tool !== undefined) {
      const t = this.toolTable.first(tool, other) ?? this.spec.perTool;
      if (t) {
        const wait = this.buckets.take(`t\0${principal}\0${toolKey(tool)}`, t);
        if (wait > 0) return { ok: false, retryAfterMs: wait, limit: 'tool' };
      }
    }
    return { ok: true };
  }
}
