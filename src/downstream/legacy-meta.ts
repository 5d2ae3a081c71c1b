/**
 * What a 2025-11-25 request's `_meta` must be before it is served: an object, as the schema has
 * it in both eras (a modern request without one is refused too: it carries no version), and a
 * progressToken, echoed in every progress notification of the request, of the schema's
 * ProgressToken type: a string or an integer (schema.json of 2025-11-25 as of 2026-07-28; the
 * SDKs read only integers). Anything else is -32602, as the modern check (modern-envelope.ts)
 * answers: served, a `_meta` that is no object was silently none, and a token no client could
 * match was sent back in its notifications. (The SDK v1 server answers neither: it drops the
 * message as one its schema does not take, and its client is never answered.)
 */
import { INVALID_PARAMS, RpcError } from '../protocol/errors.js';
import { isObj, type Params } from '../protocol/jsonrpc.js';

/** The -32602 a legacy request's `_meta` earns, or null when it may be served. */
export function legacyMetaProblem(params: Params | undefined): RpcError | null {
  const meta = params?._meta;
  if (meta === undefined) return null;
  if (!isObj(meta)) return new RpcError(INVALID_PARAMS, 'invalid _meta: must be an object');
  const token = meta.progressToken;
  if (token === undefined || typeof token === 'string' || Number.isSafeInteger(token)) return null;
  return new RpcError(INVALID_PARAMS, 'invalid _meta progressToken: a string or an integer');
}
