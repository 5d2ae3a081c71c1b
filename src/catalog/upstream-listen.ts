import type { Logger } from '../log.js';
import { MODERN } from '../protocol/era.js';
import { METHOD_NOT_FOUND, RpcError, TransportError } from '../protocol/errors.js';
import type { ListenFilter, ListenHandle, Upstream } from '../upstream/types.js';
import { monotonicNow } from '../monotonic.js';

/**
 * The hub's own `subscriptions/listen` to every modern upstream connection (digest §8.6): what
 * the hub needs (list changes of the families the upstream offers, plus the resource URIs some
 * client subscribed to), opened when the upstream becomes ready, re-opened after a drop (with
 * backoff; the lists are invalidated because changes may have been missed meanwhile) and
 * followed as the resource subscriptions change.
 *
 * One stream is being opened at a time: changes that come while it waits for its
 * acknowledgement go into the next one, opened when it is acknowledged. A burst of subscribes
 * (or a session's end) is then a few re-listens, not one each: 480 subscribes from eight
 * sessions opened 480 streams (up to 120 open at once, 475 for as many unsubscribes) and sent
 * 11 MB of filters upstream.
 *
 * The filter is spread over a few streams (several may be open at once, digest §4.1), so that
 * a change does not send it whole again: the oldest (the base) carries the list-change flags,
 * newer ones only the URIs added since, each at most half as many as the one before it. New
 * URIs go into a new stream together with the newest streams that would otherwise break that
 * rule, which it replaces once acknowledged (closed only then: a change said in between reaches
 * one of them; over HTTP read a little longer, see ListenHandle.retire); so the streams are a few (about log2 of the URIs), and a URI is sent again a
 * few times, not at each later subscribe. Subscribes awaited one by one (an IDE opening files)
 * each sent the whole filter: 64 of them 237 KB of filters, 64 more by another user of the same
 * connection 659 KB. A URI unsubscribed stays in its stream until that stream holds more such
 * URIs than wanted ones (an update of it reaches nobody: none subscribes to it): then it is
 * opened again, with the newer ones, without them, so unsubscribes one by one do not send the
 * filter whole again either.
 *
 * While a stream replaces others, a change the server says before it has heard that they were
 * closed is said on them and on the new one: a client would be told twice. A copy said on a
 * stream being replaced (or replaced) that its replacement says too (asked for, or once
 * acknowledged, honoured) is therefore held for a while (REPLACED_COPY_HOLD_MS), and passed on
 * only if the same change has not been said since by another stream: the copy passed on is
 * then never earlier than the one held, so a client that reads the resource when told reads
 * it after both (two changes told as one are still read after the second). A copy whose twin
 * does not come in time is passed on late, never dropped: a missed update is worse than a
 * duplicate.
 */

const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 30_000;
/**
 * How long an acknowledged stream must have lasted for its end to start the backoff over. An
 * acknowledgement alone says nothing: a server (or a proxy in front of it) that ends every
 * stream right after acknowledging it would otherwise be listened to again, and every list
 * fetched again and perhaps said changed to every client, four times a second for good.
 */
const LISTEN_STABLE_MS = 10_000;
/**
 * How long a stream may wait for its acknowledgement before it is given up as a drop: the next
 * change waits for it (one opening at a time), so a server that never acknowledges must not
 * hold every later change back for good.
 */
const LISTEN_ACK_TIMEOUT_MS = 10_000;

/**
 * How long a copy of a change said on a stream being replaced waits for the same change from
 * another stream (its replacement's copy follows at once over stdio, after the replacement's
 * acknowledgement over HTTP) before it is passed on itself.
 */
export const REPLACED_COPY_HOLD_MS = 1_000;

const UPDATED = 'notifications/resources/updated';
/** The list-change flag of each list-change notification. */
const FLAG_OF: Record<string, string> = {
  'notifications/tools/list_changed': 'toolsListChanged',
  'notifications/prompts/list_changed': 'promptsListChanged',
  'notifications/resources/list_changed': 'resourcesListChanged',
};
const NO_FLAGS: ReadonlySet<string> = new Set();

type ListenMessage = { method: string; params: Record<string, unknown> };

/** A copy held (see REPLACED_COPY_HOLD_MS). */
interface Held {
  n: ListenMessage;
  /** The stream that replaces the one it came on. */
  by: Stream;
  timer: NodeJS.Timeout;
}

/** One of a connection's listen streams. */
interface Stream {
  handle: ListenHandle;
  /** The resource URIs it asked for (less those it left out that are no longer wanted: see sync). */
  asked: Set<string>;
  /** Those its acknowledgement honoured; undefined until it came. */
  honoured?: ReadonlySet<string>;
  /**
   * When it was acknowledged (monotonicNow()); undefined until it is. Not the wall clock: a step
   * ahead made a stream that ended at once count as lasting (LISTEN_STABLE_MS), its backoff
   * started over, and a step back made a stream that lasted count as short.
   */
  ackedAt?: number;
  /** Its list-change flags (the base's; `{}` for a stream of URIs only). */
  flagsKey: string;
  /** The list-change flags its acknowledgement honoured (a base's). */
  heard?: ReadonlySet<string>;
  /** The list-change flags it asked for. */
  flags: ReadonlySet<string>;
  /** The acknowledged stream that took its place. */
  replacedBy?: Stream;
  /**
   * The changes it passed on (their held-copy keys) while a stream it replaced is still read
   * (retiring): a copy that comes there later is of a change no later than this one's.
   */
  told?: Set<string>;
}

interface Tracked {
  id: string;
  upstream: Upstream;
  /** The acknowledged streams, oldest (the base, with the list-change flags) first. */
  streams: Stream[];
  /** The stream being opened, and the newest `streams` from `from` on, which it replaces once acknowledged. */
  opening?: { stream: Stream; from: number };
  retry?: NodeJS.Timeout;
  failures: number;
  onState: () => void;
  /** The upstream refused listen (notSupported): do not ask again until it restarts. */
  refused: boolean;
  /** Waiting for an acknowledgement that answers for their URIs (honours); true: answered, let go. */
  waiters: Set<(final?: boolean) => boolean>;
  /** Copies said on replaced streams, by change (the method, and an update's URI). */
  held: Map<string, Held>;
  /** Streams replaced, still read for what the server said on them before (ListenHandle.retire). */
  retiring: Set<Stream>;
  /**
   * Not listened to for a while: the connection not ready (or not yet), its streams dropped, or
   * it replaced another under its key (GAPS_KEPT). A change said until a new stream is
   * acknowledged is not heard; so every URI that stream honours is said updated to its
   * subscribers (toldUnheard): those the old streams watched, and those subscribed in between,
   * whose subscribers were told they are watched while nothing watched them (a server down is
   * waited for only so long). A re-read too many is cheaper than a change missed.
   */
  lapsed: boolean;
  /**
   * URIs whose subscriber was answered before any acknowledgement honoured them (honours() gave
   * up waiting, and its caller counts them watched): a change said until one does is not heard,
   * so they are said updated once one does (toldUnheard), as after a lapse.
   */
  owed: Set<string>;
}

/**
 * How many untracked keys are remembered as lapsed for the next track() of the key (a reload or
 * `servers restart` untracks the old connection before the new one is tracked, maybe ready
 * already). A key untracked for good (a server removed) is not tracked again: the oldest are let go.
 */
const GAPS_KEPT = 256;

/** How long a client's subscription waits for a modern upstream to acknowledge its resource URIs. */
export const LISTEN_ACK_WAIT_MS = 2_000;

export interface ListenManagerOptions {
  /** The resource URIs of this upstream some downstream client subscribed to. */
  subscribedUris(serverId: string): string[];
  /** A stream ended unexpectedly: notifications may have been missed. */
  onGap(serverId: string): void;
  /** How long a stream may wait for its acknowledgement (default LISTEN_ACK_TIMEOUT_MS; shorter in tests). */
  ackTimeoutMs?: number;
  /**
   * Resource URIs still subscribed that the server does not watch: an acknowledgement left them
   * out, or it refused to listen at all. Clients told they are watched (their server was down
   * then: see Hub.subscribeResources) learn otherwise only from the caller.
   */
  onLeftOut?(key: string, uris: string[]): void;
  /**
   * A stream with list-change flags was acknowledged: changes said from now on are heard (one
   * said before it may not have been: a list asked for before then may be out of date).
   */
  onHearing?(key: string): void;
}

export function filterFor(upstream: Upstream, uris: string[]): ListenFilter | undefined {
  const caps = upstream.capabilities ?? {};
  const f: ListenFilter = {};
  if (caps.tools) f.toolsListChanged = true;
  if (caps.prompts) f.promptsListChanged = true;
  if (caps.resources) {
    f.resourcesListChanged = true;
    if (uris.length) f.resourceSubscriptions = [...uris].sort();
  }
  return Object.keys(f).length ? f : undefined;
}

/** A filter's list-change flags, as a key. */
function flagsKeyOf(f: ListenFilter): string {
  const { resourceSubscriptions: _uris, ...flags } = f;
  return JSON.stringify(flags);
}

export class ListenManager {
  private readonly tracked = new Map<string, Tracked>();
  /** Keys untracked, lapsed at their next track() (see Tracked.lapsed). */
  private readonly gaps = new Set<string>();
  private readonly ackTimeoutMs: number;

  constructor(
    private readonly log: Logger,
    private readonly opts: ListenManagerOptions,
  ) {
    this.ackTimeoutMs = opts.ackTimeoutMs ?? LISTEN_ACK_TIMEOUT_MS;
  }

  track(id: string, upstream: Upstream): void {
    this.untrack(id);
    const lapsed = this.gaps.delete(id);
    const t: Tracked = { id, upstream, streams: [], failures: 0, refused: false, onState: () => this.sync(t), waiters: new Set(), held: new Map(), retiring: new Set(), lapsed, owed: new Set() };
    this.tracked.set(id, t);
    upstream.on('state', t.onState);
    this.sync(t);
  }

  /** `upstream`: only if it is still the one tracked under `id` (a later connection may have taken the key). */
  untrack(id: string, upstream?: Upstream): void {
    const t = this.tracked.get(id);
    if (!t || (upstream && t.upstream !== upstream)) return;
    this.tracked.delete(id);
    t.upstream.off('state', t.onState);
    this.stop(t);
    // Not listened to from now until the next connection's stream is acknowledged.
    this.gaps.delete(id);
    this.gaps.add(id);
    if (this.gaps.size > GAPS_KEPT) this.gaps.delete(this.gaps.values().next().value!);
  }

  /** The filter of a server may have changed (a resource subscription came or went). */
  refresh(id: string): void {
    const t = this.tracked.get(id);
    if (t) this.sync(t);
  }

  /**
   * Which of `uris` the server's streams honour, as their acknowledgements say (digest §4.1:
   * the subset each will honour): each URI as the newest stream that asked for it says. Waits
   * up to `waitMs` for the acknowledgement of a stream that asked for a URI no acknowledged one
   * did (one being opened, the next one, which a change made meanwhile waits for, or the one
   * opened again after a drop). None when the server refused to listen (-32601). Undefined when
   * there is no stream to ask (not listening yet, or no answer in time): the caller decides.
   */
  honours(id: string, uris: readonly string[], waitMs: number): Promise<string[] | undefined> {
    const t = this.tracked.get(id);
    // It does not listen at all: nothing it is asked to watch would ever be said to change.
    if (t?.refused) return Promise.resolve([]);
    // A stream that dropped is opened again after its backoff: its acknowledgement answers, if
    // it comes in time (answered undefined at once, a subscribe was told {} unchecked).
    if (!t || (t.streams.length === 0 && !t.opening && !t.retry)) return Promise.resolve(undefined);
    // `final`: the streams were just brought up to date with the subscriptions (sync after an
    // acknowledgement): a URI no stream asked for is no longer wanted (unsubscribed meanwhile).
    const answer = (final = false): string[] | undefined => {
      if (t.refused) return [];
      if (t.streams.length === 0) return undefined;
      const out: string[] = [];
      for (const u of uris) {
        if (t.opening?.stream.asked.has(u)) return undefined;
        const s = newestAsking(t.streams, u);
        if (!s) {
          if (!final) return undefined;
        } else if (s.honoured!.has(u)) out.push(u);
      }
      return out;
    };
    const now = answer();
    if (now) return Promise.resolve(now);
    return new Promise((resolve) => {
      const waiter = (final?: boolean): boolean => {
        const a = answer(final);
        if (!a) return false;
        clearTimeout(timer);
        resolve(a);
        return true;
      };
      const timer = setTimeout(() => {
        t.waiters.delete(waiter);
        // Answered unchecked: those no acknowledgement honours yet are owed an update once one does.
        for (const u of uris) if (!newestAsking(t.streams, u)?.honoured?.has(u)) t.owed.add(u);
        resolve(undefined);
      }, waitMs);
      t.waiters.add(waiter);
    });
  }

  /**
   * Whether an acknowledged stream of this connection watches list changes of a family: its
   * base (the stream with the list-change flags) is open and its acknowledgement honoured `flag`.
   */
  hearsListChanges(id: string, flag: 'toolsListChanged' | 'promptsListChanged' | 'resourcesListChanged'): boolean {
    return this.tracked.get(id)?.streams[0]?.heard?.has(flag) === true;
  }

  /** How many copies said on replaced streams are held (for tests). */
  holding(id: string): number {
    return this.tracked.get(id)?.held.size ?? 0;
  }

  /** Whether a listen stream to this server is open (for status and tests). */
  listening(id: string): boolean {
    const t = this.tracked.get(id);
    return t !== undefined && (t.streams.length > 0 || t.opening !== undefined);
  }

  closeAll(): void {
    for (const id of [...this.tracked.keys()]) this.untrack(id);
    this.gaps.clear();
  }

  /** Every stream closed, and a re-listen scheduled is not made. */
  private stop(t: Tracked): void {
    if (t.retry) clearTimeout(t.retry);
    t.retry = undefined;
    this.closeStreams(t);
  }

  private closeStreams(t: Tracked): void {
    const all = t.opening ? [...t.streams, t.opening.stream] : t.streams;
    t.streams = [];
    t.opening = undefined;
    for (const s of all) s.handle.close();
    for (const s of t.retiring) s.handle.close();
    t.retiring.clear();
    // No replacement will say them now.
    for (const key of [...t.held.keys()]) this.release(t, key);
  }

  /**
   * A change notification said on `s` (acknowledgements aside): false when it is held, as a
   * copy of what the stream replacing `s` says too (see REPLACED_COPY_HOLD_MS).
   */
  private heard(t: Tracked, s: Stream, m: ListenMessage): boolean {
    const uri = m.params.uri;
    const key = m.method === UPDATED ? (typeof uri === 'string' ? `${UPDATED}\0${uri}` : undefined) : FLAG_OF[m.method] !== undefined ? m.method : undefined;
    if (key === undefined) return true;
    const next = s.replacedBy ?? (t.opening && t.streams.indexOf(s) >= t.opening.from ? t.opening.stream : undefined);
    if (next && says(next, m)) {
      // Its replacement said it since: what it told stands for this (a twin, or an earlier change).
      if (next.told?.has(key)) {
        this.log.debug({ server: t.id, method: m.method }, 'a change said on a replaced listen stream after its replacement said it: passed on once');
        return false;
      }
      const held = t.held.get(key);
      // The later copy, passed on no later than the earlier one was due.
      if (held) held.n = m;
      else {
        const timer = setTimeout(() => this.release(t, key), REPLACED_COPY_HOLD_MS);
        timer.unref();
        t.held.set(key, { n: m, by: next, timer });
      }
      return false;
    }
    s.told?.add(key);
    // Said again, now: the copy held stands for nothing this one does not.
    const held = t.held.get(key);
    if (held) {
      clearTimeout(held.timer);
      t.held.delete(key);
      this.log.debug({ server: t.id, method: m.method }, 'a change said on a replaced listen stream, said again by another: passed on once');
    }
    return true;
  }

  /**
   * Listened to again after a lapse (t.lapsed), by the whole filter (`whole`): the URIs `stream`
   * honours that are still subscribed are said updated, as the upstream would have said a change
   * of them: their subscribers read them again. Once each, whatever was said in the gap (nothing
   * of it was heard), and whether they were watched before the gap or subscribed during it. So
   * are those owed an update (t.owed) that any stream's acknowledgement honours at last.
   */
  private toldUnheard(t: Tracked, stream: Stream, whole: boolean): void {
    const lapsed = whole && t.lapsed;
    if (whole) t.lapsed = false;
    if ((!lapsed && t.owed.size === 0) || this.tracked.get(t.id) !== t) return;
    const wanted = new Set(this.opts.subscribedUris(t.id));
    const uris = [...stream.honoured!].filter((u) => wanted.has(u) && (lapsed || t.owed.has(u)));
    // Settled: said now, left out by this acknowledgement (onLeftOut), or no longer subscribed.
    for (const u of [...t.owed]) if (stream.asked.has(u) || !wanted.has(u)) t.owed.delete(u);
    if (uris.length === 0) return;
    if (lapsed) this.log.info({ server: t.id, uris: uris.length }, 'listening again after a gap: subscribed resources said updated, since a change in the gap was not heard');
    else this.log.info({ server: t.id, uris: uris.length }, 'resources watched only after their subscribers were answered: said updated, since a change in between was not heard');
    for (const uri of uris) t.upstream.emit('notification', { method: UPDATED, params: { uri } });
  }

  /** A copy held is passed on, as the upstream would have said it. */
  private release(t: Tracked, key: string): void {
    const held = t.held.get(key);
    if (!held) return;
    clearTimeout(held.timer);
    t.held.delete(key);
    this.log.debug({ server: t.id, method: held.n.method }, 'a change said on a replaced listen stream, not said again by another: passed on');
    t.upstream.emit('notification', held.n);
  }

  private sync(t: Tracked): void {
    const u = t.upstream;
    if (u.state !== 'ready' || u.era !== MODERN || typeof u.listen !== 'function') {
      if (u.state !== 'ready') {
        t.refused = false; // a restart may bring a server that listens
        t.lapsed = true;
      }
      this.stop(t);
      return;
    }
    if (t.refused) return;
    // One opening at a time: its acknowledgement syncs again, with whatever changed meanwhile.
    if (t.opening) return;
    if (t.retry && t.streams.length === 0) return; // a re-listen is scheduled; it will use the current filter
    const filter = filterFor(u, this.opts.subscribedUris(t.id));
    if (!filter) return this.closeStreams(t);
    const wanted = new Set(filter.resourceSubscriptions);
    const flagsKey = flagsKeyOf(filter);
    const streams = t.streams;
    // A URI a stream's acknowledgement left out, no longer wanted (its subscribe was refused for
    // that): that stream does not watch it, so it is forgotten there. Subscribed again, it is
    // then asked for again (the server may watch it by now), not answered by the old
    // acknowledgement for as long as that stream, kept for its other URIs, lives.
    for (const s of streams) if (s.honoured) for (const x of s.asked) if (!wanted.has(x) && !s.honoured.has(x)) s.asked.delete(x);
    const live = streams.map((s) => [...s.asked].filter((x) => wanted.has(x)));
    const added = [...wanted].filter((x) => !streams.some((s) => s.asked.has(x)));
    // The newest streams from `from` on are replaced by the one opened now: all of them when
    // the flags changed (or there is none yet), from the oldest that holds more URIs no longer
    // wanted than wanted ones, and then as many of the newest as hold less than twice the URIs
    // the new one would (each stream at least twice as big as the next one: a few streams).
    let from = streams.length;
    if (streams.length === 0 || streams[0]!.flagsKey !== flagsKey) from = 0;
    else {
      const stale = live.findIndex((l, i) => l.length * 2 < streams[i]!.asked.size);
      if (stale >= 0) from = stale;
    }
    let size = added.length;
    for (let i = from; i < streams.length; i++) size += live[i]!.length;
    if (from > 0 && added.length === 0 && from === streams.length) return; // nothing to change
    while (from > 0 && size > 0 && live[from - 1]!.length < 2 * size) size += live[--from]!.length;
    if (from > 0 && size === 0) {
      // Only URIs no longer wanted in them: closed, nothing replaces them.
      for (const s of streams.splice(from)) s.handle.close();
      return;
    }
    const uris = [...added, ...live.slice(from).flat()].sort();
    // The base is the whole filter; a newer stream the URIs alone.
    const f: ListenFilter = from === 0 ? { ...filter } : { resourceSubscriptions: uris };
    if (from === 0) {
      if (uris.length) f.resourceSubscriptions = uris;
      else delete f.resourceSubscriptions;
    }
    this.open(t, f, from === 0 ? flagsKey : '{}', from);
  }

  /** Those of `uris` still subscribed, to onLeftOut. */
  private leftOut(t: Tracked, uris: string[]): void {
    if (uris.length === 0 || !this.opts.onLeftOut) return;
    const wanted = new Set(this.opts.subscribedUris(t.id));
    const left = uris.filter((u) => wanted.has(u));
    if (left.length) this.opts.onLeftOut(t.id, left);
  }

  private open(t: Tracked, filter: ListenFilter, flagsKey: string, from: number): void {
    const flags = new Set(Object.keys(filter).filter((k) => k !== 'resourceSubscriptions' && filter[k as keyof ListenFilter] === true));
    const stream: Stream = { handle: undefined as unknown as ListenHandle, asked: new Set(filter.resourceSubscriptions), flagsKey, flags };
    const mine = (): boolean => t.opening?.stream === stream || t.streams.includes(stream);
    t.opening = { stream, from };
    stream.handle = t.upstream.listen!(filter, (m) => {
      if (m.method !== 'notifications/subscriptions/acknowledged') return this.heard(t, stream, m);
      if (t.opening?.stream !== stream || stream.ackedAt !== undefined) return;
      clearTimeout(slow);
      stream.ackedAt = monotonicNow();
      const notifications = m.params.notifications as Record<string, unknown> | undefined;
      const subs = notifications?.resourceSubscriptions;
      stream.honoured = new Set(Array.isArray(subs) ? subs.filter((u): u is string => typeof u === 'string') : []);
      if (flagsKey !== '{}') stream.heard = new Set(Object.keys(notifications ?? {}).filter((k) => k !== 'resourceSubscriptions' && notifications![k] === true));
      // It takes the place of those it replaces, closed only now: a change said while it was
      // opened reached one of them.
      const whole = t.opening.from === 0;
      const replaced = t.streams.splice(t.opening.from, t.streams.length, stream);
      t.opening = undefined;
      for (const s of replaced) {
        s.replacedBy = stream;
        // Read a little longer where a change said on it just before may still be on its way (HTTP).
        if (s.handle.retire === undefined) s.handle.close();
        else {
          t.retiring.add(s);
          stream.told ??= new Set();
          s.handle.retire();
        }
      }
      // Held for it, and it does not say them after all.
      for (const [key, held] of [...t.held]) if (held.by === stream && !says(stream, held.n)) this.release(t, key);
      this.log.debug({ server: t.id, honoured: m.params.notifications, streams: t.streams.length }, 'upstream listen acknowledged');
      // Heard again after a gap (the whole filter: all streams had closed), or at last: what changed in it was not.
      this.toldUnheard(t, stream, whole);
      if (stream.heard && this.tracked.get(t.id) === t) this.opts.onHearing?.(t.id);
      // Said before the waiters hear it: a subscriber still waiting for this answer is not yet
      // told anything, and is answered by it (honours).
      if (this.tracked.get(t.id) === t) this.leftOut(t, [...stream.asked].filter((u) => !stream.honoured!.has(u)));
      // What changed while it was opened.
      if (this.tracked.get(t.id) === t) this.sync(t);
      for (const w of t.waiters) if (w(true)) t.waiters.delete(w);
    });
    // Given up as a drop (its end below): the changes behind it must not wait for good.
    let unacknowledged = false;
    const slow = setTimeout(() => {
      if (t.opening?.stream !== stream || stream.ackedAt !== undefined) return;
      unacknowledged = true;
      stream.handle.close();
    }, this.ackTimeoutMs);
    slow.unref();
    void stream.handle.ended.then((end) => {
      clearTimeout(slow);
      if (t.retiring.delete(stream)) {
        const by = stream.replacedBy!;
        if (![...t.retiring].some((r) => r.replacedBy === by)) by.told = undefined;
      }
      if (!mine()) return; // closed by us, or replaced
      // Any stream's end is a drop of them all: listened to again from the whole filter. What
      // was said until then is not heard, as when the connection lapses: the lists are fetched
      // again (onGap) and the URIs watched said updated once listened to again (toldUnheard).
      this.closeStreams(t);
      t.lapsed = true;
      if (this.tracked.get(t.id) !== t || t.upstream.state !== 'ready') return;
      if (notSupported(end.error)) {
        t.refused = true;
        this.leftOut(t, this.opts.subscribedUris(t.id));
        for (const w of t.waiters) if (w()) t.waiters.delete(w);
        this.log.info({ server: t.id }, 'upstream does not support subscriptions/listen; relying on list TTLs');
        return;
      }
      // Only a stream that lasted starts the backoff over (see LISTEN_STABLE_MS).
      if (stream.ackedAt !== undefined && monotonicNow() - stream.ackedAt >= LISTEN_STABLE_MS) t.failures = 0;
      const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** t.failures++) * (0.75 + Math.random() * 0.5);
      const reason = unacknowledged ? `not acknowledged in ${this.ackTimeoutMs / 1000} s` : end.reason;
      this.log.info({ server: t.id, reason, retryInMs: Math.round(delay) }, 'upstream listen stream ended; listening again');
      this.opts.onGap(t.id);
      t.retry = setTimeout(() => {
        t.retry = undefined;
        if (this.tracked.get(t.id) === t) this.sync(t);
      }, delay);
      t.retry.unref();
    });
  }
}

/** Whether `s` says this change too: acknowledged, its acknowledgement honoured it; not yet, it asked for it. */
function says(s: Stream, m: ListenMessage): boolean {
  const acked = s.ackedAt !== undefined;
  const flag = FLAG_OF[m.method];
  if (flag !== undefined) return (acked ? (s.heard ?? NO_FLAGS) : s.flags).has(flag);
  const uri = m.params.uri;
  return m.method === UPDATED && typeof uri === 'string' && (acked ? s.honoured! : s.asked).has(uri);
}

/** The newest of `streams` that asked for `uri`. */
function newestAsking(streams: readonly Stream[], uri: string): Stream | undefined {
  for (let i = streams.length - 1; i >= 0; i--) if (streams[i]!.asked.has(uri)) return streams[i];
  return undefined;
}

/**
 * A listen refused as a method the server does not have: -32601, or over HTTP a 404 or 405
 * without a JSON-RPC answer (a modern server that sends no body with its "not found", a
 * gateway that lets no such method through). Asking again would get the same.
 */
function notSupported(err: Error | undefined): boolean {
  if (err instanceof RpcError) return err.code === METHOD_NOT_FOUND;
  return err instanceof TransportError && (err.status === 404 || err.status === 405);
}
