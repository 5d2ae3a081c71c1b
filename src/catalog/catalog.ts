import type { ServerCapabilities } from '../protocol/types.js';
import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import type { PluginRunner } from '../plugins/runner.js';
import type { Upstream } from '../upstream/types.js';
import type { Aggregate, Connection, Routed, ServerHandle, View } from './types.js';
import { Groups } from './filters.js';
import { ListCache } from './list-cache.js';
import { LIST_KINDS, offers, type ListKind } from './lists.js';
import type { NameAssigner } from './names.js';
import type { PartPolicy, PartRecord, CatalogEvent } from './part.js';
import { MemoryPinStore, type ItemPinKind, type PinStore } from './pins.js';
import { LinkedResources } from './linked-resources.js';
import { ReadCache } from './read-cache.js';
import { UpstreamWatch } from './upstream-watch.js';
import type { ResourceRouteStore } from './resource-routes.js';
import { contentSnapshot } from './snapshot.js';
import { uriKey } from './uri-key.js';
import { ListenManager } from './upstream-listen.js';
import { hasPrincipalCredentials, principalOfConn } from './principal-conn.js';
import { PartStore } from './part-store.js';
import { AggregateBuilds, readyServers } from './builds.js';
import { listHints, type ListHintsOptions } from './list-hints.js';
import { lastValid, type LastValidOptions } from './last-valid.js';
import { ListChanges } from './changes.js';
import { groupView, type Built, type Part } from './aggregate.js';
import { downItem, downResource, readyOwner } from './owners.js';
import { connOfListenKey, listenKeyOf, partKey, serverOfListenKey } from './keys.js';
import { monotonicNow } from '../monotonic.js';
import { SHARED_ONLY } from './shared-only.js';

export type { Aggregate, Connection, Routed, ServerHandle, View } from './types.js';
export { refreshed } from './listed-names.js';

export interface CatalogOptions {
  /** The clock of pins and caches alike (tests); without it, Date.now() and monotonicNow(). */
  now?: () => number;
  /** How long a list that failed is not fetched again (tests); LIST_RETRY_MS without it. */
  listRetryMs?: number;
  pins?: PinStore;
  /** Pins of prompts, resources and templates, a store per kind (default: in memory). */
  itemPins?: Record<ItemPinKind, PinStore>;
  plugins?: PluginRunner;
  policy?: Partial<PartPolicy>;
  groups?: Groups;
  /** Per-principal upstream connections (auth); default: every principal uses the server's own. */
  connection?: (h: ServerHandle, principal: string | undefined) => Connection | Promise<Connection>;
  /**
   * Whether this principal's requests to h go over a connection of its own that needs nothing of
   * h's main one (a processPerPrincipal process, the principal's own credentials), and, with
   * `ready`, whether that connection is open and ready now. Such a principal is served by h while
   * h's main connection is down (a crash of the main process, a URL that refuses the shared
   * credentials): h is listed to it from its own connection.
   */
  standsAlone?: (h: ServerHandle, principal: string, ready: boolean) => boolean;
  /**
   * Whether a server's tools are listed as soon as it is ready (default: every server's). Not
   * one whose clients may each have a connection of their own: its main connection's list is
   * nobody's in particular, and the first version a principal is shown is the one to pin.
   */
  listAtReady?: (h: ServerHandle) => boolean;
  /** Resource URIs of a server some client subscribed to (they go into its listen filter). */
  subscribedUris?: (serverId: string, conn: string) => string[];
  /** Some of those its listen stream does not watch (ListenManagerOptions.onLeftOut). */
  listenLeftOut?: (serverId: string, conn: string, uris: string[]) => void;
  /** Pin events and poisoned items, for the log and the ledger. */
  report?: (e: CatalogEvent) => void;
  /** Resource URIs and templates each server last showed, kept across restarts (downResource). */
  resourceRoutes?: ResourceRouteStore;
  /**
   * What a server offers, ready or not (hub/known-capabilities.ts: what it offered when last
   * ready, in this process or an earlier one, or every list family while it first starts). A
   * server started afresh (its first start, `servers restart`, a reload) has no capabilities of
   * its own until it is ready. Unset: its own.
   */
  capabilitiesOf?: (h: ServerHandle) => ServerCapabilities | undefined;
  /**
   * The principal's own connection to h open now (auth/upstream-pool.ts `existing`): one the
   * pool replaced since (a reload, `servers restart`) that still drains is not it.
   */
  ownConnection?: (h: ServerHandle, principal: string) => Upstream | undefined;
  /**
   * Whether some principal may have a connection of its own to h (auth/upstream-pool.ts
   * `splits`). Unset: whenever `connection` is set. A server's state change is told for every
   * list kind when it may, and for the kinds its main connection offered or offers otherwise.
   */
  splits?: (h: ServerHandle) => boolean;
}

export { DEFAULT_LEGACY_TTL_MS } from './fetch-list.js';
export { SHARED_ONLY } from './shared-only.js';
export { LACKING_TTL_MS } from './list-hints.js';

/**
 * Aggregates the lists of every upstream, names tools and prompts collision-free, and routes
 * hub names and resource URIs back to their upstream. Emits 'changed' (kind, principal?, server?,
 * SHARED_ONLY?, groups?) when a list of a family may have changed (list_changed, an upstream
 * coming or going, a pin approved) — only that principal's, only that server's part, only the
 * server's own connection's list, only those endpoint groups' lists, when given — and
 * 'resourceUpdated' ({server, uri, principal?, meta?: the server's own `_meta` keys}).
 */
export class Catalog extends EventEmitter {
  readonly cache: ListCache;
  readonly reads: ReadCache;
  /** Resources tools named without listing them, for routing reads of them (linked-resources.ts). */
  readonly links = new LinkedResources();
  readonly pins: PinStore;
  readonly itemPins: Record<ItemPinKind, PinStore>;
  readonly groups: Groups;
  readonly listens: ListenManager;
  /** The aggregates built, and which each principal was given last (builds.ts). */
  private readonly builds: AggregateBuilds;
  /** What list hints (list-hints.ts) and lastValid (last-valid.ts) read. */
  private readonly hintSources: ListHintsOptions;
  private readonly routeSources: LastValidOptions;
  /** Each server's lists, per authorization context, fetched and judged (part-store.ts). */
  private readonly parts: PartStore;
  /** What the catalog hears of each upstream connection (upstream-watch.ts). */
  private readonly watcher: UpstreamWatch;
  private policy: PartPolicy;
  /** Wall-clock time, for what is stored (pins). */
  private readonly now: () => number;
  /** For how long lists and reads stay fresh: a wall-clock step must not stretch or cut that. */
  private readonly cacheNow: () => number;
  /** When each server's lists last may have changed (changes.ts). */
  private readonly changes = new ListChanges();
  /** Counts the servers forgotten (AggregateBuilds.generation; router/replaced.ts). */
  get generation(): number {
    return this.builds.generation;
  }

  constructor(
    private readonly servers: () => readonly ServerHandle[],
    private readonly names: NameAssigner,
    log: Logger,
    private readonly opts: CatalogOptions = {},
  ) {
    super();
    this.setMaxListeners(0);
    this.now = opts.now ?? Date.now;
    this.cacheNow = opts.now ?? monotonicNow;
    this.cache = new ListCache(
      this.cacheNow,
      (key, err) => log.warn({ key: key.replace(/\0/g, '/'), err: String((err as Error)?.message ?? err) }, 'list refresh failed; serving the stale entry'),
      // Found changed when its entry expired (no list_changed from the server): clients hear it now.
      // The server's own connection's list: not the clients of principals listed from their own.
      (key) => {
        const [server, kind, own] = key.split('\0') as [string, ListKind, string | undefined];
        if (own === undefined) this.emit('changed', kind === 'resourceTemplates' ? 'resources' : kind, undefined, server, SHARED_ONLY);
        else this.emit('changed', kind === 'resourceTemplates' ? 'resources' : kind, principalOfConn(own), server);
      },
      opts.listRetryMs,
    );
    this.reads = new ReadCache(this.cacheNow);
    this.pins = opts.pins ?? new MemoryPinStore();
    this.groups = opts.groups ?? new Groups(undefined);
    this.policy = { pinning: opts.policy?.pinning ?? 'block', poisoning: opts.policy?.poisoning ?? 'warn' };
    this.parts = new PartStore({
      cache: this.cache,
      changes: this.changes,
      servers,
      now: this.now,
      cacheNow: this.cacheNow,
      pinsOf: (kind) => this.pinsOf(kind),
      policy: () => this.policy,
      plugins: opts.plugins,
      report: opts.report,
      resourceRoutes: opts.resourceRoutes,
      listAtReady: opts.listAtReady,
      changed: (kind, serverId, principal) =>
        this.emit('changed', kind === 'resourceTemplates' ? 'resources' : kind, principal, serverId, ...(principal === undefined ? [SHARED_ONLY] : [])),
    });
    // Keys are server ids, or principalListenKey()s of principals' own connections, each with the
    // resource subscriptions made on that connection (router/subscriptions.ts: its `conn`).
    this.listens = new ListenManager(log, {
      subscribedUris: (key) => opts.subscribedUris?.(serverOfListenKey(key), connOfListenKey(key)) ?? [],
      onGap: (key) => this.watcher.listenGap(key),
      onLeftOut: (key, uris) => opts.listenLeftOut?.(serverOfListenKey(key), connOfListenKey(key), uris),
      onHearing: (key) => this.changes.resources(serverOfListenKey(key)),
    });
    this.builds = new AggregateBuilds({
      servers,
      names,
      log,
      parts: this.parts,
      changes: this.changes,
      connection: opts.connection,
      standsAlone: opts.standsAlone,
    });
    this.hintSources = { groups: this.groups, cache: this.cache, servers, capabilitiesOf: opts.capabilitiesOf };
    this.routeSources = {
      builds: this.builds,
      parts: this.parts,
      cache: this.cache,
      changes: this.changes,
      listens: this.listens,
      servers,
      connection: opts.connection,
      standsAlone: opts.standsAlone,
    };
    this.watcher = new UpstreamWatch({
      servers,
      log,
      cache: this.cache,
      reads: this.reads,
      listens: this.listens,
      changes: this.changes,
      parts: this.parts,
      plugins: opts.plugins,
      ownConnection: opts.ownConnection,
      listAtReady: opts.listAtReady,
      splits: opts.splits ?? (() => opts.connection !== undefined),
      warmed: () => this.builds.refreshShared(),
      emit: (event, ...args) => void this.emit(event, ...args),
    });
    this.itemPins = opts.itemPins ?? { prompts: new MemoryPinStore(), resources: new MemoryPinStore(), resourceTemplates: new MemoryPinStore() };
    for (const kind of LIST_KINDS) {
      this.pinsOf(kind).onExternalChange?.((changed) => {
        this.parts.judgeAgain();
        for (const r of changed)
          if (r.pendingHash === null && r.approvedBy === 'cli' && r.hash)
            opts.report?.({ kind: 'approved', ...(kind === 'tools' ? {} : { itemKind: kind }), server: r.server, tool: r.tool, hash: r.hash });
        log.info({ changed: changed.length, kind }, 'pins changed outside the hub (an approval); lists rebuilt');
        this.emit('changed', kind === 'resourceTemplates' ? 'resources' : kind);
      });
    }
  }

  /** Wire an upstream's notifications and state into invalidation, and listen to it (modern). */
  watch(h: ServerHandle): void {
    this.watcher.watch(h);
  }

  /** Notifications of a connection to h: its main one, or a principal's own (UpstreamWatch.watchConnection). */
  watchConnection(h: ServerHandle, upstream: Upstream, principal?: string): void {
    this.watcher.watchConnection(h, upstream, principal);
  }

  /** `principal`: only that principal's own partition (its connection's credential) changed, and only its clients are told. */
  invalidate(serverId: string, kinds: readonly ListKind[] = LIST_KINDS, principal?: string): void {
    this.watcher.invalidate(serverId, kinds, principal);
  }

  /** The pins of a kind. */
  pinsOf(kind: ListKind): PinStore {
    return kind === 'tools' ? this.pins : this.itemPins[kind];
  }

  /**
   * `policy.pinning` / `policy.poisoning` changed (a config reload): every list is judged again,
   * and no call is routed by an aggregate built under the old policy (a tool the new one hides
   * must not stay callable).
   */
  setPolicy(policy: Partial<PartPolicy>): void {
    const next: PartPolicy = { pinning: policy.pinning ?? 'block', poisoning: policy.poisoning ?? 'warn' };
    if (next.pinning === this.policy.pinning && next.poisoning === this.policy.poisoning) return;
    this.policy = next;
    this.judgeAgain();
    // Descriptions are checked, and definitions pinned, in every family.
    this.everyListChanged();
  }

  /**
   * `groups` changed (a config reload): what each group shows is worked out again from the
   * lists held (no upstream is asked), and the clients of a group whose definition changed hear
   * that the lists it changed for changed.
   */
  setGroups(groups: Record<string, unknown> | undefined): void {
    const changed = this.groups.changedFor(groups);
    this.groups.replace(groups);
    // Group views are memoised in the aggregates, and calls are routed by them.
    this.builds.drop();
    this.builds.refreshShared();
    // Only the kinds a group's definition changed for, to that group's clients: clients of
    // `/mcp` and of a group left as it was see the same lists (they were told every kind).
    for (const [kind, names] of changed) this.emit('changed', kind, undefined, undefined, undefined, names);
  }

  /**
   * The plugins were replaced (a config reload): every list held is run through their onList
   * hooks again (no upstream is asked), no call is routed by an aggregate built under the old
   * ones, and clients hear that every list changed.
   */
  pluginsChanged(): void {
    this.judgeAgain();
    this.everyListChanged();
  }

  /** Every list held goes through the checks and hooks again at its next build; until then no call is routed by the old one. */
  private judgeAgain(): void {
    this.parts.judgeAgain();
    for (const h of this.servers()) {
      this.changes.tools(h.id);
      this.changes.resources(h.id);
    }
    this.builds.refreshShared();
  }

  /**
   * Clients hear one resources/list_changed for both resource families (as in invalidate); only
   * of the kinds some server offers (as far as the hub knows: capabilitiesOf) or some list held
   * has items of (a principal's own connection may offer more): judging lists of a kind no
   * server has changes nothing, and a hub of tools-only servers had every client told prompts
   * and resources changed at each reload of the policy or the plugins.
   */
  private everyListChanged(): void {
    const held = this.cache.kindsWithItems();
    for (const h of this.servers()) {
      const caps = this.opts.capabilitiesOf ? this.opts.capabilitiesOf(h) : h.upstream.capabilities;
      for (const k of LIST_KINDS) if (offers(caps, k)) held.add(k);
    }
    if (held.has('tools')) this.emit('changed', 'tools');
    if (held.has('prompts')) this.emit('changed', 'prompts');
    if (held.has('resources') || held.has('resourceTemplates')) this.emit('changed', 'resources');
  }

  /**
   * The resource subscriptions made on connection `conn` of a server changed (its `conn` in
   * router/subscriptions.ts: '' the server's own, principalConn() a principal's): its listen
   * filter follows.
   */
  subscriptionsChanged(serverId: string, conn = ''): void {
    this.listens.refresh(listenKeyOf(serverId, conn));
  }

  /** Which of `uris` the listen stream of that connection honours (ListenManager.honours). */
  listenHonours(serverId: string, conn: string, uris: readonly string[], waitMs: number): Promise<string[] | undefined> {
    return this.listens.honours(listenKeyOf(serverId, conn), uris, waitMs);
  }

  /** Forget what is cached of a server (removed, or its config changed: then it is listened to afresh). */
  forget(serverId: string): void {
    // Clients are told of the kinds the lists showed of it (not of prompts for a server that
    // never offered any), before the watcher forgets what they were.
    const shown = this.watcher.shownKinds(serverId);
    // Aggregates name the old handle: nothing may be routed with them any more.
    this.builds.forget();
    this.links.forget(serverId);
    const still = this.servers().find((h) => h.id === serverId);
    if (still) this.listens.track(still.id, still.upstream);
    else {
      this.listens.untrack(serverId);
      this.watcher.forget(serverId);
    }
    this.cache.drop(`${serverId}\0`);
    this.parts.forget(serverId, !still);
    this.reads.invalidate(serverId);
    for (const k of shown) if (k !== 'resourceTemplates' || !shown.includes('resources')) this.emit('changed', k, undefined, serverId);
  }

  close(): void {
    this.listens.closeAll();
    this.watcher.close();
    this.cache.close();
  }

  async aggregate(kind: ListKind, view: View = {}): Promise<Aggregate> {
    // A modern server's DiscoverResult past its ttlMs is asked again (in the background): a
    // family it added or dropped since shows from a later list on, and clients are told. At a
    // client's list, not at every build (a resource read builds two or three).
    // So is the principal's own connection's (it has its own DiscoverResult: a redeploy that
    // adds a family would otherwise stay unseen there, its listen stream left without that
    // family's changes, for as long as the connection lives).
    const principal = view.principal;
    for (const h of this.servers()) {
      h.upstream.refreshDiscover?.();
      if (principal !== undefined && this.opts.splits?.(h) === true) this.opts.ownConnection?.(h, principal)?.refreshDiscover?.();
    }
    // A client's list: a server whose refresh hangs is given its stale list after STALE_WAIT_MS
    // (told when the refresh lands changed), not waited for up to its timeoutMs. Only here: a
    // request's route (resolveTool, a read's owner) waits for the list after a change.
    const b = await this.builds.build(kind, view.principal, 0, 'bounded');
    const v = groupView(this.groups, kind, b, view.group);
    // Only a page needs the snapshot (a cursor names it): most lists fit one page.
    return {
      items: v.items,
      get snapshot() {
        return (v.snapshot ??= contentSnapshot(b.scopes, v.items));
      },
      ...listHints(kind, b, view.group, this.hintSources),
    };
  }

  /**
   * The upstream of a hub tool name. A call is routed with the aggregate built last for this
   * principal (the one its list came from), so a call does not refetch every list whose ttlMs
   * is 0. A name that aggregate does not have (none built yet: a client that kept its list
   * across a restart of the hub, or by its ttlMs; or its server's list changed since) is routed
   * by its server's list alone when the name can only be that server's (ownerItem), else the
   * catalog lists again: that waits for every server's list, the slowest one's too.
   */
  async resolveTool(hubName: string, view: View = {}): Promise<Routed | undefined> {
    const ready = this.readyTool(hubName, view);
    if (ready) return ready;
    const own = await this.ownerItem('tools', hubName, view);
    if (own === undefined) return groupView(this.groups, 'tools', await this.builds.build('tools', view.principal), view.group).byHubName.get(hubName);
    // The next calls are routed by readyTool again once it is built, not each by a fetch of its server's list.
    this.builds.buildSoon(view.principal);
    return own ?? undefined;
  }

  /**
   * What the whole aggregate would make of a hub tool or prompt name, worked out from the list of
   * the one server it can belong to (NameAssigner.soleOwner): the route, null when that list
   * hides it from this view (pins, poisoning, plugins, the group), undefined when only the whole
   * aggregate can tell (its owner unknown, not ready, or its list failed; the server does not
   * list that name, or allow/deny leaves it out: then it is named for nobody, and a name new to
   * another server may take it). The part is the one `build` uses, judged by the same checks.
   */
  private async ownerItem(kind: 'tools' | 'prompts', hubName: string, view: View): Promise<Routed | null | undefined> {
    const servers = this.servers();
    const owner = this.names.soleOwner(kind === 'tools' ? 'tool' : 'prompt', hubName, servers.map((h) => ({ id: h.id, prefix: h.config.prefix })));
    const h = owner && servers.find((x) => x.id === owner.server);
    if (!h || h.upstream.state !== 'ready' || !offers(h.upstream.capabilities, kind)) return undefined;
    let part: Part;
    try {
      const conn = this.opts.connection ? await this.connection(h, view.principal) : { credential: '', upstream: h.upstream };
      part = await this.parts.partFor(kind, h, conn);
    } catch {
      return undefined; // the build says why, as for any list
    }
    const r = part.records.find((x) => x.upstreamName === owner.upstreamName);
    if (!r || r.denied) return undefined;
    if (r.hidden || !this.groups.includes(view.group, kind, h.id, hubName, r.upstreamName, h.config.prefix)) return null;
    return { server: h, upstreamName: r.upstreamName, item: r.upstream, annotations: r.annotations, hubName, own: part.conn.credential !== '' };
  }

  /**
   * The tool or prompt behind a name that is held back for a pending pin change, as this view
   * would see it were it approved: for the refusal of a call (or get) that a client sent from a
   * list shown before the change, which says why and whose it is rather than only "unknown".
   * Read from its server's list as judged last when the name can be that server's only (the
   * part ownerItem just judged: fresh after a change), else from the aggregate built last for this principal. Never
   * a name the view's group does not show. Not on the hot path: only once a name was not routed.
   */
  async heldItem(kind: 'tools' | 'prompts', hubName: string, view: View = {}): Promise<{ server: ServerHandle; upstreamName: string; record: PartRecord } | undefined> {
    const held = (r: PartRecord): boolean => r.pin !== undefined && r.pin.state !== 'approved' && r.hidden?.startsWith('quarantined') === true;
    const shown = (h: ServerHandle, r: PartRecord): boolean => this.groups.includes(view.group, kind, h.id, hubName, r.upstreamName, h.config.prefix);
    const servers = this.servers();
    const owner = this.names.soleOwner(kind === 'tools' ? 'tool' : 'prompt', hubName, servers.map((h) => ({ id: h.id, prefix: h.config.prefix })));
    const h = owner && servers.find((x) => x.id === owner.server);
    if (h && h.upstream.state === 'ready' && offers(h.upstream.capabilities, kind)) {
      try {
        const conn = this.opts.connection ? await this.connection(h, view.principal) : { credential: '', upstream: h.upstream };
        // As judged last (by the route that just failed): never a fetch of its own, so a client
        // calling unknown names costs the server no list more than before.
        const judged = this.parts.judged.get(partKey(h.id, conn.credential, kind));
        const r = (await judged?.records)?.find((x) => x.upstreamName === owner.upstreamName);
        return r && held(r) && shown(h, r) ? { server: h, upstreamName: r.upstreamName, record: r } : undefined;
      } catch {
        return undefined;
      }
    }
    const mk = this.builds.lastKey(kind, view.principal);
    const last = mk === undefined ? undefined : this.builds.memo(mk);
    const found = last?.all.find((x) => x.hubName === hubName && held(x.record) && shown(x.h, x.record));
    return found ? { server: found.h, upstreamName: found.record.upstreamName, record: found.record } : undefined;
  }

  /** The ready server a hub tool or prompt name can only be of (owners.ts). */
  readyOwner(kind: 'tools' | 'prompts', hubName: string, group?: string): ServerHandle | undefined {
    return readyOwner(this.servers(), this.names, this.groups, kind, hubName, group);
  }

  /**
   * The route of a tool or prompt name when it needs no other server's list (readyTool, else
   * ownerItem), built into no aggregate; null when that list hides it from this view; undefined
   * when only the whole aggregate can tell. For a call in the start-up grace (hub/startup-grace.ts),
   * which need not wait for the servers still starting when its name is a ready server's alone.
   */
  async soleRoute(kind: 'tools' | 'prompts', hubName: string, view: View = {}): Promise<Routed | null | undefined> {
    if (kind === 'prompts') return this.ownerItem(kind, hubName, view);
    const ready = this.readyTool(hubName, view);
    if (ready) return ready;
    const own = await this.ownerItem(kind, hubName, view);
    // As resolveTool's: the next calls are routed by readyTool once it is built (the call's route
    // is this one, hub/startup-grace.ts: the router does not resolve it again).
    if (own !== undefined) this.builds.buildSoon(view.principal);
    return own;
  }

  /**
   * resolveTool's answer when it needs no build: the tool in the aggregate built last for this
   * principal, if its server is ready and its tool list has not changed since (list_changed, a
   * restart): then the call waits for the list to be fetched and checked against the pins
   * first. Synchronous, so the usual call does not await.
   */
  readyTool(hubName: string, view: View = {}): Routed | undefined {
    const last = this.builds.lastTools(view.principal);
    const known = last && groupView(this.groups, 'tools', last, view.group).byHubName.get(hubName);
    // The main connection's state is read first: a principal's own is looked at only while it is down.
    if (!known || (known.server.upstream.state !== 'ready' && !(view.principal !== undefined && this.opts.standsAlone?.(known.server, view.principal, true)))) return undefined;
    return this.changes.toolsSince(known.server.id, last.epoch) ? undefined : known;
  }

  /**
   * The route of a hub tool name in the tools aggregate built last for this principal, without
   * touching any upstream or cache entry: for bookkeeping right after a list (a `resolveTool` per
   * listed tool would build the aggregate once per tool, and refetch every list whose ttlMs is
   * 0). Not the one built last for anyone: that may be another principal's private list, whose
   * names a caller was then told were "unavailable" (not "unknown") while their server was down.
   */
  knownTool(hubName: string, view: View = {}): Routed | undefined {
    const last = this.builds.lastTools(view.principal);
    return last ? groupView(this.groups, 'tools', last, view.group).byHubName.get(hubName) : undefined;
  }

  /**
   * Of a server some principals reach with credentials of their own (another account upstream,
   * whose lists are that principal's), whether a name is one its own connection's list had
   * (downItem); undefined for any other server, whose stored names are anyone's (a legacy
   * session or a process of a principal's own uses the server's credentials: the same lists).
   */
  private sharedName(kind: 'tools' | 'prompts'): (h: ServerHandle, upstreamName: string) => boolean | undefined {
    return (h, upstreamName) => (hasPrincipalCredentials(h) ? this.parts.lastListed(h.id, kind, upstreamName) : undefined);
  }

  /** The server that is down behind a tool or prompt name no list of this process shows now (owners.ts). */
  downItem(kind: 'tools' | 'prompts', hubName: string, view: View = {}): { server: ServerHandle; upstreamName: string } | undefined {
    return downItem(this.servers(), this.names, this.groups, this.pinsOf(kind), this.policy.pinning, kind, hubName, view, this.sharedName(kind));
  }

  /** The server that is down behind a resource URI its last lists showed to this view (owners.ts). */
  downResource(uri: string, view: View = {}, exactOnly = false): Promise<ServerHandle | undefined> {
    return downResource(this.servers(), this.groups, this.parts.judged, this.opts.resourceRoutes, uri, view, exactOnly);
  }

  /**
   * The upstream of a hub prompt name: by its server's prompts list alone when the name can only
   * be that server's (ownerItem), else by every server's (a prompts/get waited for the slowest
   * of them, and refetched each whose ttlMs is 0, at every get).
   */
  async resolvePrompt(hubName: string, view: View = {}): Promise<Routed | undefined> {
    const own = await this.ownerItem('prompts', hubName, view);
    if (own !== undefined) return own ?? undefined;
    return groupView(this.groups, 'prompts', await this.builds.build('prompts', view.principal), view.group).byHubName.get(hubName);
  }

  /**
   * The upstream that serves a URI: an exact match in some resources list first (a server that
   * is down now counts with what its last list showed: a read of its resource is told it is
   * unavailable, never sent through another server's template), then the first matching
   * template; ties go to the server listed first in the config (documented). By the lists built
   * last for this principal while they hold (lastValid), else built now.
   */
  async routeUri(uri: string, view: View = {}): Promise<ServerHandle | undefined> {
    const ok = (h: ServerHandle) => this.groups.includes(view.group, 'resources', h.id, uri);
    let resources = (await lastValid('resources', view.principal, this.routeSources)) ?? (await this.builds.build('resources', view.principal));
    let exact = groupView(this.groups, 'resources', resources, view.group).byHubName.get(uri);
    // A server that came back while the list was built is in neither it nor what is down
    // (downResource): its URIs were routed nowhere, a read answered "not found" and a listen
    // stream opened as it came back told its URI was not honoured. Built again, once, with it.
    if (!exact && this.cameBack('resources', resources)) {
      resources = await this.builds.build('resources', view.principal);
      exact = groupView(this.groups, 'resources', resources, view.group).byHubName.get(uri);
    }
    if (exact) return exact.server;
    if (resources.hidden?.has(uriKey(uri))) return undefined;
    const down = await this.downResource(uri, view, true);
    if (down) return down;
    const templates = (await lastValid('resourceTemplates', view.principal, this.routeSources)) ?? (await this.builds.build('resourceTemplates', view.principal));
    for (const t of templates.templates) if (t.matcher.test(uri) && ok(t.routed.server)) return t.routed.server;
    // Neither listed nor templated: a link a tool of a server gave this principal (a server that
    // offers resources, ready, shown to this view; a URI its list hides was refused above, and
    // so is one a template of its that the hub hides matches: a link made the URIs of a
    // template a plugin hid readable again, though a read without one was refused).
    const linked = this.links.serverOf(view.principal ?? '', uri);
    const h = linked === undefined ? undefined : this.servers().find((x) => x.id === linked);
    if (!h || h.upstream.state !== 'ready' || !offers(h.upstream.capabilities, 'resources') || !ok(h)) return undefined;
    if (templates.hiddenTemplates?.some((t) => t.server === h.id && t.matcher.test(uri))) return undefined;
    return h;
  }

  /**
   * Whether any of these URIs (contents of a read's answer) is one this view's resources list
   * hides, in any spelling: an upstream that aliases URIs more than uriKey knows would answer a
   * read through a template with the hidden resource, and name it.
   */
  async hidesAny(uris: readonly string[], view: View = {}): Promise<boolean> {
    const hidden = ((await lastValid('resources', view.principal, this.routeSources)) ?? (await this.builds.build('resources', view.principal))).hidden;
    return !!hidden && uris.some((u) => hidden.has(uriKey(u)));
  }

  /** The server owning a resource template, by its exact uriTemplate (completion refs name templates). */
  async templateOwner(uriTemplate: string, view: View = {}): Promise<ServerHandle | undefined> {
    const templates = (await lastValid('resourceTemplates', view.principal, this.routeSources)) ?? (await this.builds.build('resourceTemplates', view.principal));
    return groupView(this.groups, 'resourceTemplates', templates, view.group).byHubName.get(uriTemplate)?.server;
  }

  /** The connection (and authorization context) a principal's requests to a server use. */
  connection(h: ServerHandle, principal: string | undefined): Connection | Promise<Connection> {
    return this.opts.connection?.(h, principal) ?? { credential: '', upstream: h.upstream };
  }

  /**
   * The shared tools aggregate, which a group key's /healthz counts by, built again from the
   * lists held if it is not of them (a list changed, pins, groups, a reload): nothing fetched.
   * Once per /healthz of such a key; the events that change it (a server ready or its tools
   * changed, pins, groups) build it as they happen, so this only catches what they miss (a
   * refresh found by a principal's private list, a server removed).
   */
  keepSharedToolsCurrent(): void {
    this.builds.refreshShared();
  }

  /**
   * A server's tool count in /healthz, without touching any upstream or cache entry: the names
   * of its own list, each once (a server whose cursor went back to the start lists some twice,
   * and the hub shows each once); for a caller limited to tool groups, the tools of the server
   * those groups show in the shared aggregate built last (built from the lists held as soon as
   * every ready server's tools are listed, and again at each change: keepSharedToolsCurrent),
   * never a principal's private one (its size is that principal's).
   */
  toolCount(server: string, groups?: Iterable<string>): number {
    const items = this.cache.peek(`${server}\0tools`)?.items;
    if (!items) return 0;
    const names = new Set<string>();
    if (groups === undefined) {
      for (const it of items) if (typeof it.name === 'string') names.add(it.name);
      return names.size;
    }
    // Of the shared lists alone: the aggregate built last may be another principal's private list.
    const last = this.builds.latestSharedTools;
    if (last) for (const g of groups) for (const [hubName, r] of groupView(this.groups, 'tools', last, g).byHubName) if (r.server.id === server) names.add(hubName);
    return names.size;
  }

  /**
   * Every item of a kind the hub knows, hidden ones included, with why (the data of `switchyard
   * tools [--kind K]`). A resource (template) another server listed first under the same URI is
   * not visible: clients are shown the first one.
   */
  async records(kind: ListKind, view: View = {}): Promise<{ hubName: string; server: ServerHandle; record: PartRecord; visible: boolean; inGroup: boolean }[]> {
    const b = await this.builds.build(kind, view.principal);
    const v = groupView(this.groups, kind, b, view.group);
    return b.all.map(({ hubName, h, record }) => ({
      hubName,
      server: h,
      record,
      visible: b.byHubName.get(hubName)?.server === h,
      inGroup: view.group === undefined || v.byHubName.get(hubName)?.server === h || this.groups.includes(view.group, kind, h.id, hubName, record.upstreamName, h.config.prefix),
    }));
  }

  /** Every tool the hub knows, hidden ones included, with why (the data of `switchyard tools`). */
  toolRecords(view: View = {}): ReturnType<Catalog['records']> {
    return this.records('tools', view);
  }

  /** Whether a server is ready now, offering the kind, that `b` (built before) neither has a part of nor failed to list. */
  private cameBack(kind: ListKind, b: Built): boolean {
    return readyServers(this.servers(), kind).some((h) => !b.parts.some((p) => p.h.id === h.id) && !b.failed.includes(h.id));
  }

  /**
   * Whether the principal's list of a kind (tools, prompts, resources: both resource lists) had
   * the server's part from that principal's own connection (its own list, not the shared one's
   * public list given to it), as built last for it: a change of the server's own connection's
   * list (SHARED_ONLY) is not that principal's, and its clients are not told of it. False when
   * unknown (nothing built for it, or no longer held): told, as before.
   */
  listsOwn(kind: string, principal: string, serverId: string): boolean {
    const kinds: readonly ListKind[] = kind === 'resources' ? ['resources', 'resourceTemplates'] : kind === 'tools' || kind === 'prompts' ? [kind] : [];
    if (kinds.length === 0) return false;
    for (const k of kinds) {
      const mk = this.builds.lastKey(k, principal);
      const part = mk === undefined ? undefined : this.builds.memo(mk)?.parts.find((p) => p.h.id === serverId);
      if (!part || part.key === `${serverId}\0${k}`) return false;
    }
    return true;
  }

  /** Why a list of the server's own connection failed last (none since it succeeded). */
  listError(serverId: string): string | undefined {
    return this.parts.listError(serverId);
  }
}
