/**
 * Per-upstream list cache: one entry per (server, list kind, authorization context), fresh for
 * the upstream's own `ttlMs` (modern) or until its `list_changed` / a configured TTL (legacy,
 * which gives no hints). Concurrent misses share one upstream fetch; a failed refresh, or one not back within STALE_WAIT_MS, serves
 * the stale entry (a client's first list not back within FIRST_LIST_WAIT_MS is built without it), and a failed fetch is not tried again for LIST_RETRY_MS. Keys are `<server>\0<kind>` for the server's own credentials and
 * `<server>\0<kind>\0<credential>` for a per-principal one, so a prefix `<server>\0` covers
 * every entry of a server.
 */
import { monotonicNow } from '../monotonic.js';

export interface ListEntry {
  items: Record<string, unknown>[];
  receivedAt: number;
  /** Milliseconds of freshness from receivedAt; Infinity = until invalidated. */
  ttlMs: number;
  scope: 'public' | 'private';
  /** Bumped on every change of content, so aggregates can be versioned. */
  version: number;
  /** Its refresh failed: served stale, and not fetched again, until then. */
  retryAt?: number;
  /** Set by its fetcher: when it was asked for, on the fetcher's own count (the catalog's ListChanges.epoch). */
  askedAt?: number;
  /**
   * Served in place of a refresh that failed, or that had not come back within STALE_WAIT_MS:
   * clients told of a change (list_changed) and listing again were given this list as the new
   * one, so the next that differs is told, whatever ttlMs it was kept for. Until a change is told
   * again (invalidate): they list again then anyway.
   */
  stoodIn?: boolean;
  /**
   * Clients were told its list changed (invalidate) after it was asked for: those who list again
   * expect the list after the change. Only such a list kept 0 ms that stood in is told when the
   * refresh lands changed (mayAnnounce).
   */
  saidChanged?: boolean;
  /**
   * A first list clients' lists were answered without (FIRST_LIST_WAIT_MS), told (onChanged) as
   * it landed: whoever else would tell it (a failed list come back, part-store.ts) need not.
   */
  landingTold?: boolean;
}

export type Fetcher = () => Promise<Omit<ListEntry, 'receivedAt' | 'version'>>;

const ANNOUNCE_EVERY_MS = 1000;
/**
 * The longest wait between two announcements of changes nobody said of one list, when each
 * refresh finds it changed again (the wait doubles from ANNOUNCE_EVERY_MS at each one in a row).
 */
const ANNOUNCE_MAX_EVERY_MS = 30_000;

/**
 * How long a list whose fetch failed is not asked for again: meanwhile its stale entry is served,
 * or, with none, the same error. Otherwise every client's list (each a refresh: a failed list
 * is never fresh) was one more request to an upstream that is failing, however many clients
 * listed a second. A list_changed or a restart of the server ends the wait at once (invalidate),
 * as a principal's own connection becoming ready does (retryNow).
 */
export const LIST_RETRY_MS = 5_000;

/**
 * How long a list waits for the refresh of a stale entry before the stale entry is served in its
 * place (marked stoodIn: the refresh, when it lands changed, is told). Without it a hung upstream
 * held every client's list, of every server (an aggregate waits for all its parts), for its
 * timeoutMs (60 s by default) before its stale entry was served. A second lets a healthy
 * upstream's refresh land first (a few ms on stdio or loopback, well under a second over most
 * networks), so clients told of a change get the new list at once, not one more notice later;
 * past it a client waits no longer for one server of many.
 */
export const STALE_WAIT_MS = 1_000;

/**
 * How long a client's list waits for a server's first list (nothing cached to stand in) before
 * it is answered without that server's items: the list, when it lands, is told (list_changed),
 * as a failed list that comes back is. Without it one server slow to answer its first list (or
 * hung) held every client's list, of every server, for its timeoutMs (60 s by default). Longer
 * than STALE_WAIT_MS: there a client gets the server's last list, here none of its items, and a
 * client that does not listen for list_changed lacks them until it lists again.
 */
export const FIRST_LIST_WAIT_MS = 3_000;

/** A first list not back within FIRST_LIST_WAIT_MS: the client's list is built without it. */
export class ListPendingError extends Error {
  constructor(key: string, ms: number) {
    super(`${key.split('\0', 2).join(' ')}: its first list is not back after ${ms} ms; left out until it is (clients are told then)`);
  }
}

/** Failures kept at most (lists of principals that never listed again are forgotten past it). */
const MAX_FAILURES = 10_000;

/**
 * Whether `prefix` names `key` or a group of keys it heads, whole fields only: `a\0tools`
 * covers `a\0tools\0principal:alice`, and that key does not cover `…\0principal:alice2`.
 */
function covers(prefix: string, key: string): boolean {
  if (prefix.endsWith('\0')) return key.startsWith(prefix);
  return key.length === prefix.length ? key === prefix : key.startsWith(prefix) && key.charCodeAt(prefix.length) === 0;
}

export class ListCache {
  private readonly entries = new Map<string, ListEntry>();
  private readonly inflight = new Map<string, Promise<ListEntry>>();
  /** When each fetch under way was started (STALE_WAIT_MS counts from then, not from each get). */
  private readonly startedAt = new WeakMap<Promise<ListEntry>, number>();
  /** Keys invalidated while their fetch was in flight: what it brings may predate the change. */
  private readonly changedInFlight = new Set<string>();
  /** When each key's change was last told by onChanged. */
  private readonly toldAt = new Map<string, number>();
  /**
   * Changes told of each key in a row (mayAnnounce), no refresh finding its list the same and
   * no change said (invalidate) in between: a list that differs at every answer (its order
   * turning, a timestamp in a description) had every client that lists again when told told
   * again once a second for good; the wait doubles with each instead.
   */
  private readonly streak = new Map<string, number>();
  /** Keys whose last fetch failed, until when they are not fetched again, and why. */
  private readonly failures = new Map<string, { until: number; err: unknown }>();
  /** Changes found inside a key's window, to be told at its end. */
  private readonly deferred = new Map<string, NodeJS.Timeout>();
  /** Keys whose first list a client's list was answered without (FIRST_LIST_WAIT_MS): told when it lands. */
  private readonly leftOut = new Set<string>();
  private versionCounter = 0;
  /** Observed counts, for metrics and tests. */
  readonly stats = { hits: 0, misses: 0, staleServed: 0 };

  constructor(
    private readonly now: () => number = monotonicNow,
    private readonly onStale?: (key: string, err: unknown) => void,
    /**
     * A refresh found the list changed, and nobody had said so (an upstream that declares no
     * listChanged, a listen stream that is not there): clients are to be told now.
     */
    private readonly onChanged?: (key: string) => void,
    private readonly retryMs = LIST_RETRY_MS,
    private readonly staleWaitMs = STALE_WAIT_MS,
    private readonly firstWaitMs = FIRST_LIST_WAIT_MS,
  ) {}

  /** Entries held (for tests). */
  get size(): number {
    return this.entries.size;
  }

  /** The list kinds of a server some entry is held of, in any partition (not on a hot path: scans every entry). */
  kindsHeld(serverId: string): Set<string> {
    const prefix = `${serverId}\0`;
    const kinds = new Set<string>();
    for (const k of this.entries.keys()) if (k.startsWith(prefix)) kinds.add(k.slice(prefix.length).split('\0', 1)[0]!);
    return kinds;
  }

  /** The list kinds some entry of which, of any server and partition, has items (not on a hot path: scans every entry). */
  kindsWithItems(): Set<string> {
    const kinds = new Set<string>();
    for (const [k, e] of this.entries) if (e.items.length !== 0) kinds.add(k.split('\0', 2)[1]!);
    return kinds;
  }

  peek(key: string): ListEntry | undefined {
    return this.entries.get(key);
  }

  isFresh(e: ListEntry): boolean {
    return this.now() < e.receivedAt + e.ttlMs;
  }

  /** How long `e` may be served as it is: while fresh, or, stale after a failed refresh, until it is tried again. */
  remainingMs(e: ListEntry): number {
    return Math.max(0, Math.max(e.receivedAt + e.ttlMs, e.retryAt ?? -Infinity) - this.now());
  }

  /** The entry when it is fresh (counted as a hit), else undefined; no fetch. */
  fresh(key: string): ListEntry | undefined {
    const e = this.entries.get(key);
    if (e && this.isFresh(e)) {
      this.stats.hits++;
      return e;
    }
    return undefined;
  }

  /**
   * `whole`: the refresh is waited for however long it takes, not STALE_WAIT_MS (the hub's own
   * fetch at a server's ready or change, which judges the list it brings and which the
   * refetch gate's one-fetch-at-a-time counts on), nor a first fetch FIRST_LIST_WAIT_MS (a
   * request's route). Otherwise (a client's list) a first fetch not back by then fails the get
   * with ListPendingError, and the list is told (onChanged) when it lands.
   */
  async get(key: string, fetch: Fetcher, whole = false): Promise<ListEntry> {
    const e = this.entries.get(key);
    if (e && this.isFresh(e)) {
      this.stats.hits++;
      return e;
    }
    const failed = this.failures.get(key);
    if (failed !== undefined) {
      if (this.now() < failed.until) {
        if (!e) throw failed.err;
        this.stats.staleServed++;
        return e;
      }
      this.failures.delete(key);
    }
    this.stats.misses++;
    let p = this.inflight.get(key);
    // One under way since before a change may bring the list from before it: whoever asks after
    // the change (a client told of it, or one whose session began after it and is not told,
    // session-table.ts) gets a fetch of its own; those who asked before get the older one.
    if (!p || this.changedInFlight.delete(key)) {
      let fetched: Promise<ListEntry> | undefined;
      // Unset while refresh has not returned (a fetcher that throws at once): nothing dropped it meanwhile.
      const f = (fetched = this.refresh(key, fetch, e, () => fetched === undefined || this.inflight.get(key) === fetched));
      p = f;
      this.inflight.set(key, f);
      this.startedAt.set(f, this.now());
      f.finally(() => {
        if (this.inflight.get(key) === f) this.inflight.delete(key);
      }).catch(() => {});
    }
    if (whole) return p;
    return e ? this.boundedWait(key, e, p) : this.firstWait(key, p);
  }

  /**
   * A first fetch (no entry to stand in), or ListPendingError once it has been under way for
   * firstWaitMs: the one fetch goes on for everyone, and lands in the cache, told, when it comes.
   */
  private firstWait(key: string, p: Promise<ListEntry>): Promise<ListEntry> {
    const pending = () => {
      this.leftOut.add(key);
      return new ListPendingError(key, this.firstWaitMs);
    };
    const left = (this.startedAt.get(p) ?? this.now()) + this.firstWaitMs - this.now();
    if (left <= 0) return Promise.reject(pending());
    return within(p, left, (resolve, reject) => {
      const landed = this.entries.get(key);
      if (landed) resolve(landed);
      else reject(pending());
    });
  }

  /**
   * The refresh of the stale entry `e`, or `e` itself once the refresh has been under way for
   * staleWaitMs (whoever asks later is not held again by a refresh that is still hanging). Every
   * waiter still shares the one fetch: the refresh lands in the cache when it comes back.
   */
  private boundedWait(key: string, e: ListEntry, p: Promise<ListEntry>): Promise<ListEntry> {
    const left = (this.startedAt.get(p) ?? this.now()) + this.staleWaitMs - this.now();
    if (left <= 0) return Promise.resolve(this.standIn(e));
    return within(p, left, (resolve) => {
      // Replaced or dropped meanwhile: that is not the list to stand in; the refresh is awaited.
      if (this.entries.get(key) === e) resolve(this.standIn(e));
    });
  }

  /** `e` served in place of a refresh still under way: the refresh, if it differs, is told. */
  private standIn(e: ListEntry): ListEntry {
    e.stoodIn = true;
    this.stats.staleServed++;
    return e;
  }

  /** `current`: whether the key still waits for this fetch (drop() lets go of it). */
  private async refresh(key: string, fetch: Fetcher, stale: ListEntry | undefined, current: () => boolean): Promise<ListEntry> {
    try {
      const got = await fetch();
      // Dropped meanwhile (its server removed or replaced): those waiting for it get it, and nothing is kept of it.
      if (!current()) return { ...got, receivedAt: this.now(), version: ++this.versionCounter };
      this.failures.delete(key);
      const same = stale && JSON.stringify(stale.items) === JSON.stringify(got.items);
      const entry: ListEntry = { ...got, receivedAt: this.now(), version: same ? stale.version : ++this.versionCounter };
      // A list_changed that came while this list was on its way: served once, fetched again next.
      if (this.changedInFlight.delete(key)) {
        entry.ttlMs = 0;
        entry.saidChanged = true;
      }
      this.entries.set(key, entry);
      if (same) this.streak.delete(key);
      if (stale && !same && this.mayAnnounce(key, stale)) this.onChanged?.(key);
      else if (!stale && this.leftOut.delete(key)) {
        // Clients were given lists without it: they hear it is there now.
        this.toldAt.set(key, this.now());
        entry.landingTold = true;
        this.onChanged?.(key);
      }
      return entry;
    } catch (err) {
      if (!current()) throw err;
      this.changedInFlight.delete(key);
      const until = this.now() + this.retryMs;
      this.failures.delete(key);
      if (this.failures.size >= MAX_FAILURES) this.failures.delete(this.failures.keys().next().value!);
      this.failures.set(key, { until, err });
      if (stale) {
        stale.retryAt = until;
        stale.stoodIn = true;
        this.stats.staleServed++;
        this.onStale?.(key, err);
        return stale;
      }
      throw err;
    }
  }

  /**
   * Whether a change found on refresh is told. Not for an entry of ttlMs 0: one that invalidate
   * made stale (clients were told then), one fetched while a change was said (the same), or one
   * never fresh (every list of it is a refresh, and a server whose list differs each time would
   * have every client told, list again, and be told again); unless it stood in for a refresh that
   * failed or was slow (stoodIn) after a change was told (saidChanged: those told listed again
   * and got it, the list from before the change, and a legacy client kept it until told again,
   * which nothing else did). Not for one never fresh that stood in with no change told: a slow
   * server whose list differs each time had every client told, list again (stood in for, the
   * refresh slow again), and be told again, about once a second for good. At most once a second per key, and
   * then, while each refresh finds it changed again (streak), at most every 2, 4 … 30 s: a
   * change found inside that wait is told at its end, never dropped (the clients told of the
   * previous change listed before it, and would keep a list that is gone).
   */
  private mayAnnounce(key: string, stale: ListEntry): boolean {
    if (!(stale.ttlMs > 0) && !(stale.stoodIn && stale.saidChanged)) return false;
    const now = this.now();
    const since = now - (this.toldAt.get(key) ?? -Infinity);
    const told = this.streak.get(key) ?? 0;
    const every = Math.min(ANNOUNCE_MAX_EVERY_MS, ANNOUNCE_EVERY_MS * 2 ** Math.max(0, told - 1));
    if (since < every) {
      if (!this.deferred.has(key)) {
        const timer = setTimeout(() => {
          this.deferred.delete(key);
          this.toldAt.set(key, this.now());
          this.streak.set(key, (this.streak.get(key) ?? 0) + 1);
          this.onChanged?.(key);
        }, every - since);
        timer.unref();
        this.deferred.set(key, timer);
      }
      return false;
    }
    clearTimeout(this.deferred.get(key));
    this.deferred.delete(key);
    this.toldAt.set(key, now);
    this.streak.set(key, told + 1);
    return true;
  }

  /** Make entries stale at once (list_changed, upstream restart). Keeps them for stale serving. */
  invalidate(prefix: string): void {
    this.forgetFailures(prefix);
    for (const [k, e] of this.entries)
      if (covers(prefix, k)) {
        e.ttlMs = 0;
        e.stoodIn = undefined;
        e.saidChanged = true;
        this.streak.delete(k);
      }
    for (const k of this.inflight.keys()) if (covers(prefix, k)) this.changedInFlight.add(k);
  }

  /**
   * Make entries stale without saying so: a change may have gone unheard (a notification stream
   * was down). The next list fetches them again and tells clients only if they differ.
   */
  expire(prefix: string): void {
    this.forgetFailures(prefix);
    const now = this.now();
    for (const [k, e] of this.entries)
      if (covers(prefix, k) && e.ttlMs > 0) {
        // Stale now even if received this very millisecond; ttlMs stays above 0 (a change the
        // refresh finds is told: nobody said it).
        e.receivedAt = Math.min(e.receivedAt, now - 1);
        e.ttlMs = Math.min(e.ttlMs, now - e.receivedAt);
      }
  }

  /** Stops: a change waiting for its window's end is not told. */
  close(): void {
    for (const timer of this.deferred.values()) clearTimeout(timer);
    this.deferred.clear();
  }

  /** Lists under `prefix` that failed are fetched again at their next get (their connection is back); the others are left as they are. */
  retryNow(prefix: string): void {
    this.forgetFailures(prefix);
  }

  /** Failed lists under `prefix` may be fetched at once again (their server said something changed). */
  private forgetFailures(prefix: string): void {
    if (this.failures.size === 0) return;
    for (const k of [...this.failures.keys()])
      if (covers(prefix, k)) {
        this.failures.delete(k);
        const e = this.entries.get(k);
        if (e) e.retryAt = undefined;
      }
  }

  /**
   * Forget entries (a server removed or reconfigured, a principal's connection gone), and the
   * fetches of them under way: their lists, or failures, come from a connection that is not the
   * one in use any more. Kept, a fetch on a connection a reload or `servers restart` replaced
   * (its process draining its calls) held the new one's first lists until it closed, and its
   * failure then kept the server out of every list for LIST_RETRY_MS.
   */
  drop(prefix: string): void {
    this.forgetFailures(prefix);
    for (const k of [...this.inflight.keys()])
      if (covers(prefix, k)) {
        this.inflight.delete(k);
        this.changedInFlight.delete(k);
      }
    for (const k of [...this.entries.keys()]) if (covers(prefix, k)) this.entries.delete(k);
    for (const k of [...this.toldAt.keys()]) if (covers(prefix, k)) this.toldAt.delete(k);
    for (const k of [...this.streak.keys()]) if (covers(prefix, k)) this.streak.delete(k);
    for (const k of [...this.leftOut]) if (covers(prefix, k)) this.leftOut.delete(k);
    for (const [k, timer] of this.deferred)
      if (covers(prefix, k)) {
        clearTimeout(timer);
        this.deferred.delete(k);
      }
  }
}

/**
 * `p`'s outcome, unless `ms` pass first: then `atTimeout` decides (it may settle, or leave the
 * promise to `p`). The timer holds no process open.
 */
function within<T>(p: Promise<T>, ms: number, atTimeout: (resolve: (v: T) => void, reject: (err: unknown) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => atTimeout(resolve, reject), ms);
    timer.unref();
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
