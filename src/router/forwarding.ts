import type { ServerHandle, View } from '../catalog/catalog.js';
import type { AuditSink } from '../ledger/sink.js';
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
import { INVALID_PARAMS, RpcError } from '../protocol/errors.js';
import { copyOf } from '../protocol/copy.js';
import { askerOf } from '../protocol/input-results.js';
import { resultJson } from '../protocol/serialized.js';
import { LEGACY, MODERN } from '../protocol/era.js';
import type { CallOptions, Upstream } from '../upstream/types.js';
import type { CallContext } from './context.js';
import { serverRetry, totalTimeoutMs, withoutHubKeys } from './call-policy.js';
import { cutOffError, outcomeOfResult, outcomeSeenBy } from './outcome.js';
import type { Mrtr } from './mrtr.js';
import type { Binding, RequestStateSealer } from './request-state.js';
import { formatTraceparent, type TraceSpan } from '../protocol/trace-context.js';
import { requestIdText } from '../ledger/request-id.js';
import type { Signal } from '../cancel.js';

// Shared by the router's forwarding paths and tools/call (call-tool.ts), so neither imports the other's helpers.

export type Result = Record<string, unknown>;

/** The caller's connection to a server: at once for a shared one, once started for a caller's own. */
export type UpstreamFor = (server: ServerHandle, ctx: CallContext) => Upstream | Promise<Upstream>;

/** Who asks, for the catalog: the authorization context of private lists and the tool group. */
export function viewOf(ctx: CallContext): View {
  return { principal: ctx.principal, group: ctx.group };
}

/** Whether the client declared anything an upstream could ask it for. */
function canBeAsked(caps: CallContext['clientCapabilities']): boolean {
  return !!(caps.elicitation || caps.sampling || caps.roots);
}

const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/**
 * The capabilities declared to an upstream on the client's behalf: what the hub can relay for
 * this request (digest §8.4, §8.16). Asks (elicitation, sampling, roots) and extensions go as the
 * client declared them, but not tasks (the 2026 extension, or the 2025-11-25 `tasks`
 * capability): the hub routes no `tasks/*` method, so a task an upstream created for it could
 * never be polled, and its answer would be lost. Nor `sampling.context`: it lets a server ask
 * for `includeContext: "thisServer"`, and the client's server is the hub, so the context it
 * attached would be every upstream's, handed to the one that asked. (A legacy upstream is not
 * told it either: LEGACY_CLIENT_CAPABILITIES.) The client's own object when nothing is taken.
 */
export function relayedCapabilities(caps: CallContext['clientCapabilities']): CallContext['clientCapabilities'] {
  const ext = caps.extensions;
  const extTasks = ext !== undefined && ext !== null && typeof ext === 'object' && TASKS_EXTENSION in ext;
  const sampling = caps.sampling;
  const context = sampling !== undefined && sampling !== null && typeof sampling === 'object' && sampling.context !== undefined;
  if (caps.tasks === undefined && !extTasks && !context) return caps;
  // The client chose the keys: copyOf keeps a "__proto__" one a field, as Object.assign would not.
  const out = copyOf(caps);
  delete out.tasks;
  if (extTasks) {
    const rest = copyOf(ext);
    delete rest[TASKS_EXTENSION];
    out.extensions = rest;
  }
  if (context) {
    const rest = copyOf(sampling);
    delete rest.context;
    out.sampling = rest;
  }
  return out;
}

/**
 * The params a request is forwarded with: the client's, copied (`copyOf`), with `key` set to
 * `value` when given (the upstream's tool or prompt name, a completion's ref). The client's
 * _meta reaches the upstream through the call options, not the params; it is set to undefined
 * rather than deleted, since a delete turns the object into a slow dictionary, dearer to copy
 * and serialise (withMeta leaves the key out either way).
 */
export function forwardedParams(params: Result, key?: string, value?: unknown): Result {
  const out = copyOf(params);
  if (key !== undefined) out[key] = value;
  out._meta = undefined;
  return out;
}

/**
 * A legacy client's params with the modern era's MRTR fields left out. `requestState` and
 * `inputResponses` are a 2026-07-28 retry's (digest §5.1); a 2025-11-25 client has no
 * `input_required` round to retry (it is asked with real requests), so its are strays, unknown
 * params of its era. Forwarded to a modern upstream they were a retry round the client forged:
 * answers to questions never put to its user, or a state the upstream minted for someone else's
 * call. Two reads for a call without them.
 */
export function withoutStrayRound(out: Result, ctx: CallContext): Result {
  if (ctx.clientEra !== MODERN && (out.requestState !== undefined || out.inputResponses !== undefined)) {
    delete out.requestState;
    delete out.inputResponses;
  }
  return out;
}

/** A call's end as its result tells it: the outcome, the size the ledger records, the result. */
export function endOf(ledger: AuditSink, result: Result): Omit<AuditEnd, 'latencyMs'> {
  const o = outcomeOfResult(result);
  return { outcome: o.outcome, errorKind: o.errorKind, responseBytes: bytesOf(ledger, result), result };
}

/**
 * Bytes of a forwarded result as JSON, for the ledger: the text is kept for the edge, which
 * sends it rather than stringifying the result again (resultJson). Without a ledger the edge
 * alone serialises it. Lists are not measured.
 */
export function bytesOf(ledger: AuditSink, result: Result): number | undefined {
  if (ledger.enabled === false) return undefined;
  const json = resultJson(result);
  return json === undefined ? undefined : Buffer.byteLength(json);
}

/**
 * `server` with the connection this caller must use (its own when principals are isolated):
 * a promise only while that connection is still starting, so the usual call need not await.
 */
export function connectionFor(opts: { upstreamFor?: UpstreamFor }, server: ServerHandle, ctx: CallContext): ServerHandle | Promise<ServerHandle> {
  if (!opts.upstreamFor) return server;
  const u = opts.upstreamFor(server, ctx);
  return u instanceof Promise ? u.then((upstream) => withUpstream(server, upstream)) : withUpstream(server, u);
}

/**
 * Whether `upstream`, a connection to `server`, is known to speak 2025-11-25: it said so at its
 * handshake, or the config fixes the server's era. A connection started afresh (`servers
 * restart`, a reload) has no era until its handshake, and one of a server in `auto` may come back
 * in the other era; a configured one never does (its handshake runs `initialize` alone).
 */
export function knownLegacy(server: ServerHandle, upstream: Upstream): boolean {
  return upstream.era === LEGACY || server.config.era === LEGACY;
}

/** `server` with `upstream` as its connection (a principal's own, when it is not the server's). */
export function withUpstream(server: ServerHandle, upstream: Upstream): ServerHandle {
  return upstream === server.upstream ? server : { ...server, upstream };
}

/** What a row's begin knows of its request's target, besides what its context says (beginOf). */
export type BeginTarget = Pick<AuditBegin, 'hubName' | 'server' | 'upstreamName' | 'upstreamEra' | 'argsHash' | 'args'>;

/**
 * A row's begin, built as one literal with every field (those the target lacks undefined), not
 * the context's fields with `target` spread over them: the spread cost ~2.2k instructions of
 * every tools/call (callgrind, docs/BENCHMARKS.md), and every begin now has the one shape.
 */
export function beginOf(method: string, ctx: CallContext, target?: BeginTarget): AuditBegin {
  const span = ctx.span;
  return {
    ts: Date.now(),
    requestId: requestIdText(ctx.requestId),
    principal: ctx.principal,
    group: ctx.group,
    clientAddress: ctx.clientAddress,
    clientEra: ctx.clientEra,
    clientInfo: ctx.clientInfo,
    method,
    hubName: target?.hubName,
    server: target?.server,
    upstreamName: target?.upstreamName,
    upstreamEra: target?.upstreamEra,
    idempotencyKey: ctx.idempotencyKey,
    argsHash: target?.argsHash,
    requestBytes: ctx.requestBytes,
    args: target?.args,
    traceId: span?.traceId,
    spanId: span?.spanId,
    parentSpanId: span?.parentSpanId,
  };
}

/** `stop`: the hub's stop begun (RouterOptions.stopBegun), which ends a wait between retries. */
export function callOptions(ctx: CallContext, server: ServerHandle, stop?: Signal, retry?: CallOptions['retry']): CallOptions {
  const config = server.config;
  // Timeouts (a caller's own bounded by the server's cap) and safe retries: call-policy.ts. One
  // object, not a policy object spread over it and tools/call's copy with its retry (~5k
  // instructions a call, BENCHMARKS.md).
  const total = totalTimeoutMs(config, ctx.meta);
  return {
    signal: ctx.signal,
    stop,
    timeoutMs: Math.min(config.timeoutMs, total),
    maxTotalTimeoutMs: total,
    onProgress: ctx.onProgress,
    onLog: ctx.onLog,
    logScope: ctx.sessionKey,
    principal: ctx.principal,
    onServerRequest: ctx.askClient,
    asker: askerOf(server),
    askerInMeta: ctx.clientEra !== MODERN,
    onElicitationComplete: ctx.onElicitationComplete,
    exclusive: canBeAsked(ctx.clientCapabilities),
    clientCapabilities: relayedCapabilities(ctx.clientCapabilities),
    meta: withoutHubKeys(ctx.meta),
    logLevel: ctx.logLevel,
    // Progress is what keeps a long call alive: ask for it whether or not the client did.
    askProgress: true,
    retry: retry ?? serverRetry(config),
  };
}

/**
 * A modern client's MRTR retry (it carries our sealed requestState): either the answer of a
 * parked call, or the params to forward with the upstream's own state restored. Undefined for
 * a first request. A bad state is -32602 and has its ledger row.
 */
/** A modern client's retry of an input_required answer (it carries requestState). */
export function isRetry(params: Result, ctx: CallContext): boolean {
  return ctx.clientEra === MODERN && params.requestState !== undefined;
}

/**
 * A retry's context, in the trace of the request whose `input_required` it answers: its row (and
 * what it forwards) carry that trace id, its parent span being that request's span, so the rows
 * of one call's rounds are found together (`ledger query --trace-id`). Only when the hub started
 * this request's trace: a client that sent a traceparent placed the retry in a trace itself.
 */
export function inCallTrace(sealer: RequestStateSealer, params: Result, ctx: CallContext): CallContext {
  const span = ctx.span;
  if (!span || span.parentSpanId !== undefined || !isRetry(params, ctx)) return ctx;
  const first = sealer.traceOf(params.requestState, ctx.principal);
  if (!first) return ctx;
  const joined: TraceSpan = { traceId: first.traceId, spanId: span.spanId, parentSpanId: first.spanId, flags: span.flags };
  const meta = ctx.meta?.traceparent === undefined ? ctx.meta : { ...ctx.meta, traceparent: formatTraceparent(joined) };
  return { ...ctx, span: joined, meta };
}

/**
 * The row of a retry refused before it had a context (the edge gate: a rate limit, a scope), in
 * its call's trace as inCallTrace puts one that has: a call's rows are one trace however they end.
 */
export function beginInCallTrace(sealer: RequestStateSealer, params: Result | undefined, b: AuditBegin): AuditBegin {
  if (b.traceId === undefined || b.parentSpanId !== undefined || b.clientEra !== MODERN || params?.requestState === undefined) return b;
  const first = sealer.traceOf(params.requestState, b.principal);
  return first ? { ...b, traceId: first.traceId, parentSpanId: first.spanId } : b;
}

export async function retryOf(
  mrtr: Mrtr,
  ledger: AuditSink,
  record: (end: AuditEnd) => Promise<void>,
  method: string,
  params: Result,
  ctx: CallContext,
  bind: Binding,
  server: ServerHandle,
  t0: number,
): Promise<{ result: Result } | { params: Result; confirmed?: boolean } | undefined> {
  if (!isRetry(params, ctx)) return undefined;
  try {
    const retry = mrtr.openRetry(params, bind, ctx.clientCapabilities, ctx.signal, { onProgress: ctx.onProgress, onLog: ctx.onLog });
    if (retry.kind === 'forward') {
      if (retry.server !== server.id) throw new RpcError(INVALID_PARAMS, 'requestState was issued for another server');
      return retry.confirmed ? { params: retry.params, confirmed: true } : { params: retry.params };
    }
    if (retry.kind === 'confirm') return { params: retry.params, confirmed: retry.accepted };
    const result = await retry.result;
    // This request is the one that carries the call's answer to the client: its row has its size.
    await record(Object.assign(endOf(ledger, result), { latencyMs: performance.now() - t0 }));
    return { result };
  } catch (err) {
    // Ended by the hub's stop (its client is answered so: HubStoppingError), not cancelled by its client.
    await record(Object.assign(outcomeSeenBy(ctx.clientEra === MODERN, cutOffError(err, ctx.signal)), { latencyMs: performance.now() - t0 }));
    throw err;
  }
}
