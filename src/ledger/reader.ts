import type { Database } from 'better-sqlite3';
import { openLedgerDb } from './db.js';
import { readChainState, verifyChain, type VerifyResult, type Witness } from './chain.js';
import { recordRow, type PendingRecord } from './audit-apply.js';
import { PendingFiles } from './pending-files.js';
import { realLedgerPath } from './real-path.js';
import { hasTable } from './migrate.js';
import { Latencies } from './latencies.js';
import { MatchedIds, type IdList } from './matched-ids.js';
import { shownOutcome, type Outcome } from './types.js';
import { HUB } from '../auth/principals.js';
import { AUDIT_COLUMNS, auditRowOf, LATER_AUDIT_COLUMNS, whereClause, type AuditDbRow, type AuditFilter, type AuditRow } from './rows.js';

export interface StatsRow {
  server: string | null;
  method: string;
  /** Tool/prompt name or resource uri; null for methods without one (e.g. tools/list). */
  name: string | null;
  calls: number;
  /** Finished calls whose outcome is neither ok nor replayed, and replayed ones of a kept error. */
  errors: number;
  errorRate: number;
  p50Ms: number | null;
  p95Ms: number | null;
  outcomes: Record<string, number>;
}

export class LedgerChainError extends Error {
  override readonly name = 'LedgerChainError';
}

const DEFAULT_LIMIT = 100;
/** The most rows one query returns; `ledger export` streams any number. */
export const MAX_LIMIT = 100_000;

/** An idempotency key as `ledger keys` shows it (ledger/idempotency.ts keeps it). */
export interface KeyRow {
  principal: string;
  /** The tool group whose endpoint the key was used through; null: `/mcp` (or a plain stdio); '*': kept before keys were scoped to endpoints, read from every one. */
  group: string | null;
  key: string;
  tool: string;
  state: 'in_flight' | 'done' | 'unknown';
  createdMs: number;
  completedMs: number | null;
}
/** Rows an export reads at a time. */
const EXPORT_PAGE = 1000;
/**
 * Bytes of stored bodies (arguments, results) a page holds at most, but for its first row: with
 * ledger.storeBodies a row keeps up to 1 MiB of each, and a page of 1,000 such rows was 2 GiB in
 * the CLI's memory at once.
 */
const PAGE_BODY_BYTES = 16 * 1024 * 1024;
/** Rows deleted per prune transaction, so a running hub never waits long for the lock. */
const PRUNE_CHUNK = 5_000;

/**
 * Everything that reads the ledger, plus prune. Used by the hub's Ledger and, on a
 * read-only (or, for prune, writable) connection, by the CLI next to a running hub.
 */
export class LedgerReader {
  /** Whether the audit table has a column a filter needs (tool_group of 0013, trace_id of 0015); known once asked. */
  private readonly columns = new Map<string, boolean>();

  constructor(readonly db: Database) {}

  static open(opts: { path: string; writable?: boolean; migrationsDir?: string; heldBy?: string }): LedgerReader {
    // A writable reader (prune) works on a ledger that is there: it never creates one.
    return new LedgerReader(
      openLedgerDb({ path: opts.path, readonly: !opts.writable, readsOlder: true, mustExist: opts.writable, migrationsDir: opts.migrationsDir, heldBy: opts.heldBy }),
    );
  }

  /**
   * The filter's WHERE clause. A ledger an older Switchyard writes (read as it is) has no
   * tool_group column: a group filter there is refused by name, not an SQL error, nor an empty
   * answer that would say no call came through the group.
   */
  private where(filter: AuditFilter): ReturnType<typeof whereClause> {
    if (filter.group !== undefined) this.needColumn('tool_group', 'tool groups', 'which group it came through');
    if (filter.traceId !== undefined) this.needColumn('trace_id', 'trace ids', 'which trace it was in');
    return whereClause(filter);
  }

  /** Whether the idempotency table scopes keys to tool groups (0016); an older Switchyard's ledger, read as it is, does not. */
  private keysGrouped(): boolean {
    return this.hasColumn('idempotency', 'tool_group');
  }

  /** Whether `table` has `column` in this ledger (an older one, read as it is, may not), asked once. */
  private hasColumn(table: 'audit' | 'idempotency', column: string): boolean {
    const key = `${table}.${column}`;
    let has = this.columns.get(key);
    if (has === undefined) {
      has = (this.db.prepare(`SELECT 1 FROM pragma_table_info(?) WHERE name = ?`).get(table, column) as unknown) !== undefined;
      this.columns.set(key, has);
    }
    return has;
  }

  private needColumn(column: string, what: string, says: string): void {
    if (!this.hasColumn('audit', column)) throw new Error(`this ledger does not record ${what} yet (an older Switchyard wrote it; a hub of this one upgrades it at its next start): no row says ${says}`);
  }

  /** Newest first by ts; with afterId oldest-first by id; with afterSeq in chain order. */
  query(filter: AuditFilter = {}): AuditRow[] {
    const { sql, params } = this.where(filter);
    const order = filter.afterSeq !== undefined ? 'seq ASC' : filter.afterId !== undefined ? 'id ASC' : 'ts DESC, id DESC';
    const limit = rowLimit(filter.limit ?? DEFAULT_LIMIT, 1);
    const rows = this.db.prepare(`SELECT ${this.auditColumns()} FROM audit ${sql} ORDER BY ${order} LIMIT @limit`).raw().all({ ...params, limit }) as unknown[][];
    return rows.map(auditRowOf);
  }

  /** AUDIT_COLUMNS as a select list (auditRowOf's order): a column an older ledger lacks read as NULL. */
  private auditColumns(): string {
    return AUDIT_COLUMNS.map((c) => (LATER_AUDIT_COLUMNS.has(c) && !this.hasColumn('audit', c) ? `NULL AS ${c}` : c)).join(', ');
  }

  /**
   * Every matching row, oldest first by id, a page at a time (export). The matching ids are
   * read first, in one pass however the filter is served, into the connection's temporary
   * database (MatchedIds: not into memory, where they were 8 bytes a row), then the rows a page
   * at a time, each page a read of its own and no statement open between pages: a caller that
   * waits there for a slow reader of its output (`export | gzip`, a pager) holds no snapshot
   * meanwhile, which would keep the hub's WAL from being rewound for as long. Paging by
   * `id > last … LIMIT` instead would sort every row still to come for each page whenever an
   * index serves the filter (quadratic). The rows are those the filter matched when the ids were
   * read, each as it is when its page is read: a call in flight then that finished since is
   * listed, finished (the filter is not asked again: `--outcome in_flight` left it out, and a
   * query's table counted a row it never printed). A row pruned meanwhile is left out.
   */
  *pages(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}, size = EXPORT_PAGE): Generator<AuditRow[]> {
    const { sql, params } = this.where(filter);
    const ids = MatchedIds.keep(this.db, `SELECT id FROM audit ${sql} ORDER BY id ASC`, params);
    try {
      yield* this.pagesOf(ids, 'id ASC', size);
    } finally {
      ids.close();
    }
  }

  /**
   * The ids of query()'s rows (the newest `limit` matching), oldest first: `ledger query` reads
   * them a page at a time from these (rowsOf), as export does, and never holds 100,000 rows
   * with their bodies.
   */
  queryIds(filter: Omit<AuditFilter, 'afterId' | 'afterSeq'> = {}): number[] {
    const { sql, params } = this.where(filter);
    const limit = rowLimit(filter.limit ?? DEFAULT_LIMIT, 1);
    return (this.db.prepare(`SELECT id FROM audit ${sql} ORDER BY ts DESC, id DESC LIMIT @limit`).pluck().all({ ...params, limit }) as number[]).reverse();
  }

  /** The ids of the first `limit` rows matching past `afterId`, oldest first by id (query()'s rows with afterId). */
  idsAfter(filter: Omit<AuditFilter, 'afterSeq'>): number[] {
    const { sql, params } = this.where(filter);
    const limit = rowLimit(filter.limit ?? DEFAULT_LIMIT, 1);
    return this.db.prepare(`SELECT id FROM audit ${sql} ORDER BY id ASC LIMIT @limit`).pluck().all({ ...params, limit }) as number[];
  }

  /**
   * queryIds(), kept in the connection's temporary database as export's are (MatchedIds), not in
   * memory: `ledger query --limit 100000` held 100,000 ids at once. The caller closes it.
   */
  keepQueryIds(filter: Omit<AuditFilter, 'afterId' | 'afterSeq'> = {}): MatchedIds {
    const { sql, params } = this.where(filter);
    const limit = rowLimit(filter.limit ?? DEFAULT_LIMIT, 1);
    // Kept newest first, as the index of ts serves the read, and read back the other way round.
    return MatchedIds.keep(this.db, `SELECT id FROM audit ${sql} ORDER BY ts DESC, id DESC LIMIT @limit`, { ...params, limit }, true);
  }

  /**
   * The rows of these ids, a page at a time, each as it is when its page is read (as pages(): a
   * row pruned since is left out), in the order they were read in: of queryIds() (`ts`), of
   * lastFinishedIds() (`seq`).
   */
  rowsOf(ids: IdList, order: 'ts' | 'seq' | 'id', size = EXPORT_PAGE, bodyBytes = PAGE_BODY_BYTES): Generator<AuditRow[]> {
    return this.pagesOf(ids, order === 'ts' ? 'ts ASC, id ASC' : order === 'seq' ? 'seq ASC' : 'id ASC', size, bodyBytes);
  }

  /** The ids of the last `n` finished rows matching, in chain (finalization) order, and the last one's chain position (0: none). */
  lastFinishedIds(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'>, n: number): { ids: number[]; lastSeq: number } {
    const { sql, params } = this.where(filter);
    const cond = sql ? `${sql} AND seq IS NOT NULL` : 'WHERE seq IS NOT NULL';
    const limit = rowLimit(n, 0);
    const rows = this.db.prepare(`SELECT id, seq FROM audit ${cond} ORDER BY seq DESC LIMIT @limit`).raw().all({ ...params, limit }) as [number, number][];
    return { ids: rows.map((r) => r[0]).reverse(), lastSeq: rows[0]?.[1] ?? 0 };
  }

  /**
   * The ids of the first `limit` rows matching past chain position `afterSeq`, in chain order,
   * and the last one's position (`afterSeq` for none): `tail -f` reads their rows a page at a time
   * (rowsOf), as query's, not 1,000 rows with their bodies at once.
   */
  idsAfterSeq(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'>, afterSeq: number, limit: number): { ids: number[]; lastSeq: number } {
    const { sql, params } = this.where({ ...filter, afterSeq });
    const rows = this.db.prepare(`SELECT id, seq FROM audit ${sql} ORDER BY seq ASC LIMIT @limit`).raw().all({ ...params, limit: rowLimit(limit, 1) }) as [number, number][];
    return { ids: rows.map((r) => r[0]), lastSeq: rows.at(-1)?.[1] ?? afterSeq };
  }

  /** `ids` (in `order`) a page of at most `size` rows and `bodyBytes` of their bodies at a time. */
  private *pagesOf(ids: IdList, order: string, size: number, bodyBytes = PAGE_BODY_BYTES): Generator<AuditRow[]> {
    // By the primary key only (NOT INDEXED): by the index of ts or seq, to skip the sort, SQLite would walk every row per page.
    const page = this.db.prepare(`SELECT ${this.auditColumns()} FROM audit NOT INDEXED WHERE id IN (SELECT value FROM json_each(@pageIds)) ORDER BY ${order}`).raw();
    // The bodies' sizes, from the rows' headers: octet_length reads none of their text. Their
    // sum first: only a page over the bound (seldom) needs each row's.
    const body = 'COALESCE(octet_length(args_json), 0) + COALESCE(octet_length(result_json), 0)';
    const total = this.db.prepare(`SELECT TOTAL(${body}) FROM audit NOT INDEXED WHERE id IN (SELECT value FROM json_each(@pageIds))`).pluck();
    const sizes = this.db.prepare(`SELECT id, ${body} FROM audit NOT INDEXED WHERE id IN (SELECT value FROM json_each(@pageIds))`).raw();
    for (let i = 0; i < ids.length; ) {
      let next = ids.slice(i, i + size);
      if (!next.length) return;
      let pageIds = JSON.stringify(next);
      if ((total.get({ pageIds }) as number) > bodyBytes) {
        const bytes = new Map(sizes.all({ pageIds }) as [number, number][]);
        let sum = 0;
        const fit = next.findIndex((id, k) => (sum += bytes.get(id) ?? 0) > bodyBytes && k > 0);
        if (fit > 0) {
          next = next.slice(0, fit);
          pageIds = JSON.stringify(next);
        }
      }
      i += next.length;
      const rows = (page.all({ pageIds }) as unknown[][]).map(auditRowOf);
      if (rows.length) yield rows;
    }
  }

  /**
   * Calls, error rate and latency percentiles per (server, method, name), finished rows only, in
   * memory bounded per group whatever the rows (latencies.ts: exact up to 8192 calls a group, then
   * to 3 significant digits). A row answered `input_required` is a round of a call, not a call:
   * the call is counted at the row of the request that got its answer (as /metrics counts it).
   */
  stats(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}): StatsRow[] {
    return this.callStats(filter).rows;
  }

  /**
   * stats(), and how many rows of the hub's own events (principal `hub`: a tool quarantined or
   * dropped by the catalog, a plugin that failed) it left out. Those are no request of a client,
   * which /metrics never counts either: counted as calls, they made a server's `catalog/drop` or
   * `plugin/onCall` read as its failed calls. Asked for by `--principal hub`, they are counted.
   */
  callStats(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}): { rows: StatsRow[]; hubEvents: number } {
    const { sql, params } = this.where(filter);
    const cond = `${sql ? `${sql} AND` : 'WHERE'} outcome NOT IN ('in_flight', 'input_required')`;
    const it = this.db
      .prepare(`SELECT principal, server, method, hub_name, outcome, error_kind, latency_ms FROM audit ${cond}`)
      .iterate(params) as IterableIterator<Pick<AuditDbRow, 'principal' | 'server' | 'method' | 'hub_name' | 'outcome' | 'error_kind' | 'latency_ms'>>;
    const groups = new Map<string, { row: StatsRow; latencies: Latencies }>();
    let hubEvents = 0;
    for (const r of it) {
      if (r.principal === HUB && filter.principal !== HUB) {
        hubEvents++;
        continue;
      }
      const k = JSON.stringify([r.server, r.method, r.hub_name]);
      let g = groups.get(k);
      if (!g) {
        g = {
          row: { server: r.server, method: r.method, name: r.hub_name, calls: 0, errors: 0, errorRate: 0, p50Ms: null, p95Ms: null, outcomes: {} },
          latencies: new Latencies(),
        };
        groups.set(k, g);
      }
      g.row.calls++;
      // A replayed error (`replayed_error`) is the error its client got again, as /metrics counts it.
      const shown = shownOutcome(r.outcome as Outcome, r.error_kind);
      if (shown !== 'ok' && shown !== 'replayed') g.row.errors++;
      g.row.outcomes[shown] = (g.row.outcomes[shown] ?? 0) + 1;
      if (r.latency_ms !== null) g.latencies.add(r.latency_ms);
    }
    const out: StatsRow[] = [];
    for (const { row, latencies } of groups.values()) {
      row.errorRate = row.calls ? row.errors / row.calls : 0;
      row.p50Ms = latencies.percentile(0.5);
      row.p95Ms = latencies.percentile(0.95);
      out.push(row);
    }
    return { rows: out.sort((a, b) => cmp(a.server, b.server) || cmp(a.method, b.method) || cmp(a.name, b.name)), hubEvents };
  }

  /** The whole chain; each witness's row must still hold the witness's hash. */
  verify(witnesses: readonly Witness[] = []): VerifyResult {
    // One read transaction: rows and chain head from the same snapshot while the hub writes.
    return this.db.transaction(() => verifyChain(this.db, undefined, witnesses))();
  }

  /**
   * Deletes finished rows older than `beforeTs`, oldest chain positions first, and moves
   * the chain anchor so verify() still passes. Only a prefix of the chain can go: an old
   * row finalized after a newer one waits for a later prune. The part to be dropped is
   * verified first, so pruning never erases evidence of tampering (LedgerChainError).
   *
   * The ids of deleted rows that a pending file still holds a line of go to audit_pruned, in
   * the same transaction, and a replay of those files skips them (AuditApplier.apply): a file
   * keeps the lines of rows already in SQLite until it is emptied, and a hub killed before
   * that, or one that died before a prune run beside it, would otherwise put them back at its
   * start. Ids, listed one by one, because nothing coarser is exact: the deleted rows are a
   * prefix of the chain (seq), and neither ids nor ts follow seq. A row older than the cutoff
   * (ts) or with a lower id than a deleted one can be a line no batch committed yet (a begin
   * held for its finish while later calls went in; the rows a killed hub left), which a
   * replay must apply. The files are read inside the transaction, holding the write lock:
   * every row committed before it had its line written before its commit, and no line of a
   * committed row is written again later (a begin written again is one not handed over yet),
   * so any line of a deleted row that is in the files is seen.
   */
  prune(beforeTs: number): number {
    let total = 0;
    for (;;) {
      const n = this.db.transaction(() => this.pruneChunk(beforeTs)).immediate();
      total += n;
      if (n < PRUNE_CHUNK) return total;
    }
  }

  private pruneChunk(beforeTs: number): number {
    const state = readChainState(this.db);
    const firstKept = this.db
      .prepare('SELECT MIN(seq) AS s FROM audit WHERE seq IS NOT NULL AND ts >= ?')
      .get(beforeTs) as { s: number | null };
    const limit = firstKept.s === null ? state.head_seq : firstKept.s - 1;
    const cut = Math.min(limit, state.anchor_seq + PRUNE_CHUNK);
    if (cut <= state.anchor_seq) return 0;
    const check = verifyChain(this.db, cut);
    if (!check.ok) {
      throw new LedgerChainError(`refusing to prune: the chain does not verify at row ${check.rowId} (seq ${check.seq}): ${check.reason}`);
    }
    const anchor = this.db.prepare('SELECT hash FROM audit WHERE seq = ?').get(cut) as { hash: string };
    const listed = idsInPendingFiles(this.db.name);
    if (listed.length > 0) {
      this.db
        .prepare('INSERT OR IGNORE INTO audit_pruned (id) SELECT id FROM audit WHERE seq IS NOT NULL AND seq <= ? AND id IN (SELECT value FROM json_each(?))')
        .run(cut, JSON.stringify(listed));
    }
    const res = this.db.prepare('DELETE FROM audit WHERE seq IS NOT NULL AND seq <= ?').run(cut);
    this.db.prepare('UPDATE chain_state SET anchor_seq = ?, anchor_hash = ? WHERE id = 1').run(cut, anchor.hash);
    return res.changes;
  }

  /**
   * Idempotency keys, the latest first (by their call's end, or its start while it runs), at
   * most `limit`: who sent each, for which tool, and its state; never the answer kept for it.
   * None in a ledger older than the table. Only the keys (principal and key) are read here, in
   * one pass; their rows then a page at a time (keysOf), as queryIds/rowsOf do for `ledger
   * query`: 100,000 rows with their table or JSON lines were held at once before the first line
   * (over 300 MB with long keys), and a read held open while a slow reader of the output waits
   * would keep the hub's WAL from being rewound.
   */
  keyIds(filter: { principal?: string; key?: string; state?: KeyRow['state'] }, limit: number): [principal: string, group: string, key: string][] {
    if (!hasTable(this.db, 'idempotency')) return [];
    const cond: string[] = [];
    if (filter.principal !== undefined) cond.push('principal = @principal');
    if (filter.key !== undefined) cond.push('key = @key');
    if (filter.state !== undefined) cond.push('state = @state');
    return this.db
      .prepare(
        `SELECT principal, ${this.keysGrouped() ? 'tool_group' : "'*'"}, key FROM idempotency ${cond.length ? `WHERE ${cond.join(' AND ')}` : ''}
         ORDER BY COALESCE(completed_ms, created_ms) DESC, key, principal LIMIT @limit`,
      )
      .raw()
      .all({ ...filter, limit: rowLimit(limit, 1) }) as [string, string, string][];
  }

  /**
   * The keys of keyIds(), a page at a time, in its order, each as it is when its page is read
   * (a call that ended meanwhile shows its end); one purged meanwhile is left out.
   */
  *keysOf(ids: readonly [string, string, string][], size = EXPORT_PAGE): Generator<KeyRow[]> {
    const grouped = this.keysGrouped();
    const page = this.db.prepare(
      `SELECT i.principal, ${grouped ? 'i.tool_group' : "'*'"} AS tool_group, i.key, i.tool, i.state, i.created_ms, i.completed_ms FROM json_each(@pageIds) j
       JOIN idempotency i ON i.principal = j.value ->> 0 AND ${grouped ? 'i.tool_group = j.value ->> 1 AND ' : ''}i.key = j.value ->> 2 ORDER BY j.key`,
    );
    for (let i = 0; i < ids.length; i += size) {
      const rows = page.all({ pageIds: JSON.stringify(ids.slice(i, i + size)) }) as { principal: string; tool_group: string; key: string; tool: string; state: KeyRow['state']; created_ms: number; completed_ms: number | null }[];
      if (rows.length) yield rows.map((r) => ({ principal: r.principal, group: r.tool_group || null, key: r.key, tool: r.tool, state: r.state, createdMs: r.created_ms, completedMs: r.completed_ms }));
    }
  }

  maxId(): number {
    return (this.db.prepare('SELECT MAX(id) AS m FROM audit').get() as { m: number | null }).m ?? 0;
  }

  headSeq(): number {
    return readChainState(this.db).head_seq;
  }

  /** Where the chain starts: the last row a prune deleted (0 and the genesis hash before any). */
  anchor(): Witness {
    const s = readChainState(this.db);
    return { seq: s.anchor_seq, hash: s.anchor_hash };
  }

  /**
   * Runs `read` in one read transaction: every read in it sees the same snapshot, whatever the
   * hub commits meanwhile (outside one, each statement sees the latest commit).
   */
  snapshot<T>(read: () => T): T {
    return this.db.transaction(read)();
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/**
 * The row ids the ledger's pending files hold lines of: those under the real path, and those
 * under the path as given, which a start also applies (replayOldNames in startup.ts).
 */
function idsInPendingFiles(dbPath: string): number[] {
  const ids = new Set<number>();
  for (const base of new Set([realLedgerPath(dbPath), dbPath])) {
    for (const r of PendingFiles.read(base) as PendingRecord[]) {
      const row = recordRow(r);
      if (row) ids.add(row.id);
    }
  }
  return [...ids];
}

/**
 * A row count for LIMIT, from `min` to MAX_LIMIT. Callers validate what a person typed; this
 * refuses what would reach SQL as NaN (an SQL error naming a column "NaN") or as a non-number.
 */
function rowLimit(n: number, min: number): number {
  if (typeof n !== 'number' || Number.isNaN(n)) throw new RangeError(`a row limit must be a number, not ${String(n)}`);
  return Math.max(min, Math.min(MAX_LIMIT, Math.floor(n)));
}

function cmp(a: string | null, b: string | null): number {
  return (a ?? '').localeCompare(b ?? '');
}
