/**
 * What a 2026-07-28 message's envelope must be before it is served: its headers matching its
 * body (digest §2.2, §6.3) and the `_meta` keys the hub reads well formed.
 */
import { MODERN_VERSIONS } from '../protocol/era.js';
import { HEADER_MISMATCH, INVALID_PARAMS, RpcError, UNSUPPORTED_PROTOCOL_VERSION } from '../protocol/errors.js';
import type { Request } from '../protocol/jsonrpc.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION } from '../protocol/meta.js';
import { capabilitiesProblem, implementationProblem } from '../protocol/client-capabilities.js';
import { decodeHeaderValue, plainHeaderValue } from '../protocol/header-value.js';
import { shownName, shownVersion } from '../protocol/shown-value.js';
import { methodTable } from '../protocol/method-table.js';
import { LOG_LEVELS, type LoggingLevel } from '../protocol/types.js';
import type { Exchange } from './exchange.js';

type Params = Record<string, unknown>;

/** The param each method's Mcp-Name header repeats (methodTable: no prototype, as the endpoint's FAMILY). */
const NAMED = methodTable<'name' | 'uri'>({ 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' });

/** Header and `_meta` checks of digest §2.2 / §6.3; null when the request is well formed. */
export function checkModern(req: Request, ex: Exchange): { error: RpcError; status: number } | null {
  const bad = checkModernHeaders(req.method, req.params, ex);
  if (bad) return bad;
  const meta = (req.params?._meta ?? {}) as Params;
  const caps = meta[META_CLIENT_CAPABILITIES];
  if (caps === undefined || caps === null || typeof caps !== 'object' || Array.isArray(caps))
    return { status: 400, error: new RpcError(INVALID_PARAMS, `missing required _meta key: ${META_CLIENT_CAPABILITIES}`) };
  const capsBad = capabilitiesProblem(caps);
  if (capsBad) return { status: 400, error: new RpcError(INVALID_PARAMS, `invalid _meta ${META_CLIENT_CAPABILITIES}: ${capsBad}`) };
  const info = meta[META_CLIENT_INFO];
  const infoBad = info === undefined ? undefined : implementationProblem(info);
  if (infoBad) return { status: 400, error: new RpcError(INVALID_PARAMS, `invalid _meta ${META_CLIENT_INFO}: ${infoBad}`) };
  // Checked here, whatever serves the request: a legacy upstream would take any level.
  const level = meta[META_LOG_LEVEL];
  if (level !== undefined && !LOG_LEVELS.includes(level as LoggingLevel))
    return { status: 200, error: new RpcError(INVALID_PARAMS, `invalid ${META_LOG_LEVEL}: ${shownName(level)}`) };
  // A ProgressToken is a string or an integer: anything else would be echoed in every progress notification.
  const token = meta.progressToken;
  if (token !== undefined && typeof token !== 'string' && !Number.isSafeInteger(token))
    return { status: 200, error: new RpcError(INVALID_PARAMS, 'invalid _meta progressToken: a string or an integer') };
  if (NAMED[req.method] !== undefined) return roundFieldsProblem(req.params);
  return null;
}

/**
 * The MRTR fields of a request that may be a retry (tools/call, prompts/get, resources/read:
 * InputResponseRequestParams): `inputResponses` a map of answers, `requestState` a string. Of
 * another shape the request is malformed (-32602, in-band as the SDK v2 server answers a request
 * that breaks its schema): an array of answers was forwarded as a retry's, or, at a call parked
 * here, read as no answers and asked again. A null `inputResponses` is taken as none and left
 * out (clients that write absent fields as null), as null `arguments` are.
 */
function roundFieldsProblem(params: Params | undefined): { error: RpcError; status: number } | null {
  if (params === undefined) return null;
  const answers = params.inputResponses;
  if (answers === null) delete params.inputResponses;
  else if (answers !== undefined && (typeof answers !== 'object' || Array.isArray(answers)))
    return { status: 200, error: new RpcError(INVALID_PARAMS, 'Invalid params: inputResponses must be an object (the answers, by the keys of inputRequests)') };
  const state = params.requestState;
  if (state !== undefined && typeof state !== 'string') return { status: 200, error: new RpcError(INVALID_PARAMS, 'Invalid params: requestState must be a string (as the input_required result gave it)') };
  return null;
}

/**
 * The version in `_meta` and the headers every modern POST carries. A notification's POST is
 * held to headers only where it has them: the 2026 revision defines no header for one (and no
 * client notification over HTTP), and the SDK v2 client POSTs its listen teardown's
 * notifications/cancelled without Mcp-Method; a header it does send must agree with its body.
 */
export function checkModernHeaders(method: string, params: Params | undefined, ex: Exchange, notification = false): { error: RpcError; status: number } | null {
  const req = { method, params };
  const meta = (req.params?._meta ?? {}) as Params;
  // A notification needs no _meta (2026-07-28 NotificationParams): without a version of its own, its header's stands.
  const own = meta[META_PROTOCOL_VERSION];
  // A version that is no string is no version (the schema's `_meta` key is a string): the `_meta`
  // field is malformed (-32602, as the SDK v2 server answers), not a header that fails to match it
  // (-32020 'header 2026-07-28 does not match _meta 5', which told the client to fix its header).
  if (own !== undefined && typeof own !== 'string')
    return { status: 400, error: new RpcError(INVALID_PARAMS, `invalid _meta ${META_PROTOCOL_VERSION}: a version string, not ${shownVersion(own)}`) };
  const version = own === undefined && notification && ex.transport === 'http' ? ex.header('mcp-protocol-version') : own;
  // Header ≠ body is a malformed request whatever the version, so it is checked first.
  if (ex.transport === 'http') {
    const hv = ex.header('mcp-protocol-version');
    if (hv !== version && !(notification && hv === undefined))
      return { status: 400, error: new RpcError(HEADER_MISMATCH, hv === undefined ? 'missing MCP-Protocol-Version header' : `MCP-Protocol-Version header ${shownVersion(hv)} does not match _meta ${shownVersion(version)}`) };
  }
  if (typeof version !== 'string' || !(MODERN_VERSIONS as readonly string[]).includes(version)) return unsupportedVersion(version);
  if (ex.transport === 'http') {
    const hm = ex.header('mcp-method');
    // A method no header can carry as it is (the spec gives Mcp-Method no sentinel) has nothing
    // for one to repeat, as a name that is no string: it is answered as its method decides (no
    // MCP method is such: -32601, 404), not told to fix a header it could not write (`connect`
    // failed to send one, and answered -32603 'hub not reachable'). Checked on a mismatch only.
    if (hm !== req.method && !(notification && hm === undefined) && plainHeaderValue(req.method))
      return { status: 400, error: new RpcError(HEADER_MISMATCH, hm === undefined ? 'missing Mcp-Method header' : `Mcp-Method header ${shownName(hm)} does not match method ${shownName(req.method)}`) };
    const field = NAMED[req.method];
    if (field) {
      const raw = ex.header('mcp-name');
      const expected = req.params?.[field];
      const got = raw === undefined ? undefined : decodeHeaderValue(raw);
      if (got === null) return { status: 400, error: new RpcError(HEADER_MISMATCH, 'Mcp-Name header has an invalid encoding') };
      // Mcp-Name repeats params.name or params.uri, a string (digest §6.3): of another type, or
      // absent, there is nothing for a header to repeat, and the request is malformed in its
      // params (-32602, where the method checks them; the SDK v2 server compares only a string),
      // not in its headers (-32020, which told the client to fix a header it could not write).
      // So too a string with a lone surrogate: it has no UTF-8, so no sentinel can carry it
      // (`switchyard connect` mirrored one as U+FFFD, and its stdio client was told of a header it
      // never sent). Checked on a mismatch only: the usual request pays nothing for it.
      if (got !== expected && typeof expected === 'string' && expected.isWellFormed())
        return { status: 400, error: new RpcError(HEADER_MISMATCH, raw === undefined ? 'missing Mcp-Name header' : `Mcp-Name header does not match params.${field}`) };
    }
  }
  return null;
}

/**
 * The -32022 (HTTP 400) of a version the hub serves none of: `data.supported` is exactly what
 * server/discover lists (legacy versions are reached through initialize); `data.requested` a
 * string, as the schema has it ({supported: string[], requested: string}), whatever was sent,
 * cut as the message quotes it (shownVersion): a client chose its length.
 */
export function unsupportedVersion(version: unknown): { error: RpcError; status: number } {
  const requested = shownVersion(version);
  return { status: 400, error: new RpcError(UNSUPPORTED_PROTOCOL_VERSION, `unsupported protocol version: ${requested}`, { supported: [...MODERN_VERSIONS], requested }) };
}
