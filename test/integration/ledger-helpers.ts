/**
 * Shared by the ledger acceptance tests: the `switchyard ledger` CLI (the built binary, or its
 * own command run in this process), raw requests of both eras with full control over ids,
 * headers and `_meta`, and fixture configs.
 * Protocol constants are spelled out on purpose rather than imported from src/.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { runLedgerCommand } from '../helpers/ledger-command.js';
import { ledgerWriter } from '../../src/cli/ledger-lock.js';
import { recordRow, type PendingRecord } from '../../src/ledger/audit-apply.js';
import { hasTable } from '../../src/ledger/migrate.js';
import { PendingFiles } from '../../src/ledger/pending-files.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { realLedgerPath } from '../../src/ledger/real-path.js';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';

export const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
export const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';
export const LEGACY = '2025-11-25';
export const MODERN = '2026-07-28';
export const META_KEY = 'dev.switchyard/idempotency-key';

export type Json = Record<string, unknown>;

/** A row as `switchyard ledger query|export --json` prints it. */
export interface Row {
  id: number;
  seq: number | null;
  ts: string;
  /** The id as sent: a number id a number, a string id a string. */
  requestId: string | number;
  /** The id's JSON type (the number 1 and the string "1" are different requests); null: no client's request. */
  requestIdType: 'number' | 'string' | null;
  /** The id was longer than a row keeps: requestId is its start. */
  requestIdCut: boolean;
  principal: string;
  /** The tool group whose endpoint the request came through (null: `/mcp`). */
  group: string | null;
  clientAddress: string | null;
  clientEra: string;
  clientName: string | null;
  clientVersion: string | null;
  method: string;
  server: string | null;
  tool: string | null;
  upstreamName: string | null;
  upstreamEra: string | null;
  outcome: string;
  errorKind: string | null;
  errorCode: number | null;
  errorMessage: string | null;
  latencyMs: number | null;
  requestBytes: number | null;
  responseBytes: number | null;
  idempotencyKey: string | null;
  argsHash: string | null;
  /** The request's span in a W3C trace. */
  traceId: string | null;
  spanId: string | null;
  parentSpanId: string | null;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built `switchyard ledger <args…> --db <db>`. */
export function ledgerCli(db: string, args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'ledger', ...args, '--db', db], { cwd: ROOT, timeout: 15_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * `switchyard ledger <args…> --db <db>` run in this process: the command the binary mounts
 * (makeLedgerCommand: the same options, filters, read-only open and output), its output
 * captured. What tests poll with: a node process started at every 100 ms poll cost a few
 * hundred ms of CPU each (a second or more on a loaded machine), minutes of the suite.
 * `ledgerCli` runs the binary itself; the cli-*.test.ts files and ledger-outcomes check it.
 */
export async function ledgerInProcess(db: string, args: string[]): Promise<CliResult> {
  try {
    const r = await runLedgerCommand(['ledger', ...args, '--db', db]);
    return { code: r.code, stdout: r.out, stderr: r.err };
  } catch (err) {
    // The binary's usage errors (yargs: unknown option, missing subcommand) exit 2.
    return { code: 2, stdout: '', stderr: `${(err as Error).message}\n` };
  }
}

/**
 * Rows a running hub has written to its pending files and its ledger thread has not yet put
 * into SQLite (a few ms after each, later on a loaded machine). A call's finished row is in
 * the pending file before the call is answered, so once this is 0 every answered call's row
 * can be read. 0 with no hub running: what a stopped hub left waits for its next start.
 */
function rowsOnTheirWay(db: string): number {
  if (!ledgerWriter(db)) return 0;
  let reader: LedgerReader | undefined;
  try {
    reader = LedgerReader.open({ path: db });
    const outcome = reader.db.prepare('SELECT outcome FROM audit WHERE id = ?').pluck();
    const pruned = hasTable(reader.db, 'audit_pruned') ? reader.db.prepare('SELECT 1 FROM audit_pruned WHERE id = ?').pluck() : undefined;
    const ids = new Set<number>();
    for (const r of PendingFiles.read(realLedgerPath(db)) as PendingRecord[]) {
      const row = recordRow(r);
      if (!row) continue;
      const now = outcome.get(row.id);
      if (now === undefined ? pruned?.get(row.id) === undefined : now === 'in_flight' && row.done) ids.add(row.id);
    }
    return ids.size;
  } catch {
    return 0; // no database yet, or one the command itself will report on
  } finally {
    reader?.close();
  }
}

/**
 * Waits (at most 5 s, then reads anyway) until SQLite holds every row the hub had written when
 * called: a read right after an answer then finds its row. The ledger command in a process of
 * its own took long enough to start that it mostly did; in this process it would not.
 */
async function settled(db: string): Promise<void> {
  for (const deadline = Date.now() + 5_000; rowsOnTheirWay(db) > 0 && Date.now() < deadline; ) await sleep(10);
}

/** Every row of the ledger at `db`, as `switchyard ledger export` prints them. */
export async function exportRows(db: string): Promise<Row[]> {
  await settled(db);
  const r = await ledgerInProcess(db, ['export']);
  if (r.code !== 0) throw new Error(`ledger export exited ${r.code}: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);
}

/** Every row (`ledger export`) once the row of request `last` is in: rows go in in order, so all before it are too. */
export async function rowsThrough(db: string, last: string, timeoutMs = 15_000): Promise<Row[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const rows = await exportRows(db);
    if (rows.some((r) => r.requestId === last)) return rows;
    if (Date.now() > end) throw new Error(`no row for ${last}`);
    await sleep(50);
  }
}

/** `ledger query --json` with filters (e.g. `{tool: 'f__echo', outcome: 'ok'}`), oldest first. */
export async function queryRows(db: string, filter: Record<string, string> = {}, limit = 1000): Promise<Row[]> {
  const args = ['query', '--json', '--limit', String(limit)];
  for (const [k, v] of Object.entries(filter)) args.push(`--${k}`, v);
  await settled(db);
  const r = await ledgerInProcess(db, args);
  if (r.code !== 0) throw new Error(`ledger query failed (${r.code}): ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);
}

/** Polls `ledger query` until `pick` finds something (rows land once their call finishes). */
export async function waitForRows(db: string, filter: Record<string, string>, pick: (rows: Row[]) => boolean = (r) => r.length > 0, timeoutMs = 10_000): Promise<Row[]> {
  const deadline = Date.now() + timeoutMs;
  let rows: Row[] = [];
  while (Date.now() < deadline) {
    rows = await queryRows(db, filter);
    if (pick(rows)) return rows;
    await sleep(100);
  }
  throw new Error(`no matching ledger rows for ${JSON.stringify(filter)} within ${timeoutMs} ms; last: ${JSON.stringify(rows)}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The JSON-RPC response in a reply body, JSON or SSE. */
function lastMessage(contentType: string | null, text: string): Json | undefined {
  if (!text) return undefined;
  if ((contentType ?? '').includes('text/event-stream')) {
    let last: Json | undefined;
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) {
        const m = JSON.parse(data) as Json;
        if ('id' in m && ('result' in m || 'error' in m)) last = m;
      }
    }
    return last;
  }
  return JSON.parse(text) as Json;
}

export interface Answer {
  status: number;
  /** The JSON-RPC response, if one came. */
  body?: { id?: unknown; result?: Json; error?: { code: number; message: string } };
  /** Exact size of the request body sent. */
  requestBytes: number;
  headers: Headers;
}

async function send(url: string, body: Json, headers: Record<string, string>, signal?: AbortSignal): Promise<Answer> {
  const text = JSON.stringify(body);
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: text,
    signal,
  });
  const reply = await res.text();
  return { status: res.status, body: lastMessage(res.headers.get('content-type'), reply) as Answer['body'], requestBytes: Buffer.byteLength(text), headers: res.headers };
}

/** One modern (2026-07-28) request, envelope and headers included; `meta` adds `_meta` keys. */
export function modernCall(
  url: string,
  id: string | number,
  method: string,
  params: Json = {},
  opts: { meta?: Json; headers?: Record<string, string>; clientName?: string; signal?: AbortSignal } = {},
): Promise<Answer> {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: opts.clientName ?? 'ledger-raw-modern', version: '3.1.4' },
    ...opts.meta,
  };
  const headers: Record<string, string> = { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...opts.headers };
  const name = method === 'tools/call' || method === 'prompts/get' ? params.name : method === 'resources/read' ? params.uri : undefined;
  if (typeof name === 'string') headers['mcp-name'] = name;
  return send(url, { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }, headers, opts.signal);
}

export interface LegacyRaw {
  sessionId: string;
  call(id: string | number, method: string, params?: Json, headers?: Record<string, string>): Promise<Answer>;
  /** A notification on the session (its own POST). */
  notify(method: string, params?: Json): Promise<Answer>;
}

/** A raw legacy (2025-11-25) session: initialize, notifications/initialized, then requests. */
export async function legacySession(url: string, clientName = 'ledger-raw-legacy'): Promise<LegacyRaw> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: clientName, version: '2.7.1' } } }),
  });
  await res.text();
  const sessionId = res.headers.get('mcp-session-id');
  if (!sessionId) throw new Error(`initialize gave no session (HTTP ${res.status})`);
  const base = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  await send(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, base);
  return {
    sessionId,
    call: (id, method, params = {}, headers = {}) => send(url, { jsonrpc: '2.0', id, method, params }, { ...base, ...headers }),
    notify: (method, params = {}) => send(url, { jsonrpc: '2.0', method, params }, base),
  };
}

/** A tool result's first text. */
export function textOf(result: Json | undefined): string {
  const c = (result?.content as { type: string; text?: string }[] | undefined)?.[0];
  return c?.text ?? '';
}

export function readCounter(file: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/** A fixture upstream over stdio, with its own side-effect counter file. */
export function fixture(file: string, dir: string, extra: Json = {}, counter = join(dir, 'counter.json')): Json {
  return { ...nodeServer(file, [], { COUNTER_FILE: counter }), ...extra };
}

export async function health(url: string): Promise<{ servers: { id: string; state: string }[] }> {
  const res = await fetch(new URL('/healthz', url));
  return (await res.json()) as { servers: { id: string; state: string }[] };
}

export async function waitForReady(url: string, ids: string[], timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    const h = await health(url);
    last = h;
    if (ids.every((id) => h.servers.some((s) => s.id === id && s.state === 'ready'))) return;
    await sleep(50);
  }
  throw new Error(`upstreams not ready: ${JSON.stringify(last)}`);
}

/** The outcome and error code of each of these requests' committed rows, by request id (read beside the running hub). */
export function outcomes(db: string, requestIds: string[]): Record<string, string> {
  const reader = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const rows = reader.prepare(`SELECT request_id, outcome, error_code FROM audit WHERE request_id IN (${requestIds.map(() => '?').join(', ')})`).all(...requestIds) as { request_id: string; outcome: string; error_code: number | null }[];
    return Object.fromEntries(rows.map((r) => [r.request_id, r.error_code === null ? r.outcome : `${r.outcome} ${r.error_code}`]));
  } finally {
    reader.close();
  }
}

/** How many of these requests have a committed in_flight row (read beside the running hub). */
export function inFlight(db: string, requestIds: string[]): number {
  const reader = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const row = reader.prepare(`SELECT COUNT(*) AS n FROM audit WHERE outcome = 'in_flight' AND request_id IN (${requestIds.map(() => '?').join(', ')})`).get(...requestIds) as { n: number };
    return row.n;
  } finally {
    reader.close();
  }
}
