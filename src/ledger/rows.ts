import { REPLAYED_ERROR, type ErrorKind, type Outcome } from './types.js';

/** An audit row as the database holds it (snake_case columns). */
export interface AuditDbRow {
  id: number;
  ts: number;
  request_id: string;
  principal: string;
  client_address: string | null;
  client_era: string;
  client_name: string | null;
  client_version: string | null;
  method: string;
  hub_name: string | null;
  server: string | null;
  upstream_name: string | null;
  upstream_era: string | null;
  outcome: string;
  error_kind: string | null;
  error_code: number | null;
  error_message: string | null;
  latency_ms: number | null;
  request_bytes: number | null;
  response_bytes: number | null;
  idempotency_key: string | null;
  args_hash: string | null;
  args_json: string | null;
  result_json: string | null;
  seq: number | null;
  hash: string | null;
  /** Absent in a ledger before migration 0013 (read as it is by the CLI). */
  tool_group?: string | null;
  /** Absent in a ledger before migration 0015. */
  trace_id?: string | null;
  span_id?: string | null;
  parent_span_id?: string | null;
}

/** An audit row as the library hands it out. Bodies stay JSON text (already redacted). */
export interface AuditRow {
  id: number;
  /** Chain position; null while the call is in flight. */
  seq: number | null;
  ts: number;
  requestId: string;
  principal: string;
  /** The tool group whose endpoint the request came through; null for `/mcp` (and rows before groups were recorded). */
  group: string | null;
  clientAddress: string | null;
  clientEra: string;
  clientName: string | null;
  clientVersion: string | null;
  method: string;
  hubName: string | null;
  server: string | null;
  upstreamName: string | null;
  upstreamEra: string | null;
  outcome: Outcome;
  errorKind: ErrorKind;
  errorCode: number | null;
  errorMessage: string | null;
  latencyMs: number | null;
  requestBytes: number | null;
  responseBytes: number | null;
  idempotencyKey: string | null;
  argsHash: string | null;
  argsJson: string | null;
  resultJson: string | null;
  hash: string | null;
  /** The request's W3C trace id; null in rows before traces were recorded (and refusals before a body was read). */
  traceId: string | null;
  /** The hub's span id for the request: the parent span id of what it forwarded. */
  spanId: string | null;
  /** The caller's span id, when the request came with a valid traceparent (null: the hub started the trace). */
  parentSpanId: string | null;
}

/**
 * The columns rows are read in, as arrays (auditRowOf's order): better-sqlite3 builds a
 * row object of 30 keys one key at a time, which was most of `ledger export`'s time. The last
 * four are absent from a ledger an older Switchyard wrote (read as it is): read as NULL there.
 */
export const AUDIT_COLUMNS = [
  'id', 'seq', 'ts', 'request_id', 'principal', 'client_address', 'client_era', 'client_name', 'client_version', 'method', 'hub_name', 'server',
  'upstream_name', 'upstream_era', 'outcome', 'error_kind', 'error_code', 'error_message', 'latency_ms', 'request_bytes', 'response_bytes',
  'idempotency_key', 'args_hash', 'args_json', 'result_json', 'hash', 'tool_group', 'trace_id', 'span_id', 'parent_span_id',
] as const;
export const LATER_AUDIT_COLUMNS: ReadonlySet<string> = new Set(['tool_group', 'trace_id', 'span_id', 'parent_span_id']);

/** A row read as an array of AUDIT_COLUMNS (the one mapper of the CLI's and the admin API's reads). */
export function auditRowOf(v: unknown[]): AuditRow {
  return {
    id: v[0] as number,
    seq: v[1] as number | null,
    ts: v[2] as number,
    requestId: v[3] as string,
    principal: v[4] as string,
    group: (v[26] as string | null) ?? null,
    clientAddress: v[5] as string | null,
    clientEra: v[6] as string,
    clientName: v[7] as string | null,
    clientVersion: v[8] as string | null,
    method: v[9] as string,
    hubName: v[10] as string | null,
    server: v[11] as string | null,
    upstreamName: v[12] as string | null,
    upstreamEra: v[13] as string | null,
    outcome: v[14] as Outcome,
    errorKind: v[15] as ErrorKind,
    errorCode: v[16] as number | null,
    errorMessage: v[17] as string | null,
    latencyMs: v[18] as number | null,
    requestBytes: v[19] as number | null,
    responseBytes: v[20] as number | null,
    idempotencyKey: v[21] as string | null,
    argsHash: v[22] as string | null,
    argsJson: v[23] as string | null,
    resultJson: v[24] as string | null,
    hash: v[25] as string | null,
    traceId: (v[27] as string | null) ?? null,
    spanId: (v[28] as string | null) ?? null,
    parentSpanId: (v[29] as string | null) ?? null,
  };
}

export interface AuditFilter {
  server?: string;
  /** The hub-side name (tool/prompt name or resource uri). */
  tool?: string;
  principal?: string;
  /** The tool group whose endpoint the request came through (`/mcp/<group>`). */
  group?: string;
  /** A stored outcome, `replayed` only of a success, or `replayed_error` (see shownOutcome). */
  outcome?: string;
  method?: string;
  /** The request's JSON-RPC id, as stored (request-id.ts: a number's digits, a string that could read as one in its JSON form). */
  requestId?: string;
  /** The client's name (clientInfo.name) as it said it. */
  client?: string;
  /** The W3C trace id (32 lowercase hex digits) of the request's span. */
  traceId?: string;
  /** Epoch ms, inclusive. */
  since?: number;
  /** Epoch ms, exclusive. */
  until?: number;
  /** Default 100; at most 100,000 per call. */
  limit?: number;
  /** Rows with a larger id, oldest first (paging and `tail` of inserts). */
  afterId?: number;
  /** Finalized rows with a larger chain position, in finalization order (`tail -f`). */
  afterSeq?: number;
}

/**
 * WHERE clause and parameters for a filter; column names match the indexes. With afterSeq
 * (`tail -f`, each poll) the other columns are written `+col`, which no index serves: SQLite
 * would otherwise walk every row ever of `--server x` by its index (fetching each to test its
 * seq) and sort them, at every poll, where the chain's own index holds just the new rows.
 */
export function whereClause(f: AuditFilter): { sql: string; params: Record<string, unknown> } {
  const parts: string[] = [];
  const params: Record<string, unknown> = {};
  const byChain = f.afterSeq !== undefined;
  const add = (cond: string, name: string, value: unknown): void => {
    if (value === undefined || value === null) return;
    parts.push(byChain && name !== 'afterSeq' ? `+${cond}` : cond);
    params[name] = value;
  };
  add('server = @server', 'server', f.server);
  add('hub_name = @tool', 'tool', f.tool);
  add('principal = @principal', 'principal', f.principal);
  add('tool_group = @group', 'group', f.group);
  if (f.outcome === 'replayed' || f.outcome === REPLAYED_ERROR) {
    // Stored as `replayed` either way: a kept error's replay is told by its error_kind (shownOutcome).
    add('outcome = @outcome', 'outcome', 'replayed');
    parts.push(`${byChain ? '+' : ''}error_kind IS ${f.outcome === 'replayed' ? '' : 'NOT '}NULL`);
  } else add('outcome = @outcome', 'outcome', f.outcome);
  add('method = @method', 'method', f.method);
  add('request_id = @requestId', 'requestId', f.requestId);
  add('client_name = @client', 'client', f.client);
  add('trace_id = @traceId', 'traceId', f.traceId);
  add('ts >= @since', 'since', f.since);
  add('ts < @until', 'until', f.until);
  add('id > @afterId', 'afterId', f.afterId);
  add('seq > @afterSeq', 'afterSeq', f.afterSeq);
  return { sql: parts.length ? 'WHERE ' + parts.join(' AND ') : '', params };
}
