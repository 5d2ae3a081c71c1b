/**
 * W3C Trace Context (`traceparent`, https://www.w3.org/TR/trace-context/) for the hub as one hop
 * of a trace: a request's `_meta.traceparent` names the caller's span; the hub is a span of its
 * own under it (same trace id, a new span id, the flags less reserved bits), and what it
 * forwards names the hub's span as the parent. Without a usable traceparent the hub starts
 * the trace, so hubs in a chain still share one trace id. The ledger records each request's span (trace id, span id,
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

/** The flags version 00 defines: sampled (0x01) and, in Level 2, random trace id (0x02). */
const SAMPLED = 0x01;
const V00_FLAGS = 0x03;
const FLAGS_TEXT = ['00', '01', '02', '03'] as const;

/** A traceparent's first 55 characters: version, trace id, parent id, flags (lowercase hex only, HEXDIGLC). */
const FIELDS = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}/;

/**
 * The span a `traceparent` value names, or undefined when it is none the spec accepts: not a
 * string, version `ff`, a trace id or parent id of all zeros, anything not lowercase hex, a
 * version-00 value of any length but 55. A later version is read as the spec says: its first
 * 55 characters as version 00, followed by nothing or a dash. Reserved flags are cleared.
 */
export function parseTraceparent(v: unknown): TraceParent | undefined {
  if (typeof v !== 'string' || v.length < V00_LENGTH || !FIELDS.test(v)) return undefined;
  const v00 = v.startsWith('00');
  if (v00 ? v.length !== V00_LENGTH : v.startsWith('ff') || (v.length > V00_LENGTH && v.charCodeAt(V00_LENGTH) !== 45)) return undefined;
  const traceId = v.slice(3, 35);
  const parentId = v.slice(36, 52);
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return undefined;
  // Version 00 defines sampled (and Level 2 random, which describes the trace id kept); its other
  // bits are reserved and the spec has them set to zero. A later version's flags may mean
  // something else there: only the sampled bit is read.
  const flags = FLAGS_TEXT[parseInt(v.slice(53, 55), 16) & (v00 ? V00_FLAGS : SAMPLED)]!;
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

/**
 * A trace id an operator gave (`ledger --trace-id`, `/admin/ledger?traceId=`), as the ledger
 * stores it: lower case, so one pasted in upper case is the same id; undefined when it is no
 * trace id (32 hex digits), which would match no row and read as "no such calls".
 */
export function traceIdQuery(text: string): string | undefined {
  return /^[0-9a-fA-F]{32}$/.test(text) ? text.toLowerCase() : undefined;
}

/** The traceparent naming `span` as the parent of what it sends on (always version 00). */
export function formatTraceparent(span: TraceSpan): string {
  return `00-${span.traceId}-${span.spanId}-${span.flags}`;
}

/** Where an HTTP request's headers are read (a downstream Exchange); stdio has none. */
export interface HeaderSource {
  header(name: string): string | undefined;
}

/**
 * The hub's span for a request whose `_meta` is `meta` (anything a client sent). The `_meta`
 * traceparent is MCP's; without one, the HTTP request's `traceparent` header counts: an
 * OpenTelemetry-instrumented HTTP client (fetch, undici) sends it there, and its calls started
 * a trace of their own here, cut off from the client's.
 */
export function spanOfMeta(meta: unknown, http?: HeaderSource, ids: IdSource = randomHex): TraceSpan {
  let tp = meta !== null && typeof meta === 'object' ? (meta as Record<string, unknown>).traceparent : undefined;
  if (tp === undefined) tp = http?.header('traceparent');
  return childSpan(tp === undefined ? undefined : parseTraceparent(tp), ids);
}

function nonZero(ids: IdSource, bytes: 8 | 16, zero: string): string {
  let id = ids(bytes);
  // All zeros is the spec's invalid id: 1 in 2^64 draws, drawn again.
  while (id === zero) id = ids(bytes);
  return id;
}

/**
 * Random bytes drawn 4 KiB at a time and hex-encoded as one string, ids being cut from it (one
 * call into the kernel's generator and one encoding per 170 new traces, or 512 child spans): a
 * few tens of ns an id, where a Buffer's toString('hex') per id cost two to four times that and
 * crypto.randomBytes per id a call into the generator each. No byte is handed out twice. An id
 * is a slice of the 8 KiB string, which lives as long as an id cut from it: a few per
 * request in flight at most.
 */
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolHex = '';
let taken = POOL_BYTES;

export function randomHex(bytes: 8 | 16): string {
  if (taken + bytes > POOL_BYTES) {
    randomFillSync(pool);
    poolHex = pool.toString('hex');
    taken = 0;
  }
  const s = poolHex.slice(2 * taken, 2 * (taken + bytes));
  taken += bytes;
  return s;
}
