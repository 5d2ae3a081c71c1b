import { setField } from './copy.js';

/** Reserved `_meta` keys of the 2026-07-28 era (digest §2.2). */
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** Hub-specific key carrying an idempotency key on tools/call. */
export const META_IDEMPOTENCY_KEY = 'dev.switchyard/idempotency-key';

/** Keys the edges own: they are rewritten per hop, never passed through. */
const ENVELOPE_KEYS = new Set([
  META_PROTOCOL_VERSION,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  'progressToken',
]);

/** The `_meta` keys that travel with a call across the hub unchanged (trace context, third-party keys). */
export function passThroughMeta(meta: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!meta) return undefined;
  let out: Record<string, unknown> | undefined;
  for (const k in meta) {
    if (ENVELOPE_KEYS.has(k) || k === META_IDEMPOTENCY_KEY) continue;
    setField((out ??= {}), k, meta[k]);
  }
  return out;
}
