/**
 * `failMode` per server. "open" (the default): a server that is down fails only its own calls
 * and the rest of the hub keeps serving. "closed": while the server is not ready, the whole hub
 * refuses every call that would act — tools/call, prompts/get, resources/read,
 * completion/complete — whatever server it is for, so that a client never works with a partial
 * toolset it was not meant to have (a policy or audit server, say). Lists, initialize, ping
 * and discovery keep working, so clients can still see what is going on. A tools/call gets an
 * isError result naming the server and its state; the other methods a JSON-RPC error.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { INTERNAL_ERROR, RpcError, UpstreamUnavailableError } from '../protocol/errors.js';
import type { CallContext } from './context.js';
import type { AuditEnd } from '../ledger/types.js';
import type { BeginTarget } from './forwarding.js';
import { outcomeOfError, toolErrorResult } from './outcome.js';

export const GUARDED_METHODS: ReadonlySet<string> = new Set(['tools/call', 'prompts/get', 'resources/read', 'completion/complete']);

/** The first fail-closed server that is down, as the error that says so; undefined when none is. */
export function failClosedBlocker(handles: Iterable<ServerHandle>): UpstreamUnavailableError | undefined {
  for (const h of handles) {
    if (h.config.failMode !== 'closed' || h.upstream.state === 'ready') continue;
    const err = new UpstreamUnavailableError(h.id, h.upstream.state, h.upstream.lastError);
    err.message = `the hub refuses calls while server "${h.id}" (failMode "closed") is ${h.upstream.state}${h.upstream.lastError ? `: ${h.upstream.lastError}` : ''}`;
    return err;
  }
  return undefined;
}

/**
 * What a caller whose view does not show the blocking server is told (a key limited to tool
 * groups that do not show it): that the hub refuses, not which server, nor why (its lastError).
 */
export const UNNAMED_BLOCKER = 'the hub refuses calls while a server it depends on (failMode "closed") is not ready';

type Record_ = (method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'>, extra?: BeginTarget) => Promise<void>;

/**
 * The answer to a guarded call refused by `err`, with its audit row (which names the server
 * whatever the caller may see). `shown`: the caller's view shows the blocking server.
 */
export async function refuseClosed(method: string, params: Record<string, unknown>, ctx: CallContext, err: UpstreamUnavailableError, record: Record_, shown = true): Promise<Record<string, unknown>> {
  const target = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
  await record(method, ctx, outcomeOfError(err), target === undefined ? undefined : { hubName: target });
  const message = shown ? err.message : UNNAMED_BLOCKER;
  if (method === 'tools/call') return toolErrorResult(message);
  throw new RpcError(INTERNAL_ERROR, message, shown ? { server: err.server, state: err.state, failMode: 'closed' } : { failMode: 'closed' });
}
