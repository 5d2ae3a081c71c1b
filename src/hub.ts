import { EventEmitter } from 'node:events';
import { dirname, join, resolve } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Logger } from './log.js';
import { DEFAULT_INPUT_TIMEOUT_MS, type HubConfig, type PolicyConfig, type ServerConfig } from './config/types.js';
import { Catalog, type ServerHandle } from './catalog/catalog.js';
import { cursorKeyFrom } from './catalog/cursor.js';
import { SessionIds } from './downstream/session-ids.js';
import { baseName, NameAssigner } from './catalog/names.js';
import { Groups } from './catalog/filters.js';
import type { ResourceRouteStore } from './catalog/resource-routes.js';
import { PluginRunner } from './plugins/runner.js';
import type { HubCore } from './downstream/core.js';
import { Endpoint } from './downstream/endpoint.js';
import { openLedger } from './ledger/open.js';
import type { AuditSink } from './ledger/sink.js';
import type { AuditBegin, AuditEnd, LedgerCounters } from './ledger/types.js';
import type { Implementation, ServerCapabilities } from './protocol/types.js';
import type { CallContext } from './router/context.js';
import { Router } from './router/router.js';
import { Authenticator } from './auth/authenticator.js';
import { PrincipalUpstreams } from './auth/upstream-pool.js';
import { EdgeGate } from './policy/gate.js';
import { RateLimiter } from './policy/rate-limit.js';
import type { OtherNames } from './policy/glob.js';
import { SchemaValidator } from './policy/validate.js';
import { Mrtr } from './router/mrtr.js';
import { Confirmer, type ConfirmPolicy } from './policy/confirm.js';
import { RequestStateSealer, loadStateKey } from './router/request-state.js';
import { Subscriptions } from './router/subscriptions.js';
import { principalConn } from './catalog/principal-conn.js';
import { PrincipalRestartTotals, RestartTotals } from './hub/restart-totals.js';
import { KnownCapabilities } from './hub/known-capabilities.js';
import { SessionMemory } from './downstream/session-memory.js';
import { ServerHandles } from './hub/server-handles.js';
import { InFlight } from './router/inflight.js';
import { beginInCallTrace, inCallTrace } from './router/forwarding.js';
import { StartupGrace } from './hub/startup-grace.js';
import { configSecretValues } from './config/secret-values.js';
import { ignoredSettings } from './config/ignored-settings.js';
import { dropConfigSecrets, useConfigSecrets } from './policy/config-secrets.js';
import { applyReload, restartServer, type ReloadReport, type ReloadTarget } from './hub/reload.js';
import type { ReloadOutcome } from './config/watch.js';
import { ShownRoutes } from './hub/shown-routes.js';
import { HubStoppingError, INTERNAL_ERROR, RpcError } from './protocol/errors.js';
import { Canceller } from './cancel.js';
import { createUpstream } from './upstream/index.js';
import type { AskClient } from './upstream/types.js';
import { askerOf, relayedInput } from './protocol/input-results.js';
import { VERSION } from './version.js';
import { mergedInstructions, unionCapabilities } from './catalog/describe.js';
import { InstructionScreen, instructionChecks, type InstructionsVerdict } from './catalog/instructions.js';
import type { Metrics, MetricsSources } from './metrics.js';
import { specOf } from './hub/upstream-spec.js';
import { Dispatch, toolServerOf } from './hub/dispatch.js';
import { Listeners } from './hub/listeners.js';
import { ReloadHistory } from './hub/reload-history.js';
import { SubscriptionMoves } from './hub/moved-subscriptions.js';
import { endRemovedGroups, endRevoked } from './hub/reload-endings.js';
import { PluginLoads } from './hub/plugin-loads.js';
import { hubHealth, type HealthSources, type HubHealth } from './hub/health.js';
import { reportCatalogEvent, reportInstructions, reportPluginFailure } from './hub/reports.js';
import { ownReady, standsAlone, startsOwnProcess, usedBy } from './hub/own-connection.js';
import { UpstreamSubscriptions } from './hub/upstream-subscriptions.js';
import { relayCatalogChanges } from './hub/change-notices.js';
import { monotonicNow } from './monotonic.js';
import { auditEvent, tapAudit } from './observe.js';

/** The families currentCapabilities offers whatever the servers do (Hub.offers). */
const LIST_FAMILIES: ReadonlySet<keyof ServerCapabilities> = new Set(['tools', 'prompts', 'resources']);

/**
 * The composition root: upstreams, catalog, router, ledger and the downstream endpoint, wired
 * so data flows one way (downstream → router → upstream → ledger).
 */
export class Hub implements HubCore {
  /** Frozen: every modern answer's `_meta` carries it, and its JSON is kept (protocol/serialized.ts). */
  readonly serverInfo: Implementation = Object.freeze({ name: 'switchyard', version: VERSION });
  /** The ledger keeps idempotency keys: off (`ledger.enabled: false`), a keyed call runs each time it is sent. */
  get keepsIdempotencyKeys(): boolean {
    return this.ledger.enabled !== false;
  }
  get maxBodyBytes(): number {
    return this.config.listen.maxBodyBytes;
  }
  get drainTimeoutMs(): number {
    return this.config.listen.drainTimeoutMs;
  }
  readonly events = new EventEmitter();
  readonly handles = new ServerHandles();
  /**
   * Automatic restarts per server id, for switchyard_upstream_restarts_total: a counter that
   * must not go back when `servers restart` or a reload replaces the connection (a fresh one
   * counts from 0). Kept when a server is removed (its count, not its connection), so one added
   * again under its id goes on from its total.
   */
  private readonly restartTotals = new RestartTotals();
  private readonly principalRestarts = new PrincipalRestartTotals();
  /** The catalog's changes as clients hear them (hub/change-notices.ts); closed at stop. */
  private readonly listChanges: { close(): void };
  readonly catalog: Catalog;
  readonly router: Router;
  readonly mrtr: Mrtr;
  readonly endpoint: Endpoint;
  readonly subs = new Subscriptions();
  /** The subscriptions as the upstreams hold them (made, renewed, carried, let go). */
  private readonly upstreamSubs: UpstreamSubscriptions;
  /** Resource subscriptions a reload moved, carried to where their URIs are now. */
  private readonly moves: SubscriptionMoves;
  /** The MCP listener and the operator's own (hub/listeners.ts). */
  private readonly listeners: Listeners;
  /**
   * Prometheus metrics for /metrics, made by listen(): `switchyard stdio` has no listener, and
   * does not load prom-client (as it loads no jose) at each start an IDE makes.
   */
  metrics: Metrics | undefined;
  private readonly metricsSources: MetricsSources;
  readonly auth: Authenticator;
  /** Authentication, tool scopes and rate limits at the HTTP edge. */
  readonly gate: EdgeGate;
  /** Per-principal connections to HTTP upstreams (no upstream session is shared across users). */
  readonly upstreams: PrincipalUpstreams;
  readonly validator: SchemaValidator;
  /** Plugin hooks (bundled description checks and secret redaction, then the operator's). */
  readonly plugins: PluginRunner;
  /** The start-up grace: what waits for the servers still starting, and until when. */
  private readonly grace: StartupGrace;
  /** What the hub does with a request around the router (hub/dispatch.ts). */
  private readonly dispatch: Dispatch;
  /** Requests being handled, so that stop() can drain them. */
  readonly inflight = new InFlight();
  private draining = false;
  /**
   * Aborted as the stop begins (stopAccepting): a request waiting for a server to start (its first
   * start, or back after a crash for a retry) ends then, answered as the stop ends a request
   * (Dispatch.endedWhileWaiting). Nothing runs upstream for it, and the drain waited for it, its
   * whole listen.drainTimeoutMs for a server slow to start.
   */
  private readonly stopBegun = new Canceller();
  /** stop() is past its drain deadline, closing the upstreams (a list built now may lack them). */
  private closingUpstreams = false;
  /** Tool names clients were shown, by group, so a down server's tools answer "unavailable". */
  private readonly routes: ShownRoutes;
  /** Each server's capabilities when it was last ready (see currentCapabilities). */
  private readonly knownCapabilities: KnownCapabilities;
  private readonly resourceRoutes: ResourceRouteStore | undefined;
  /** Read the config file again and apply it: set by `switchyard start` (POST /admin/reload). */
  reloadConfigFile: (() => Promise<ReloadOutcome<ReloadReport>>) | undefined;
  /** The plugins' loads, at the start and by reloads (hub/plugin-loads.ts). */
  private readonly pluginLoads: PluginLoads;
  /** The poisoning checks on upstream instructions. */
  private readonly instructionScreen: InstructionScreen;
  /** What /healthz looks at (hub/health.ts). */
  private readonly healthSources: HealthSources;
  /** What a reload's report says beyond what it applied (hub/reload-history.ts). */
  private readonly reloads = new ReloadHistory();
  /**
   * The config's secret values (config/secret-values.ts), redacted in logs, errors, the ledger
   * and the admin views while the hub runs (policy/config-secrets.ts, registered under `config`).
   * A reload adds the new config's; those it drops stay until the hub stops: a server being
   * retired may still say them.
   */
  private readonly secretValues = new Set<string>();

  private constructor(
    readonly config: HubConfig,
    readonly ledger: AuditSink,
    readonly log: Logger,
  ) {
    // The start-up grace counts from the hub's start, not from when StartupGrace is made below
    // (after the plugins, the state key and the upstream pool, which it looks at, are).
    const startedAt = monotonicNow();
    this.events.setMaxListeners(0);
    this.pluginLoads = new PluginLoads(config, log, (f) => reportPluginFailure(this, f));
    this.plugins = this.pluginLoads.runner;
    this.instructionScreen = new InstructionScreen(instructionChecks(config.plugins), () => this.config.policy?.poisoning ?? 'warn', (e) => reportInstructions(this, e), () => this.handles.keys());
    this.knownCapabilities = new KnownCapabilities(ledger.capabilityStore?.());
    this.resourceRoutes = ledger.resourceRouteStore?.();
    this.catalog = new Catalog(() => [...this.handles.values()], new NameAssigner({ mode: config.names.mode, store: ledger.nameStore?.() }), log, {
      subscribedUris: (id, conn) => this.subs.uris(id, conn),
      listenLeftOut: (id, conn, uris) => this.upstreamSubs.unwatched(id, conn, uris),
      pins: ledger.pinStore?.(),
      itemPins: ledger.itemPinStores?.(),
      resourceRoutes: this.resourceRoutes,
      plugins: this.plugins,
      policy: { pinning: config.policy?.pinning, poisoning: config.policy?.poisoning },
      groups: new Groups(config.groups),
      report: (e) => reportCatalogEvent(this, e, this.config.policy?.pinning),
      listAtReady: (h) => !this.upstreams.splits(h),
      splits: (h) => this.upstreams.splits(h),
      capabilitiesOf: (h) => this.knownCapabilities.of(h.id, h.upstream.state, h.upstream.capabilities),
      // A principal with its own upstream connection has its own private list partition.
      connection: async (h, principal) =>
        principal !== undefined && this.upstreams.isolated(h, principal)
          ? { credential: principalConn(principal), upstream: await this.upstreams.for(h, principal) }
          : { credential: '', upstream: h.upstream },
      // A principal's own process is not started for a server whose main process is down (the
      // same command, which would most likely fail alike: a crash loop per principal); its own
      // credentials to a URL server are tried (the URL may refuse only the shared ones).
      ownConnection: (h, principal) => this.upstreams.existing(h, principal),
      standsAlone: (h, principal, ready) => (ready ? ownReady(this.upstreams, h, principal) : standsAlone(this.upstreams, h, principal) && (h.config.url !== undefined || this.upstreams.existing(h, principal) !== undefined)),
    });
    this.routes = new ShownRoutes(this.catalog);
    this.listChanges = relayCatalogChanges(this.catalog, this.subs, this.events);
    const policy = (config.policy ?? {}) as { requestStateKey?: string; inputTimeoutMs?: number; requestStateTtlMs?: number };
    const base = config.file ? dirname(config.file) : process.cwd();
    const keyFile = config.ledger.enabled ? join(dirname(resolve(base, config.ledger.path)), 'state.key') : join(base, 'data', 'state.key');
    const stateKey = loadStateKey(policy.requestStateKey, keyFile);
    const inputTimeoutMs = policy.inputTimeoutMs ?? DEFAULT_INPUT_TIMEOUT_MS;
    this.mrtr = new Mrtr(new RequestStateSealer(stateKey, policy.requestStateTtlMs, Date.now, ledger.spentStateStore?.()), inputTimeoutMs, config.listen.maxBodyBytes);
    this.metricsSources = {
      servers: () =>
        [...this.handles.values()].map((h) => ({
          id: h.id,
          state: h.upstream.state,
          restarts: this.restartTotals.of(h.id, h.upstream),
          hungRestarts: this.restartTotals.hungOf(h.id, h.upstream),
          principalRestarts: this.principalRestarts.of(h.id),
          principalHungRestarts: this.principalRestarts.hungOf(h.id),
        })),
      cacheStats: () => this.catalog.cache.stats,
      ledgerCounters: () => (ledger as { commitCounters?: () => LedgerCounters }).commitCounters?.(),
      openSessions: () => this.endpoint.sessions.size,
    };
    // Every finished request feeds the metrics and, when someone watches, the live feed ('audit').
    const observed = tapAudit(ledger, {
      began: () => this.metrics?.callStarted(),
      ended: (b, e, began) => {
        this.metrics?.observeCall(b, e, began);
        if (this.events.listenerCount('audit')) this.events.emit('audit', auditEvent(b, e));
      },
      committed: (s) => this.metrics?.observeCommit(s),
    });
    this.auth = new Authenticator(config.auth, base, log);
    this.gate = new EdgeGate(this.auth, new RateLimiter(config.policy?.rateLimit), (b, e, params) => observed.record(beginInCallTrace(this.mrtr.sealer, params, this.withToolServer(b)), e), log, (name, principal, group) => this.otherNames(name, principal, group));
    this.upstreams = new PrincipalUpstreams((spec, l) => createUpstream(spec, l), (h) => specOf(h.config, base), this.auth.required, log, {
      onConnection: (h, upstream, principal) => {
        this.catalog.watchConnection(h, upstream, principal);
        this.principalRestarts.opened(h.id, upstream);
        // Its subscriptions, like the main connection's, are asked for again when it is back.
        upstream.on('state', (state: string) => {
          if (state === 'ready') this.upstreamSubs.resubscribe(h, upstream, principalConn(principal));
          else if (state === 'stopped') this.principalRestarts.closed(h.id, upstream);
        });
      },
      // Its subscriptions keep a principal's connection open while the principal makes no call.
      inUse: (serverId, principal) => this.subs.uris(serverId, principalConn(principal)).length > 0,
      // A call routed before a reload or `servers restart` replaced its server opens none.
      handleOf: (id) => this.handles.get(id),
    });
    this.upstreamSubs = new UpstreamSubscriptions({
      handles: this.handles,
      upstreams: this.upstreams,
      subs: this.subs,
      catalog: this.catalog,
      knownCapabilities: this.knownCapabilities,
      // The endpoint is made last, and is there before any connection is.
      endStreamsHolding: (streams) => this.endpoint.listen.endStreamsHolding(streams),
      log,
    });
    this.moves = new SubscriptionMoves({
      handles: this.handles,
      resubscribeMoved: (moved) => this.endpoint.resubscribeMoved(moved),
      takeMoved: (subscriber, principal, group) => this.upstreamSubs.takeMoved(subscriber, principal, group),
      movesBegin: (keepUnrouted) => this.upstreamSubs.movesBegin(keepUnrouted),
      stop: this.stopBegun.signal,
      log,
    });
    this.grace = new StartupGrace({ startedAt, handles: this.handles, catalog: this.catalog, routes: this.routes, upstreams: this.upstreams, stop: this.stopBegun.signal, log });
    this.healthSources = {
      handles: this.handles,
      catalog: this.catalog,
      grace: this.grace,
      ledgerWriteFailing: () => this.metricsSources.ledgerCounters()?.writeFailing,
    };
    this.validator = new SchemaValidator(log);
    this.router = new Router(this.catalog, observed, this.subs, this.mrtr, log, {
      pageSize: config.pageSize,
      cursorKey: cursorKeyFrom(stateKey),
      // A call let past the grace (StartupGrace.holdCall) is not held in it by the router either.
      // Past the grace (every call from then on), no look at the call's context.
      startupGrace: (ctx) => (this.grace.over || ctx?.routedInGrace !== undefined ? undefined : this.grace.wait(ctx?.group)),
      closingUpstreams: () => this.closingUpstreams,
      stopBegun: this.stopBegun.signal,
      confirmer: new Confirmer(policy as ConfirmPolicy),
      upstreamFor: (server, ctx) => this.upstreams.for(server, ctx.principal),
      openConnection: (server, ctx) => usedBy(this.upstreams, server, ctx.principal),
      connectionKnown: (server, principal) => this.upstreams.knownBeforeReady(server, principal),
      // As the catalog's standsAlone: a principal's own process is not started while the server's is down.
      startsOwnProcess: (server, principal) => startsOwnProcess(this.upstreams, server, principal),
      validator: this.validator,
      plugins: this.plugins,
      credentials: this.auth,
      capabilitiesOf: (h) => this.knownCapabilities.of(h.id, h.upstream.state, h.upstream.capabilities),
      server: (id) => this.handles.get(id),
      carrySubscription: (id, conn, made, uri) => this.upstreamSubs.carrySubscription(id, conn, made, uri),
      movedMeanwhile: (subscriber, uri, principal, group, since) => this.upstreamSubs.movedMeanwhile(subscriber, [uri], principal, group, since),
    });
    this.dispatch = new Dispatch({
      handles: this.handles,
      catalog: this.catalog,
      routes: this.routes,
      router: this.router,
      grace: this.grace,
      upstreams: this.upstreams,
      sealer: this.mrtr.sealer,
      stop: this.stopBegun.signal,
      offers: (family, group) => this.offers(family, group),
      log,
    });
    const { maxPendingPerSession, sessionIdleTimeoutMs, maxSessions, maxSessionsPerPrincipal } = config.listen;
    const memory = ledger.sessionMemoryStore?.();
    const limits = { maxPendingPerSession, sessionIdleTimeoutMs, maxSessions, maxSessionsPerPrincipal, inputTimeoutMs };
    this.endpoint = new Endpoint(this, log, limits, new SessionIds(stateKey, memory?.home), memory && new SessionMemory(memory));
    this.listeners = new Listeners({
      config,
      hub: this,
      endpoint: this.endpoint,
      auth: this.auth,
      gate: this.gate,
      catalog: this.catalog,
      // Before the listener serves (and before startUpstreams): no call is missed.
      metricsReady: async () => {
        this.metrics ??= new (await import('./metrics.js')).Metrics(this.metricsSources);
      },
      log,
    });
  }

  static create(config: HubConfig, log: Logger): Hub {
    // First: an error of what follows (the ledger, a plugin, a server) may quote them.
    const secrets = configSecretValues(config);
    useConfigSecrets(config, secrets);
    // Should this throw, they stay registered: the caller reports the error (redacted) and exits.
    const hub = new Hub(config, openLedger(config, log), log);
    for (const v of secrets) hub.secretValues.add(v);
    for (const m of ignoredSettings(config)) log.warn(m);
    for (const s of Object.values(config.servers)) if (s.enabled) hub.addServer(hub.buildServer(s));
    hub.forgetUnconfigured();
    return hub;
  }

  /**
   * What the ledger kept of servers no longer in the config (capabilities, resource routes) is
   * dropped: a server added later under the same id may be another one. A disabled server keeps
   * its rows. The verdicts on instructions are kept for running servers only.
   */
  private forgetUnconfigured(): void {
    const ids = new Set(Object.keys(this.config.servers));
    this.knownCapabilities.retain(ids);
    this.resourceRoutes?.retain(ids);
    this.instructionScreen.retain(new Set(this.handles.keys()));
    this.restartTotals.retain(new Set(this.handles.keys()));
  }

  /** A server's upstream and handle, not yet registered or started; throws on a config it cannot use. */
  private buildServer(s: ServerConfig): ServerHandle {
    const upstream = createUpstream(specOf(s, this.config.file ? dirname(this.config.file) : process.cwd()), this.log);
    return { id: s.id, config: s, upstream };
  }

  private addServer(h: ServerHandle): void {
    const s = h.config;
    const upstream = h.upstream;
    // The connection it replaces (a restart, a reload, a removal and a return) is done counting:
    // its restarts so far join the total, read once so that the total never goes back.
    this.restartTotals.connected(s.id, upstream);
    this.handles.set(s.id, h);
    this.catalog.watch(h);
    upstream.on('state', (state: string, detail?: string) => {
      if (state === 'ready' && upstream.capabilities) this.knownCapabilities.ready(s.id, upstream.capabilities);
      // Checked as the server comes up, so the operator hears of flagged instructions before a client connects.
      if (state === 'ready') this.instructionsVerdict(h);
      this.events.emit('serverState', { type: 'serverState', ts: Date.now(), id: s.id, state, era: upstream.era ?? null, detail });
      if (state === 'ready') this.upstreamSubs.resubscribe(h);
    });
  }

  /**
   * A tools/call the edge refused (a rate limit, a credential of the wrong group…) names the
   * server of its tool when the catalog showed that tool to the caller's group: its row is then
   * found under the server (`ledger query --server`, `ledger stats`) and /metrics counts it under
   * the tool, as the tool's calls refused, not under no tool at all. An unknown name stays none.
   */
  /**
   * A tool's upstream name and the name it had before the hub renamed it, for the edge's scopes
   * and rate limits (EdgeGate): by the tools list built last for this principal, else routed as
   * its call will be (after the start-up grace, as the router waits for it), so a name no list has
   * shown yet (a fresh hub, its hash worked out by the client) is not let past the glob its
   * siblings meet. A name that routes nowhere has none: the router answers it "Unknown tool".
   */
  private otherNames(hubName: string, principal: string, group: string | undefined): OtherNames | undefined | Promise<OtherNames | undefined> {
    const view = { principal, group };
    const known = this.catalog.knownTool(hubName, view);
    if (known) return namesOf(known);
    const grace = this.grace.over ? undefined : this.grace.wait(group, true);
    return (grace ?? Promise.resolve())
      .then(() => this.catalog.resolveTool(hubName, view))
      .then((r) => (r ? namesOf(r) : undefined), () => undefined);
  }

  private withToolServer(b: AuditBegin): AuditBegin {
    return b.server === undefined ? { ...b, ...toolServerOf(this.catalog, b.method, b.hubName, b.principal, b.group) } : b;
  }

  /** Start every upstream in the background; the endpoint serves at once. */
  startUpstreams(): void {
    for (const h of this.handles.values()) this.startServer(h);
  }

  private startServer(h: ServerHandle): void {
    // Its attempt logged why (redacted), or nothing for a stop during it; it retries on its own.
    h.upstream.start().catch(() => undefined);
  }

  /**
   * What only a listener needs, loaded when the hub will have one: the OAuth verifier (jose) for
   * a config with `auth.oauth`. Its errors (an unreadable `jwksFile`) are the config's: `start`
   * calls this before listen() to say so. Idempotent; listen() calls it too.
   */
  async prepareListener(): Promise<void> {
    await this.auth.prepare();
  }

  async listen(host = this.config.listen.host, port = this.config.listen.port): Promise<AddressInfo> {
    return this.listeners.listen(host, port);
  }

  /** The operator's own listener (listen.admin), once listen() has run (hub/listeners.ts); its address, undefined without one. */
  listenAdmin(): Promise<string | undefined> {
    return this.listeners.listenAdmin();
  }

  /** Refuse new work from now on (answered: the hub is shutting down), as stop() does first; calls in flight go on. */
  stopAccepting(): void {
    this.draining = true;
    this.stopBegun.abort(new HubStoppingError(true));
    this.listeners.stopAccepting();
    // A parked call waits for a retry, which is a request, refused from now on (handle): it ends
    // now, not at the drain deadline. A legacy stdio server's parked call holds its call gate
    // alone: the calls queued behind it ran only once the drain was over, into a closed upstream.
    this.mrtr.bridge.close();
  }

  /**
   * Stop: refuse new work, let calls in flight finish for up to `drainMs`, then close the
   * upstreams (stdin EOF → SIGTERM → SIGKILL for processes), which fails what is still running
   * with a recorded answer, then the listener, and flush the ledger last. `beforeLedgerClose`:
   * what must still write its rows (`switchyard stdio` stops reading stdin there, and waits for
   * the refusals of the lines it read: one read after the close was answered without a row).
   */
  async stop(drainMs = this.config.listen.drainTimeoutMs, beforeLedgerClose?: () => Promise<void>): Promise<void> {
    this.stopAccepting();
    if (!(await this.inflight.idle(drainMs))) this.log.warn({ inFlight: this.inflight.count, drainMs }, 'calls still running at the drain deadline; closing the upstreams under them');
    this.closingUpstreams = true;
    this.endpoint.listen.closeAll();
    this.endpoint.close();
    this.listChanges.close();
    this.catalog.close();
    // What waits for a client's answer (a legacy client's question; a parked call ended as the stop began) ends now, before the upstreams close.
    this.mrtr.close();
    this.listeners.admin?.close();
    // The principals' own connections alongside the servers' (nothing of one waits on the other):
    // closed after them, their calls were answered only once every server's process had exited,
    // 2 s and more for one that ignores the end of its stdin. From here on the pool opens none (a
    // call in flight at the drain deadline that gets that far finds its connection closed): one
    // opened later was closed by nothing but the exit watchdog, after the exit.
    await Promise.allSettled([...[...this.handles.values()].map((h) => h.upstream.close()), this.upstreams.closeAll()]);
    // What waits on the hub alone (a legacy client's answer to a relayed question) is ended too.
    this.endpoint.stopCalls();
    // The calls failed by the closing upstreams still write their answers and audit rows.
    await this.inflight.idle(1_000);
    await this.listeners.close();
    this.metrics?.close();
    await this.listeners.releaseSocket();
    this.validator.close();
    await this.plugins.close();
    await beforeLedgerClose?.();
    await this.ledger.close();
    dropConfigSecrets(this.config);
  }

  /**
   * Apply a new config to the running hub (see hub/reload.ts). The report also says what is
   * still wrong (plugins not loaded) and, when this reload changed nothing, the last one that
   * did: the file watch may have applied the file before `switchyard reload` asked.
   */
  async reload(next: HubConfig): Promise<ReloadReport> {
    // Before anything starts: a new server's first stderr line may say its new token.
    for (const v of configSecretValues(next)) this.secretValues.add(v);
    useConfigSecrets(this.config, this.secretValues);
    for (const m of ignoredSettings(next)) this.log.warn(m);
    const report = await applyReload(this.reloadTarget(), next);
    // Once the servers it started are ready: what clients subscribed to on a server it removed,
    // renamed, routed away from or hid is subscribed again where it is now (hub/moved-subscriptions.ts).
    this.moves.after(report);
    // Read once it is done: its plugins' load replaced the list.
    return this.reloads.complete(report, next, this.pluginLoads.notLoaded);
  }

  /** A fresh connection for one running server, its config unchanged (POST /admin/servers/<id>/restart). */
  restartServer(id: string): void {
    restartServer(this.reloadTarget(), id);
  }

  private reloadTarget(): ReloadTarget {
    const { config, handles, catalog, upstreams, routes, auth, log } = this;
    return {
      config,
      handles,
      catalog,
      upstreams,
      routes,
      auth,
      log,
      buildServer: (s) => this.buildServer(s),
      addServer: (h) => this.addServer(h),
      startServer: (h) => this.startServer(h),
      applyPolicy: (p) => this.applyPolicy(p),
      applyGroups: (g) => this.applyGroups(g),
      applyPlugins: (p) => this.applyPlugins(p),
      pluginFilesChanged: (p) => this.pluginLoads.filesChanged(p),
      applyPageSize: (n) => this.router.setPageSize(n),
      credentialsRevoked: (p, k, n) => endRevoked(this.endpoint, this.listeners.admin, this.log, p, k, n),
      forgetUnconfigured: () => this.forgetUnconfigured(),
    };
  }

  private applyPolicy(p: PolicyConfig): void {
    this.gate.setLimits(p.rateLimit);
    this.router.setConfirmer(new Confirmer(p as ConfirmPolicy));
    this.catalog.setPolicy({ pinning: p.pinning, poisoning: p.poisoning });
  }

  private async applyPlugins(plugins: NonNullable<HubConfig['plugins']>): Promise<string[]> {
    this.instructionScreen.setChecks(instructionChecks(plugins));
    const failed = await this.pluginLoads.reload(plugins);
    this.catalog.pluginsChanged();
    return failed;
  }

  private applyGroups(groups: NonNullable<HubConfig['groups']>): void {
    this.catalog.setGroups(groups);
    // Names remembered per group for servers that are down: a group that no longer shows one
    // must answer "unknown tool" for it, not "unavailable".
    this.routes.forgetAll();
    endRemovedGroups(this.endpoint, this.log, (group) => !this.catalog.groups.has(group));
  }

  namesFirstStarting(method: string, params: Record<string, unknown>, group?: string): boolean {
    return this.dispatch.namesFirstStarting(method, params, group);
  }

  familyInGrace(method: string, params: Record<string, unknown>, group?: string): 'wait' | 'on' | 'none' {
    return this.grace.family(method, params, group);
  }

  currentCapabilities(group?: string): ServerCapabilities {
    // A server that is not ready counts with what it offered last (or, never seen, the list
    // families while it starts): its families answer "unavailable" or an empty list meanwhile
    // rather than "method not found", and a handshake made now does not leave them out.
    // A group's are those of the servers it shows: another server's logging, completions or
    // resources.subscribe would be offered where nothing gives them.
    const shown = [...this.handles.values()].filter((h) => this.catalog.groups.showsServer(group, h.id));
    const caps = unionCapabilities(shown, (h) => this.knownCapabilities.of(h.id, h.upstream.state, h.upstream.capabilities));
    // The list families always: a legacy session keeps its handshake's capabilities, and one
    // made while no server offered tools, prompts or resources (none configured yet, every one
    // failed to start, none of the kind) would never ask for those of a server added by a
    // reload or started by `servers restart`. An empty list is a true answer meanwhile.
    // (Subscriptions, logging and completions stay what the servers give.)
    caps.tools ??= { listChanged: true };
    caps.prompts ??= { listChanged: true };
    caps.resources ??= { listChanged: true };
    return caps;
  }

  offers(family: keyof ServerCapabilities, group?: string): boolean {
    // The list families are always offered (currentCapabilities): a call of one, the usual
    // request, looks at no server (issue #9: each request built the union over every server).
    if (LIST_FAMILIES.has(family)) return true;
    return Boolean(this.currentCapabilities(group)[family]);
  }

  async capabilities(group?: string): Promise<ServerCapabilities> {
    const grace = this.grace.wait(group);
    if (grace) {
      await grace;
      // The stop began while it waited: not a handshake with what is ready (capabilities missing
      // the servers still starting, on a hub going away), but the stop's error, as a list's.
      if (this.stopBegun.signal.aborted) throw new HubStoppingError(true);
    }
    return this.currentCapabilities(group);
  }

  instructions(group?: string): string | undefined {
    return mergedInstructions(
      this.handles.values(),
      (id) => this.catalog.groups.showsServer(group, id),
      (id, text) => this.instructionScreen.verdict(id, text).withheld,
    );
  }

  /** A server's instructions and what the poisoning checks made of them; undefined: it gave none. */
  instructionsVerdict(h: ServerHandle): InstructionsVerdict | undefined {
    const text = h.upstream.instructions;
    return text ? this.instructionScreen.verdict(h.id, text) : undefined;
  }

  handle(method: string, params: Record<string, unknown>, ctx: CallContext): Promise<Record<string, unknown>> {
    // A retry's rows are in its call's trace however it ends: refused here (draining, its
    // server down or failMode closed) or forwarded (its state is sealed with the joined span).
    ctx = inCallTrace(this.mrtr.sealer, params, ctx);
    if (this.draining) {
      const err = new RpcError(INTERNAL_ERROR, 'the hub is shutting down; send the request again once it is back');
      return this.recordLocal(method, ctx, { outcome: 'unavailable', errorKind: 'transport', errorMessage: err.message }).then(() => Promise.reject(err));
    }
    this.inflight.enter();
    return this.dispatch.route(method, params, ctx, this.inflight);
  }

  recordLocal(method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'> & { latencyMs?: number }, extra?: { hubName?: string; clientEra?: string }): Promise<void> {
    return this.router.recordLocal(method, ctx, end, extra);
  }

  /**
   * A modern listen stream's resourceSubscriptions: routed, reference-counted, subscribed
   * upstream (hub/upstream-subscriptions.ts).
   */
  async subscribeResources(subscriber: string, uris: string[], principal: string, group?: string, saidLater?: Set<string>): Promise<string[]> {
    // In the start-up grace, routed once the servers still starting are ready (or the grace is
    // over), as a read or a legacy subscribe is (its session's handshake waits): routed at once,
    // a URI of a server the hub has never seen ready (a first start, `switchyard stdio` with the
    // ledger off) routed nowhere, and the listen acknowledgement left it out for good.
    const grace = this.grace.over ? undefined : this.grace.wait(group);
    if (grace) await grace;
    return this.upstreamSubs.subscribeResources(subscriber, uris, principal, group, saidLater);
  }

  /**
   * Each legacy server this client's endpoint shows hears it, on the connection that is this
   * principal's: with authentication off, the server's main one (every client is the one
   * principal); with it on, only the principal's own connection (per-principal credentials, a
   * legacy HTTP session, processPerPrincipal). A shared connection may serve anyone next, and the
   * roots a server keeps act for whoever calls (server-filesystem makes them its allowed
   * directories, in place of the configured ones). A modern server asks for roots in each
   * request that needs them.
   */
  rootsChanged(principal: string, group: string | undefined, ask: AskClient, firstClient?: boolean, canAsk?: () => boolean): void {
    for (const h of this.handles.values()) {
      if (!this.catalog.groups.showsServer(group, h.id)) continue;
      const conn = this.auth.required ? this.upstreams.existing(h, principal) : h.upstream;
      if (conn?.rootsChanged?.(principal, askedFor(ask, askerOf(h)), firstClient, canAsk)) this.log.debug({ server: h.id, principal, firstClient }, 'client roots changed: told the server');
    }
  }

  sessionClosed(sessionKey: string): void {
    this.upstreamSubs.sessionClosed(sessionKey);
  }

  /** /healthz and `switchyard status` (hub/health.ts). */
  health(shows?: (server: string) => boolean, groups?: ReadonlySet<string>): HubHealth {
    return hubHealth(this.healthSources, this.draining, shows, groups);
  }
}

/**
 * `ask` for the roots/list a server sends outside any call, put to a legacy client (the only kind
 * told of root changes) as its questions within a call are (forwarding.ts: asker, askerInMeta):
 * an untrusted server's own `dev.switchyard/server` value replaced by its id, so a server cannot
 * pass itself off as another; a trusted one's (`asker` undefined) relayed as it asked.
 */
function askedFor(ask: AskClient, asker: string | undefined): AskClient {
  return asker === undefined ? ask : (req, withdrawn) => ask(relayedInput(req, asker, true), withdrawn);
}

/** A routed tool's base name (names.ts baseName) when the hub shows it under another. */
function namesOf(r: { server: ServerHandle; upstreamName: string; hubName: string }): OtherNames {
  const base = baseName(r.server.config.prefix, r.upstreamName);
  return { base: base === r.hubName ? undefined : base, upstream: r.upstreamName };
}
