/** The ledger's boundary types. The router records every call; the CLI reads. */
export const OUTCOMES = ['in_flight', 'ok', 'input_required', 'tool_error', 'rpc_error', 'timeout', 'cancelled', 'denied', 'unavailable', 'replayed', 'unknown'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/**
 * A `replayed` row of a kept error (errorKind set) is the error its client got again: shown and
 * selected as `replayed_error`, the outcome label /metrics counts it under, so that `replayed`
 * (in the table, `ledger stats` and `--outcome`) is a replayed success only, as on /metrics.
 */
export const REPLAYED_ERROR = 'replayed_error';
/** The outcomes an operator reads and filters by (`ledger query|tail|stats`, /metrics): the stored ones and `replayed_error`. */
export const SHOWN_OUTCOMES = [...OUTCOMES, REPLAYED_ERROR] as const;
export type ShownOutcome = (typeof SHOWN_OUTCOMES)[number];

export function shownOutcome(outcome: Outcome, errorKind: string | null | undefined): ShownOutcome {
  return outcome === 'replayed' && errorKind ? REPLAYED_ERROR : outcome;
}

/** Which layer a failure came from; kept apart as the issue asks. */
export type ErrorKind = 'transport' | 'jsonrpc' | 'tool' | 'policy' | null;

export interface AuditBegin {
  ts: number; // epoch ms
  requestId: string; // downstream JSON-RPC id, as stored (requestIdText: a string of a number's text in its JSON form)
  principal: string; // 'anonymous' when unauthenticated
  /** The tool group whose endpoint (`/mcp/<group>`, `stdio --group`) the request came through. */
  group?: string;
  clientAddress?: string;
  clientEra: string;
  clientInfo?: { name?: string; version?: string } | undefined;
  method: string;
  hubName?: string; // the tool/prompt name as the client saw it, or the resource uri
  server?: string;
  upstreamName?: string;
  upstreamEra?: string;
  idempotencyKey?: string;
  argsHash?: string; // sha256 hex of canonical arguments
  requestBytes?: number;
  /** Only stored when ledger.storeBodies is on (redacted by the ledger). */
  args?: unknown;
  /** The request's span in a W3C trace (see src/protocol/trace-context.ts): its trace id, the hub's span id, the caller's span id. */
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
}

export interface AuditEnd {
  outcome: Exclude<Outcome, 'in_flight'>;
  errorKind?: ErrorKind;
  errorCode?: number | null;
  errorMessage?: string;
  latencyMs: number;
  responseBytes?: number;
  /** Only stored when ledger.storeBodies is on (redacted by the ledger). */
  result?: unknown;
  /**
   * Not stored: this request was answered `input_required`, though its row carries the call's
   * end (a parked call that ended before its client retried): /metrics counts the round too.
   */
  answeredInputRequired?: true;
  /** Late facts, e.g. the upstream chosen after routing. */
  server?: string;
  upstreamName?: string;
  upstreamEra?: string;
}

export interface AuditHandle {
  readonly rowId: number;
  /**
   * Resolves once the in-flight row is committed (rejects when it could not be written): a
   * caller that waited since begin() checks it before forwarding. Absent: nothing to wait for.
   */
  readonly written?: Promise<void>;
  /** True when `written` was settled as begin() returned (its line written at once): nothing to wait a turn for. */
  readonly writtenNow?: boolean;
  /** Resolves when the completed row is committed (group commit). */
  finish(end: AuditEnd): Promise<void>;
}

/**
 * Whose an idempotency key is: a principal's (a plain string: on `/mcp` and a plain stdio), or a
 * principal's on one tool group's endpoint. The group is an authorization boundary (an API key
 * limited to groups), so a key used through one group is unknown through another.
 */
export type KeyOwner = string | { principal: string; group?: string };

/** Result of claiming an idempotency key for a tools/call. */
export type IdempotencyClaim =
  | { kind: 'new' } // caller must run the call, then complete() or abandon()
  // Same call in flight: wait for its answer. `join` counts the wait (its return ends it), so
  // the first call is not cancelled under a retry that waits for it (IdempotencyStore.awaited).
  | { kind: 'wait'; result: Promise<StoredAnswer>; join?: () => () => void }
  | { kind: 'replay'; answer: StoredAnswer } // completed earlier: replay, do not call upstream
  | { kind: 'conflict'; tool: string } // same key, other tool or arguments
  | { kind: 'unknown' }; // an earlier attempt died mid-call: outcome unknown

/** What is replayed: either a result object or a JSON-RPC error. */
/** `upstream`: the error is the upstream's answer, not one the hub raised (replayed as such). */
export type StoredAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown }; upstream?: true };

/** The ledger's counters for metrics. */
export interface LedgerCounters {
  /** Writes of the pending file (group commits). */
  batches: number;
  /** Audit rows (begun or finished) those writes carried. */
  writes: number;
  /** Ingest threads that ended and were replaced. */
  threadRestarts: number;
  /** Batches handed to the ingest thread and not yet committed in SQLite. */
  batchesUnapplied: number;
  /** Writes of the pending files that failed (a full disk, an I/O error). */
  writeFailures: number;
  /** The last write failed (its error code, and when: monotonicNow(), for how long ago only): calls are refused until one succeeds. */
  writeFailing?: { code: string; at: number };
}
