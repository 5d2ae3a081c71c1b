import type { Logger } from '../log.js';
import { MODERN } from '../protocol/era.js';
import { METHOD_NOT_FOUND, RpcError, TransportError } from '../protocol/errors.js';
import type { ListenFilter, ListenHandle, Upstream } from '../upstream/types.js';

/**
 * The hub's own `subscriptions/listen` to every modern upstream (digest §8.6): one stream per
 * upstream with the union of what the hub needs (list changes of the families the upstream
 * offers, plus the resource URIs some client subscribed to), opened when the upstream becomes
 * ready, re-opened after a drop (with backoff; the lists are invalidated because changes may
 * have been missed meanwhile) and when the filter changes.
 *
 * One stream is being opened at a time: changes that come while it waits for its
 * acknowledgement go into the next one, opened when it is acknowledged. A burst of subscribes
 * (or a session's end) is then a few re-listens, not one each: 480 subscribes from eight
 * sessions opened 480 streams (up to 120 open at once, 475 for as many unsubscribes) and sent
 * 11 MB of filters upstream.
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

interface Tracked {
  id: string;
  upstream: Upstream;
  handle?: ListenHandle;
  filterKey?: string;
  retry?: NodeJS.Timeout;
  failures: number;
  /** When the current stream was acknowledged (Date.now()); undefined until it is. */
  ackedAt?: number;
  onState: () => void;
  /** The upstream refused listen (notSupported): do not ask again until it restarts. */
  refused: boolean;
  /** The resource URIs the current stream's acknowledgement honoured; undefined until it came. */
  honoured?: ReadonlySet<string>;
  /** The resource URIs the current stream asked for. */
  asked: ReadonlySet<string>;
  /** Waiting for an acknowledgement that answers for their URIs (honours); true: answered, let go. */
  waiters: Set<(final?: boolean) => boolean>;
}

/** How long a client's subscription waits for a modern upstream to acknowledge its resource URIs. */
export const LISTEN_ACK_WAIT_MS = 2_000;

export interface ListenManagerOptions {
  /** The resource URIs of this upstream some downstream client subscribed to. */
  subscribedUris(serverId: string): string[];
  /** A stream ended unexpectedly: notifications may have been missed. */
  onGap(serverId: string): void;
  /** How long a stream may wait for its acknowledgement (default LISTEN_ACK_TIMEOUT_MS; shorter in tests). */
  ackTimeoutMs?: number;
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

export class ListenManager {
  private readonly tracked = new Map<string, Tracked>();
  private readonly ackTimeoutMs: number;

  constructor(
    private readonly log: Logger,
    private readonly opts: ListenManagerOptions,
  ) {
    this.ackTimeoutMs = opts.ackTimeoutMs ?? LISTEN_ACK_TIMEOUT_MS;
  }

  track(id: string, upstream: Upstream): void {
    this.untrack(id);
    const t: Tracked = { id, upstream, failures: 0, refused: false, onState: () => this.sync(t), asked: new Set(), waiters: new Set() };
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
  }

  /** The filter of a server may have changed (a resource subscription came or went). */
  refresh(id: string): void {
    const t = this.tracked.get(id);
    if (t) this.sync(t);
  }

  /**
   * Which of `uris` the server's stream honours, as its acknowledgement says (digest §4.1: the
   * subset it will honour); waits up to `waitMs` for the acknowledgement of a stream that asked
   * for them all (one being opened, the next one, which a change made meanwhile waits for, or
   * the one opened again after a drop).
   * None when the server refused to listen (-32601). Undefined when there is no stream to ask
   * (not listening yet, or no answer in time): the caller decides.
   */
  honours(id: string, uris: readonly string[], waitMs: number): Promise<string[] | undefined> {
    const t = this.tracked.get(id);
    // It does not listen at all: nothing it is asked to watch would ever be said to change.
    if (t?.refused) return Promise.resolve([]);
    // A stream that dropped is opened again after its backoff: its acknowledgement answers, if
    // it comes in time (answered undefined at once, a subscribe was told {} unchecked).
    if (!t || (!t.handle && !t.retry)) return Promise.resolve(undefined);
    // `final`: the acknowledged stream's filter is the whole current one (nothing changed while
    // it was opened): a URI it did not ask for is no longer wanted (unsubscribed meanwhile).
    const answer = (final = false): string[] | undefined => {
      if (t.refused) return [];
      const h = t.honoured;
      return h && (final || uris.every((u) => t.asked.has(u))) ? uris.filter((u) => h.has(u)) : undefined;
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
        resolve(undefined);
      }, waitMs);
      t.waiters.add(waiter);
    });
  }

  /** Whether a listen stream to this server is open (for status and tests). */
  listening(id: string): boolean {
    return this.tracked.get(id)?.handle !== undefined;
  }

  closeAll(): void {
    for (const id of [...this.tracked.keys()]) this.untrack(id);
  }

  private stop(t: Tracked): void {
    if (t.retry) clearTimeout(t.retry);
    t.retry = undefined;
    const h = t.handle;
    t.handle = undefined;
    t.filterKey = undefined;
    h?.close();
  }

  private sync(t: Tracked): void {
    const u = t.upstream;
    if (u.state !== 'ready' || u.era !== MODERN || typeof u.listen !== 'function') {
      if (u.state !== 'ready') t.refused = false; // a restart may bring a server that listens
      this.stop(t);
      return;
    }
    if (t.refused) return;
    // One opening at a time: its acknowledgement syncs again, with whatever changed meanwhile.
    if (t.handle && t.ackedAt === undefined) return;
    const filter = filterFor(u, this.opts.subscribedUris(t.id));
    const key = JSON.stringify(filter ?? null);
    if (t.handle && t.filterKey === key) return;
    if (t.retry && !t.handle) return; // a re-listen is scheduled; it will use the current filter
    // A stream whose filter changed is closed only once its successor is acknowledged: a change
    // the server says in between reaches one of them (closing first would lose it).
    const prev = t.handle;
    if (prev) {
      t.handle = undefined;
      t.filterKey = undefined;
    } else this.stop(t);
    if (filter) this.open(t, filter, key, prev);
    else prev?.close();
  }

  private open(t: Tracked, filter: ListenFilter, key: string, prev?: ListenHandle): void {
    let replaced = prev;
    const closeReplaced = (): void => {
      const p = replaced;
      replaced = undefined;
      p?.close();
    };
    t.honoured = undefined;
    t.ackedAt = undefined;
    t.asked = new Set(filter.resourceSubscriptions);
    const handle = t.upstream.listen!(filter, (m) => {
      if (m.method !== 'notifications/subscriptions/acknowledged' || t.handle !== handle || t.ackedAt !== undefined) return;
      clearTimeout(slow);
      t.ackedAt = Date.now();
      closeReplaced();
      const subs = (m.params.notifications as { resourceSubscriptions?: unknown } | undefined)?.resourceSubscriptions;
      t.honoured = new Set(Array.isArray(subs) ? subs.filter((u): u is string => typeof u === 'string') : []);
      for (const w of t.waiters) if (w()) t.waiters.delete(w);
      this.log.debug({ server: t.id, honoured: m.params.notifications }, 'upstream listen acknowledged');
      // What changed while it was opened.
      if (this.tracked.get(t.id) === t) this.sync(t);
      if (t.handle === handle) for (const w of t.waiters) if (w(true)) t.waiters.delete(w);
    });
    t.handle = handle;
    t.filterKey = key;
    // Given up as a drop (its end below): the changes behind it must not wait for good.
    let unacknowledged = false;
    const slow = setTimeout(() => {
      if (t.handle !== handle || t.ackedAt !== undefined) return;
      unacknowledged = true;
      handle.close();
    }, this.ackTimeoutMs);
    slow.unref();
    void handle.ended.then((end) => {
      clearTimeout(slow);
      closeReplaced();
      if (t.handle !== handle) return; // closed by us, or replaced
      t.handle = undefined;
      t.filterKey = undefined;
      if (this.tracked.get(t.id) !== t || t.upstream.state !== 'ready') return;
      if (notSupported(end.error)) {
        t.refused = true;
        for (const w of t.waiters) if (w()) t.waiters.delete(w);
        this.log.info({ server: t.id }, 'upstream does not support subscriptions/listen; relying on list TTLs');
        return;
      }
      // Only a stream that lasted starts the backoff over (see LISTEN_STABLE_MS).
      if (t.ackedAt !== undefined && Date.now() - t.ackedAt >= LISTEN_STABLE_MS) t.failures = 0;
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

/**
 * A listen refused as a method the server does not have: -32601, or over HTTP a 404 or 405
 * without a JSON-RPC answer (a modern server that sends no body with its "not found", a
 * gateway that lets no such method through). Asking again would get the same.
 */
function notSupported(err: Error | undefined): boolean {
  if (err instanceof RpcError) return err.code === METHOD_NOT_FOUND;
  return err instanceof TransportError && (err.status === 404 || err.status === 405);
}
