/**
 * What a 2025-11-25 request's `_meta` must be before it is served. Little: a `_meta` that is no
 * object is read as none (call-context.ts), and its keys pass upstream as they are; but a
 * progressToken is echoed in every progress notification of the request, so one of a type no
 * ProgressToken has (the schema's is a string or a number) is refused rather than sent back in
 * notifications its client could not match. (The modern check, modern-envelope.ts, also
 * refuses a fraction: the SDKs read only integers, and that era's clients are new.)
 */
import { INVALID_PARAMS, RpcError } from '../protocol/errors.js';
import { isObj, type Params } from '../protocol/jsonrpc.js';

/** The -32602 a legacy request's `_meta` earns, or null when it may be served. */
export function legacyMetaProblem(params: Params | undefined): RpcError | null {
  const meta = params?._meta;
  const token = isObj(meta) ? meta.progressToken : undefined;
  if (token === undefined || typeof token === 'string' || typeof token === 'number') return null;
  return new RpcError(INVALID_PARAMS, 'invalid _meta progressToken: a string or a number');
}
