import { setField } from './copy.js';
import { formatTraceparent, type HeaderSource, type TraceSpan } from './trace-context.js';

/** Reserved `_meta` keys of the 2026-07-28 era (digest §2.2). */
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
export const META_LOG_LEVEL = 'io.modelcontextprotocol/logLevel';
export const META_SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
export const META_SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** Hub-specific key carrying an idempotency key on tools/call. */
export const META_IDEMPOTENCY_KEY = 'dev.switchyard/idempotency-key';
/**
 * HTTP header of the hub's answer to an initialize or a server/discover when it honours
 * idempotency keys (value `kept`): `switchyard connect` sends a keyed tools/call again after a
 * lost kept-alive connection only then, since a hub that keeps no keys would run it twice.
 */
export const KEYS_KEPT_HEADER = 'switchyard-idempotency-keys';
/**
 * The largest request body the hub reads (listen.maxBodyBytes), said on its HTTP handshake answers:
 * `switchyard connect` reads its client's lines up to it (beyond its own 64 MiB), as `stdio` does.
 */
export const MAX_BODY_HEADER = 'switchyard-max-body-bytes';
/**
 * How long the hub lets calls in flight answer when it stops (listen.drainTimeoutMs), said on its
 * HTTP handshake answers: `switchyard connect` gives its client's calls as long at stdin EOF, as
 * `stdio` does.
 */
export const DRAIN_MS_HEADER = 'switchyard-drain-timeout-ms';

/** Keys the edges own: they are rewritten per hop, never passed through. */
const ENVELOPE_KEYS = new Set([
  META_PROTOCOL_VERSION,
  META_CLIENT_CAPABILITIES,
  META_CLIENT_INFO,
  META_LOG_LEVEL,
  'progressToken',
]);

/**
 * The `_meta` keys that travel with a call across the hub (trace context, third-party keys), in
 * the copy the edge makes anyway. With `span` (the hub's span for the request, see
 * trace-context.ts) `traceparent` names it, the caller's parent of it; `tracestate` goes on
 * unchanged under a caller's trace, and is dropped when the hub started a new one (the spec: a
 * traceparent that cannot be parsed restarts the trace and deletes tracestate, whose entries
 * describe the trace the upstream would no longer be in). `baggage` is no part of the trace's
 * identity (a W3C specification of its own) and always goes on. A trace `span` continues from
 * the HTTP `traceparent` header (`_meta` naming none, see spanOfMeta) goes on with that
 * request's `tracestate` header: the vendors' entries of the client's trace, which its tracer
 * sends beside the traceparent.
 */
export function passThroughMeta(meta: Record<string, unknown> | undefined, span?: TraceSpan, http?: HeaderSource): Record<string, unknown> | undefined {
  let out: Record<string, unknown> | undefined;
  if (span) {
    out = { traceparent: formatTraceparent(span) };
    if (http && span.parentSpanId !== undefined && meta?.traceparent === undefined) {
      const state = http.header('tracestate');
      if (state) out.tracestate = state;
    }
  }
  if (!meta) return out;
  const restarted = span !== undefined && span.parentSpanId === undefined;
  for (const k in meta) {
    if (ENVELOPE_KEYS.has(k) || k === META_IDEMPOTENCY_KEY) continue;
    if (span && (k === 'traceparent' || (k === 'tracestate' && restarted))) continue;
    setField((out ??= {}), k, meta[k]);
  }
  return out;
}
