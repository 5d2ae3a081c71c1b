/**
 * Resource subscriptions as the upstreams hold them: made on the connection a principal's calls
 * use (its own or the server's), asked for again when a legacy connection comes back, carried to
 * a connection that replaced the one they were made on, and let go when their sessions go.
 * Subscriptions (router/subscriptions.ts) counts who holds what; this says it upstream. A modern
 * server's are its listen filter (the catalog's ListenManager), changed through the catalog.
 */
import type { Logger } from '../log.js';
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import { LISTEN_ACK_WAIT_MS } from '../catalog/upstream-listen.js';
import { principalConn, principalOfConn } from '../catalog/principal-conn.js';
import type { PrincipalUpstreams } from '../auth/upstream-pool.js';
import { isListenKey } from '../downstream/listen.js';
import { MODERN } from '../protocol/era.js';
import { MAX_SUBSCRIBED_URI_LENGTH, type Subscriptions } from '../router/subscriptions.js';
import { knownLegacy } from '../router/forwarding.js';
import type { Upstream } from '../upstream/types.js';
import { readyWithin } from '../upstream/ready-within.js';
import { monotonicNow } from '../monotonic.js';
import type { KnownCapabilities } from './known-capabilities.js';
import { ownReady, startsOwnProcess } from './own-connection.js';

/** What the subscriptions look at and change, all of it the hub's, given once. */
export interface SubscriptionSources {
  /** The configured servers, as they are now (a reload or `servers restart` replaces them in place). */
  readonly handles: ReadonlyMap<string, ServerHandle>;
  readonly upstreams: Pick<PrincipalUpstreams, 'isolated' | 'existing' | 'knownBeforeReady' | 'for'>;
  readonly subs: Subscriptions;
  readonly catalog: Pick<Catalog, 'routeUri' | 'downResource' | 'hidesAny' | 'subscriptionsChanged' | 'listenHonours'>;
  readonly knownCapabilities: Pick<KnownCapabilities, 'of'>;
  /** Ends the modern listen streams of these subscriber keys (the endpoint's); how many ended. */
  endStreamsHolding(streams: ReadonlySet<string>): number;
  readonly log: Logger;
}

const UPDATED = 'notifications/resources/updated';

export class UpstreamSubscriptions {
  /** Connections whose notification stream's gaps are listened for (watchGaps). */
  private readonly gapsWatched = new WeakSet<Upstream>();
  /** When (performance.now()) the latest pass of a reload's moves began (movesBegin). */
  private movesBeganAt = -Infinity;
  /** That pass keeps a URI of a server gone that routes nowhere where it is held (takeMoved). */
  private keepUnrouted = false;

  constructor(private readonly src: SubscriptionSources) {}

  /**
   * A legacy upstream that restarted, or whose HTTP session the hub renewed (it reports 'ready'
   * again, "session renewed"), has forgotten its resource subscriptions, while the count here
   * still says they are held: ask again for every URI that has subscribers. So is a server
   * started afresh under its id (`servers restart`, a reload), and one subscribed to while it
   * was down. (A modern upstream's listen stream is opened again with its filter: ListenManager.)
   */
  resubscribe(h: ServerHandle, upstream: Upstream = h.upstream, conn = ''): void {
    this.watchGaps(h.id, upstream, conn);
    if (upstream.era === MODERN) return;
    const uris = this.src.subs.uris(h.id, conn);
    // Back without resources.subscribe: nothing it holds is watched any more.
    if (!upstream.capabilities?.resources?.subscribe) return this.unwatched(h.id, conn, uris);
    // Made for its holders, as their own subscribes were (Subscriptions.heldFor): on a fresh
    // connection the hub's own request would leave it one principal's, and a line the server
    // writes about it would go to that principal's call.
    let told = 0;
    const renewed = uris.map((uri) =>
      upstream.request('resources/subscribe', { uri }, { hubOwn: true, principal: this.src.subs.heldFor(h.id, uri, conn) }).then(
        () => {
          // Nothing watched it since the connection went down (or before this one was up, for a
          // subscription made meanwhile): an update said then was not heard, and the server does
          // not say it again. Said updated to its subscribers once watched again, through the
          // server's own notification's path (plugins, read cache, legacy and modern clients),
          // as a modern server's listen does after a gap (ListenManager's toldUnheard).
          told++;
          upstream.emit('notification', { method: UPDATED, params: { uri } });
        },
        (err: unknown) => {
          this.src.log.warn({ server: h.id, uri, err: String((err as Error)?.message ?? err) }, 'resource subscription not renewed after a restart');
          // Still the connection it was made on (not one opened since, which renews it itself).
          if (this.src.subs.uris(h.id, conn).includes(uri) && (conn === '' ? h.upstream : this.src.upstreams.existing(h, principalOfConn(conn))) === upstream) this.unwatched(h.id, conn, [uri]);
        },
      ),
    );
    if (uris.length)
      void Promise.all(renewed).then(() => {
        if (told) this.src.log.info({ server: h.id, uris: told }, 'subscribed again after a gap: subscribed resources said updated, since a change in the gap was not heard');
      });
  }

  /**
   * A legacy HTTP connection's standalone GET stream cut and opened again with nothing to resume
   * from (HttpUpstream's 'unheard', once the new one is open): an update the server said while
   * no stream was open was not heard, and it does not say it again, though the session, and its
   * subscriptions, live on (nothing is subscribed again, so resubscribe says nothing). Every URI
   * held on that connection is said updated to its subscribers, as after the other gaps. Listened
   * for from the connection's first `ready` (resubscribe runs at each), once per connection.
   */
  private watchGaps(serverId: string, upstream: Upstream, conn: string): void {
    if (this.gapsWatched.has(upstream)) return;
    this.gapsWatched.add(upstream);
    upstream.on('unheard', () => {
      // A connection replaced since, draining: the one open now was subscribed afresh, and said so.
      if (this.connectionNow(serverId, conn) !== upstream || upstream.era === MODERN || !upstream.capabilities?.resources?.subscribe) return;
      const uris = this.src.subs.uris(serverId, conn);
      for (const uri of uris) upstream.emit('notification', { method: UPDATED, params: { uri } });
      if (uris.length) this.src.log.info({ server: serverId, uris: uris.length }, 'notification stream open again after a gap it could not resume: subscribed resources said updated, since a change in the gap was not heard');
    });
  }

  /**
   * A legacy subscription of `uri`, counted on connection `conn` of `serverId` once `made` held
   * it. Should `made` have been replaced meanwhile (`servers restart`, a reload: its subscribe
   * sent before, answered as it drained), the connection open now was asked at its start for
   * the URIs counted then (resubscribe), not this one, and the old one takes it away when it
   * closes: the client would never hear of the resource again. Asked now, the hub's own request;
   * one not ready yet is asked when it is (resubscribe), a modern one listens for it.
   */
  async carrySubscription(serverId: string, conn: string, made: Upstream, uri: string): Promise<void> {
    const h = this.src.handles.get(serverId);
    const now = this.connectionNow(serverId, conn);
    if (h === undefined || now === undefined || now === made || now.state !== 'ready') return;
    if (now.era === MODERN) return this.src.catalog.subscriptionsChanged(serverId, conn);
    if (!now.capabilities?.resources?.subscribe) return this.unwatched(serverId, conn, [uri]);
    // For its holders, as resubscribe's.
    await now.request('resources/subscribe', { uri }, { hubOwn: true, principal: this.src.subs.heldFor(serverId, uri, conn) }).catch((err: unknown) => {
      this.src.log.warn({ server: serverId, uri, err: String((err as Error)?.message ?? err) }, 'resource subscription made on a replaced connection not carried to the new one');
      // Still the connection it is held on (not one opened since, which renews it itself).
      const current = this.src.handles.get(serverId);
      if (current && this.src.subs.uris(serverId, conn).includes(uri) && (conn === '' ? current.upstream : this.src.upstreams.existing(current, principalOfConn(conn))) === now) this.unwatched(serverId, conn, [uri]);
    });
  }

  /** Connection `conn` of server `serverId` (Subscriptions' names) open now, if any (none is made). */
  private connectionNow(serverId: string, conn: string): Upstream | undefined {
    const h = this.src.handles.get(serverId);
    return h === undefined ? undefined : conn === '' ? h.upstream : this.src.upstreams.existing(h, principalOfConn(conn));
  }

  /**
   * Resource URIs a server does not watch (its listen acknowledgement left them out, it refused
   * to listen, its resources/subscribe failed or is no longer offered) though clients hold them:
   * made while it was down, they were told they are watched (a listen stream's acknowledgement,
   * subscribeResources). A modern client's listen stream holding one ends, gracefully (its
   * request answered, digest §4.1): an acknowledgement cannot be taken back, and the client,
   * listening again, is told what is watched now. A legacy session cannot be told: its count stays.
   */
  unwatched(server: string, conn: string, uris: readonly string[]): void {
    const streams = new Set<string>();
    for (const uri of uris) for (const s of this.src.subs.holders(server, uri, conn)) if (isListenKey(s)) streams.add(s);
    if (streams.size === 0) return;
    const ended = this.src.endStreamsHolding(streams);
    if (ended) this.src.log.info({ server, uris: uris.length, streams: ended }, 'the server does not watch resource URIs listen streams were told it would: those streams ended, for their clients to listen again');
  }

  /**
   * Where `principal`'s subscription of `uri` lives: its server (one that offers
   * resources.subscribe), the connection this principal's calls use (as Router's) and that
   * connection's key in `subs`, and the era that decides how it is made. Undefined: not honoured.
   * `routedBefore`: the server it was routed to before a wait for that server.
   */
  private async subscriptionPlace(uri: string, principal: string, view: { principal: string; group?: string }, routedBefore?: string): Promise<{ h: ServerHandle; upstream: Upstream; conn: string; era: string | undefined } | undefined> {
    const routed = (await this.src.catalog.routeUri(uri, view)) ?? (await this.src.catalog.downResource(uri, view));
    const id = routed?.id ?? routedBefore;
    const h = id === undefined ? undefined : this.src.handles.get(id);
    if (!h) return undefined;
    // The server's main connection down, this principal's own one (which needs nothing of it)
    // ready: that one is what its calls use, and what it offers and its era decide. They were
    // the main one's: never ready, it offered nothing, and the URI was left out.
    const alone = h.upstream.state !== 'ready' && ownReady(this.src.upstreams, h, principal);
    const caps = alone ? this.src.upstreams.existing(h, principal)?.capabilities : this.src.knownCapabilities.of(h.id, h.upstream.state, h.upstream.capabilities);
    if (!caps?.resources?.subscribe) return undefined;
    // A modern one in that connection's listen filter.
    const own = (h.upstream.state === 'ready' || alone) && this.src.upstreams.isolated(h, principal);
    const upstream = own ? await this.src.upstreams.for(h, principal) : h.upstream;
    return { h, upstream, conn: own ? principalConn(principal) : '', era: (alone ? upstream : h.upstream).era };
  }

  /**
   * A modern listen stream's resourceSubscriptions: routed, reference-counted, subscribed
   * upstream. A URI of a server that is down (Catalog.downResource) is counted only: it is
   * subscribed when the server is ready (resubscribe, or a modern upstream's listen filter);
   * a modern one is waited for a while first (LISTEN_ACK_WAIT_MS), so that its acknowledgement decides.
   */
  async subscribeResources(subscriber: string, uris: string[], principal: string, group?: string, saidLater?: Set<string>): Promise<string[]> {
    const since = performance.now();
    const honoured: string[] = [];
    const view = { principal, group };
    /** Modern servers whose listen filter gained URIs, and those URIs (`conn`: the connection whose filter, as Subscriptions names it). */
    const modern = new Map<ServerHandle, { conn: string; list: string[] }>();
    /** Until when a modern server restarting is waited for (set at the first such wait). */
    let waitUntil: number | undefined;
    for (const uri of uris) {
      // Not honoured (the acknowledgement leaves it out), as a legacy subscribe of it is refused.
      if (uri.length > MAX_SUBSCRIBED_URI_LENGTH) continue;
      let at = await this.subscriptionPlace(uri, principal, view);
      // Restarting, not known to be legacy (whose subscription is kept and made when it is back,
      // resubscribe): what a modern one watches only its listen acknowledgement says, once it is
      // back (told honoured at once, a URI it leaves out, or every URI when it does not listen, had
      // the client wait for updates that never come). Waited for as an acknowledgement is, this
      // stream's servers all within one such wait, then routed again (as Router's, which waits timeoutMs).
      if (at && at.upstream.state !== 'ready' && !knownLegacy(at.h, at.upstream)) {
        waitUntil ??= monotonicNow() + LISTEN_ACK_WAIT_MS;
        // Routed again: its lists, just fetched, may not name the URI yet (as Router's, its own server then).
        if (await readyWithin(at.upstream, waitUntil - monotonicNow())) at = await this.subscriptionPlace(uri, principal, view, at.h.id);
      }
      if (!at) continue;
      const { h, upstream, conn, era } = at;
      // Still down, and this principal's calls would go to a process of its own, not started
      // while the server's is down: not honoured, as its legacy resources/subscribe is refused
      // (Router's unstarted). Held on the server's connection, it would watch that process's
      // resource, not this principal's.
      if (conn === '' && h.upstream.state !== 'ready' && startsOwnProcess(this.src.upstreams, h, principal)) continue;
      if (era === MODERN) {
        // Past this principal's share of the filter: left out, as a legacy subscribe of it is refused.
        if (!this.src.subs.addToFilter(h.id, uri, subscriber, conn, principal)) continue;
        // Not back in time: in its filter when it is back (as Router's), and said updated once its
        // listen is acknowledged (ListenManager's toldUnheard: a connection not ready lapsed).
        if (upstream.state !== 'ready') {
          honoured.push(uri);
          saidLater?.add(uri);
          continue;
        }
        const list = modern.get(h) ?? { conn, list: [] };
        list.list.push(uri);
        modern.set(h, list);
        continue;
      }
      // As Router's: counted once the upstream holds it; a connection that is down is subscribed when it is back.
      // Made for `principal`, as Router's is: a connection that carried it has served them
      // (UpstreamBase.servedFor), and a line the server writes about it goes to no other principal's call.
      // Not on a connection replaced while it waited to be made (`servers restart` or a reload
      // while an unsubscribe of the URI there was on its way): the old one drains only what it was
      // sent, and takes the subscription away as it closes. Counted, it is made on the one open
      // now (carrySubscription, or resubscribe once that one is ready).
      const make = (): Promise<unknown> => (upstream.state === 'ready' && this.connectionNow(h.id, conn) === upstream ? upstream.request('resources/subscribe', { uri }, { principal }) : Promise.resolve(undefined));
      if (this.src.subs.leavingNow(h.id, conn, uri)) this.src.log.debug({ server: h.id }, 'a subscribe waits for the unsubscribe of its URI on its way there');
      // Let go when nobody stays for it once made (a session taken back, ended meanwhile): the hub's own request (hubOwn), no client's call.
      const joined = await this.src.subs.join(h.id, uri, subscriber, conn, make, () => upstream.request('resources/unsubscribe', { uri }, { hubOwn: true }), principal).catch(() => undefined);
      // Nobody stays for it (unheld: a session taken back unsubscribed, or ended, while it was
      // made; let go on that connection): not carried to a connection opened since, which would
      // hold it for nobody, for good (as Router's subscribeLegacy).
      if (!joined || joined.left || joined.unheld) continue;
      await this.carrySubscription(h.id, conn, upstream, uri);
      honoured.push(uri);
      // Held on a connection not ready: subscribed when it is, and said updated then (resubscribe).
      if (upstream.state !== 'ready') saidLater?.add(uri);
    }
    // A modern server says in its listen acknowledgement which URIs it honours (digest §4.1):
    // one re-listen per server with all of them, and what it leaves out is not honoured here.
    for (const [h, { conn, list }] of modern) {
      this.src.catalog.subscriptionsChanged(h.id, conn);
      const ok = await this.src.catalog.listenHonours(h.id, conn, list, LISTEN_ACK_WAIT_MS);
      const refused = ok === undefined ? [] : list.filter((u) => !ok.includes(u));
      for (const u of refused) this.src.subs.remove(h.id, u, subscriber, conn);
      if (refused.length) {
        this.src.log.info({ server: h.id, refused: refused.length }, 'upstream did not honour resource subscriptions in its listen acknowledgement');
        this.src.catalog.subscriptionsChanged(h.id, conn);
      }
      for (const u of list) if (!refused.includes(u)) honoured.push(u);
    }
    // Routed before a reload's moves began, counted after they looked at this subscriber: moved now.
    const yes = new Set(await this.movedMeanwhile(subscriber, honoured, principal, group, since));
    // In the order asked for.
    return uris.filter((u) => yes.has(u));
  }

  /** A pass of a reload's moves (hub/moved-subscriptions.ts) begins: what is counted from now on, routed before, it may not see. */
  movesBegin(keepUnrouted: boolean): void {
    this.movesBeganAt = performance.now();
    this.keepUnrouted = keepUnrouted;
  }

  /**
   * `uris`, which `subscriber` was just counted for, routed from `since` (performance.now()) on:
   * when a reload's moves began meanwhile, they may have looked at this subscriber before these
   * were counted (a subscribe on its way to a server a reload removed, answered as it drained;
   * a listen stream opening): those whose owner changed are let go and made again where they are
   * now, as the moves would have. Without one, nothing is looked at. Returns what is held now.
   * Never rejects.
   */
  async movedMeanwhile(subscriber: string, uris: readonly string[], principal: string, group: string | undefined, since: number): Promise<string[]> {
    if (this.movesBeganAt < since || uris.length === 0) return [...uris];
    try {
      const moved = await this.takeMoved(subscriber, principal, group, new Set(uris));
      if (moved.length === 0) return [...uris];
      const again = new Set(await this.subscribeResources(subscriber, moved, principal, group));
      this.src.log.info({ principal, uris: moved.length, honoured: again.size }, 'resource subscriptions made as a reload moved others: made again where their URIs are now');
      return uris.filter((u) => !moved.includes(u) || again.has(u));
    } catch (err) {
      this.src.log.warn({ principal, err: String((err as Error)?.message ?? err) }, 'resource subscriptions made as a reload moved others not checked');
      return [...uris];
    }
  }

  /**
   * After a reload: the URIs `subscriber` holds (of `only`, given) whose owner changed, its
   * server gone from the config (removed, renamed), the URI routed to another server now, or
   * hidden by the lists now (a plugin, the policy), for this view. They are let go where they
   * were held, and returned for the subscriber to be subscribed again at the owner they have now
   * (subscribeResources), as a session taken back after a restart is. One whose server is still
   * configured but that routes nowhere just now (down, its lists not fetched) stays: it is
   * renewed there when the server is back (resubscribe). So does one of a server gone that
   * routes nowhere while a server a reload started is not ready yet (keepUnrouted): it may be
   * that one's, and is moved there by the pass that runs when it is ready.
   */
  async takeMoved(subscriber: string, principal: string, group?: string, only?: ReadonlySet<string>): Promise<string[]> {
    const moved = new Set<string>();
    const view = { principal, group };
    for (const { server, conn, uri } of this.src.subs.heldOf(subscriber)) {
      if (only !== undefined && !only.has(uri)) continue;
      if (this.src.handles.has(server)) {
        const routed = (await this.src.catalog.routeUri(uri, view)) ?? (await this.src.catalog.downResource(uri, view));
        // Routing nowhere because the lists hide it now (a plugin, the policy), not because its
        // server is down: not renewed when anything comes back, and its updates are not said
        // (UpstreamWatch). Taken, it is honoured nowhere: let go, a listen stream ends.
        if (routed === undefined ? !(await this.src.catalog.hidesAny([uri], view)) : routed.id === server) continue;
      } else if (this.keepUnrouted && ((await this.src.catalog.routeUri(uri, view)) ?? (await this.src.catalog.downResource(uri, view))) === undefined) continue;
      // Let go meanwhile (unsubscribed, its session ended): nothing to carry.
      if (!this.src.subs.holders(server, uri, conn).has(subscriber)) continue;
      if (this.src.subs.remove(server, uri, subscriber, conn)) this.letGo(server, conn, uri);
      moved.add(uri);
    }
    return [...moved];
  }

  sessionClosed(sessionKey: string): void {
    for (const { server, conn, uri } of this.src.subs.removeSubscriber(sessionKey)) this.letGo(server, conn, uri);
  }

  /** `uri` lost its last subscriber on connection `conn` of `server`: let go there. */
  private letGo(server: string, conn: string, uri: string): void {
    const h = this.src.handles.get(server);
    // A server gone from the config: its connection closes, and what it held with it.
    if (!h) return;
    // On the connection it was made on (a principal's own one may have been closed since:
    // its upstream session, and the subscription, went with it), whose era decides (the
    // main one's may never have been ready).
    const upstream = conn === '' ? h.upstream : this.src.upstreams.existing(h, principalOfConn(conn));
    if ((upstream?.era ?? h.upstream.era) === MODERN) this.src.catalog.subscriptionsChanged(server, conn);
    // The hub's own request (hubOwn), for a session gone: unanswered, no call left unanswered.
    else if (upstream?.state === 'ready' && upstream.capabilities?.resources?.subscribe) this.src.subs.unsubscribing(server, conn, uri, () => upstream.request('resources/unsubscribe', { uri }, { hubOwn: true })).catch(() => {});
  }
}
