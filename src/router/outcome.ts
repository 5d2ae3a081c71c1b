import { CancelledError, errorSeenBy, HubError, HubStoppingError, InputTimeoutError, RpcError, TimeoutError, TransportError, UpstreamUnavailableError } from '../protocol/errors.js';
import type { AuditEnd } from '../ledger/types.js';
import { reasonOf, type Signal } from '../cancel.js';
import { notSent } from '../protocol/errors.js';

/** Classify how a forwarded call ended, keeping transport, JSON-RPC and tool failures apart. */
export function outcomeOfResult(result: Record<string, unknown>): Pick<AuditEnd, 'outcome' | 'errorKind'> {
  // An MRTR round: the client was asked for input and retries; the call's outcome is on the row
  // of the request that gets its answer (metrics and `ledger stats` count that one, not each round).
  if (result.resultType === 'input_required') return { outcome: 'input_required', errorKind: null };
  return result.isError === true ? { outcome: 'tool_error', errorKind: 'tool' } : { outcome: 'ok', errorKind: null };
}

/**
 * What ended a call: a CancelledError from the hub's own abort with an RpcError as its reason
 * (a parked call cut off for a capability the client lacks) is that RpcError, as the client was told.
 * A call ended because its client did not answer a question in time (InputTimeoutError) ended so
 * whatever the upstream side saw of it (a cancellation, or the question's error).
 */
export function cutOffError(caught: unknown, signal: { readonly reason: unknown } | undefined): unknown {
  const reason = signal?.reason;
  if (reason instanceof InputTimeoutError) return reason;
  // The hub stopping ended it: its client is told so (HubStoppingError), not left unanswered.
  if (caught instanceof CancelledError && reason instanceof HubStoppingError) return new HubStoppingError(caught.notSent);
  return caught instanceof CancelledError && reason instanceof RpcError ? reason : caught;
}

/**
 * A held request refused because a reload changed its key or groups, whose client's request the
 * same reload ended (its legacy session's end, SessionTable.endSessionsOf/endSessionsOfGroups):
 * its client is answered by that end (Endpoint.legacyRequest: 404 'Session not found: …'), so
 * its row says that, cancelled and not sent, as for a request in flight then, not the refusal.
 */
export function endedWhileHeld(ctx: { readonly signal: Signal }): unknown {
  return ctx.signal.aborted ? cutOffError(notSent(new CancelledError(reasonOf(ctx.signal))), ctx.signal) : undefined;
}

export function outcomeOfError(err: unknown): Pick<AuditEnd, 'outcome' | 'errorKind' | 'errorCode' | 'errorMessage'> {
  if (err instanceof RpcError) return { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message };
  if (err instanceof TimeoutError) return { outcome: 'timeout', errorKind: 'transport', errorMessage: err.message };
  if (err instanceof HubStoppingError) return { outcome: 'unavailable', errorKind: 'transport', errorMessage: err.message };
  if (err instanceof CancelledError) return { outcome: 'cancelled', errorKind: null, errorMessage: err.message };
  if (err instanceof UpstreamUnavailableError) return { outcome: 'unavailable', errorKind: 'transport', errorMessage: err.message };
  if (err instanceof TransportError) return { outcome: 'unavailable', errorKind: 'transport', errorMessage: err.message };
  if (err instanceof HubError) return { outcome: 'unknown', errorKind: 'transport', errorMessage: err.message };
  return { outcome: 'unknown', errorKind: null, errorMessage: 'internal error' };
}

/**
 * The outcome of `err` as the ledger records it: with the error its client was sent, which for a
 * modern client may not be the upstream's own (errorSeenBy: -32002 is -32602; a code of the
 * spec's reserved range is -32603, the upstream's code in the message). `ledger query` shows what
 * the client saw; the message keeps what the upstream said.
 */
export function outcomeSeenBy(modernClient: boolean, err: unknown): ReturnType<typeof outcomeOfError> {
  return outcomeOfError(err instanceof RpcError ? errorSeenBy(modernClient, err) : err);
}

/** A tool-call failure the model can read and act on, instead of a protocol error. */
export function toolErrorResult(text: string, structured?: Record<string, unknown>): Record<string, unknown> {
  const r: Record<string, unknown> = { content: [{ type: 'text', text }], isError: true };
  if (structured) r.structuredContent = structured;
  return r;
}
