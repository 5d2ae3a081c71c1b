/**
 * What the catalog hears of each upstream connection, and what it does about it: a server's
 * state (ready, restarting), its notifications (list_changed, resources/updated), its stream's
 * gaps, and a principal's own connection closing; each makes the lists concerned stale, and the
 * tools of a server ready or changed are listed and judged at once (warm). What a connection a
 * reload or `servers restart` replaced says is passed over (replaced-connection.ts).
 */
import type { Logger } from '../log.js';
import type { PluginRunner } from '../plugins/runner.js';
import type { Upstream } from '../upstream/types.js';
import type { ListCache } from './list-cache.js';
import type { ReadCache } from './read-cache.js';
import type { ListChanges } from './changes.js';
import type { PartStore } from './part-store.js';
import type { ListenManager } from './upstream-listen.js';
import type { ServerHandle } from './types.js';
import { CHANGED_NOTIFICATION, LIST_KINDS, offers, type ListKind } from './lists.js';
import { LapsedLists } from './lapsed-lists.js';
import { RefetchGate } from './refetch-gate.js';
import { principalConn } from './principal-conn.js';
import { principalListenKey, serverOfListenKey } from './keys.js';
import { currentRecord, replacedConnection, type OwnConnection } from './replaced-connection.js';
import { isObj } from '../protocol/jsonrpc.js';
import { withoutRelatedTask } from '../protocol/input-results.js';
import { META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import { SHARED_ONLY } from './shared-only.js';

export interface UpstreamWatchOptions {
  servers: () => readonly ServerHandle[];
  log: Logger;
  cache: ListCache;
  reads: ReadCache;
  listens: ListenManager;
  changes: ListChanges;
  parts: PartStore;
  plugins?: PluginRunner;
  ownConnection?: OwnConnection;
  /** Whether a server's tools are listed as soon as it is ready (CatalogOptions.listAtReady). */
  listAtReady?: (h: ServerHandle) => boolean;
  /** Whether some principal may have a connection of its own to h (CatalogOptions.splits). */
  splits?: (h: ServerHandle) => boolean;
  /** A server's tools listed and judged at its ready or change (warm): the shared aggregate /healthz counts by follows. */
  warmed?: () => void;
  /** The catalog's events: 'changed' (kind, principal?, server?) and 'resourceUpdated'. */
  emit: (event: 'changed' | 'resourceUpdated', ...args: unknown[]) => void;
}

export class UpstreamWatch {
  private readonly servers: () => readonly ServerHandle[];
  private readonly log: Logger;
  private readonly cache: ListCache;
  private readonly reads: ReadCache;
  private readonly listens: ListenManager;
  private readonly changes: ListChanges;
  private readonly parts: PartStore;
  /** Each server's notifications, handled in order (plugins may drop one). */
  private readonly notifyChain = new Map<string, Promise<void>>();
  /** What list_changed sets off (invalidate, fetch again), at most once a second per list. */
  private readonly refetches = new RefetchGate();
  /** Principals' own lists whose connections closed: only the most recent are kept. */
  private readonly lapsed: LapsedLists;
  /** Each server's main connection watched last, and the kinds its lists showed at its last state (shownKinds). */
  private readonly watched = new Map<string, ServerHandle>();
  private readonly shown = new WeakMap<Upstream, readonly ListKind[]>();
  /** Each server's principals' own connections open now (watchConnection until 'stopped'): the kinds they offer are shown (shownKinds). */
  private readonly own = new Map<string, Set<Upstream>>();

  constructor(private readonly o: UpstreamWatchOptions) {
    this.servers = o.servers;
    this.log = o.log;
    this.cache = o.cache;
    this.reads = o.reads;
    this.listens = o.listens;
    this.changes = o.changes;
    this.parts = o.parts;
    this.lapsed = new LapsedLists((serverId, principal) => o.parts.dropOwn(serverId, principal));
  }

  /** Wire an upstream's notifications and state into invalidation, and listen to it (modern). */
  watch(h: ServerHandle): void {
    this.watchConnection(h, h.upstream);
    this.watched.set(h.id, h);
    this.shown.set(h.upstream, listedKinds(h.upstream));
    h.upstream.on('state', (state: string) => {
      // A connection a reload or `servers restart` replaced turns `stopped` once its calls have
      // drained: the server's lists are the new connection's by then, and clients were told, and
      // calls routed, by them (forget() dropped what the old one had).
      if (this.servers().find((x) => x.id === h.id)?.upstream !== h.upstream) {
        this.log.debug({ server: h.id, state }, 'state of a connection replaced since: passed over');
        return;
      }
      this.reads.invalidate(h.id);
      // Clients are told of the kinds its lists showed before or show now: a server that never
      // offered prompts had every client told they changed at each restart (an IDE lists them
      // again), and one in a crash loop (restarting, failed, restarting) all three at each turn.
      const before = this.shownKinds(h);
      this.shown.set(h.upstream, listedKinds(h.upstream));
      this.invalidate(h.id, LIST_KINDS, undefined, union(before, this.shownKinds(h)));
      if (state === 'ready') this.warm(this.current(h));
    });
    this.listens.track(h.id, h.upstream);
  }

  /**
   * A server that is ready, or says its tools changed, has them listed and judged (pins,
   * poisoning, plugins) at once on its own connection, not at some client's next list: a tool
   * changed (while the hub was down, or now) is held back and reported before anyone asks,
   * `switchyard servers` counts its tools, and the first list after a start is served from the
   * cache. Tools only: the other lists are asked for far less, and each would cost a fetch of
   * every server at every start. (See listAtReady.)
   */
  private warm(h: ServerHandle): Promise<void> {
    if (!offers(h.upstream.capabilities, 'tools') || this.o.listAtReady?.(h) === false) return Promise.resolve();
    const upstream = h.upstream;
    // The whole refresh (partFor's default), not the stale list after STALE_WAIT_MS: the new list
    // is judged when it comes, and the refetch gate starts no other fetch of it meanwhile.
    return this.parts.partFor('tools', h, { credential: '', upstream }).then(
      () => this.o.warmed?.(),
      (err: unknown) => {
        // Its connection closed meanwhile (the hub stopping, a restart or reload replacing it):
        // no fault of the server's. A warning said so at every quick exit of `switchyard stdio`
        // (a client that closes stdin right after initialize), in the client's log.
        const level = upstream.state === 'stopped' ? 'debug' : 'warn';
        this.log[level]({ server: h.id, err: String((err as Error)?.message ?? err) }, 'tools list (server ready, or its tools changed) failed');
      },
    );
  }

  /**
   * Notifications of a connection to h: its main one, or a principal's own (auth/upstream-pool.ts),
   * whose list_changed makes that principal's cached list stale like any other of h's. A modern
   * server says list changes only on a listen stream, and its private lists may differ per
   * credential, so a principal's own connection gets a stream of its own, ended with the connection.
   */
  watchConnection(h: ServerHandle, upstream: Upstream, principal?: string): void {
    if (principal !== undefined) {
      const key = principalListenKey(h.id, principal);
      this.listens.track(key, upstream);
      this.lapsed.opened(h.id, principal);
      let open = this.own.get(h.id);
      if (!open) this.own.set(h.id, (open = new Set()));
      open.add(upstream);
      const onState = (state: string) => {
        // Closed (idle, evicted from the pool, reconfigured) or reconnecting: the stream that
        // would have said a change (legacy GET, modern listen) is gone with it.
        // One the pool replaced (a reload, `servers restart`) closes once its calls have drained,
        // maybe after the principal's next connection opened and listed: those lists are that
        // connection's, and lapsing them had every principal's next call miss readyTool.
        if (state === 'stopped' || state === 'restarting' || state === 'failed') {
          if (this.replaced(h, upstream, principal)) this.log.debug({ server: h.id, principal, state }, "state of a principal's connection replaced since: passed over");
          else this.ownListsLapsed(h.id, principal);
        }
        // Back (or up at last): a list that failed while it was not, refused as `restarting`, is
        // fetched at the next list, not LIST_RETRY_MS later with the server ready all the while
        // (the main connection's lists are invalidated at each of its state changes, see watch()).
        if (state === 'ready') for (const k of LIST_KINDS) this.cache.retryNow(`${h.id}\0${k}\0${principalConn(principal)}`);
        if (state !== 'stopped') return;
        upstream.off('state', onState);
        this.dropOwn(h.id, upstream);
        this.listens.untrack(key, upstream);
        this.lapsed.closed(h.id, principal);
      };
      upstream.on('state', onState);
    }
    // Its notification stream was down for a while (and what came meanwhile is not replayed).
    upstream.on('gap', () => {
      // A connection replaced since, still draining, heard nothing for lists that are not its own
      // (the server's are the new connection's): they were fetched again for nothing.
      if (this.replaced(h, upstream, principal)) {
        this.log.debug({ server: h.id, principal }, 'notification gap of a connection replaced since: passed over');
        return;
      }
      // A principal's own connection missed what its own stream would have said: its own lists
      // only (as a modern listen's gap, listenGap), not every principal's and the server's.
      if (principal !== undefined) {
        this.log.debug({ server: h.id, principal }, "notification gap of a principal's own connection: its own lists lapse");
        return this.ownListsLapsed(h.id, principal);
      }
      this.log.debug({ server: h.id }, "notification gap: the server's lists lapse");
      // A call waits for the tools list and its pin check, as after a list_changed (listenGap):
      // routed by the list held (readyTool), a tool changed in the gap was called unjudged.
      if (this.cache.peek(`${h.id}\0tools`)) this.changes.tools(h.id);
      this.changes.resources(h.id);
      this.cache.expire(`${h.id}\0`);
    });
    upstream.on('notification', (n: { method: string; params?: Record<string, unknown> }) => {
      // A server's connection a reload or `servers restart` replaced may still speak while its
      // calls drain (legacy: on its own pipe): a list change it says is its own, and its list,
      // fetched as the server's, was served and routed by as the new connection's.
      // So may a principal's own connection the pool replaced: its change is of its own process's
      // lists, and taken, every principal's next call missed readyTool (changes.ts: a server's tools, not a connection's).
      if (CHANGED_NOTIFICATION[n.method] && this.replaced(h, upstream, principal)) {
        this.log.debug({ server: h.id, principal, method: n.method }, 'list change said by a connection replaced since: passed over');
        return;
      }
      // Reads stop going by the resource lists held now as it is heard: not after the handling
      // of the notifications before it, the plugins, or the refetch gate. (One a plugin drops
      // costs a read one list of each server.)
      if (CHANGED_NOTIFICATION[n.method]?.includes('resources')) this.changes.resources(h.id);
      // Plugins may drop a notification; keep each server's notifications in order.
      const prev = this.notifyChain.get(h.id) ?? Promise.resolve();
      const next = prev.then(() => this.onNotification(this.current(h), n.method, n.params ?? {}, principal)).catch((err: unknown) =>
        this.log.error({ err, server: h.id }, 'notification handling failed'),
      );
      this.notifyChain.set(h.id, next);
    });
  }

  private replaced(h: ServerHandle, upstream: Upstream, principal: string | undefined): boolean {
    return replacedConnection(this.servers(), this.o.ownConnection, h, upstream, principal);
  }

  private current(h: ServerHandle): ServerHandle {
    return currentRecord(this.servers(), h);
  }

  /** `principal`: it came on that principal's own connection, undefined on the server's main one. */
  private async onNotification(h: ServerHandle, method: string, params: Record<string, unknown>, principal: string | undefined): Promise<void> {
    const kinds = CHANGED_NOTIFICATION[method];
    if (!kinds && method !== 'notifications/resources/updated') return;
    const plugins = this.o.plugins;
    if (plugins && !(await plugins.notification({ id: h.id, trust: h.config.trust, era: h.upstream.era }, method, params))) return;
    if (kinds) {
      // A storm of list_changed is acted on at most once a second per list (the first at once),
      // with one fetch running: each used to be a fetch of the whole list.
      this.refetches.run(`${h.id}\0${kinds.join()}\0${principal ?? ''}`, () => {
        // Said on a principal's own connection: that principal's partition, and its clients only;
        // on the server's own one, not the clients of principals listed from their own (SHARED_ONLY).
        this.invalidate(h.id, kinds, principal, kinds, principal === undefined);
        // Judged at once, as at ready: a rug pull is held back and audited when it happens.
        return principal === undefined && kinds.includes('tools') ? this.warm(h) : Promise.resolve();
      });
    } else if (typeof params.uri === 'string') {
      this.reads.invalidate(h.id, params.uri);
      // A subscriber of a parent URI would learn the name of a resource the hub hides.
      if (await this.parts.hiddenEverywhere(h.id, params.uri)) return;
      const update: { server: string; uri: string; principal?: string; meta?: Record<string, unknown> } = { server: h.id, uri: params.uri };
      if (principal !== undefined) update.principal = principal;
      const meta = updateMeta(params._meta);
      if (meta) update.meta = meta;
      this.o.emit('resourceUpdated', update);
    }
  }

  /**
   * `principal`: only that principal's own partition (its connection's credential) changed, and only its clients are told.
   * `said`: the kinds clients are told of (default: all of `kinds`); the others are only fetched again.
   * `sharedOnly`: said on the server's own connection, of its lists: not told to principals whose list of it is their own (SHARED_ONLY).
   */
  invalidate(serverId: string, kinds: readonly ListKind[] = LIST_KINDS, principal?: string, said: readonly ListKind[] = kinds, sharedOnly = false): void {
    if (kinds.includes('tools')) this.changes.tools(serverId);
    if (kinds.includes('resources') || kinds.includes('resourceTemplates')) this.changes.resources(serverId);
    const own = principal === undefined ? '' : `\0${principalConn(principal)}`;
    for (const k of kinds) this.cache.invalidate(`${serverId}\0${k}${own}`);
    // Clients hear one resources/list_changed for both families, so a change of both is said once.
    for (const k of said)
      if (k !== 'resourceTemplates' || !said.includes('resources')) {
        if (sharedOnly) this.o.emit('changed', k, principal, serverId, SHARED_ONLY);
        else this.o.emit('changed', k, principal, serverId);
      }
  }

  /**
   * The kinds whose lists show a server's items now, as far as its state tells: those its main
   * connection offers while ready (or offered when last ready, until the state after it), none
   * while it is down. When some principal may have a connection of its own to it (splits), also
   * the kinds the principals' own connections open now offer, and every kind some list of it is
   * held of, in any partition (a connection closed since): that principal's lists may show it
   * from there, with that connection's capabilities (a kind no connection offers and nobody
   * listed of it, no client was shown anything of; every kind was told, at each restart or reload
   * of such a server). A server not watched (yet, or any more): every kind.
   */
  shownKinds(h: ServerHandle | string): readonly ListKind[] {
    const watched = typeof h === 'string' ? this.watched.get(h) : h;
    // Its config as it is now (a reload may have changed it and kept the connection).
    const handle = watched && this.current(watched);
    if (!handle) return LIST_KINDS;
    const main = union(this.shown.get(handle.upstream) ?? LIST_KINDS, listedKinds(handle.upstream));
    if (this.o.splits?.(handle) === false) return main;
    const held = this.cache.kindsHeld(handle.id);
    const own = [...(this.own.get(handle.id) ?? [])].flatMap((u) => listedKinds(u));
    return LIST_KINDS.filter((k) => main.includes(k) || held.has(k) || own.includes(k));
  }

  /**
   * A listen stream to a modern server ended unasked (the server's graceful end, a proxy's time
   * limit, a broken connection) and is opened again: a change said meanwhile was not heard. Its
   * lists are fetched again, the tools at once and judged, and clients are told only if they
   * differ (as after a legacy GET stream's gap): a server whose streams end every minute must
   * not have every client told, and relisting, that every list changed every minute. Lists kept
   * for 0 ms are the exception: a change found in one is never told (list-cache.ts), so for them
   * the gap itself is said, as before. A principal's own stream: its own lists only.
   */
  listenGap(key: string): void {
    const serverId = serverOfListenKey(key);
    if (key !== serverId) return this.ownListsLapsed(serverId, key.slice(serverId.length + 1));
    const unheard = LIST_KINDS.filter((k) => {
      const e = this.cache.peek(`${serverId}\0${k}`);
      return e !== undefined && !(e.ttlMs > 0);
    });
    if (unheard.length) this.invalidate(serverId, unheard);
    // A call waits for the tools list and its pin check, as after a list_changed.
    if (this.cache.peek(`${serverId}\0tools`)) this.changes.tools(serverId);
    this.changes.resources(serverId);
    this.cache.expire(`${serverId}\0`);
    const h = this.servers().find((x) => x.id === serverId);
    if (h) void this.warm(h);
  }

  /**
   * A principal's own connection to a server went away. Its lists were kept by what that
   * connection would hear (a legacy list until its list_changed, a modern one refreshed early by
   * its listen stream), and the next connection hears nothing said meanwhile: they are fetched
   * again at the next list (clients told if they differ), and a call waits for that list and its
   * pin check, as after a restart, rather than being routed by the list from before.
   */
  private ownListsLapsed(serverId: string, principal: string): void {
    const own = `\0${principalConn(principal)}`;
    if (this.cache.peek(`${serverId}\0tools${own}`)) this.changes.tools(serverId);
    this.changes.resources(serverId);
    for (const k of LIST_KINDS) this.cache.expire(`${serverId}\0${k}${own}`);
  }

  private dropOwn(serverId: string, upstream: Upstream): void {
    const open = this.own.get(serverId);
    if (open?.delete(upstream) && open.size === 0) this.own.delete(serverId);
  }

  /** A server forgotten for good (removed): its notifications' order goes with it. */
  forget(serverId: string): void {
    this.notifyChain.delete(serverId);
    this.own.delete(serverId);
    this.watched.delete(serverId);
  }

  close(): void {
    this.refetches.close();
  }
}

/** The kinds a connection's lists give while it is ready (resourceTemplates go with resources), none otherwise. */
function listedKinds(upstream: Upstream): ListKind[] {
  return upstream.state === 'ready' ? LIST_KINDS.filter((k) => offers(upstream.capabilities, k)) : [];
}

function union(a: readonly ListKind[], b: readonly ListKind[]): ListKind[] {
  return LIST_KINDS.filter((k) => a.includes(k) || b.includes(k));
}

/**
 * What of a server's `_meta` on its resources/updated its subscribers are told: its own keys
 * pass (digest §8.4), as a progress's and a log line's do; its subscription id names the hub's
 * listen stream to it, not a client's, and its related-task a task the hub runs itself.
 */
function updateMeta(meta: unknown): Record<string, unknown> | undefined {
  if (!isObj(meta)) return undefined;
  const { [META_SUBSCRIPTION_ID]: _sid, ...rest } = meta;
  return Object.keys(rest).length > 0 ? withoutRelatedTask(rest) : undefined;
}
