import type { Logger } from '../log.js';
import type { Catalog, Routed, ServerHandle, View } from '../catalog/catalog.js';
import { cacheableRead } from '../catalog/read-cache.js';
import type { CallPlan, PluginRunner } from '../plugins/runner.js';
import { KIND_OF_METHOD, type ListKind } from '../catalog/lists.js';
import { decodeCursor, encodeCursor } from '../catalog/cursor.js';
import { argsHash } from '../ledger/canonical.js';
import type { AuditSink } from '../ledger/sink.js';
import type { AuditBegin, AuditEnd, StoredAnswer } from '../ledger/types.js';
import { CancelledError, HEADER_MISMATCH, INVALID_PARAMS, LEGACY_RESOURCE_NOT_FOUND, METHOD_NOT_FOUND, RpcError, TimeoutError, TransportError, UpstreamUnavailableError } from '../protocol/errors.js';
import type { CallOptions, Upstream } from '../upstream/types.js';
import { argsRefusal, checkedOutput } from '../policy/tool-check.js';
import type { SchemaValidator } from '../policy/validate.js';
import type { CallContext } from './context.js';
import { callPolicy, toolRetry } from './call-policy.js';
import { outcomeOfError, outcomeOfResult, toolErrorResult } from './outcome.js';
import { paramHeaderProblem } from '../protocol/param-headers.js';
import type { Subscriptions } from './subscriptions.js';
import type { Mrtr } from './mrtr.js';
import { settleIdempotency } from './idempotency.js';
import type { Binding } from './request-state.js';
import { CONFIRM_KEY, accepted, type Confirmer } from '../policy/confirm.js';
import { MODERN } from '../protocol/era.js';

export interface RouterOptions {
  pageSize: number;
  cursorKey: Buffer;
  /** Waits (bounded) for upstreams still starting, so a first list is complete. */
  startupGrace: () => Promise<void>;
  /** Policy confirmation of risky calls (`policy.confirm`, `policy.confirmDestructive`). */
  confirmer?: Confirmer;
  /** The connection this caller must use (per-principal upstream isolation); default the server's own. */
  upstreamFor?: (server: ServerHandle, ctx: CallContext) => Promise<Upstream>;
  /** Checks tool arguments and structured results against the tool's schemas. */
  validator?: SchemaValidator;
  /** Plugin hooks around tool calls (beforeCall, afterCall). */
  plugins?: PluginRunner;
}

/** Who asks, for the catalog: the authorization context of private lists and the tool group. */
function viewOf(ctx: CallContext): View {
  return { principal: ctx.principal, group: ctx.group };
}

type Result = Record<string, unknown>;

/** Whether the client declared anything an upstream could ask it for. */
function canBeAsked(caps: CallContext['clientCapabilities']): boolean {
  return !!(caps.elicitation || caps.sampling || caps.roots);
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
  constructor(
    private readonly catalog: Catalog,
    private readonly ledger: AuditSink,
    private readonly subs: Subscriptions,
    private readonly mrtr: Mrtr,
    private readonly log: Logger,
    private readonly opts: RouterOptions,
  ) {}

  /**
   * Bytes of a forwarded result as JSON, for the ledger only: one extra stringify (about 1.5 µs
   * for a small tool result, ~5 ms per MB), skipped without a ledger. Lists are not measured.
   */
  private bytesOf(result: Result): number | undefined {
    if (this.ledger.enabled === false) return undefined;
    try {
      return Buffer.byteLength(JSON.stringify(result));
    } catch {
      return undefined;
    }
  }

  /** `server` with the connection this caller must use (its own when principals are isolated). */
  private async connectionFor(server: ServerHandle, ctx: CallContext): Promise<ServerHandle> {
    const upstream = this.opts.upstreamFor ? await this.opts.upstreamFor(server, ctx) : server.upstream;
    return upstream === server.upstream ? server : { ...server, upstream };
  }

  /**
   * A request the edge answered itself (initialize, ping, discover, setLevel) or rejected;
   * `extra` carries what the row knows about its target (the name a client asked for).
   */
  recordLocal(method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'> & { latencyMs?: number }, extra?: Partial<AuditBegin>): Promise<void> {
    return this.ledger.record(this.beginOf(method, ctx, extra), { latencyMs: 0, ...end });
  }

  async handle(method: string, params: Result, ctx: CallContext): Promise<Result> {
    const kind = KIND_OF_METHOD[method];
    if (kind) return this.list(method, kind, params, ctx);
    switch (method) {
      case 'tools/call':
        return this.callTool(params, ctx);
      case 'prompts/get':
        return this.forwardNamed(method, params, ctx, 'prompt');
      case 'resources/read':
        return this.readResource(params, ctx);
      case 'completion/complete':
        return this.complete(params, ctx);
      case 'resources/subscribe':
      case 'resources/unsubscribe':
        return this.subscribe(method, params, ctx);
      default: {
        const err = new RpcError(METHOD_NOT_FOUND, `method not found: ${method}`);
        await this.recordLocal(method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
        throw err;
      }
    }
  }

  private beginOf(method: string, ctx: CallContext, extra?: Partial<AuditBegin>): AuditBegin {
    return {
      ts: Date.now(),
      requestId: String(ctx.requestId),
      principal: ctx.principal,
      clientAddress: ctx.clientAddress,
      clientEra: ctx.clientEra,
      clientInfo: ctx.clientInfo,
      method,
      idempotencyKey: ctx.idempotencyKey,
      requestBytes: ctx.requestBytes,
      ...extra,
    };
  }

  private async list(method: string, kind: ListKind, params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const begin = this.beginOf(method, ctx);
    try {
      await this.opts.startupGrace();
      const agg = await this.catalog.aggregate(kind, viewOf(ctx));
      let offset = 0;
      if (params.cursor !== undefined) {
        const c = typeof params.cursor === 'string' ? decodeCursor(params.cursor, this.opts.cursorKey) : null;
        if (!c || c.snapshot !== agg.snapshot || c.offset > agg.items.length)
          throw new RpcError(INVALID_PARAMS, 'invalid or expired cursor; list again from the start');
        offset = c.offset;
      }
      const end = offset + this.opts.pageSize;
      const result: Result = { [kind]: this.page(agg.items, offset, end) };
      if (end < agg.items.length) result.nextCursor = encodeCursor({ offset: end, snapshot: agg.snapshot }, this.opts.cursorKey);
      result.ttlMs = agg.ttlMs;
      result.cacheScope = agg.scope;
      await this.ledger.record(begin, { outcome: 'ok', latencyMs: performance.now() - t0 });
      return result;
    } catch (err) {
      await this.ledger.record(begin, { ...outcomeOfError(err), latencyMs: performance.now() - t0 });
      throw asRpcError(err);
    }
  }

  /** Pages of one aggregate keep their identity, so the edge serialises each page once. */
  private readonly pages = new WeakMap<readonly unknown[], Map<number, readonly unknown[]>>();

  private page(items: readonly Record<string, unknown>[], offset: number, end: number): readonly unknown[] {
    if (offset === 0 && end >= items.length) return items;
    let byOffset = this.pages.get(items);
    if (!byOffset) this.pages.set(items, (byOffset = new Map()));
    let p = byOffset.get(offset);
    if (!p) byOffset.set(offset, (p = items.slice(offset, end)));
    return p;
  }

  private callOptions(ctx: CallContext, server: ServerHandle): CallOptions {
    return {
      signal: ctx.signal,
      timeoutMs: server.config.timeoutMs,
      onProgress: ctx.onProgress,
      onLog: ctx.onLog,
      onServerRequest: ctx.askClient,
      exclusive: canBeAsked(ctx.clientCapabilities),
      clientCapabilities: ctx.clientCapabilities,
      meta: ctx.meta,
      logLevel: ctx.logLevel,
      // Timeouts (a caller's own bounded by the server's cap) and safe retries: call-policy.ts.
      ...callPolicy(server.config, ctx.meta),
    };
  }

  private async callTool(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const hubName = typeof params.name === 'string' ? params.name : '';
    const args = params.arguments ?? {};
    const hash = argsHash(args);
    await this.opts.startupGrace();
    const routed = hubName ? await this.catalog.resolveTool(hubName, viewOf(ctx)) : undefined;
    const begin = this.beginOf('tools/call', ctx, {
      hubName,
      argsHash: hash,
      args,
      server: routed?.server.id,
      upstreamName: routed?.upstreamName,
      upstreamEra: routed?.server.upstream.era,
    });
    if (!routed) {
      const err = new RpcError(INVALID_PARAMS, `Unknown tool: ${hubName || '(no name)'}`);
      await this.ledger.record(begin, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message, latencyMs: 0 });
      throw err;
    }
    // The hub re-serves the tool's schema over HTTP, so it must check the Mcp-Param-* mirrors itself.
    const headerProblem = ctx.requestHeader ? paramHeaderProblem(routed.item.inputSchema, args, ctx.requestHeader) : null;
    if (headerProblem) {
      const err = new RpcError(HEADER_MISMATCH, headerProblem);
      await this.ledger.record(begin, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message, latencyMs: 0 });
      throw err;
    }
    // Arguments that break the tool's inputSchema never reach the upstream.
    const refused = argsRefusal(this.opts.validator, hubName, routed.item, args);
    if (refused) {
      await this.ledger.record(begin, { outcome: 'tool_error', errorKind: 'policy', errorMessage: refused.message, latencyMs: performance.now() - t0 });
      return refused.result;
    }
    const { server, upstreamName } = routed;
    const principal = ctx.principal;
    const bind: Binding = { principal, method: 'tools/call', target: hubName, argsDigest: hash };
    const retry = await this.retryOf('tools/call', params, ctx, bind, server, begin, t0);
    if (retry && 'result' in retry) return retry.result;
    const confirmation = await this.confirm(ctx, routed, hubName, args, bind, retry?.confirmed);
    if (confirmation) {
      const waiting = confirmation.resultType === 'input_required';
      await this.ledger.record(begin, {
        outcome: waiting ? 'ok' : 'denied',
        errorKind: waiting ? null : 'policy',
        errorMessage: waiting ? 'awaiting the user\'s confirmation' : String((confirmation.content as { text?: string }[])[0]?.text),
        latencyMs: performance.now() - t0,
      });
      return confirmation;
    }
    // Plugins see the call last, once policy let it through; a deny is a tool error, audited.
    const plugins = this.opts.plugins?.callHooks ? this.opts.plugins : undefined;
    const pluginTool = plugins && {
      hubName,
      upstreamName,
      server: { id: server.id, trust: server.config.trust, era: server.upstream.era },
      annotations: routed.annotations ?? {},
    };
    let plan: CallPlan | undefined;
    if (plugins && pluginTool) {
      plan = await plugins.beforeCall(pluginTool, principal, ctx.group, args as Result);
      if (plan.deny) {
        const msg = `Tool ${hubName} was refused by plugin ${plan.deny.plugin}: ${plan.deny.reason}`;
        await this.ledger.record(begin, { outcome: 'denied', errorKind: 'policy', errorMessage: msg, latencyMs: performance.now() - t0 });
        return toolErrorResult(msg);
      }
    }
    const key = ctx.idempotencyKey;
    if (key) {
      const settled = await settleIdempotency(this.ledger.idempotency, principal, key, hubName, hash);
      if (settled) {
        if ('answer' in settled) {
          const replayed = 'result' in settled.answer ? this.bytesOf(settled.answer.result) : undefined;
          await this.ledger.record(begin, { outcome: 'replayed', responseBytes: replayed, latencyMs: performance.now() - t0 });
          if ('error' in settled.answer) throw RpcError.from(settled.answer.error);
          return settled.answer.result;
        }
        await this.ledger.record(begin, { outcome: 'denied', errorKind: 'policy', errorMessage: settled.refusal, latencyMs: 0 });
        return toolErrorResult(settled.refusal);
      }
    }
    const audit = this.ledger.begin(begin);
    await this.ledger.whenCommitted();
    /**
     * `answer`: a known outcome to store for replay. `ran`: false when the upstream surely never
     * saw the call (the key is freed), true when it may have run (the key becomes unknown).
     */
    const finish = (end: Omit<AuditEnd, 'latencyMs'>, answer: StoredAnswer | undefined, ran: boolean) => {
      if (key) {
        // Stored before the audit row finishes, so the answer commits in the same batch or earlier.
        if (answer) this.ledger.idempotency.complete(principal, key, answer);
        else if (ran) this.ledger.idempotency.markUnknown(principal, key);
        else this.ledger.idempotency.abandon(principal, key);
      }
      return audit.finish({ ...end, latencyMs: performance.now() - t0 });
    };
    const conn = await this.connectionFor(server, ctx);
    if (conn.upstream.state !== 'ready') {
      const err = new UpstreamUnavailableError(server.id, conn.upstream.state, conn.upstream.lastError);
      await finish(outcomeOfError(err), undefined, false);
      return toolErrorResult(`Tool ${hubName} is unavailable: ${err.message}`);
    }
    const forwarded: Result = { ...(retry ? retry.params : params), name: upstreamName };
    delete forwarded._meta;
    if (plan && plan.arguments !== args) forwarded.arguments = plan.arguments;
    const body = async (opts: CallOptions): Promise<Result> => {
      try {
        const raw = await this.mrtr.roundTrips('tools/call', conn, forwarded, ctx, opts, bind);
        const isFinal = raw.resultType === undefined || raw.resultType === 'complete';
        let result = isFinal ? checkedOutput(this.opts.validator, hubName, routed.item, raw) : raw;
        if (isFinal && plugins && pluginTool && plan) result = await plugins.afterCall(pluginTool, principal, ctx.group, plan, result);
        // An input_required turn is no outcome yet: the key is freed for the client's retry.
        await finish({ ...outcomeOfResult(result), responseBytes: this.bytesOf(result) }, isFinal ? { result } : undefined, false);
        return result;
      } catch (err) {
        const notDelivered = err instanceof UpstreamUnavailableError || (err instanceof TransportError && err.notDelivered);
        // Only a JSON-RPC answer is a known outcome worth replaying; anything else may have run or not.
        await finish(outcomeOfError(err), err instanceof RpcError ? { error: err.toJSON() } : undefined, !notDelivered);
        if (err instanceof RpcError || err instanceof CancelledError) throw err;
        if (err instanceof TimeoutError || err instanceof TransportError || err instanceof UpstreamUnavailableError)
          return toolErrorResult(`Tool ${hubName} failed: ${err.message}`);
        this.log.error({ err, server: server.id }, 'tools/call failed');
        return toolErrorResult(`Tool ${hubName} failed inside the hub`);
      }
    };
    return this.mrtr.run(ctx, conn, { ...this.callOptions(ctx, conn), retry: toolRetry(server.config, upstreamName, routed.item) }, bind, body);
  }

  /**
   * Policy confirmation of a risky call: undefined = go ahead; otherwise what to answer now
   * (an `input_required` asking a modern client, or a refusal). Legacy clients are asked on
   * their session while the call waits.
   */
  private async confirm(ctx: CallContext, routed: Routed, hubName: string, args: unknown, bind: Binding, answered?: boolean): Promise<Result | undefined> {
    const c = this.opts.confirmer;
    if (answered === true || !c?.active) return undefined;
    if (answered === false) return toolErrorResult(`Tool ${hubName} was declined by the user.`);
    if (!c.needed(hubName, routed.server.config, routed.upstreamName, routed.item.annotations)) return undefined;
    if (!ctx.clientCapabilities.elicitation)
      return toolErrorResult(`Tool ${hubName} needs the user's confirmation, and this client cannot ask the user (it did not declare elicitation). It was not run.`);
    const req = c.request(hubName, args);
    if (ctx.clientEra === MODERN)
      return { resultType: 'input_required', inputRequests: { [CONFIRM_KEY]: req }, requestState: this.mrtr.sealer.seal(bind, { k: 'confirm' }) };
    try {
      if (ctx.askClient && accepted(await ctx.askClient(req))) return undefined;
    } catch (err) {
      this.log.debug({ err: String((err as Error)?.message ?? err) }, 'confirmation request failed');
    }
    return toolErrorResult(`Tool ${hubName} was declined by the user.`);
  }

  /**
   * A modern client's MRTR retry (it carries our sealed requestState): either the answer of a
   * parked call, or the params to forward with the upstream's own state restored. Undefined for
   * a first request. A bad state is -32602 and has its ledger row.
   */
  private async retryOf(
    method: string,
    params: Result,
    ctx: CallContext,
    bind: Binding,
    server: ServerHandle,
    begin: AuditBegin,
    t0: number,
  ): Promise<{ result: Result } | { params: Result; confirmed?: boolean } | undefined> {
    if (ctx.clientEra !== MODERN || params.requestState === undefined) return undefined;
    try {
      const retry = this.mrtr.openRetry(params, bind, ctx.signal);
      if (retry.kind === 'forward') {
        if (retry.server !== server.id) throw new RpcError(INVALID_PARAMS, 'requestState was issued for another server');
        return { params: retry.params };
      }
      if (retry.kind === 'confirm') return { params: retry.params, confirmed: retry.accepted };
      const result = await retry.result;
      await this.ledger.record(begin, { ...outcomeOfResult(result), latencyMs: performance.now() - t0 });
      return { result };
    } catch (err) {
      await this.ledger.record(begin, { ...outcomeOfError(err), latencyMs: performance.now() - t0 });
      throw err;
    }
  }

  /** Forward a request to the upstream that owns a prompt name, with the name mapped back. */
  private async forwardNamed(method: string, params: Result, ctx: CallContext, what: 'prompt'): Promise<Result> {
    const t0 = performance.now();
    const hubName = typeof params.name === 'string' ? params.name : '';
    await this.opts.startupGrace();
    const routed = hubName ? await this.catalog.resolvePrompt(hubName, viewOf(ctx)) : undefined;
    if (!routed) {
      const err = new RpcError(INVALID_PARAMS, `Unknown ${what}: ${hubName || '(no name)'}`);
      await this.recordLocal(method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, { hubName });
      throw err;
    }
    const forwarded: Result = { ...params, name: routed.upstreamName };
    delete forwarded._meta;
    const bind: Binding = { principal: ctx.principal, method, target: hubName, argsDigest: argsHash(params.arguments ?? {}) };
    return this.forward(method, forwarded, ctx, routed.server, { hubName, upstreamName: routed.upstreamName }, t0, bind);
  }

  private async forward(
    method: string,
    forwarded: Result,
    ctx: CallContext,
    server: ServerHandle,
    names: { hubName?: string; upstreamName?: string },
    t0: number,
    bind?: Binding,
  ): Promise<Result> {
    const begin = this.beginOf(method, ctx, { ...names, server: server.id, upstreamEra: server.upstream.era });
    const retry = bind ? await this.retryOf(method, forwarded, ctx, bind, server, begin, t0) : undefined;
    if (retry && 'result' in retry) return retry.result;
    const params = retry ? retry.params : forwarded;
    const audit = this.ledger.begin(begin);
    await this.ledger.whenCommitted();
    const conn = await this.connectionFor(server, ctx);
    const body = async (opts: CallOptions): Promise<Result> => {
      try {
        if (conn.upstream.state !== 'ready')
          throw new UpstreamUnavailableError(server.id, conn.upstream.state, conn.upstream.lastError);
        const result = bind
          ? await this.mrtr.roundTrips(method, conn, params, ctx, opts, bind)
          : await conn.upstream.request(method, params, opts);
        await audit.finish({ outcome: 'ok', responseBytes: this.bytesOf(result), latencyMs: performance.now() - t0 });
        return result;
      } catch (err) {
        await audit.finish({ ...outcomeOfError(err), latencyMs: performance.now() - t0 });
        throw asRpcError(this.normaliseNotFound(method, params, err));
      }
    };
    const opts = this.callOptions(ctx, conn);
    return bind ? this.mrtr.run(ctx, conn, opts, bind, body) : body(opts);
  }

  /** Resource-not-found is -32002 in the legacy era and -32602 + data.uri in the modern one; the core uses -32002. */
  private normaliseNotFound(method: string, params: Result, err: unknown): unknown {
    if (method !== 'resources/read' || !(err instanceof RpcError)) return err;
    const data = err.data as { uri?: unknown } | undefined;
    if (err.code === LEGACY_RESOURCE_NOT_FOUND || (err.code === INVALID_PARAMS && data && typeof data.uri === 'string'))
      return new RpcError(LEGACY_RESOURCE_NOT_FOUND, err.message || 'Resource not found', { uri: params.uri });
    return err;
  }

  private async readResource(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const uri = typeof params.uri === 'string' ? params.uri : '';
    await this.opts.startupGrace();
    const server = uri ? await this.catalog.routeUri(uri, viewOf(ctx)) : undefined;
    if (!server) {
      const err = new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
      await this.recordLocal('resources/read', ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, { hubName: uri });
      throw err;
    }
    const forwarded: Result = { ...params };
    delete forwarded._meta;
    const bind: Binding = { principal: ctx.principal, method: 'resources/read', target: uri, argsDigest: '' };
    // Cached per URI and upstream authorization context; MRTR retries neither read nor fill it.
    const first = params.inputResponses === undefined && params.requestState === undefined;
    const partition = first ? (await this.catalog.connection(server, ctx.principal)).credential : '';
    const hit = first ? this.catalog.reads.get(server.id, partition, uri) : undefined;
    if (hit) {
      await this.recordLocal('resources/read', ctx, { outcome: 'ok', server: server.id, upstreamName: uri, latencyMs: performance.now() - t0 }, { hubName: uri });
      return { ...hit.result, ttlMs: hit.remainingMs, cacheScope: hit.scope };
    }
    const result = await this.forward('resources/read', forwarded, ctx, server, { hubName: uri, upstreamName: uri }, t0, bind);
    if (first && cacheableRead(params, result)) {
      const hinted = server.upstream.era === MODERN && typeof result.ttlMs === 'number' ? result.ttlMs : 0;
      const scope = result.cacheScope === 'public' && server.upstream.era === MODERN ? 'public' : 'private';
      this.catalog.reads.put(server.id, partition, uri, result, server.config.cacheTtlMs ?? hinted, scope);
    }
    return result;
  }

  private async complete(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const ref = (params.ref ?? {}) as { type?: string; name?: string; uri?: string };
    await this.opts.startupGrace();
    let server: ServerHandle | undefined;
    let forwardedRef: Result = ref as Result;
    const hubName = typeof ref.name === 'string' ? ref.name : typeof ref.uri === 'string' ? ref.uri : undefined;
    let upstreamName = hubName;
    if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
      const routed = await this.catalog.resolvePrompt(ref.name, viewOf(ctx));
      if (routed) {
        server = routed.server;
        upstreamName = routed.upstreamName;
        forwardedRef = { ...ref, name: routed.upstreamName };
      }
    } else if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
      server = (await this.catalog.templateOwner(ref.uri, viewOf(ctx))) ?? (await this.catalog.routeUri(ref.uri, viewOf(ctx)));
    }
    if (!server) {
      const err = new RpcError(INVALID_PARAMS, `Unknown completion reference: ${ref.name ?? ref.uri ?? '(none)'}`);
      await this.recordLocal('completion/complete', ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, { hubName });
      throw err;
    }
    if (!server.upstream.capabilities?.completions) {
      await this.recordLocal('completion/complete', ctx, { outcome: 'ok', server: server.id }, { hubName, upstreamName });
      return { completion: { values: [] } };
    }
    const forwarded: Result = { ...params, ref: forwardedRef };
    delete forwarded._meta;
    return this.forward('completion/complete', forwarded, ctx, server, { hubName, upstreamName }, t0);
  }

  private async subscribe(method: string, params: Result, ctx: CallContext): Promise<Result> {
    const uri = typeof params.uri === 'string' ? params.uri : '';
    const server = uri ? await this.catalog.routeUri(uri, viewOf(ctx)) : undefined;
    if (!server) {
      const err = new RpcError(LEGACY_RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
      await this.recordLocal(method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, { hubName: uri });
      throw err;
    }
    const t0 = performance.now();
    const subscriber = ctx.sessionKey ?? `${ctx.principal}:${ctx.requestId}`;
    const subscribing = method === 'resources/subscribe';
    const needUpstream = subscribing ? this.subs.add(server.id, uri, subscriber) : this.subs.remove(server.id, uri, subscriber);
    const upstreamSubscribes = server.upstream.capabilities?.resources?.subscribe === true;
    // A modern upstream has no resources/subscribe: the URI goes into the hub's listen filter.
    const modern = server.upstream.era === MODERN;
    if (needUpstream && upstreamSubscribes && modern) this.catalog.subscriptionsChanged(server.id);
    if (!needUpstream || !upstreamSubscribes || modern) {
      await this.recordLocal(method, ctx, { outcome: 'ok', server: server.id, upstreamName: uri }, { hubName: uri });
      return {};
    }
    try {
      return await this.forward(method, { uri }, ctx, server, { hubName: uri, upstreamName: uri }, t0);
    } catch (err) {
      // Not subscribed upstream, so not here either: the next subscriber must ask the upstream again.
      if (subscribing) this.subs.remove(server.id, uri, subscriber);
      throw err;
    }
  }
}
