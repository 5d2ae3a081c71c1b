/**
 * What the upstream edge adds to a call on its way out: the `_meta` envelope of the era and,
 * for modern Streamable HTTP, the routing headers that must mirror the body (digest §2.2, §6.3).
 */
import { encodeHeaderValue } from '../protocol/header-value.js';
import { jsonText, plainFrozen } from '../protocol/json-text.js';
import { readFileSync } from 'node:fs';
import { MODERN } from '../protocol/era.js';
import { setField } from '../protocol/copy.js';
import {
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_IDEMPOTENCY_KEY,
  META_LOG_LEVEL,
  META_PROTOCOL_VERSION,
} from '../protocol/meta.js';
import type { ClientCapabilities, Implementation, LoggingLevel } from '../protocol/types.js';

function hubVersion(): string {
  // src/upstream/ when run from source, dist/src/upstream/ when built.
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'switchyard' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next candidate
    }
  }
  return '0.0.0';
}

/** The hub's identity as a client of its upstreams. */
export const HUB_CLIENT_INFO: Implementation = Object.freeze({ name: 'switchyard', version: hubVersion() });

/**
 * What the hub declares at a legacy `initialize`: everything it can relay from some downstream
 * client. Whether *this* call's client can do it is decided when a request arrives
 * (CallOptions.onServerRequest); without a handler the upstream gets -32601. `sampling.tools`
 * too: a server refuses tool-enabled sampling itself when it is not declared (SDK 1.x does),
 * so no client that declares it could ever be asked. Not `sampling.context`: a client's
 * "thisServer" context through the hub is every upstream's, not the asking server's.
 * `roots.listChanged`: a client's change is passed on where its principal alone uses the
 * connection (Upstream.rootsChanged).
 */
export const LEGACY_CLIENT_CAPABILITIES: ClientCapabilities = Object.freeze({
  elicitation: { form: {}, url: {} },
  sampling: { tools: {} },
  roots: { listChanged: true },
});

/** Keys the edge owns; never taken from the caller's pass-through `_meta`. */
const OWNED = new Set<string>([
  META_PROTOCOL_VERSION,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  META_IDEMPOTENCY_KEY,
  'progressToken',
]);

function copyPassThrough(into: Record<string, unknown>, from: unknown): void {
  if (typeof from !== 'object' || from === null || Array.isArray(from)) return;
  const src = from as Record<string, unknown>;
  for (const k in src) if (!OWNED.has(k)) setField(into, k, src[k]);
}

export interface EnvelopeInput {
  /** `_meta` that came inside the caller's params, if any (only pass-through keys survive). */
  paramsMeta?: unknown;
  /** CallOptions.meta */
  meta?: Record<string, unknown>;
  progressToken?: string;
  clientCapabilities?: ClientCapabilities;
  logLevel?: LoggingLevel;
  clientInfo: Implementation;
}

/**
 * A client's capabilities in 2026-07-28 terms: `roots` is `{}` there, `listChanged` gone with the
 * notification it announced (digest §2.2), which a legacy client's declaration still carries.
 */
function modernCapabilities(c: ClientCapabilities | undefined): ClientCapabilities {
  if (c === undefined) return {};
  const roots: unknown = c.roots;
  if (roots === null || typeof roots !== 'object' || !('listChanged' in roots)) return c;
  const { listChanged: _gone, ...rest } = roots as Record<string, unknown>;
  return { ...c, roots: rest };
}

/** The `_meta` of a modern request: the required envelope plus pass-through keys. */
export function modernMeta(e: EnvelopeInput): Record<string, unknown> {
  const m: Record<string, unknown> = {};
  copyPassThrough(m, e.paramsMeta);
  copyPassThrough(m, e.meta);
  m[META_PROTOCOL_VERSION] = MODERN;
  m[META_CLIENT_CAPABILITIES] = modernCapabilities(e.clientCapabilities);
  m[META_CLIENT_INFO] = e.clientInfo;
  if (e.logLevel !== undefined) m[META_LOG_LEVEL] = e.logLevel;
  if (e.progressToken !== undefined) m.progressToken = e.progressToken;
  return m;
}

/** The `_meta` of a legacy request: pass-through keys and the progress token, or nothing. */
export function legacyMeta(e: EnvelopeInput): Record<string, unknown> | undefined {
  const m: Record<string, unknown> = {};
  copyPassThrough(m, e.paramsMeta);
  copyPassThrough(m, e.meta);
  if (e.progressToken !== undefined) m.progressToken = e.progressToken;
  for (const _ in m) return m;
  return undefined;
}

/**
 * Params as sent: the caller's params with `_meta` replaced. A shallow copy, so the caller's
 * object is never mutated and large argument trees are not cloned.
 */
export function withMeta(params: Record<string, unknown>, meta: Record<string, unknown> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in params) if (k !== '_meta') setField(out, k, params[k]);
  if (meta !== undefined) out._meta = meta;
  return out;
}

export { encodeHeaderValue };

/**
 * A value's JSON as JSON.stringify writes it as a member of an object; undefined for one the
 * serialiser would leave out or treat apart (undefined, a function, a symbol, a bigint, an object
 * with a toJSON, which is called with its key): only the serialiser can tell those.
 */
function valueJson(v: unknown): string | undefined {
  if (typeof v === 'string') return jsonText(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return JSON.stringify(v);
  if (typeof v !== 'object' || typeof (v as { toJSON?: unknown }).toJSON === 'function') return undefined;
  return JSON.stringify(v);
}

/** copyPassThrough's members of `from`, `"k":v` joined by commas; undefined where the hand-made text could differ from the object's. */
function passThroughJson(from: unknown): string | undefined {
  if (typeof from !== 'object' || from === null || Array.isArray(from)) return '';
  let s = '';
  const src = from as Record<string, unknown>;
  for (const k in src) {
    if (OWNED.has(k)) continue;
    // An array index is ordered first in an object whatever its place: the serialiser tells.
    const c = k.charCodeAt(0);
    if (c >= 0x30 && c <= 0x39) return undefined;
    const v = valueJson(src[k]);
    if (v === undefined) return undefined;
    s = s === '' ? jsonText(k) + ':' + v : s + ',' + jsonText(k) + ':' + v;
  }
  return s;
}

/** The last frozen client info of plain values seen (the hub's own, HUB_CLIENT_INFO) and its JSON, which cannot change. */
let keptInfo: object | undefined;
let keptInfoJson = '';

function clientInfoJson(info: Implementation): string | undefined {
  if (info === keptInfo) return keptInfoJson;
  const json = valueJson(info);
  if (json === undefined || !plainFrozen(info)) return json;
  keptInfo = info;
  keptInfoJson = json;
  return json;
}

const MODERN_VERSION_JSON = `${JSON.stringify(META_PROTOCOL_VERSION)}:${JSON.stringify(MODERN)}`;
const CAPABILITIES_KEY = `${JSON.stringify(META_CLIENT_CAPABILITIES)}:`;
const INFO_KEY = `${JSON.stringify(META_CLIENT_INFO)}:`;
const LEVEL_KEY = `${JSON.stringify(META_LOG_LEVEL)}:`;

/**
 * JSON.stringify(withMeta(params, modernMeta(e)))'s text, for params whose own `_meta` is
 * undefined (a forwarded call's: forwardedParams): the params through the serialiser as they are
 * (no copy), the envelope written by hand, the hub's client info's JSON kept. That envelope was a
 * copy of the params and three objects more for the serialiser: ~4.7k instructions a request
 * more (in-process, callgrind, issue #9). Not for a legacy request, whose envelope (pass-through
 * keys and a progress token) the serialiser writes more cheaply than this (+0.75k measured).
 * Undefined where the text could differ (params with a `_meta`, another prototype or a toJSON; a
 * pass-through key that is an array index; a value only the serialiser can write): withMeta
 * and stringify then. Held to withMeta's text by a property test
 * (test/unit/upstream-envelope-json.test.ts).
 */
export function modernParamsJson(params: Record<string, unknown>, e: EnvelopeInput): string | undefined {
  if (params._meta !== undefined || e.paramsMeta !== undefined || Object.getPrototypeOf(params) !== Object.prototype || typeof params.toJSON === 'function') return undefined;
  const through = passThroughJson(e.meta);
  const caps = valueJson(modernCapabilities(e.clientCapabilities));
  const info = clientInfoJson(e.clientInfo);
  if (through === undefined || caps === undefined || info === undefined) return undefined;
  let meta = (through === '' ? '' : through + ',') + MODERN_VERSION_JSON + ',' + CAPABILITIES_KEY + caps + ',' + INFO_KEY + info;
  if (e.logLevel !== undefined) {
    const level = valueJson(e.logLevel);
    if (level === undefined) return undefined;
    meta += ',' + LEVEL_KEY + level;
  }
  if (e.progressToken !== undefined) {
    const token = valueJson(e.progressToken);
    if (token === undefined) return undefined;
    meta += ',"progressToken":' + token;
  }
  const json = JSON.stringify(params);
  // (No slice of `meta`: a string made by joins would be copied flat first.)
  const m = '"_meta":{' + meta + '}';
  return json.length === 2 ? '{' + m + '}' : json.slice(0, -1) + ',' + m + '}';
}

/** The value of `Mcp-Name` for a method that needs one, else undefined. */
export function mcpNameFor(method: string, params: Record<string, unknown>): string | undefined {
  let v: unknown;
  switch (method) {
    case 'tools/call':
    case 'prompts/get':
      v = params.name;
      break;
    case 'resources/read':
      v = params.uri;
      break;
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel':
      v = params.taskId;
      break;
    default:
      return undefined;
  }
  return typeof v === 'string' ? encodeHeaderValue(v) : undefined;
}
