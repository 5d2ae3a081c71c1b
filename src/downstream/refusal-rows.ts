/**
 * The audit rows of requests the hub refuses before serving them: each reached the hub, so each
 * is recorded like any other, under its id, method and the tool, prompt or resource it named.
 */
import { Canceller } from '../cancel.js';
import type { Era } from '../protocol/era.js';
import { eraOfRequest } from '../protocol/request-era.js';
import { UNSUPPORTED_PROTOCOL_VERSION, type RpcError } from '../protocol/errors.js';
import { memberBytes, type Id } from '../protocol/jsonrpc.js';
import type { CallContext } from '../router/context.js';
import { spanOfMeta } from '../protocol/trace-context.js';
import type { HubCore } from './core.js';
import type { Exchange } from './exchange.js';

type Params = Record<string, unknown>;

/**
 * The audit row of a request refused before it had a session or even a method (a message
 * that is not JSON-RPC, no session, another principal's session): it reached the hub, so it
 * is recorded like any other. `era`: the era it was refused in; by default the one the
 * endpoint tells from its `_meta` and header (eraOfRequest: a modern header's request is
 * refused by that era's rules, whichever version it names). A -32022's row names the version
 * the client asked for instead (refusalFacts).
 */
export function recordRefused(
  core: HubCore,
  /** `requestBytes`: its own size, when it came with others (a batch member); the exchange's otherwise. */
  req: { id?: Id; method: string; params?: Params; target?: string; requestBytes?: number },
  ex: Exchange,
  err: RpcError,
  era: Era = eraOfRequest(req.method, req.params, ex.header('mcp-protocol-version')),
  end: Parameters<HubCore['recordLocal']>[2] = { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message },
): Promise<void> {
  const ctx: CallContext = {
    requestId: req.id,
    principal: ex.principal,
    authContext: ex.authContext,
    group: ex.group,
    clientAddress: ex.clientAddress,
    clientEra: era,
    clientCapabilities: {},
    signal: new Canceller().signal,
    requestBytes: req.requestBytes ?? ex.requestBytes,
    span: spanOfMeta(req.params?._meta, ex),
  };
  const hubName = req.target ?? targetOf(req.params);
  const clientEra = requestedVersion(err);
  return core.recordLocal(req.method, ctx, end, hubName === undefined && clientEra === undefined ? undefined : { hubName, clientEra });
}

/** Rows one refused batch may have: a batch is capped at its session's maxPendingPerSession (64 by default). */
const MAX_BATCH_ROWS = 64;

/**
 * The requests of a batch refused whole, each to be recorded under its own id, method and tool
 * (a batch of tools/call refused for one Idempotency-Key had a single `(invalid)` row, with no
 * request id nor tool to find it by), as it would be alone: its params (its `_meta` version
 * claim says its era, its traceparent its trace) and its own size, not the body's. Notifications
 * and junk have none; a batch over the cap (refused for its size) keeps its single row, so no
 * body buys more rows than the cap.
 */
export function refusedMembers(members: readonly unknown[], batchBytes: number): { id: Id; method: string; params?: Params; requestBytes: number }[] {
  if (members.length > MAX_BATCH_ROWS) return [];
  const rows: { id: Id; method: string; params?: Params; requestBytes: number }[] = [];
  for (const m of members) {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) continue;
    const o = m as { id?: unknown; method?: unknown; params?: unknown };
    // An id of no allowed type (1.5, or 2^53 + 1, which JSON.parse reads as 2^53) makes no request,
    // as alone (classify): a row under it would name an id the client never sent.
    if (typeof o.method !== 'string' || (typeof o.id !== 'string' && !Number.isSafeInteger(o.id))) continue;
    const params = o.params !== null && typeof o.params === 'object' && !Array.isArray(o.params) ? (o.params as Params) : undefined;
    rows.push({ id: o.id as Id, method: o.method, params, requestBytes: memberBytes(m, batchBytes) });
  }
  return rows;
}

/** The tool or prompt name, or the resource URI, a refused request named: its row is found by it (`ledger query --tool`). */
function targetOf(params: Params | undefined): string | undefined {
  return typeof params?.name === 'string' ? params.name : typeof params?.uri === 'string' ? params.uri : undefined;
}

/** targetOf as a refusal row's extra facts. */
export function named(params: Params | undefined): { hubName: string } | undefined {
  const hubName = targetOf(params);
  return hubName === undefined ? undefined : { hubName };
}

/**
 * What a modern request's refusal row knows besides its context: the name it gave, and, refused
 * for its version (-32022, `data.requested`), that version as its client era: such a client
 * speaks no era the hub serves, and 2026-07-28, the era of the envelope it used, would have
 * `ledger query` show a modern client refused where a client of another version was. The
 * version as the error quotes it: cut to MAX_VERSION_TEXT, the cut marked (shownVersion).
 */
export function refusalFacts(params: Params | undefined, err: RpcError): { hubName?: string; clientEra?: string } | undefined {
  const facts = named(params);
  const requested = requestedVersion(err);
  return requested === undefined ? facts : { ...facts, clientEra: requested };
}

/** The version a -32022 says the client asked for (its `data.requested`), or undefined for any other error. */
function requestedVersion(err: RpcError): string | undefined {
  if (err.code !== UNSUPPORTED_PROTOCOL_VERSION) return undefined;
  const requested = (err.data as { requested?: unknown } | undefined)?.requested;
  return typeof requested === 'string' ? requested : undefined;
}
