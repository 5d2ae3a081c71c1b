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

/**
 * The client capability families the hub relays to a client end to end, and the members of each
 * it honours (undefined: all of them). A family or member not here is one the hub cannot carry:
 */
const RELAYED: ReadonlyMap<string, ReadonlySet<string> | undefined> = new Map([
  ['elicitation', new Set(['form', 'url'])],
  ['sampling', new Set(['tools'])],
  // `listChanged`, a legacy client's, is left out for modern upstreams by the envelope.
  ['roots', undefined],
]);

/**
 * The capabilities declared to an upstream on the client's behalf: only what the hub itself can
 * honour for this request (digest §8.4, §8.16), since a declaration is a promise the upstream
 * acts on, and one told nothing falls back to core behaviour (2026-07-28 versioning: "If one
 * party supports an extension but the other does not, the supporting party MUST either revert to
 * core protocol behavior or reject"). So the asks the hub relays (elicitation form and URL,
 * sampling with tools, roots) go as the client declared them, and nothing else:
 * - no extension: the hub knows none it can carry. An extension's methods are not routed here
 *   (-32601), its result types are invalid here (-32603), its listen filters are not kept; the
 *   tasks one least of all (no `tasks/*` is routed, so a task an upstream made could never be
 *   polled). Even MCP Apps (`io.modelcontextprotocol/ui`): the hub's lists are fetched and
 *   cached under its own declaration, and an app calls tools by its server's names, which the
 *   hub prefixes.
 * - no `experimental` capability (non-standard, so unknown to the hub by definition), nor the
 *   2025-11-25 `tasks` capability, nor a family or member neither schema has;
 * - not `sampling.context`: it lets a server ask for `includeContext: "thisServer"`, and the
 *   client's server is the hub, so the context it attached would be every upstream's, handed to
 *   the one that asked. (A legacy upstream is not told it either: LEGACY_CLIENT_CAPABILITIES.)
 * The client's own object when nothing is taken (the usual call: no copy).
 */
export function relayedCapabilities(caps: CallContext['clientCapabilities']): CallContext['clientCapabilities'] {
  if (allRelayed(caps)) return caps;
  const out: Record<string, unknown> = {};
  const all = caps as Record<string, unknown>;
  for (const [family, members] of RELAYED) {
    const v = all[family];
    if (v === undefined || !Object.hasOwn(all, family)) continue;
    if (members === undefined || v === null || typeof v !== 'object') {
      out[family] = v;
      continue;
    }
    // Only members read from the hub's own set: a client's "__proto__" never becomes one.
    const kept: Record<string, unknown> = {};
    for (const m of members) if (Object.hasOwn(v, m)) kept[m] = (v as Record<string, unknown>)[m];
    out[family] = kept;
  }
  return out as CallContext['clientCapabilities'];
}

/** Whether every family and member the client declared is one the hub relays (relayedCapabilities' fast path). */
function allRelayed(caps: CallContext['clientCapabilities']): boolean {
  const all = caps as Record<string, unknown>;
  for (const family in all) {
    if (!RELAYED.has(family)) return false;
    const members = RELAYED.get(family);
    const v = all[family];
    if (members === undefined || v === null || typeof v !== 'object') continue;
    for (const m in v) if (!members.has(m)) return false;
  }
  return true;
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
): Promise<{ result: Result } | { params: Result; confirmed?: boolean; rewritten?: string } | undefined> {
  if (!isRetry(params, ctx)) return undefined;
  try {
    const retry = mrtr.openRetry(params, bind, ctx.clientCapabilities, ctx.signal, { onProgress: ctx.onProgress, onLog: ctx.onLog });
    if (retry.kind === 'forward') {
      if (retry.server !== server.id) throw new RpcError(INVALID_PARAMS, 'requestState was issued for another server');
      return retry.confirmed ? { params: retry.params, confirmed: true, rewritten: retry.rewritten } : { params: retry.params };
    }
    if (retry.kind === 'confirm') return { params: retry.params, confirmed: retry.accepted, rewritten: retry.rewritten };
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
