import {
  errorSeenBy,
  HEADER_MISMATCH,
  HubStoppingError,
  INTERNAL_ERROR,
  METHOD_NOT_FOUND,
  MISSING_CLIENT_CAPABILITY,
  RpcError,
  UNSUPPORTED_PROTOCOL_VERSION,
} from '../protocol/errors.js';
import { META_SERVER_INFO } from '../protocol/meta.js';
import { isObj } from '../protocol/jsonrpc.js';
import type { Implementation } from '../protocol/types.js';
import type { Logger } from '../log.js';
import { copyOf } from '../protocol/copy.js';
import { cacheTtl } from '../protocol/ttl.js';

type Result = Record<string, unknown>;

const CACHEABLE = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/**
 * A core result as a 2026-07-28 client must see it: `resultType` on every result, caching hints
 * on cacheable ones, the hub's serverInfo in `_meta`. Results are shallow-copied only when a
 * field has to change.
 */
export function toModernResult(method: string, r: Result, serverInfo: Implementation): Result {
  const out = copyOf(r);
  if (out.resultType === undefined) out.resultType = 'complete';
  if (CACHEABLE.has(method) && out.resultType === 'complete') {
    out.ttlMs = cacheTtl(out.ttlMs);
    if (out.cacheScope !== 'public' && out.cacheScope !== 'private') out.cacheScope = 'private';
  }
  const meta = metaOf(r);
  let m: Result;
  if (meta) {
    m = copyOf(meta);
    m[META_SERVER_INFO] = serverInfo;
  } else m = { [META_SERVER_INFO]: serverInfo };
  out._meta = m;
  return out;
}

/**
 * A result's `_meta` if it is one: an object. Any other value (`true`, a string, an array, null)
 * is no `_meta` of either era's schema, which a client's SDK refuses the whole result for; it is
 * left out, as if the upstream had sent none.
 */
function metaOf(r: Result): Result | undefined {
  return isObj(r._meta) ? r._meta : undefined;
}

/**
 * A core result as a 2025-11-25 client expects it: no modern-only fields, and modern shapes the
 * 2025 types cannot carry (non-object outputSchema / structuredContent) dropped (digest §8.11).
 */
export function toLegacyResult(method: string, r: Result): Result {
  const { resultType: _rt, ttlMs: _t, cacheScope: _c, ...out } = r;
  // An upstream's self-description is not the hub's; legacy clients got ours at initialize.
  const meta = metaOf(out);
  if (meta === undefined) {
    if (out._meta !== undefined) delete out._meta;
  } else if (META_SERVER_INFO in meta) {
    const { [META_SERVER_INFO]: _s, ...rest } = meta;
    if (Object.keys(rest).length) out._meta = rest;
    else delete out._meta;
  }
  if (method === 'tools/list' && Array.isArray(out.tools)) {
    let changed = false;
    const tools = (out.tools as Result[]).map((t) => {
      const os = t.outputSchema as Result | undefined;
      const input = withObjectProperties(t.inputSchema);
      const output = os === undefined || os.type !== 'object' ? undefined : withObjectProperties(os);
      if (input === t.inputSchema && output === os) return t;
      changed = true;
      const { outputSchema: _o, ...rest } = t;
      return output === undefined ? { ...rest, inputSchema: input } : { ...rest, inputSchema: input, outputSchema: output };
    });
    if (changed) out.tools = tools;
  } else if (method === 'tools/call' && 'structuredContent' in out) {
    const sc = out.structuredContent;
    if (sc === null || typeof sc !== 'object' || Array.isArray(sc)) delete out.structuredContent;
  }
  return out;
}

/**
 * A schema whose root `properties` holds boolean schemas, with each spelt as the object that
 * means the same (`true` is `{}`, `false` is `{"not": {}}`): the 2025-11-25 types have a map of
 * objects there, and the v1 SDK client refuses a whole tools/list that has a boolean in it.
 * Anything else is returned as it is.
 */
function withObjectProperties(schema: unknown): unknown {
  const props = (schema as Result | null)?.properties;
  if (props === null || typeof props !== 'object' || Array.isArray(props)) return schema;
  if (!Object.values(props).some((p) => typeof p === 'boolean')) return schema;
  const spelt = Object.fromEntries(Object.entries(props).map(([k, p]) => [k, p === true ? {} : p === false ? { not: {} } : p]));
  return { ...(schema as Result), properties: spelt };
}

/** Era-specific error codes: resource-not-found is -32002 for legacy clients and -32602 for modern ones (errorSeenBy). */
export function toModernError(err: RpcError): RpcError {
  return errorSeenBy(true, err);
}

/** An error as a 2025-11-25 client is sent it: an upstream's -32020 or -32022 is -32603 naming it (errorSeenBy). */
export function toLegacyError(err: RpcError): RpcError {
  return errorSeenBy(false, err);
}

/**
 * The HTTP status of a modern error answer (digest §6.3): the request-validation errors are 400
 * wherever they arise, e.g. an upstream's -32021 for a capability the client did not declare, and
 * a -32601 is 404, as the hub's own is (a family no server offers): the 2026 transport sends
 * every method-not-found so (a MUST), an upstream's for a tool or prompt the hub routed to it too.
 */
export function modernErrorStatus(err: RpcError): number {
  if (err.code === METHOD_NOT_FOUND) return 404;
  return err.code === HEADER_MISMATCH || err.code === MISSING_CLIENT_CAPABILITY || err.code === UNSUPPORTED_PROTOCOL_VERSION ? 400 : 200;
}

/** What a client is told of a request the hub's stop ended: -32603, as one refused while the hub drains (refuseUnserved). */
export function stoppedError(reason: HubStoppingError): RpcError {
  return new RpcError(INTERNAL_ERROR, reason.message);
}

export function asRpc(err: unknown, log: Logger): RpcError {
  if (err instanceof RpcError) return err;
  // The hub's stop ended it without its own signal (a question to its client withdrawn as the upstreams close: Mrtr.close).
  if (err instanceof HubStoppingError) return stoppedError(err);
  log.error({ err }, 'unexpected error while handling a request');
  return new RpcError(-32603, 'internal error');
}
