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
import { LEGACY } from '../protocol/era.js';

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
 * The first revision with resource_link content, structuredContent and outputSchema
 * (schema/2025-06-18): a client that negotiated an older one knows none of them.
 */
const STRUCTURED_FROM = '2025-06-18';
/** The first revision with audio content (schema/2025-03-26). */
const AUDIO_FROM = '2025-03-26';

/**
 * A core result as a 2025-11-25 client expects it: no modern-only fields, and modern shapes the
 * 2025 types cannot carry (non-object outputSchema / structuredContent) dropped (digest §8.11).
 * `version`: the revision the client's session negotiated; one older than 2025-06-18 gets what
 * its revision defines (olderResult). The versions compare as their ISO dates.
 */
export function toLegacyResult(method: string, r: Result, version: string = LEGACY): Result {
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
      // Before 2025-06-18 there is no outputSchema: an SDK client that read one would refuse
      // every result of that tool, which reaches such a client without structuredContent.
      const output = os === undefined || os.type !== 'object' || version < STRUCTURED_FROM ? undefined : withObjectProperties(os);
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
  if (version < STRUCTURED_FROM) olderResult(method, out, version);
  return out;
}

/**
 * `out` (a copy of its own, whose arrays are shared) as a revision before 2025-06-18 defines it:
 * a tool result's or prompt message's content is text, image and embedded resources (and audio
 * from 2025-03-26): a resource_link is a text item naming it (and audio before 2025-03-26 one
 * saying it was left out), which such a client's schema takes, where a content type it does not
 * know fails the whole result; a tool result has no structuredContent, whose JSON is added as text
 * when no text item carries it.
 */
function olderResult(method: string, out: Result, version: string): void {
  if (method === 'tools/call') {
    const content = Array.isArray(out.content) ? (out.content as unknown[]) : undefined;
    let blocks = content === undefined ? undefined : olderBlocks(content, version);
    if ('structuredContent' in out) {
      const sc = out.structuredContent;
      delete out.structuredContent;
      // A text item of the upstream's own may carry it (the spec's SHOULD); one made here of a link does not.
      if (isObj(sc) && !(content ?? []).some((b) => isObj(b) && b.type === 'text')) blocks = [...(blocks ?? []), { type: 'text', text: JSON.stringify(sc) }];
    }
    if (blocks !== content) out.content = blocks;
  } else if (method === 'prompts/get' && Array.isArray(out.messages)) {
    const messages = out.messages as unknown[];
    let changed = false;
    const older = messages.map((m) => {
      if (!isObj(m)) return m;
      const content = olderBlock(m.content, version);
      if (content === m.content) return m;
      changed = true;
      return { ...m, content };
    });
    if (changed) out.messages = older;
  }
}

/** `blocks`, or a new array if a block had to change (olderBlock). */
function olderBlocks(blocks: unknown[], version: string): unknown[] {
  let out: unknown[] | undefined;
  blocks.forEach((b, i) => {
    const older = olderBlock(b, version);
    if (older !== b) (out ??= blocks.slice())[i] = older;
  });
  return out ?? blocks;
}

/** A content block as `version` (before 2025-06-18) knows it; the block itself if it does. */
function olderBlock(b: unknown, version: string): unknown {
  if (!isObj(b)) return b;
  let text: string;
  if (b.type === 'resource_link') {
    const name = typeof b.title === 'string' && b.title !== '' ? b.title : typeof b.name === 'string' ? b.name : undefined;
    const about = [String(b.uri), typeof b.mimeType === 'string' ? b.mimeType : undefined].filter((x) => x !== undefined).join(', ');
    text = `${name !== undefined ? `${name} (resource link: ${about})` : `Resource link: ${about}`}${typeof b.description === 'string' && b.description !== '' ? `: ${b.description}` : ''}`;
  } else if (b.type === 'audio' && version < AUDIO_FROM) {
    text = `[audio${typeof b.mimeType === 'string' ? ` (${b.mimeType})` : ''} left out: protocol version ${version} has no audio content]`;
  } else return b;
  // Annotations and _meta are the text item's too (every revision has them on text).
  const item: Result = { type: 'text', text };
  if (b.annotations !== undefined) item.annotations = b.annotations;
  if (b._meta !== undefined) item._meta = b._meta;
  return item;
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
