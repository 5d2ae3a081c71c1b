/**
 * W3C Trace Context (`traceparent`, https://www.w3.org/TR/trace-context/) for the hub as one hop
 * of a trace: a request's `_meta.traceparent` names the caller's span; the hub is a span of its
 * own under it (same trace id, a new span id, the flags kept), and what it forwards names the
 * hub's span as the parent. Without a usable traceparent the hub starts the trace, so hubs in a
 * chain still share one trace id. The ledger records each request's span (trace id, span id,
 * the parent's span id): rows of one call in two hubs' ledgers share the trace id.
 */
import { randomFillSync } from 'node:crypto';

/** A caller's span as its traceparent names it. */
export interface TraceParent {
  traceId: string;
  parentId: string;
  /** Two lowercase hex digits. */
  flags: string;
}

/** The hub's span for one request. */
export interface TraceSpan {
  traceId: string;
  spanId: string;
  /** The caller's span id; undefined when the hub started the trace. */
  parentSpanId?: string;
  flags: string;
}

/**
 * Flags of a trace the hub starts: sampled. The bit says the caller "may have recorded trace
 * data", and the hub records every request in its ledger under this trace id; a parent-based
 * sampler upstream (OpenTelemetry's default) then records its side too, which is what lets the
 * two be put together. A caller's own flags are always kept.
 */
export const STARTED_FLAGS = '01';

const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
/** `version-traceid-parentid-flags`: 2 + 32 + 16 + 2 hex digits and three dashes. */
const V00_LENGTH = 55;

/** Whether s[from, to) is lowercase hex (the spec's HEXDIGLC: upper case is invalid). */
function lowerHex(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * The span a `traceparent` value names, or undefined when it is none the spec accepts: not a
 * string, version `ff` or not hex, a trace id or parent id of all zeros, anything not lowercase
 * hex, a version-00 value of any length but 55. A later version is read as the spec says: its
 * first 55 characters as version 00, followed by nothing or a dash, and of its flags only the
 * sampled bit (the others may mean something else there).
 */
export function parseTraceparent(v: unknown): TraceParent | undefined {
  if (typeof v !== 'string' || v.length < V00_LENGTH) return undefined;
  if (!lowerHex(v, 0, 2) || v.charCodeAt(2) !== 45 || v.charCodeAt(35) !== 45 || v.charCodeAt(52) !== 45) return undefined;
  const version = v.slice(0, 2);
  if (version === 'ff') return undefined;
  if (version === '00' ? v.length !== V00_LENGTH : v.length > V00_LENGTH && v.charCodeAt(V00_LENGTH) !== 45) return undefined;
  if (!lowerHex(v, 3, 35) || !lowerHex(v, 36, 52) || !lowerHex(v, 53, 55)) return undefined;
  const traceId = v.slice(3, 35);
  const parentId = v.slice(36, 52);
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return undefined;
  const flags = version === '00' ? v.slice(53, 55) : (parseInt(v.slice(53, 55), 16) & 1) === 1 ? '01' : '00';
  return { traceId, parentId, flags };
}

/** Where new ids come from: `bytes` random bytes as lowercase hex (tests give their own). */
export type IdSource = (bytes: 8 | 16) => string;

/** The hub's span under `parent`, or the first span of a new trace without one. */
export function childSpan(parent: TraceParent | undefined, ids: IdSource = randomHex): TraceSpan {
  if (parent === undefined) return { traceId: nonZero(ids, 16, ZERO_TRACE), spanId: nonZero(ids, 8, ZERO_SPAN), flags: STARTED_FLAGS };
  let spanId = nonZero(ids, 8, ZERO_SPAN);
  // A span id equal to its parent's would make the two one span to whoever reads the trace.
  while (spanId === parent.parentId) spanId = nonZero(ids, 8, ZERO_SPAN);
  return { traceId: parent.traceId, spanId, parentSpanId: parent.parentId, flags: parent.flags };
}

/** The traceparent naming `span` as the parent of what it sends on (always version 00). */
export function formatTraceparent(span: TraceSpan): string {
  return `00-${span.traceId}-${span.spanId}-${span.flags}`;
}

/** The hub's span for a request whose `_meta` is `meta` (anything a client sent). */
export function spanOfMeta(meta: unknown, ids: IdSource = randomHex): TraceSpan {
  const tp = meta !== null && typeof meta === 'object' ? (meta as Record<string, unknown>).traceparent : undefined;
  return childSpan(tp === undefined ? undefined : parseTraceparent(tp), ids);
}

function nonZero(ids: IdSource, bytes: 8 | 16, zero: string): string {
  let id = ids(bytes);
  // All zeros is the spec's invalid id: 1 in 2^64 draws, drawn again.
  while (id === zero) id = ids(bytes);
  return id;
}

/**
 * Random bytes drawn 4 KiB at a time and handed out as hex (one call into the kernel's
 * generator per 170 new traces, or 512 child spans), where crypto.randomBytes would make one
 * per id. No byte of the pool is handed out twice.
 */
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let taken = POOL_BYTES;

export function randomHex(bytes: 8 | 16): string {
  if (taken + bytes > POOL_BYTES) {
    randomFillSync(pool);
    taken = 0;
  }
  const s = pool.toString('hex', taken, taken + bytes);
  taken += bytes;
  return s;
}
