import { BATCH_VERSION } from '../protocol/jsonrpc.js';
import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { classifyEra } from './classify.js';

type Params = Record<string, unknown>;

/** The batch cap when no in-flight limit is configured. */
const DEFAULT_MAX_BATCH = 64;

/**
 * Why a batch the session takes is refused whole (one invalid message; a row per request, refusedMembers), or
 * null. At most maxPendingPerSession members: its members run at once, and each costs a row.
 * No initialize (the revision forbids it), no message of the modern era, no other version.
 * `maxPendingPerSession`: the endpoint's listen.maxPendingPerSession, if set.
 */
export function batchRefusal(members: readonly unknown[], headerVersion: string | undefined, headerKey: string | undefined, maxPendingPerSession: number | undefined): RpcError | null {
  const cap = maxPendingPerSession ?? DEFAULT_MAX_BATCH;
  if (members.length === 0) return new RpcError(INVALID_REQUEST, 'an empty batch');
  if (members.length > cap) return new RpcError(INVALID_REQUEST, `a batch holds at most ${cap} messages (listen.maxPendingPerSession)`);
  if (headerVersion !== undefined && headerVersion !== BATCH_VERSION) return new RpcError(INVALID_REQUEST, `batches are taken only at ${BATCH_VERSION}`);
  for (const m of members) {
    const o = (m ?? {}) as { method?: unknown; params?: unknown };
    const params = o.params !== null && typeof o.params === 'object' ? (o.params as Params) : undefined;
    if (o.method === 'initialize') return new RpcError(INVALID_REQUEST, 'initialize cannot be part of a batch');
    if (classifyEra(typeof o.method === 'string' ? o.method : undefined, params, undefined).era === 'modern')
      return new RpcError(INVALID_REQUEST, 'a batch cannot hold a message of the 2026-07-28 era');
  }
  // The header names one call: shared by several, the second would be refused (other arguments)
  // or, the same write twice, answered with the first's answer and never run.
  if (headerKey && members.filter((m) => (m as { method?: unknown } | null)?.method === 'tools/call').length > 1)
    return new RpcError(INVALID_REQUEST, 'an Idempotency-Key header names one call, and this batch holds several tools/call: give each its own _meta "dev.switchyard/idempotency-key"');
  return null;
}
