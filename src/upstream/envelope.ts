/**
 * What the upstream edge adds to a call on its way out: the `_meta` envelope of the era and,
 * for modern Streamable HTTP, the routing headers that must mirror the body (digest §2.2, §6.3).
 */
import { encodeHeaderValue } from '../protocol/header-value.js';
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
