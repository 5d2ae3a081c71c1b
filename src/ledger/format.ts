import type { AuditRow } from './rows.js';
import type { KeyRow, StatsRow } from './reader.js';
import type { InFlight } from './chain.js';
import { alignColumns } from '../text-columns.js';
import { shownOutcome } from './types.js';
import { requestIdOf } from './request-id.js';
import { HUB } from '../auth/principals.js';

/** The shape of one audit row in `ledger query --json`, `tail --json` and `export`. */
export function rowJson(r: AuditRow): Record<string, unknown> {
  // The id as sent, and its type: the number 1 and the string "1" are different requests. Its
  // three keys written out, not spread in: export builds a million of these.
  const id = requestIdJson(r);
  return {
    id: r.id,
    seq: r.seq,
    ts: new Date(r.ts).toISOString(),
    requestId: id.requestId,
    requestIdType: id.requestIdType,
    requestIdCut: id.requestIdCut,
    principal: r.principal,
    group: r.group,
    clientAddress: r.clientAddress,
    clientEra: r.clientEra,
    clientName: r.clientName,
    clientVersion: r.clientVersion,
    method: r.method,
    server: r.server,
    tool: r.hubName,
    upstreamName: r.upstreamName,
    upstreamEra: r.upstreamEra,
    outcome: r.outcome,
    errorKind: r.errorKind,
    errorCode: r.errorCode,
    errorMessage: r.errorMessage,
    latencyMs: r.latencyMs,
    requestBytes: r.requestBytes,
    responseBytes: r.responseBytes,
    idempotencyKey: r.idempotencyKey,
    argsHash: r.argsHash,
    // Its span in a W3C trace: rows of one call in chained hubs' ledgers share the trace id, and
    // the inner hub's parentSpanId is the outer hub's spanId.
    traceId: r.traceId,
    spanId: r.spanId,
    parentSpanId: r.parentSpanId,
    args: parseOrText(r.argsJson),
    result: parseOrText(r.resultJson),
    // The row's link in the hash chain: an export can be held against the database later.
    hash: r.hash,
  };
}

/**
 * The request's id as its client sent it: a number id as a JSON number (`7311`), a string id as
 * a string (`"7311"`), `requestIdType` beside it saying which; null: no client's request (the
 * hub's own rows, a message with no id; the string id "" is a string). `requestIdCut`: the id
 * was longer than a row keeps, `requestId` is its start (request-id.ts). Digits no JSON number
 * keeps exactly (only a row of a string id that a hub before types were kept wrote can hold
 * them) stay text: as a number they would be another id. The same in `ledger query --json`,
 * `export` (its CSV has the number too, free of the formula guard's quote) and /admin/ledger.
 */
export function requestIdJson(r: AuditRow): RequestIdJson {
  return requestIdAsSent(r.requestId, r.principal);
}

export interface RequestIdJson {
  requestId: string | number;
  requestIdType: 'number' | 'string' | null;
  requestIdCut: boolean;
}

/** requestIdJson of a row's stored id text and principal (the live feed's, before its row is read). */
export function requestIdAsSent(stored: string, principal: string): RequestIdJson {
  const { type, text, cut } = requestIdOf(stored);
  const requestIdType = principal === HUB || stored === '' ? null : type;
  return { requestId: requestIdType === 'number' && String(Number(text)) === text ? Number(text) : text, requestIdType, requestIdCut: cut };
}

function parseOrText(json: string | null): unknown {
  if (json === null) return null;
  try {
    return JSON.parse(json) as unknown;
  } catch {
    return json;
  }
}

export const CSV_COLUMNS = Object.keys(rowJson({ ts: 0, requestId: '' } as AuditRow));

/**
 * Characters an upstream could use to take over a terminal (C0 but tab and newline, DEL, C1:
 * ESC sequences, OSC titles, clipboard writes) or to make text read otherwise than it is
 * stored: bidi overrides and isolates, and every other character a terminal shows as nothing
 * (format characters such as U+200B, line and paragraph separators, lone surrogates, the
 * default-ignorable ones such as variation selectors and tags), with which a row's tool
 * `f__echo\u200b` reads as `f__echo`. Upstream and client text (names, methods, errors,
 * serverInfo) reaches the CLI's output, so none of it goes out raw.
 */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Default_Ignorable_Code_Point}]/gu;
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Default_Ignorable_Code_Point}]/gu;

/** Text with no unsafe character for certain (all of them are C0 controls or past U+007E): most text, told apart by a cheaper test. */
const PLAIN_TEXT = /^[\t\n\x20-\x7e]*$/;
const PLAIN_JSON = /^[\x00-\x7e]*$/;

/** Text for a terminal: each unsafe character shown as '?'. */
export function screenText(s: string): string {
  return PLAIN_TEXT.test(s) ? s : s.replace(UNSAFE, '?');
}

/** JSON for a terminal: the unsafe characters JSON.stringify leaves as they are, escaped (the same JSON). */
export function screenJson(json: string): string {
  if (PLAIN_JSON.test(json)) return json;
  // Each UTF-16 unit of the match: a character past U+FFFF (a tag) is two escapes in JSON.
  return json.replace(UNSAFE_IN_JSON, (c) => [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''));
}

/**
 * A CSV cell that is text as it stands: printable ASCII with no quote or comma (nothing to screen
 * or quote), not starting as a formula would. Most of an export's cells, told apart by one test.
 */
const PLAIN_CELL = /^(?![=+\-@])[\x20\x21\x23-\x2b\x2d-\x7e]*$/;

function csvCell(v: unknown): string {
  if (typeof v === 'string' && PLAIN_CELL.test(v)) return v;
  if (v === null || v === undefined) return '';
  let s = typeof v === 'string' ? screenText(v) : typeof v === 'object' ? screenJson(JSON.stringify(v)) : String(v);
  // Text that a spreadsheet would run as a formula is kept as text (OWASP CSV injection).
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvLine(values: unknown[]): string {
  return values.map(csvCell).join(',');
}

export function csvRow(r: AuditRow): string {
  // A number id is a number in rowJson (no formula a spreadsheet could run): as text, the
  // guard of csvLine made the id -1 `'-1`, which reads as another id than the string "-1" is.
  const o = rowJson(r);
  return csvLine(CSV_COLUMNS.map((c) => o[c]));
}

/** Left-aligned text table; the last column is not padded. */
export function table(header: string[], rawRows: string[][]): string {
  return alignColumns([header, ...rawRows.map(tableCells)]);
}

/** A row's cells as table() shows them: names come from clients and upstreams, and never put terminal control sequences on screen. */
export function tableCells(raw: string[]): string[] {
  return raw.map((c) => screenText(c).replace(/[\t\n]/g, '?'));
}

export const ROW_HEADER = ['time', 'principal', 'group', 'method', 'server', 'tool', 'eras', 'outcome', 'code', 'ms', 'idem-key', 'trace'];

export function rowCells(r: AuditRow): string[] {
  return [
    new Date(r.ts).toISOString(),
    r.principal,
    r.group ?? '-',
    r.method,
    r.server ?? '-',
    r.hubName ?? '-',
    `${r.clientEra}→${r.upstreamEra ?? '?'}`,
    shownOutcome(r.outcome, r.errorKind),
    r.errorCode === null ? '' : String(r.errorCode),
    r.latencyMs === null ? '' : String(Math.round(r.latencyMs)),
    r.idempotencyKey ?? '',
    r.traceId ?? '',
  ];
}

export const STATS_HEADER = ['server', 'method', 'name', 'calls', 'errors', 'error%', 'p50ms', 'p95ms'];

export function statsCells(s: StatsRow): string[] {
  const ms = (v: number | null): string => (v === null ? '' : String(Math.round(v)));
  return [s.server ?? '-', s.method, s.name ?? '-', String(s.calls), String(s.errors), (s.errorRate * 100).toFixed(1), ms(s.p50Ms), ms(s.p95Ms)];
}

/**
 * What a passing verify did not check: rows in flight are in no chain, and a stopped hub's next
 * start chains each as `unknown`, a row inserted by hand as in flight too. Said, with the ids,
 * so a row that no call left is looked at before a start vouches for it.
 */
export function inFlightNote(f: InFlight): string {
  const ids = f.rows === 1 ? `id ${f.firstId}` : `ids ${f.firstId}..${f.lastId}`;
  return `${f.rows} row${f.rows === 1 ? ' is' : 's are'} in flight (${ids}), in no chain and not verified: calls still running, or left by a hub that stopped (its next start chains them as unknown)`;
}

export const KEY_HEADER = ['principal', 'group', 'key', 'tool', 'state', 'created', 'ended', 'a retry with it'];

/** What a retry with a key in this state gets (router/idempotency.ts). */
const RETRY_GETS: Record<KeyRow['state'], string> = {
  done: 'gets the kept answer (replayed)',
  unknown: 'is refused: the call may have run; check its effect, then use a new key',
  in_flight: 'waits for the call (refused as unknown if its hub stopped during it)',
};

/**
 * Whether a retry finds the key absent: its call ended (or began, with no end) at or before
 * `expiredBefore` (now less ledger.idempotencyTtl), as IdempotencyStore.lookup reads it. An
 * in-flight key a running hub holds is never expired to it; one left in the table is read so.
 */
function keyExpired(k: KeyRow, expiredBefore: number): boolean {
  return (k.completedMs ?? k.createdMs) <= expiredBefore;
}

export function keyJson(k: KeyRow, expiredBefore: number): Record<string, unknown> {
  return {
    principal: k.principal,
    group: k.group,
    key: k.key,
    tool: k.tool,
    state: k.state,
    created: new Date(k.createdMs).toISOString(),
    ended: k.completedMs === null ? null : new Date(k.completedMs).toISOString(),
    // Past ledger.idempotencyTtl: a retry with it runs the call as new, whatever its state says.
    expired: k.state !== 'in_flight' && keyExpired(k, expiredBefore),
  };
}

export function keyCells(k: KeyRow, expiredBefore: number): string[] {
  const retry = k.state !== 'in_flight' && keyExpired(k, expiredBefore) ? 'runs the call as new: the key expired (ledger.idempotencyTtl)' : (RETRY_GETS[k.state] ?? '?');
  return [k.principal, k.group ?? '-', k.key, k.tool, k.state, new Date(k.createdMs).toISOString(), k.completedMs === null ? '-' : new Date(k.completedMs).toISOString(), retry];
}
