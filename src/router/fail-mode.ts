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
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
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

type Record_ = (method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'>, extra?: Partial<AuditBegin>) => Promise<void>;

/** The answer to a guarded call refused by `err`, with its audit row. */
export async function refuseClosed(method: string, params: Record<string, unknown>, ctx: CallContext, err: UpstreamUnavailableError, record: Record_): Promise<Record<string, unknown>> {
  const target = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
  await record(method, ctx, outcomeOfError(err), target === undefined ? undefined : { hubName: target });
  if (method === 'tools/call') return toolErrorResult(err.message);
  throw new RpcError(INTERNAL_ERROR, err.message, { server: err.server, state: err.state, failMode: 'closed' });
}
