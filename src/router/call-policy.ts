/**
 * The per-call limits the router hands an upstream request: timeouts (the server's, or a
 * caller's own bounded by the server's hard cap) and when the call may be sent again.
 *
 * `_meta["dev.switchyard/timeoutMs"]` on a request: the most this call may take in all,
 * progress or not. It can shorten the server's `maxTotalTimeoutMs`, never lengthen it; the
 * server's `timeoutMs` still bounds each silence between progress notifications. The key is
 * the hub's own and is not passed upstream.
 */
import type { ServerConfig } from '../config/types.js';
import type { CallOptions } from '../upstream/types.js';

export const META_TIMEOUT = 'dev.switchyard/timeoutMs';

type Meta = Record<string, unknown> | undefined;

/** The caller's own limit, if it asked for a usable one. */
function requestedMs(meta: Meta): number | undefined {
  const v = meta?.[META_TIMEOUT];
  return typeof v === 'number' && Number.isFinite(v) && v >= 1 ? Math.floor(v) : undefined;
}

/** `_meta` as passed upstream: without the hub's own key. */
export function withoutHubKeys(meta: Meta): Meta {
  if (!meta || !(META_TIMEOUT in meta)) return meta;
  const out = { ...meta };
  delete out[META_TIMEOUT];
  return Object.keys(out).length ? out : undefined;
}

/** The most one call to `config`'s server may take in all: the server's cap, or the caller's own limit under it. */
export function totalTimeoutMs(config: ServerConfig, meta: Meta): number {
  const cap = config.maxTotalTimeoutMs;
  const asked = requestedMs(meta);
  return asked === undefined ? cap : Math.min(asked, cap);
}

/** The most one call to `config`'s server may go without an answer or progress: the server's, or less when the caller's total is less. */
export function callTimeoutMs(config: ServerConfig, meta: Meta): number {
  return Math.min(config.timeoutMs, totalTimeoutMs(config, meta));
}

/** The retry rule of a call that is not a tool's (tools/call's: toolRetry): never sent again once it may have run. */
export function serverRetry(config: ServerConfig): NonNullable<CallOptions['retry']> {
  return { maxAttempts: config.retry.maxAttempts, budgetMs: config.retry.budgetMs, idempotent: false };
}

function claimed(annotations: unknown, key: 'idempotentHint' | 'readOnlyHint'): unknown {
  return annotations !== null && typeof annotations === 'object' ? (annotations as Record<string, unknown>)[key] : undefined;
}

/**
 * A tool may be sent again after an attempt that may have run only when repeating it is
 * harmless by trusted configuration: the operator's own annotations in the config, or, for a
 * hint the config does not set, the server's annotation when the operator marked the server
 * trusted. An untrusted server's hints are never enough (it could call a delete "idempotent").
 * Read-only implies idempotent.
 */
export function toolIsIdempotent(config: ServerConfig, upstreamName: string, tool: Record<string, unknown>): boolean {
  const override = config.tools.byName[upstreamName]?.annotations;
  const trusted = config.trust === 'trusted';
  const pick = (key: 'idempotentHint' | 'readOnlyHint'): unknown => override?.[key] ?? (trusted ? claimed(tool.annotations, key) : undefined);
  return pick('idempotentHint') === true || pick('readOnlyHint') === true;
}

/** The retry rule of a tools/call. */
export function toolRetry(config: ServerConfig, upstreamName: string, tool: Record<string, unknown>): CallOptions['retry'] {
  return { maxAttempts: config.retry.maxAttempts, budgetMs: config.retry.budgetMs, idempotent: toolIsIdempotent(config, upstreamName, tool) };
}
