import { credentialUnchanged, CredentialRevokedError, heldCredentialRefusal, type HeldCredentials } from '../auth/held-credential.js';
import { heldReason } from '../catalog/held-reason.js';
import type { Logger } from '../log.js';
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import type { ItemKind } from '../catalog/filters.js';
import { cacheableRead } from '../catalog/read-cache.js';
import type { PluginRunner } from '../plugins/runner.js';
import { KIND_OF_METHOD, NAME_FIELD, type ListKind } from '../catalog/lists.js';
import { decodeCursor, encodeCursor } from '../catalog/cursor.js';
import type { AuditSink } from '../ledger/sink.js';
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
import { CancelledError, HubStoppingError, INTERNAL_ERROR, INVALID_PARAMS, LEGACY_RESOURCE_NOT_FOUND, METHOD_NOT_FOUND, namesOnlyUri, notSent, refusedUnapplied, RpcError, UpstreamUnavailableError } from '../protocol/errors.js';
import { completionArgumentsProblem, promptArgumentsProblem } from '../protocol/string-args.js';
import { copyOf } from '../protocol/copy.js';
import { shownName, uriData } from '../protocol/shown-value.js';
import type { CallOptions, Upstream } from '../upstream/types.js';
import type { ServerCapabilities } from '../protocol/types.js';
import type { SchemaValidator } from '../policy/validate.js';
import type { CallContext } from './context.js';
import { cutOffError, endedWhileHeld, outcomeOfError, outcomeSeenBy } from './outcome.js';
import { LISTEN_SHARE, MAX_SUBSCRIBED_URI_LENGTH, type Subscriptions } from './subscriptions.js';
import { principalConn } from '../catalog/principal-conn.js';
import { awaitsUrlSteps, urlStepsNamedFor, type Mrtr } from './mrtr.js';
import { firstRowEnd, type FirstRow } from './input-bridge.js';
import type { Binding } from './request-state.js';
import type { Confirmer } from '../policy/confirm.js';
import { LEGACY, MODERN } from '../protocol/era.js';
import { readyWithin } from '../upstream/ready-within.js';
import { reasonOf, unlessAborted, type Signal } from '../cancel.js';
import { LISTEN_ACK_WAIT_MS } from '../catalog/upstream-listen.js';
import { beginOf, bytesOf, callOptions, connectionFor, forwardedParams, knownLegacy, retryOf, viewOf, withUpstream, withoutStrayRound, type BeginTarget, type Result, type UpstreamFor } from './forwarding.js';
import { ToolCall } from './call-tool.js';
import { cacheTtl } from '../protocol/ttl.js';
import { notDelivered } from '../upstream/retry.js';
import { PagedLists, type KeptList } from './paged-lists.js';
import { pageEnd } from './page-end.js';
import { withScreenedContentIcons } from '../catalog/icons.js';
import { connectionReplaced, replacedError, reroutesLeft, RouteReplacedError, rerouteIfReplaced } from './replaced.js';

export interface RouterOptions {
  pageSize: number;
  cursorKey: Buffer;
  /**
   * Waits (bounded) for upstreams still starting, so a first list is complete; undefined when
   * nothing is starting any more (no await needed).
   *
   * `ctx`: the request's: its endpoint group's servers alone are waited for (a server the group
   * does not show changes none of its answers); a call (tools/call, prompts/get,
   * completion/complete) the hub may have let past the grace (hub/startup-grace.ts).
   */
  startupGrace: (ctx?: CallContext) => Promise<void> | undefined;
  /**
   * Whether the hub's stop is closing its upstreams (its drain time over): a list built then may
   * lack the servers the stop closed under it, and is not given as the list (see list()).
   */
  closingUpstreams?: () => boolean;
  /**
   * Aborted as the hub's stop begins: a list that waited in the start-up grace is ended then (not
   * answered with what is ready), and a request waiting between retries (its server restarting)
   * is answered at once instead of holding the drain (retry.ts).
   */
  stopBegun?: Signal;
  /** Policy confirmation of risky calls (`policy.confirm`, `policy.confirmDestructive`). */
  confirmer?: Confirmer;
  /** The connection this caller must use (per-principal upstream isolation); default the server's own. */
  upstreamFor?: UpstreamFor;
  /**
   * upstreamFor's choice if that connection is open now, none made: undefined when it would be a
   * principal's own one not open (never started, or closed by a reload or `servers restart`);
   * default the server's own.
   */
  openConnection?: (server: ServerHandle, ctx: CallContext) => Upstream | undefined;
  /**
   * Whether upstreamFor's choice for `principal` is known while the server's own connection is
   * not ready (a stdio server's processPerPrincipal, a principal's own credentials): else it turns
   * on what that connection learns at its handshake (its era), known once it is ready.
   */
  connectionKnown?: (server: ServerHandle, principal: string) => boolean;
  /**
   * Whether upstreamFor would start a connection of `principal`'s own that is not open now (a
   * stdio server's processPerPrincipal process). Not done while the server's own connection is
   * down: the same command would most likely fail alike, a crash loop per user (as the catalog
   * and tools/call do not, hub/own-connection.ts standsAlone).
   */
  startsOwnProcess?: (server: ServerHandle, principal: string) => boolean;
  /** Checks tool arguments and structured results against the tool's schemas. */
  validator?: SchemaValidator;
  /** Plugin hooks around tool calls (beforeCall, afterCall). */
  plugins?: PluginRunner;
  /** The hub's API keys as they stand now: a held call's key is looked up again before it is sent (auth/held-credential.ts). */
  credentials?: HeldCredentials;
  /** The capabilities a server counts with: its own, or what it offered when last ready while it is down; default its own. */
  capabilitiesOf?: (server: ServerHandle) => ServerCapabilities | undefined;
  /**
   * A configured server's handle in use now, by id (where a subscription is held; whether a
   * request's route still names it: router/replaced.ts).
   */
  server?: (id: string) => ServerHandle | undefined;
  /**
   * A legacy subscription of `uri` just counted on connection `conn` of server `serverId`, made
   * on `made`: should that connection have been replaced meanwhile (`servers restart`, a reload),
   * the one open now holds it too once this settles (UpstreamSubscriptions.carrySubscription).
   */
  carrySubscription?: (serverId: string, conn: string, made: Upstream, uri: string) => Promise<void>;
  /**
   * `subscriber`'s subscription of `uri`, routed from `since` (performance.now()) on, just
   * counted: a reload's moves that began meanwhile may not have seen it, and it is moved now as
   * they would have (UpstreamSubscriptions.movedMeanwhile). Never rejects.
   */
  movedMeanwhile?: (subscriber: string, uri: string, principal: string, group: string | undefined, since: number) => Promise<unknown>;
}

/** Which error a hub-level failure becomes for a method that is not a tool call. */
function asRpcError(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  if (err instanceof CancelledError) return new RpcError(-32800, 'request cancelled');
  return new RpcError(-32603, err instanceof Error ? err.message : 'internal error');
}

/**
 * Routes era-neutral requests to upstreams and records every one in the ledger. The row is
 * committed before a call is forwarded and again before its answer is returned.
 */
export class Router {
  private readonly tools: ToolCall;
  private readonly paged = new PagedLists();

  /** A tools/call whose idempotency key's call has ended: answered from the key, whatever its server's state (ToolCall.keyEnded). */
  keyEnded(params: Record<string, unknown>, ctx: CallContext): boolean | Promise<boolean> {
    return this.tools.keyEnded(params, ctx);
  }

  /** A reloaded `policy.confirm` / `confirmDestructive`: read by the next call (ToolCall reads these options per call). */
  setConfirmer(c: Confirmer): void {
    this.opts.confirmer = c;
  }

  /**
   * A reloaded `pageSize`: cursors carry an offset, so a client paging through a list goes on
   * from where it was; the pages memoised at the old size are dropped.
   */
  setPageSize(n: number): void {
    if (n === this.opts.pageSize) return;
    this.opts.pageSize = n;
    this.pages = new WeakMap();
  }

  constructor(
    private readonly catalog: Catalog,
    private readonly ledger: AuditSink,
    private readonly subs: Subscriptions,
    private readonly mrtr: Mrtr,
    private readonly log: Logger,
    private readonly opts: RouterOptions,
  ) {
    this.tools = new ToolCall({ catalog, ledger, mrtr, log, opts });
  }

  /**
   * A request the edge answered itself (initialize, ping, discover, setLevel) or rejected;
   * `extra` carries what the row knows about its target (the name a client asked for), and the
   * client's protocol version when it is none of the hub's eras (`clientEra`).
   */
  recordLocal(method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'> & { latencyMs?: number }, extra?: BeginTarget & { clientEra?: string }): Promise<void> {
    const begin = beginOf(method, ctx, extra);
    if (extra?.clientEra !== undefined) begin.clientEra = extra.clientEra;
    return this.noted(this.ledger.record(begin, { latencyMs: 0, ...end }), method);
  }

  /** Records a request the router answers with a JSON-RPC error of its own, and gives the error to throw. */
  private async refused(method: string, ctx: CallContext, err: RpcError, extra?: BeginTarget, facts?: Pick<AuditEnd, 'server' | 'upstreamName'>): Promise<RpcError> {
    await this.recordLocal(method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message, ...facts }, extra);
    return err;
  }

  /**
   * A row of what ran, or needed no upstream, that the ledger could not write (a full disk) is
   * logged, not the request's failure: only calls are refused when rows cannot be written (they
   * are, before they run); everything else keeps working (README, "The ledger").
   */
  private noted(written: Promise<void>, method: string): Promise<void> {
    return written.catch((err: unknown) => this.log.error({ method, err: err instanceof Error ? err.message : String(err) }, 'audit row not written'));
  }

  // Not async: each case hands on its own method's promise, which an async wrapper would only
  // take again (a thenable resolved: two more turns a request).
  handle(method: string, params: Result, ctx: CallContext): Promise<Result> {
    const kind = KIND_OF_METHOD[method];
    if (kind) return this.list(method, kind, params, ctx);
    switch (method) {
      case 'tools/call':
        return this.tools.call(params, ctx);
      case 'prompts/get':
        return this.forwardNamed(method, params, ctx, 'prompt');
      case 'resources/read':
        return this.readResource(params, ctx);
      case 'completion/complete':
        return this.complete(params, ctx);
      case 'resources/subscribe':
        return this.subscribe(params, ctx);
      case 'resources/unsubscribe':
        return this.unsubscribe(params, ctx);
      default:
        return this.refused(method, ctx, new RpcError(METHOD_NOT_FOUND, `method not found: ${shownName(method)}`)).then((err) => Promise.reject(err));
    }
  }

  private async list(method: string, kind: ListKind, params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const begin = beginOf(method, ctx);
    let result: Result;
    try {
      // Ended by its client or by the hub's stop while it waits (the start-up grace, a server's
      // slow list): it ends then, as a call does, not when the slowest server answers. It held a
      // stop signal after stdin EOF (`switchyard stdio`) until its drain time ran out, the
      // calls ended with it unanswered meanwhile. The lists go on being fetched, for the next.
      const ended = (): never => {
        throw cutOffError(new CancelledError(reasonOf(ctx.signal)), ctx.signal);
      };
      const grace = this.opts.startupGrace(ctx);
      if (grace) {
        await unlessAborted(() => grace, ctx.signal, ended);
        // The stop began while it waited: a list of what is ready would lack the servers still
        // starting (a modern client's cacheable for ttlMs), from a hub going away. Ended as the
        // stop ends a request (-32603 the hub is shutting down, recorded unavailable).
        if (this.opts.stopBegun?.aborted) throw new HubStoppingError(true);
      }
      const agg = await unlessAborted(() => this.catalog.aggregate(kind, viewOf(ctx)), ctx.signal, ended);
      // Built as the stop closed the servers (in flight at the drain deadline, over HTTP): it left
      // them out (`{"tools": []}`, cacheable for ttlMs, public, to a modern client), recorded ok.
      // Ended as the stop ends a request: -32603 the hub is shutting down, recorded unavailable.
      if (this.opts.closingUpstreams?.()) throw new HubStoppingError();
      let offset = 0;
      // The names of the list the cursor came from, when it is no longer the current one (kept a while).
      let kept: KeptList | undefined;
      let snapshot: string | undefined;
      if (params.cursor !== undefined) {
        const c = typeof params.cursor === 'string' ? decodeCursor(params.cursor, this.opts.cursorKey) : null;
        if (c && c.snapshot !== agg.snapshot) kept = this.paged.recall(viewOf(ctx), kind, c.snapshot);
        // Every page of one list carries its first page's cacheScope (digest §3.2), and a page
        // of a list gone private since must not pass for public (a client caches the pages it
        // walked as one list, with the first page's scope): that list is over, it is listed again.
        const gonePrivate = kept?.scope === 'public' && agg.scope === 'private';
        if (!c || (c.snapshot !== agg.snapshot && !kept) || gonePrivate || c.offset > (kept?.names.length ?? agg.items.length))
          throw new RpcError(INVALID_PARAMS, 'invalid or expired cursor; list again from the start');
        offset = c.offset;
        snapshot = c.snapshot;
      }
      // A kept list gives the order and the membership of the client's pages; what they show is
      // the current list's: an item since removed, hidden (a reload, a quarantine, a group
      // change) or changed is left out or shown as it is now.
      const { end, items } = kept ? this.keptPage(kind, agg.items, kept.names, offset) : this.page(agg.items, offset);
      result = { [kind]: items };
      if (end < (kept?.names.length ?? agg.items.length)) {
        snapshot ??= agg.snapshot;
        this.paged.remember(viewOf(ctx), kind, snapshot, agg.items, agg.scope);
        result.nextCursor = encodeCursor({ offset: end, snapshot }, this.opts.cursorKey);
      }
      result.ttlMs = agg.ttlMs;
      result.cacheScope = kept?.scope ?? agg.scope;
    } catch (err) {
      await this.noted(this.ledger.record(begin, Object.assign(outcomeOfError(err), { latencyMs: performance.now() - t0 })), method);
      throw asRpcError(err);
    }
    await this.noted(this.ledger.record(begin, { outcome: 'ok', latencyMs: performance.now() - t0 }), method);
    return result;
  }

  /** Pages of one aggregate keep their identity, so the edge serialises each page once. */
  private pages = new WeakMap<readonly unknown[], Map<number, Page>>();

  /** The page of the current list at `offset`: at most pageSize items, and PAGE_BYTE_LIMIT bytes of them. */
  private page(items: readonly Record<string, unknown>[], offset: number): Page {
    let byOffset = this.pages.get(items);
    if (!byOffset) this.pages.set(items, (byOffset = new Map()));
    let p = byOffset.get(offset);
    if (!p) {
      const end = pageEnd(items.length, offset, this.opts.pageSize, (i) => items[i]);
      p = { end, items: offset === 0 && end === items.length ? items : items.slice(offset, end) };
      byOffset.set(offset, p);
    }
    return p;
  }

  /** The page of a kept list at `offset`, its names shown as the current list `now` has them. */
  private keptPage(kind: ListKind, now: readonly Record<string, unknown>[], names: readonly unknown[], offset: number): Page {
    const m = byKeyOf(kind, now);
    const end = pageEnd(names.length, offset, this.opts.pageSize, (i) => m.get(names[i]));
    const items: Record<string, unknown>[] = [];
    for (let i = offset; i < end; i++) {
      const cur = m.get(names[i]);
      if (cur) items.push(cur);
    }
    return { end, items };
  }

  /**
   * What `find` finds: a route, which takes the servers' lists when none is built yet (or one
   * changed since), the slowest server's too. The request's client cancelling it, or the hub's
   * stop, ends it then, recorded so (nothing was sent), as a list (Router.list) and a call.
   */
  private async found<T>(method: string, ctx: CallContext, extra: BeginTarget, find: () => Promise<T>): Promise<T> {
    try {
      const route = await unlessAborted(find, ctx.signal, () => {
        throw cutOffError(notSent(new CancelledError(reasonOf(ctx.signal))), ctx.signal);
      });
      // Found as the stop closed the servers (in flight at an HTTP hub's drain deadline): one it
      // closed is left out, and its prompt or resource was answered as not found. Ended as the
      // stop ends a request: nothing was sent.
      if (this.opts.closingUpstreams?.()) throw new HubStoppingError(true);
      return route;
    } catch (err) {
      const stopping = err instanceof HubStoppingError && !ctx.signal?.aborted;
      if (ctx.signal?.aborted || stopping) await this.recordLocal(method, ctx, outcomeOfError(err), extra);
      // Its client is told as one the stop ended is (-32603 the hub is shutting down).
      throw stopping ? asRpcError(err) : err;
    }
  }

  /** Forward a request to the upstream that owns a prompt name, with the name mapped back. */
  private async forwardNamed(method: string, params: Result, ctx: CallContext, what: 'prompt'): Promise<Result> {
    const t0 = performance.now();
    const hubName = typeof params.name === 'string' ? params.name : '';
    const grace = this.opts.startupGrace(ctx);
    if (grace) await unlessAborted(() => grace, ctx.signal, () => undefined);
    const view = viewOf(ctx);
    const judged = this.judged(ctx, 'prompts');
    // A prompt of a server that is down is not listed, but it is not unknown either: the
    // forward answers that the server is unavailable, and the row says which one.
    // One let past the start-up grace comes with its route (hub/startup-grace.ts): its server's list is not fetched again.
    const generation = this.catalog.generation;
    const routed = !hubName ? undefined : (ctx.routedInGrace ?? (await this.found(method, ctx, { hubName }, async () => (await this.catalog.resolvePrompt(hubName, view)) ?? this.catalog.downItem('prompts', hubName, view))));
    rerouteIfReplaced(generation, this.catalog.generation, routed?.server, this.opts.server, ctx);
    if (!routed) {
      // Held back for a pending pin change (a client getting it from a list shown before): said, as for a tool call.
      const held = hubName ? await this.catalog.heldItem('prompts', hubName, view) : undefined;
      if (held) throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, `Unknown ${what}: ${shownName(hubName)} (${heldReason('prompt', held.record)})`), { hubName, server: held.server.id, upstreamName: held.upstreamName, upstreamEra: held.server.upstream.era });
      throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, typeof params.name !== 'string' ? `${method} needs params.name, a string` : `Unknown ${what}: ${hubName ? shownName(hubName) : '(no name)'}`), { hubName });
    }
    // A server that is down has no listed prompt here (downItem): only the arguments' shape is checked.
    const bad = promptArgumentsProblem(params, 'item' in routed ? (routed.item as Result).arguments : undefined);
    if (bad) {
      throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, `Invalid params for ${what} ${hubName}: ${bad}`), { hubName, upstreamName: routed.upstreamName });
    }
    const forwarded = withoutStrayRound(forwardedParams(params, 'name', routed.upstreamName), ctx);
    // Null arguments were checked as none, so none are sent (as for tools/call): the SDK servers
    // answer a null with -32603 and their parser's complaint.
    if (forwarded.arguments === null) delete forwarded.arguments;
    const bind: Binding = { principal: ctx.principal, group: ctx.group, method, target: hubName, args: params.arguments };
    const result = await this.forward(method, forwarded, ctx, routed.server, { hubName, upstreamName: routed.upstreamName }, t0, { bind, judged });
    // Icons in its messages (a resource_link's): an untrusted server's, screened as its listed items' are.
    return routed.server.config.trust === 'trusted' ? result : withScreenedContentIcons(result, routed.server.config.url);
  }

  private async forward(
    method: string,
    forwarded: Result,
    ctx: CallContext,
    server: ServerHandle,
    names: { hubName?: string; upstreamName?: string },
    t0: number,
    { bind, vet, chosen, judged }: ForwardOptions = {},
  ): Promise<Result> {
    // A retry's context is in its call's trace already (Hub.handle: inCallTrace), its state sealed with it.
    if (bind) bind.span = ctx.span;
    const begin = beginOf(method, ctx, { ...names, server: server.id, upstreamEra: server.upstream.era });
    const retry = bind ? await retryOf(this.mrtr, this.ledger, (e) => this.ledger.record(begin, e), method, forwarded, ctx, bind, server, t0) : undefined;
    if (retry && 'result' in retry) return retry.result;
    const params = retry ? retry.params : forwarded;
    const audit = this.ledger.begin(begin);
    // Its row (and what is queued since) written before it is sent. Nothing to wait for with the
    // ledger off, nor when its line was written at once and nothing is queued (a lone request):
    // no turn then, as for a call (call-tool.ts).
    if (this.ledger.enabled !== false && !(audit.writtenNow === true && this.ledger.committedNow?.() === true)) {
      try {
        await this.ledger.whenCommitted();
      } catch (err) {
        // Not written, so not sent: its row ends refused, as a call's does (call-tool.ts), not
        // left in flight for the next start to call `unknown`.
        if (retry) this.mrtr.sealer.release(forwarded.requestState);
        await audit.finish({ ...outcomeOfError(err), latencyMs: performance.now() - t0 }).catch(() => undefined);
        throw err;
      }
    }
    // A process of this principal's own is not started for a server whose own process is down
    // (startsOwnProcess): its read, prompt or completion is answered unavailable, as its calls are.
    // Its server's connection replaced while the row was written: the old one drains only what
    // it was sent (a connection chosen already is the one open now: Router.release).
    const replaced = chosen === undefined && connectionReplaced(server, this.opts.server);
    const found = chosen ?? (replaced || this.unstarted(server, ctx.principal) ? server : connectionFor(this.opts, server, ctx));
    const conn = found instanceof Promise ? await found : found;
    // A parked request whose retry carries its end (Mrtr.run): this request's row is a round.
    let first: FirstRow | undefined;
    const finish = (e: AuditEnd): Promise<void> => {
      // Ended while parked: this row carries the end only if no retry of its client takes it.
      const later = first?.known();
      if (later) return later.then((f) => audit.finish({ ...firstRowEnd(f, e, first?.answeredBytes), latencyMs: e.latencyMs }));
      return audit.finish({ ...firstRowEnd(first?.first, e, first?.answeredBytes), latencyMs: e.latencyMs });
    };
    // A legacy subscribe whose connection was replaced as its row was written (made in the turn an
    // unsubscribe of its URI there was answered, say) is routed again, as one replaced before it
    // was made (subscribeLegacy): nothing was sent, and it changes nothing but the subscription.
    // This row ends saying so; the request routed again has a row of its own.
    if (replaced && method === 'resources/subscribe' && reroutesLeft(ctx)) {
      await this.noted(finish(Object.assign(this.outcomeSeenBy(ctx, replacedError(server, true)), { latencyMs: performance.now() - t0 })), method);
      throw new RouteReplacedError(server.id);
    }
    // A reload changed the groups while the request was held (its row written): what its group
    // no longer shows is not sent through it, as it would not be for a request that came after,
    // and it is answered as that one is (unknown, not found). Nothing was sent. Without a reload
    // since its route, one number is compared.
    if (judged !== undefined && !replaced && this.catalog.groups.version !== judged.groupsAt && !this.catalog.groups.includes(ctx.group, judged.kind, server.id, names.hubName ?? '', names.upstreamName, server.config.prefix)) {
      // Unless the same reload ended its client's legacy session (its group removed): its client
      // is answered that session's 404, and its row says so, as a held tools/call's does.
      const err = endedWhileHeld(ctx) ?? unknownTo(method, names.hubName ?? '');
      if (retry) this.mrtr.sealer.release(forwarded.requestState);
      await this.noted(finish(Object.assign(this.outcomeSeenBy(ctx, err), { latencyMs: performance.now() - t0 })), method);
      throw err;
    }
    // Its credential revoked since the edge let it in (a reload removed its API key while its body
    // was on its way or its row was written; its OAuth token's key left the key set): not sent,
    // answered as a request with it is now, as a held tools/call is (call-tool.ts).
    // Not an unsubscribe, which only lets go (one the hub makes as a session ends included).
    const lapsed = method !== 'resources/unsubscribe' && (ctx.credentialKey !== undefined || ctx.credentialLapse !== undefined) ? heldCredentialRefusal(this.opts.credentials, ctx.credentialKeysAt, ctx.credentialKey, ctx.credentialLapse, ctx.principal, ctx.group) : null;
    const revoked = lapsed instanceof Promise ? await lapsed : lapsed;
    if (revoked) {
      const ended = endedWhileHeld(ctx);
      if (retry) this.mrtr.sealer.release(forwarded.requestState);
      await this.noted(finish(ended ? { ...outcomeOfError(ended), latencyMs: performance.now() - t0 } : { outcome: 'denied', errorKind: 'policy', errorCode: revoked.status, errorMessage: revoked.message, latencyMs: performance.now() - t0 }), method);
      throw ended ?? new CredentialRevokedError(revoked);
    }
    const body = async (opts: CallOptions, parkedRun?: FirstRow): Promise<Result> => {
      first = parkedRun;
      try {
        if (replaced) throw replacedError(server);
        if (conn.upstream.state !== 'ready')
          throw new UpstreamUnavailableError(server.id, conn.upstream.state, conn.upstream.lastError);
        const result = bind
          ? await this.mrtr.roundTrips(method, conn, params, ctx, opts, bind)
          : await conn.upstream.request(method, params, opts);
        if (vet) await vet(result);
        // Answered even when the row cannot be finished (it stays in flight: unknown at the next start).
        await this.noted(finish({ outcome: result.resultType === 'input_required' ? 'input_required' : 'ok', responseBytes: bytesOf(this.ledger, result), result, latencyMs: performance.now() - t0 }), method);
        return result;
      } catch (caught) {
        // A legacy client is sent an untrusted upstream's -32042 with its steps naming it.
        const err = urlStepsNamedFor(cutOffError(caught, opts.signal), ctx, conn);
        // Asked of the user as URL steps, then issued again: the next attempt's outcome is the request's.
        if (awaitsUrlSteps(err, ctx, conn)) throw err;
        // Surely never delivered, or refused 401/403 unapplied: the retry's requestState may be
        // sent again (see call-tool.ts).
        if (retry && (notDelivered(err) || refusedUnapplied(err))) this.mrtr.sealer.release(forwarded.requestState);
        const normalised = this.normaliseNotFound(method, params, err);
        await this.noted(finish(Object.assign(this.outcomeSeenBy(ctx, normalised), { latencyMs: performance.now() - t0 })), method);
        throw asRpcError(normalised);
      }
    };
    const opts = callOptions(ctx, conn, this.opts.stopBegun);
    if (!bind) return body(opts);
    // A URL step the user turned down ends the request without `body` finishing its row (a
    // no-op when it did: the first finish counts).
    const ended = (run: Promise<Result>): Promise<Result> =>
      run.catch(async (err: unknown) => {
        // The first finish counts: when `body`'s could not be written, this gives back its failure.
        await this.noted(finish(Object.assign(this.outcomeSeenBy(ctx, err), { latencyMs: performance.now() - t0 })), method);
        throw err;
      });
    return this.mrtr.run(ctx, conn, opts, bind, body, ended);
  }

  /**
   * For a tool group's client, the groups' version its route is judged under (`kind`: what of
   * the group shows the target), looked at again once its row is written (forward); nothing for
   * any other client. A route the hub let past the start-up grace with was judged before the
   * request began: looked at again whatever the version (-1), as tools/call's is.
   */
  private judged(ctx: CallContext, kind: ItemKind): Judged | undefined {
    if (ctx.group === undefined) return undefined;
    return { groupsAt: ctx.routedInGrace === undefined ? this.catalog.groups.version : -1, kind };
  }

  /** The outcome of `err` as the ledger records it: with the error code this client sees. */
  private outcomeSeenBy(ctx: CallContext, err: unknown): ReturnType<typeof outcomeOfError> {
    return outcomeSeenBy(ctx.clientEra === MODERN, err);
  }

  /**
   * Resource-not-found is -32002 in the legacy era and -32602 + data.uri in the modern one; the
   * core uses -32002. A -32602 is a not-found only in that form, data {uri} and nothing more (as
   * the SDK v2 reads it): the 2026 code is also every other invalid params, and one whose data
   * says more ({uri, reason} for a URI the SDK cannot parse) or nothing is passed on as it is,
   * invalid params in both eras, rather than told to a legacy client as a resource not found.
   */
  private normaliseNotFound(method: string, params: Result, err: unknown): unknown {
    if (method !== 'resources/read' || !(err instanceof RpcError)) return err;
    if (err.code === LEGACY_RESOURCE_NOT_FOUND || (err.code === INVALID_PARAMS && namesOnlyUri(err.data)))
      return new RpcError(LEGACY_RESOURCE_NOT_FOUND, err.message || 'Resource not found', uriData(params.uri));
    return err;
  }

  private async readResource(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    if (typeof params.uri !== 'string') throw await this.refused('resources/read', ctx, noUri('resources/read'));
    const uri = params.uri;
    const grace = this.opts.startupGrace(ctx);
    if (grace) await unlessAborted(() => grace, ctx.signal, () => undefined);
    const view = viewOf(ctx);
    const judged = this.judged(ctx, 'resources');
    // A resource of a server that is down is not listed, but it is not missing either: the
    // forward answers that the server is unavailable.
    const generation = this.catalog.generation;
    const server = uri ? await this.found('resources/read', ctx, { hubName: uri }, async () => (await this.catalog.routeUri(uri, view)) ?? (await this.catalog.downResource(uri, view))) : undefined;
    rerouteIfReplaced(generation, this.catalog.generation, server, this.opts.server, ctx);
    if (!server) {
      const err = new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${shownName(uri)}`, uriData(uri));
      await this.recordLocal('resources/read', ctx, this.outcomeSeenBy(ctx, err), { hubName: uri });
      throw err;
    }
    const forwarded = withoutStrayRound(forwardedParams(params), ctx);
    const bind: Binding = { principal: ctx.principal, group: ctx.group, method: 'resources/read', target: uri, argsDigest: '' };
    // Cached per URI and upstream authorization context; MRTR retries neither read nor fill it
    // (a legacy client's strays of their fields are gone from `forwarded`: its read is a first).
    const first = forwarded.inputResponses === undefined && forwarded.requestState === undefined;
    // Its partition without its connection when that is a process not to be started (unstarted).
    const partition = !first ? '' : this.unstarted(server, ctx.principal) ? principalConn(ctx.principal) : (await this.catalog.connection(server, ctx.principal)).credential;
    // Not from the cache for a credential revoked since it was let in: forward() refuses it.
    const hit = first && credentialUnchanged(this.opts.credentials, ctx.credentialKeysAt, ctx.credentialLapse) ? this.catalog.reads.get(server.id, partition, uri) : undefined;
    if (hit) {
      await this.recordLocal('resources/read', ctx, { outcome: 'ok', server: server.id, upstreamName: uri, latencyMs: performance.now() - t0 }, { hubName: uri });
      const result = copyOf(hit.result);
      result.ttlMs = hit.remainingMs;
      result.cacheScope = hit.scope;
      return result;
    }
    // A read the user had to answer for (an MRTR round for a legacy client, or a legacy
    // upstream's elicitation passed on) is theirs alone: never cached (digest §3.3).
    const since = this.catalog.reads.mark();
    let asked = false;
    const ask = ctx.askClient;
    const readCtx: CallContext = ask && first ? { ...ctx, askClient: (r, withdrawn) => ((asked = true), ask(r, withdrawn)) } : ctx;
    // An answer naming a resource the hub hides (an upstream that aliases URIs beyond uriKey's
    // spellings served it through a template) is refused as not found, and never cached.
    const vet = async (result: Result): Promise<void> => {
      const named = contentUris(result);
      if (named.length === 0 || !(await this.catalog.hidesAny(named, viewOf(ctx)))) return;
      this.log.warn({ server: server.id }, 'resources/read answered with a resource the hub hides; refused');
      throw new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${shownName(uri)}`, uriData(uri));
    };
    const result = await this.forward('resources/read', forwarded, readCtx, server, { hubName: uri, upstreamName: uri }, t0, { bind, vet, judged });
    if (first && !asked && cacheableRead(forwarded, result)) {
      const hinted = server.upstream.era === MODERN ? cacheTtl(result.ttlMs) : 0;
      // Read over a principal's own credentials (partition), it is that principal's, as the lists
      // its connection fetches are (listHints): the server checked that account alone, so the
      // shared cache handed it to principals the server would refuse.
      const scope = result.cacheScope === 'public' && server.upstream.era === MODERN && partition === '' ? 'public' : 'private';
      const ttlMs = server.config.cacheTtlMs ?? hinted;
      this.catalog.reads.put(server.id, partition, uri, result, ttlMs, scope, since);
      // The client is told what the hub holds the read to, as a hit of it is told: a 2025-11-25
      // server's own ttlMs or cacheScope (its era has neither) passed on made a read the hub
      // keeps private and asks for again public and fresh for a minute, to every cache behind it.
      if (result.ttlMs !== ttlMs || result.cacheScope !== scope) return { ...result, ttlMs, cacheScope: scope };
    }
    // A retry's result holds the user's answers: no cache between the hub and its client may keep
    // it, whatever the upstream said (digest §3.3: results of MRTR retries are never cached).
    if ((!first || asked) && result.resultType !== 'input_required' && (result.ttlMs !== undefined || result.cacheScope !== undefined))
      return { ...result, ttlMs: 0, cacheScope: 'private' };
    return result;
  }

  private async complete(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const ref = (params.ref ?? {}) as { type?: string; name?: string; uri?: string };
    const grace = this.opts.startupGrace(ctx);
    if (grace) await unlessAborted(() => grace, ctx.signal, () => undefined);
    let server: ServerHandle | undefined;
    let forwardedRef: Result = ref as Result;
    const hubName = typeof ref.name === 'string' ? ref.name : typeof ref.uri === 'string' ? ref.uri : undefined;
    let upstreamName = hubName;
    const view = viewOf(ctx);
    // A resource's completion is shown as its server's resources are (the group's servers).
    const judged = this.judged(ctx, ref.type === 'ref/prompt' ? 'prompts' : 'resources');
    const generation = this.catalog.generation;
    // A prompt or resource of a server that is down is its own still (as for prompts/get and
    // resources/read): the forward answers that the server is unavailable.
    if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
      const name = ref.name;
      const routed = ctx.routedInGrace ?? (await this.found('completion/complete', ctx, { hubName }, async () => (await this.catalog.resolvePrompt(name, view)) ?? this.catalog.downItem('prompts', name, view)));
      if (routed) {
        server = routed.server;
        upstreamName = routed.upstreamName;
        forwardedRef = { ...ref, name: routed.upstreamName };
      }
    } else if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
      const uri = ref.uri;
      server = await this.found('completion/complete', ctx, { hubName }, async () => (await this.catalog.templateOwner(uri, view)) ?? (await this.catalog.routeUri(uri, view)) ?? (await this.catalog.downResource(uri, view)));
    }
    rerouteIfReplaced(generation, this.catalog.generation, server, this.opts.server, ctx);
    if (!server) {
      // A prompt held back for a pending pin change: said, as for its prompts/get.
      const held = ref.type === 'ref/prompt' && typeof ref.name === 'string' && ref.name !== '' ? await this.catalog.heldItem('prompts', ref.name, view) : undefined;
      if (held) throw await this.refused('completion/complete', ctx, new RpcError(INVALID_PARAMS, `Unknown completion reference: ${shownName(ref.name)} (${heldReason('prompt', held.record)})`), { hubName, server: held.server.id, upstreamName: held.upstreamName, upstreamEra: held.server.upstream.era });
      throw await this.refused('completion/complete', ctx, new RpcError(INVALID_PARAMS, `Unknown completion reference: ${shownName(hubName ?? ref.name ?? ref.uri ?? '(none)')}`), { hubName });
    }
    const bad = completionArgumentsProblem(params);
    if (bad) {
      throw await this.refused('completion/complete', ctx, new RpcError(INVALID_PARAMS, `Invalid params: ${bad}`), { hubName, upstreamName });
    }
    if (server.upstream.state === 'ready' && !server.upstream.capabilities?.completions) {
      await this.recordLocal('completion/complete', ctx, { outcome: 'ok', server: server.id }, { hubName, upstreamName });
      return { completion: { values: [] } };
    }
    const forwarded = forwardedParams(params, 'ref', forwardedRef);
    // A null context, or null context arguments, were checked as none, and are sent as none (as
    // null arguments are): an SDK server answers null with -32603.
    if (forwarded.context === null) delete forwarded.context;
    else if ((forwarded.context as Result | undefined)?.arguments === null) {
      const { arguments: _none, ...context } = forwarded.context as Result;
      forwarded.context = context;
    }
    return atMost100(await this.forward('completion/complete', forwarded, ctx, server, { hubName, upstreamName }, t0, { vet: completionVet, judged }));
  }

  /** The server a subscription of `uri` is made on: the one it routes to, or one that is down and showed it. */
  private async ownerOf(uri: string, ctx: CallContext): Promise<ServerHandle | undefined> {
    const view = viewOf(ctx);
    return uri ? ((await this.catalog.routeUri(uri, view)) ?? (await this.catalog.downResource(uri, view))) : undefined;
  }

  private async notFound(method: string, uri: string, ctx: CallContext): Promise<RpcError> {
    return this.refused(method, ctx, new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${shownName(uri)}`, uriData(uri)), { hubName: uri });
  }

  /** A subscription the hub cannot keep: the client would wait for updates that never come. */
  private async unwatched(method: string, ctx: CallContext, server: ServerHandle, uri: string, why: string): Promise<RpcError> {
    return this.refused(method, ctx, new RpcError(INVALID_PARAMS, `the upstream does not watch ${shownName(uri)} for updates (${why})`, uriData(uri)), { hubName: uri }, { server: server.id, upstreamName: uri });
  }

  private async subscribe(params: Result, ctx: CallContext): Promise<Result> {
    const method = 'resources/subscribe';
    const since = performance.now();
    if (typeof params.uri !== 'string') throw await this.refused(method, ctx, noUri(method));
    const uri = params.uri;
    if (uri.length > MAX_SUBSCRIBED_URI_LENGTH) {
      throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, `the hub keeps resource subscriptions to URIs of at most ${MAX_SUBSCRIBED_URI_LENGTH} characters`), { hubName: uri });
    }
    const judged = this.judged(ctx, 'resources');
    let server = await this.ownerOf(uri, ctx);
    if (!server) throw await this.notFound(method, uri, ctx);
    // A server starting or restarting, unless known to be legacy (whose subscription is kept and
    // made when it is back, UpstreamSubscriptions.resubscribe): what a modern one watches only its listen
    // acknowledgement says, once it is back. Answered {} meanwhile, a URI it leaves out (or every
    // URI, when it does not listen) had the client wait for updates that never come. The
    // subscribe waits for it, as long as a call waits for an answer (timeoutMs), and is then
    // made as to a ready server (on the connection this principal's calls use, known only
    // then). Not back by then: kept, and in its listen filter once it is.
    // Waited for on the connection this principal's calls use, when known: its own process (or
    // connection) restarting while the server's is ready, a subscribe answered {} at once was
    // never checked against what that one watches; the server's restarting while its own is
    // ready, it waited for nothing, and then went into the server's listen filter, not its own.
    // A process of this principal's own not started yet: not while the server's is down (see
    // startsOwnProcess); the server's is waited for instead, as when the connection is not known.
    const used = (this.unstarted(server, ctx.principal) ? server : ((await this.connectionOf(server, ctx)) ?? server)).upstream;
    if (used.state !== 'ready' && !knownLegacy(server, used)) {
      if (await readyWithin(used, server.config.timeoutMs, ctx.signal)) server = (await this.ownerOf(uri, ctx)) ?? server;
      // Cancelled while it waited: nothing is held for it (kept, it would be a subscription its
      // client was never told of). Ended by the hub's stop: unavailable, as its client is answered.
      if (ctx.signal?.aborted) {
        const err = new CancelledError(reasonOf(ctx.signal));
        await this.recordLocal(method, ctx, { ...outcomeOfError(cutOffError(err, ctx.signal)), server: server.id, upstreamName: uri }, { hubName: uri });
        throw err;
      }
    }
    // Still down: refused as its calls are (kept, it would wait for a process nothing starts).
    if (this.unstarted(server, ctx.principal)) {
      const err = new UpstreamUnavailableError(server.id, server.upstream.state, server.upstream.lastError);
      await this.recordLocal(method, ctx, { ...outcomeOfError(err), server: server.id, upstreamName: uri }, { hubName: uri });
      throw asRpcError(err);
    }
    // Offered when it was last ready, if it is down (as for a listen stream's subscriptions): a
    // server without resources.subscribe never says that a resource changed.
    // The server's main connection down, this principal's own one (known to need nothing of it)
    // ready: that one's offer and era decide. The main one's, never ready, offered nothing, and
    // the subscribe was refused.
    const alone = server.upstream.state !== 'ready' && used !== server.upstream && used.state === 'ready';
    const caps = alone ? used.capabilities : this.opts.capabilitiesOf ? this.opts.capabilitiesOf(server) : server.upstream.capabilities;
    if (caps?.resources?.subscribe !== true) throw await this.unwatched(method, ctx, server, uri, `server "${server.id}" does not offer resources.subscribe`);
    const subscriber = subscriberOf(ctx);
    if (this.subs.countOf(subscriber) >= MAX_SUBSCRIPTIONS_PER_SESSION && this.subs.heldBy(subscriber, uri).length === 0) {
      throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, `this session holds ${MAX_SUBSCRIPTIONS_PER_SESSION} resource subscriptions, the most the hub keeps for one: unsubscribe from one first`, { uri }), { hubName: uri }, { server: server.id, upstreamName: uri });
    }
    // A modern upstream has no resources/subscribe: the URI goes into the hub's listen filter.
    const answer = (alone ? used : server.upstream).era === MODERN ? await this.listenFor(ctx, server, uri, subscriber) : await this.subscribeLegacy(ctx, server, uri, subscriber, judged);
    // Routed before a reload's moves began, counted after they looked at this session (answered
    // by a server the reload removed, as it drained): moved now, before its client is answered.
    await this.opts.movedMeanwhile?.(subscriber, uri, ctx.principal, ctx.group, since);
    return answer;
  }

  private async listenFor(ctx: CallContext, server: ServerHandle, uri: string, subscriber: string): Promise<Result> {
    const method = 'resources/subscribe';
    // In the listen filter of the connection this principal's calls use: its own one (its own
    // credentials) watches the URI as that user, and what it says reaches that user's subscribers only.
    const conn = (await this.connectionOf(server, ctx)) ?? server;
    const connKey = conn.upstream === server.upstream ? '' : principalConn(ctx.principal);
    const added = this.subs.addToFilter(server.id, uri, subscriber, connKey, ctx.principal);
    if (!added) {
      throw await this.refused(method, ctx, new RpcError(INVALID_PARAMS, `this user's subscriptions to server "${server.id}" would pass ${LISTEN_SHARE.maxUris} URIs or ${LISTEN_SHARE.maxChars} characters of URIs, the most the hub puts in its listen filter for one user: unsubscribe from some first`, { uri }), { hubName: uri }, { server: server.id, upstreamName: uri });
    }
    if (added.first) this.catalog.subscriptionsChanged(server.id, connKey);
    // The server's listen acknowledgement says which URIs it watches (digest §4.1): a client
    // told {} for one it left out would wait for updates that never come. Asked for every
    // subscriber, not only the first: a second one may come while the first waits for it.
    const ok = conn.upstream.state === 'ready' ? await this.catalog.listenHonours(server.id, connKey, [uri], LISTEN_ACK_WAIT_MS) : undefined;
    if (ok !== undefined && !ok.includes(uri)) {
      if (this.subs.remove(server.id, uri, subscriber, connKey)) this.catalog.subscriptionsChanged(server.id, connKey);
      throw await this.unwatched(method, ctx, server, uri, 'its listen stream leaves it out');
    }
    await this.recordLocal(method, ctx, { outcome: 'ok', server: server.id, upstreamName: uri }, { hubName: uri });
    return {};
  }

  /**
   * Whether `server`'s own process is down and this principal's calls would go to a process of
   * its own not started yet, which is then not started (startsOwnProcess).
   */
  private unstarted(server: ServerHandle, principal: string): boolean {
    return server.upstream.state !== 'ready' && this.opts.startsOwnProcess?.(server, principal) === true;
  }

  /**
   * The connection this principal's calls to `server` use, if it is known now (connectionKnown):
   * undefined while the server's own connection, not ready, has yet to tell.
   */
  private async connectionOf(server: ServerHandle, ctx: CallContext): Promise<ServerHandle | undefined> {
    if (server.upstream.state !== 'ready' && this.opts.connectionKnown?.(server, ctx.principal) !== true) return undefined;
    return connectionFor(this.opts, server, ctx);
  }

  private async subscribeLegacy(ctx: CallContext, server: ServerHandle, uri: string, subscriber: string, judged: Judged | undefined): Promise<Result> {
    const method = 'resources/subscribe';
    const t0 = performance.now();
    // A legacy subscription lives on the connection this principal's calls use (its own, when it
    // has one): counted there, and its updates go to that connection's subscribers only.
    const found = connectionFor(this.opts, server, ctx);
    const conn = found instanceof Promise ? await found : found;
    const connKey = conn.upstream === server.upstream ? '' : principalConn(ctx.principal);
    const local = async (): Promise<Result> => {
      await this.recordLocal(method, ctx, { outcome: 'ok', server: server.id, upstreamName: uri }, { hubName: uri });
      return {};
    };
    // Its server replaced while it waited to be made (for an unsubscribe of the URI there on its
    // way, or for another session's subscribe of it, which failed): the old connection drains only
    // what it was sent. Nothing is sent, recorded or counted yet, and a subscribe changes nothing
    // but the subscription: routed again from the start (Dispatch.route, hub/dispatch.ts), to the connection open now.
    // A connection that is down holds nothing to change: the count here is the subscription, and
    // the hub subscribes again for every counted URI when it is back (UpstreamSubscriptions.resubscribe).
    const make = (): Promise<Result> => {
      if (reroutesLeft(ctx) && connectionReplaced(server, this.opts.server)) return Promise.reject(new RouteReplacedError(server.id));
      return conn.upstream.state === 'ready' ? this.forward(method, { uri }, ctx, server, { hubName: uri, upstreamName: uri }, t0, { judged }) : local();
    };
    if (this.subs.leavingNow(server.id, connKey, uri)) this.log.debug({ server: server.id }, 'a subscribe waits for the unsubscribe of its URI on its way there');
    // Its session ended (or it unsubscribed) while the upstream subscribe was made, and nobody else waited for it: let go (unmake),
    // the hub's own request (hubOwn): no client's call, in the count of calls left unanswered or in a slot's queue.
    const joined = await this.subs.join(server.id, uri, subscriber, connKey, make, () => conn.upstream.request('resources/unsubscribe', { uri }, { hubOwn: true }), ctx.principal);
    // Made on a connection replaced since (sent before `servers restart` or a reload, answered
    // as it drained): the new one, asked at its start for what was counted then, is asked now.
    // Not when nobody stays for it (unheld: let go on the old one): asked again, the new one held
    // it for nobody, for good, made for no principal.
    if (!joined.left && !joined.unheld) await this.opts.carrySubscription?.(server.id, connKey, conn.upstream, uri);
    return joined.made ?? local();
  }

  /**
   * Released where the session holds it (Subscriptions.heldBy), not where the URI routes now:
   * another server may have started listing it since, and become its owner.
   */
  private async unsubscribe(params: Result, ctx: CallContext): Promise<Result> {
    const method = 'resources/unsubscribe';
    if (typeof params.uri !== 'string') throw await this.refused(method, ctx, noUri(method));
    const uri = params.uri;
    const subscriber = subscriberOf(ctx);
    let answer: Result | undefined;
    let holder: string | undefined;
    for (const at of uri ? this.subs.heldBy(subscriber, uri) : []) {
      holder ??= at.server;
      const server = this.opts.server?.(at.server);
      // A server gone from the config since holds nothing upstream any more: its count only.
      if (!server) this.subs.remove(at.server, uri, subscriber, at.conn);
      else answer = (await this.release(ctx, server, at.conn, uri, subscriber)) ?? answer;
    }
    if (answer) return answer;
    // Nothing said upstream (not held, others still hold it, or its connection is down): answered here.
    const server = holder ?? (await this.ownerOf(uri, ctx))?.id;
    if (!server) throw await this.notFound(method, uri, ctx);
    await this.recordLocal(method, ctx, { outcome: 'ok', server, upstreamName: uri }, { hubName: uri });
    return {};
  }

  /** One of the session's subscriptions of `uri` let go; the upstream's answer when its last subscriber left there. */
  private async release(ctx: CallContext, server: ServerHandle, connKey: string, uri: string, subscriber: string): Promise<Result | undefined> {
    const last = this.subs.remove(server.id, uri, subscriber, connKey);
    if (!last) return undefined;
    if (server.upstream.era === MODERN) return void this.catalog.subscriptionsChanged(server.id, connKey);
    // The connection open now, none started: a principal's own one the pool forgot (a reload,
    // `servers restart`) was closed with what it held, and one started now to say so would hold
    // nothing, a process (or session) made for an unsubscribe.
    const used = this.opts.openConnection ? this.opts.openConnection(server, ctx) : server.upstream;
    if (!used) return undefined;
    // Held in the listen filter of this principal's own connection, the main one never ready.
    if (connKey !== '' && used.era === MODERN) return void this.catalog.subscriptionsChanged(server.id, connKey);
    // Only on the connection it was made on: should this principal's calls have moved to the
    // server's own one since (a reload), an unsubscribe there would end other sessions' subscription.
    if (used.state !== 'ready' || (connKey === '') !== (used === server.upstream)) return undefined;
    const conn = withUpstream(server, used);
    return this.subs.unsubscribing(server.id, connKey, uri, () => this.forward('resources/unsubscribe', { uri }, ctx, server, { hubName: uri, upstreamName: uri }, performance.now(), { chosen: conn }));
  }
}

/**
 * Resource subscriptions one legacy session may hold: each costs the hub memory and the upstream
 * a subscription, and a session could otherwise make any number (40,000 in 8 s, one URI each).
 * As many as a session's memory keeps for a restarted hub (MAX_KEPT_URIS); a modern listen
 * stream may name 256.
 */
const MAX_SUBSCRIPTIONS_PER_SESSION = 1_000;

/** Who holds a subscription: the legacy session (a request outside one holds it alone). */
function subscriberOf(ctx: CallContext): string {
  return ctx.sessionKey ?? `${ctx.principal}:${ctx.requestId}`;
}

/** Each current list's items by their key (name, URI or template), for pages of kept lists. */
const byKey = new WeakMap<readonly Record<string, unknown>[], Map<unknown, Record<string, unknown>>>();

function byKeyOf(kind: ListKind, now: readonly Record<string, unknown>[]): Map<unknown, Record<string, unknown>> {
  let m = byKey.get(now);
  if (!m) byKey.set(now, (m = new Map(now.map((it) => [it[NAME_FIELD[kind]], it]))));
  return m;
}

/** What a forwarded request comes with besides its target (Router.forward). */
interface ForwardOptions {
  /** What its MRTR state is bound to (principal, group, method, target, arguments): a retry's requestState is checked against it. */
  bind?: Binding;
  /** Throws to refuse an answer (before its row is finished). */
  vet?: (result: Result) => Promise<void>;
  /** The connection to use, chosen already (release: never one started for it); default upstreamFor's. */
  chosen?: ServerHandle;
  /** The groups its route was judged under, for a tool group's client (judged()). */
  judged?: Judged;
}

/** The groups a request's route was judged under (Router.judged), and what of its group shows its target. */
interface Judged {
  /** Catalog.groups.version then; -1: looked at again whatever the version. */
  groupsAt: number;
  kind: ItemKind;
}

/**
 * What a request through a group that does not show its target is answered (as its route
 * answers one that comes after the group hid it): an unknown prompt or completion reference,
 * a resource not found.
 */
function unknownTo(method: string, target: string): RpcError {
  if (method === 'prompts/get') return new RpcError(INVALID_PARAMS, `Unknown prompt: ${shownName(target)}`);
  if (method === 'completion/complete') return new RpcError(INVALID_PARAMS, `Unknown completion reference: ${shownName(target)}`);
  return new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${shownName(target)}`, uriData(target));
}

/** One page of a list: its items, and where the next page starts. */
interface Page {
  end: number;
  items: readonly Record<string, unknown>[];
}

/** The URIs a resources/read answer's contents name. */
function contentUris(result: Result): string[] {
  const contents = result.contents;
  if (!Array.isArray(contents)) return [];
  const out: string[] = [];
  for (const c of contents) if (c !== null && typeof c === 'object' && typeof (c as { uri?: unknown }).uri === 'string') out.push((c as { uri: string }).uri);
  return out;
}

/**
 * A completion holds at most 100 values (both eras' schemas; the official v2 client refuses a
 * longer answer whole): an upstream's longer list is cut to its first 100, with `hasMore` and a
 * `total` of at least what it sent.
 */
function atMost100(r: Result): Result {
  const c = r.completion as { values?: unknown; total?: unknown } | undefined;
  if (!c || typeof c !== 'object' || !Array.isArray(c.values) || c.values.length <= MAX_COMPLETION_VALUES) return r;
  const total = typeof c.total === 'number' && c.total >= c.values.length ? c.total : c.values.length;
  return { ...r, completion: { ...c, values: c.values.slice(0, MAX_COMPLETION_VALUES), hasMore: true, total } };
}

const MAX_COMPLETION_VALUES = 100;

/**
 * A request about a resource without its `uri` (both eras require it, a string): invalid params,
 * not a resource "not found" under the name "" (digest §3.1).
 */
function noUri(method: string): RpcError {
  return new RpcError(INVALID_PARAMS, `${method} needs params.uri, a string`);
}

/**
 * completion/complete has no MRTR and no tasks (digest §3.1): an answer with any resultType but
 * "complete" (an input_required, whose questions and requestState the client was never meant to
 * see, a task nobody could poll, a value nobody knows) is the upstream's error, as it is for the
 * methods that go through Mrtr.roundTrips.
 */
async function completionVet(r: Result): Promise<void> {
  if (r.resultType !== undefined && r.resultType !== 'complete')
    throw new RpcError(INTERNAL_ERROR, `the upstream answered completion/complete with resultType ${JSON.stringify(r.resultType)}, which the hub did not ask for and cannot relay`);
}
