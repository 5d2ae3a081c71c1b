import type { Database, Statement } from 'better-sqlite3';
import { silentLogger, type Logger } from '../log.js';
import { Checkpointer } from './checkpointer.js';
import { ChainWriter, type VerifyResult } from './chain.js';
import { openLedgerDb } from './db.js';
import { GroupCommit } from './group-commit.js';
import { IdempotencyStore } from './idempotency.js';
import { LedgerNameStore } from './names.js';
import { PendingLog } from './pending-log.js';
import { LedgerPinStore } from './pins.js';
import { LedgerReader, type StatsRow } from './reader.js';
import { DEFAULT_REDACT_KEYS, redact, redactString } from './redact.js';
import type { AuditDbRow, AuditFilter, AuditRow } from './rows.js';
import type { AuditBegin, AuditEnd, AuditHandle } from './types.js';

export interface LedgerOptions {
  path: string;
  /** Store redacted arguments and results (off by default). */
  storeBodies?: boolean;
  /** Keys whose values are redacted in stored bodies; a string is a case-insensitive regex source. */
  redactKeys?: RegExp | string;
  idempotencyTtlMs?: number;
  /** Defaults to the package's migrations/ folder. */
  migrationsDir?: string;
  log?: Logger;
  /** Clock for idempotency TTL and bookkeeping (tests inject one). */
  now?: () => number;
  /** A stored body larger than this is replaced by a size marker. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Checkpoint the WAL from a worker thread (default true; see checkpointer.ts). */
  backgroundCheckpoint?: boolean;
  /** How long rows wait in the pending file before they move into SQLite (default 50 ms). */
  ingestDelayMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * How long a row waits in the pending file before it moves into SQLite (see ingest). Each move
 * holds the event loop for its transaction; every 5 ms that cost ~0.012 ms of p50 at
 * concurrency 1 against 50 ms (measured, 3 alternating runs each), and 50 ms is still fresh
 * for a reader.
 */
const INGEST_DELAY_MS = 50;
/** Rows queued that make the move happen at once instead. */
const INGEST_BATCH = 512;
/** After SQLite refused a whole batch (disk full, lock held too long). */
const INGEST_RETRY_MS = 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
const MAX_ERROR_MESSAGE = 4096;

type Params = Record<string, unknown>;

/** The columns a begin writes, and those a finish adds (their params are named alike). */
const BEGIN_COLS = ['id', 'ts', 'request_id', 'principal', 'client_address', 'client_era', 'client_name', 'client_version', 'method',
  'hub_name', 'server', 'upstream_name', 'upstream_era', 'idempotency_key', 'args_hash', 'request_bytes', 'args_json'] as const;
const END_COLS = ['outcome', 'error_kind', 'error_code', 'error_message', 'latency_ms', 'response_bytes', 'result_json'] as const;

/** An audit row on its way from the pending file into SQLite. */
interface Entry {
  id: number;
  start: Params;
  /** null: the call is still in flight. */
  fin: Params | null;
  /** Its in-flight row is in SQLite already, so finishing it is an UPDATE. */
  inDb: boolean;
}

/**
 * The hub's ledger: one writer per file. An audit row is committed when its line is written
 * to the pending file (PendingLog: one write() per turn of the event loop, durable against
 * SIGKILL); rows move from there into SQLite in batches every 50 ms (ingest), where
 * they are chained and where readers find them. A call's in-flight row and its finished row
 * usually reach SQLite together, as one INSERT. Idempotency keys, names and pins are SQLite
 * writes through the group commit.
 *
 * Usage on the hot path: claim the idempotency key (if any), `await beginCommitted()`,
 * forward, `idempotency.complete()`, `await handle.finish()`, then answer the client.
 */
export class Ledger {
  /** A real ledger: the router measures response sizes only for one (see AuditSink.enabled). */
  readonly enabled = true;
  readonly idempotency: IdempotencyStore;
  private readonly names: LedgerNameStore;
  private readonly pins: LedgerPinStore;
  private readonly reader: LedgerReader;
  private readonly gc: GroupCommit;
  private readonly chain: ChainWriter;
  private readonly insertBegin: Statement;
  private readonly finishLinked: Statement;
  private readonly finishKept: Statement;
  private readonly insertLinked: Statement;
  private readonly finalize: Statement;
  private readonly storeBodies: boolean;
  private readonly redactKeys: RegExp;
  private readonly maxBodyBytes: number;
  private readonly log: Logger;
  private readonly purgeTimer: NodeJS.Timeout;
  private readonly checkpointer: Checkpointer | null;
  private readonly pending: PendingLog;
  /** Rows written to the pending file and not yet in SQLite, in order. */
  private queue: Entry[] = [];
  /** Queued rows still in flight: their finish completes the entry instead of queueing an UPDATE. */
  private readonly unsaved = new Map<number, Entry>();
  private ingestTimer: NodeJS.Timeout | null = null;
  private ingestSoon = false;
  private readonly ingestDelayMs: number;
  private nextId: number;
  private closed = false;
  /** The pending file could not be emptied after the last move (warned once per streak). */
  private truncateFailing = false;

  private constructor(
    private readonly db: Database,
    opts: LedgerOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    this.storeBodies = opts.storeBodies ?? false;
    this.redactKeys = redactPattern(opts.redactKeys);
    this.maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
    this.ingestDelayMs = opts.ingestDelayMs ?? INGEST_DELAY_MS;
    const now = opts.now ?? Date.now;
    this.reader = new LedgerReader(db);
    this.chain = new ChainWriter(db);
    this.gc = new GroupCommit(db, { before: () => this.chain.startBatch(), after: () => this.chain.endBatch() }, this.log);
    this.idempotency = new IdempotencyStore(db, this.gc, opts.idempotencyTtlMs ?? DAY_MS, now, this.log);
    this.names = new LedgerNameStore(db, this.gc, now, this.log);
    this.pins = new LedgerPinStore(db, this.gc, this.log);

    // Parameters are named after their columns, so a row (dbRow) binds as it is digested.
    const named = (cols: readonly string[]) => cols.map((c) => `@${c}`).join(', ');
    const ended = END_COLS.map((c) => `${c} = @${c}`).join(', ');
    const inFlight = `WHERE id = @id AND outcome = 'in_flight'`;
    // OR IGNORE: rows replayed from the pending file may be in SQLite already (see replay).
    this.insertBegin = db.prepare(`INSERT OR IGNORE INTO audit (${BEGIN_COLS.join(', ')}, outcome) VALUES (${named(BEGIN_COLS)}, 'in_flight')`);
    // The finished row's chain link is computed from the values written (see dbRow), so
    // finishing is one statement and needs no RETURNING.
    this.finishLinked = db.prepare(`UPDATE audit SET ${ended},
      server = @server, upstream_name = @upstream_name, upstream_era = @upstream_era, seq = @seq, hash = @hash ${inFlight}`);
    // The usual finish: the call went where its begin said. Leaving server out of SET spares
    // SQLite rewriting its audit_server_ts entry.
    this.finishKept = db.prepare(`UPDATE audit SET ${ended}, seq = @seq, hash = @hash ${inFlight}`);
    const linked = [...BEGIN_COLS, ...END_COLS, 'seq', 'hash'];
    this.insertLinked = db.prepare(`INSERT OR IGNORE INTO audit (${linked.join(', ')}) VALUES (${named(linked)})`);
    this.finalize = db.prepare(`UPDATE audit SET ${ended},
      server = COALESCE(@server, server), upstream_name = COALESCE(@upstream_name, upstream_name),
      upstream_era = COALESCE(@upstream_era, upstream_era) ${inFlight} RETURNING *`);

    const pendingPath = PendingLog.pathFor(db.name);
    this.replay(pendingPath);
    this.recover();
    // Everything the file held is in SQLite now; appends start it over.
    this.pending = new PendingLog(pendingPath);
    this.pending.truncate();
    // Ids are handed out here so begin() can return one synchronously; AUTOINCREMENT's
    // sequence remembers pruned ids, so they are never reused.
    const seq = db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'audit'`).get() as { seq: number } | undefined;
    const max = this.reader.maxId();
    this.nextId = Math.max(seq?.seq ?? 0, max) + 1;

    void this.idempotency.purgeExpired().catch(() => undefined);
    this.purgeTimer = setInterval(() => void this.idempotency.purgeExpired().catch(() => undefined), PURGE_EVERY_MS);
    this.purgeTimer.unref();
    this.checkpointer = opts.backgroundCheckpoint === false ? null : new Checkpointer(db.name, this.log);
  }

  static open(opts: LedgerOptions): Ledger {
    const db = openLedgerDb({ path: opts.path, migrationsDir: opts.migrationsDir, now: opts.now });
    try {
      return new Ledger(db, opts);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /** Queues the 'in_flight' row; it is committed by the next write of the pending file. */
  begin(b: AuditBegin): AuditHandle {
    this.assertOpen();
    const id = this.nextId++;
    const start = this.beginParams(id, b);
    const startJson = JSON.stringify(start);
    const entry: Entry = { id, start, fin: null, inDb: false };
    this.queue.push(entry);
    this.unsaved.set(id, entry);
    void this.pending.append(`{"s":${startJson}}`); // waited for through whenCommitted()
    this.scheduleIngest();
    return new Handle(this, id, start, startJson);
  }

  /** begin() and wait until the row is committed: call before forwarding. */
  async beginCommitted(b: AuditBegin): Promise<AuditHandle> {
    const h = this.begin(b);
    await this.whenCommitted(); // the row, and an idempotency claim made just before it
    return h;
  }

  /** Resolves once everything queued so far is committed (pending file and SQLite writes). */
  whenCommitted(): Promise<void> {
    const written = this.pending.whenWritten();
    const sql = this.gc.pending > 0 ? this.gc.whenCommitted() : null;
    if (written && sql) return Promise.all([written, sql]).then(noop);
    return written ?? sql ?? RESOLVED;
  }

  /** A finished row in one step (denials, protocol errors, replays). */
  record(b: AuditBegin, e: AuditEnd): Promise<void> {
    this.assertOpen();
    const id = this.nextId++;
    const start = this.beginParams(id, b);
    const fin = this.finalParams(start, e);
    this.queue.push({ id, start, fin, inDb: false });
    const written = this.pending.append(`{"s":${JSON.stringify(start)},"e":${JSON.stringify(fin)}}`);
    this.scheduleIngest();
    return written;
  }

  /** @internal used by the handle; `start` is what its begin() wrote. */
  finishRow(id: number, start: Params, startJson: string, e: AuditEnd): Promise<void> {
    if (this.closed) return Promise.reject(new Error('ledger is closed'));
    const fin = this.finalParams(start, e);
    const queued = this.unsaved.get(id);
    if (queued) {
      this.unsaved.delete(id);
      queued.fin = fin;
    } else this.queue.push({ id, start, fin, inDb: true });
    // The line repeats the begin's columns so a restart can finish the row from this line alone.
    void this.pending.append(`{"s":${startJson},"e":${JSON.stringify(fin)}}`);
    this.scheduleIngest();
    // Its line, and an idempotency answer stored just before it (a SQLite write).
    return this.whenCommitted();
  }

  /** Moves every queued row into SQLite now (readers in this process call it first). */
  sync(): void {
    this.ingest();
  }

  private scheduleIngest(): void {
    if (this.queue.length >= INGEST_BATCH) {
      if (!this.ingestSoon) {
        this.ingestSoon = true;
        setImmediate(() => this.ingest());
      }
    } else if (!this.ingestTimer) {
      this.ingestTimer = setTimeout(() => this.ingest(), this.ingestDelayMs);
      this.ingestTimer.unref();
    }
  }

  /**
   * Queued rows into SQLite in one transaction (chained there, in this order), then the
   * pending file starts over. All synchronous, so nothing is appended in between. A row that
   * fails alone is logged by the group commit and dropped; if SQLite refuses the whole batch
   * the rows and the file stay, and it is tried again.
   */
  private ingest(): boolean {
    if (this.ingestTimer) clearTimeout(this.ingestTimer);
    this.ingestTimer = null;
    this.ingestSoon = false;
    if (this.queue.length === 0) return true;
    this.pending.flush();
    const batch = this.queue;
    this.queue = [];
    this.unsaved.clear();
    for (const e of batch) void this.gc.enqueue(() => this.apply(e, false));
    if (this.gc.flush()) {
      const emptied = this.pending.truncate();
      if (!emptied && !this.truncateFailing) this.log.warn('ledger: could not empty the pending file; its rows are in SQLite and a restart skips them');
      this.truncateFailing = !emptied;
      return true;
    }
    this.queue = batch;
    for (const e of batch) if (e.fin === null && !e.inDb) this.unsaved.set(e.id, e);
    if (!this.closed) {
      this.ingestTimer = setTimeout(() => this.ingest(), INGEST_RETRY_MS);
      this.ingestTimer.unref();
    }
    return false;
  }

  /**
   * One row into SQLite. A replayed row may be there already (the file is emptied only after
   * its batch committed): in flight (finish it) or finished (nothing to do).
   */
  private apply(e: Entry, replay: boolean): void {
    if (e.fin === null) {
      this.insertBegin.run(e.start);
      return;
    }
    const { start, fin } = e;
    const row = dbRow(start, fin);
    const link = this.chain.next(row);
    row.seq = link.seq;
    row.hash = link.hash;
    const kept = fin.server === start.server && fin.upstream_name === start.upstream_name && fin.upstream_era === start.upstream_era;
    const finish = kept ? this.finishKept : this.finishLinked;
    // Extra keys are ignored by a statement that does not name them.
    let changes = e.inDb ? finish.run(row).changes : this.insertLinked.run(row).changes;
    if (changes === 0) changes = e.inDb ? this.insertLinked.run(row).changes : finish.run(row).changes;
    if (changes === 1) this.chain.advance(link);
    else if (!replay) throw new Error(`audit row ${e.id} is not in flight (it was finished already)`);
  }

  /** Rows a hub that died left in the pending file go into SQLite before recovery. */
  private replay(path: string): void {
    const byId = new Map<number, Entry>();
    const order: Entry[] = [];
    for (const r of PendingLog.read(path)) {
      const { s, e } = (r ?? {}) as { s?: Params; e?: Params };
      if (!s || typeof s.id !== 'number') continue;
      const begun = byId.get(s.id);
      if (!e) {
        if (!begun) {
          const entry: Entry = { id: s.id, start: s, fin: null, inDb: false };
          byId.set(s.id, entry);
          order.push(entry);
        }
      } else if (begun && begun.fin === null) begun.fin = e;
      else order.push({ id: s.id, start: s, fin: e, inDb: false });
    }
    if (order.length === 0) return;
    for (const entry of order) void this.gc.enqueue(() => this.apply(entry, true));
    if (!this.gc.flush()) throw new Error(`ledger: could not apply ${path} (see the log); it is kept for the next start`);
    this.log.info({ rows: order.length }, 'ledger: applied rows the hub wrote before it last stopped');
  }

  /** The end's columns; late facts (server, upstream) win, otherwise the begin's stay. */
  private finalParams(start: Params, e: AuditEnd): Params {
    const fin = this.endParams(e);
    for (const k of ['server', 'upstream_name', 'upstream_era'] as const) fin[k] ??= start[k];
    return fin;
  }

  /** Hub-name assignments that outlive the process (the hub hands it to its NameAssigner). */
  nameStore(): LedgerNameStore {
    return this.names;
  }

  /** Pinned tool definitions (src/catalog/pins.ts); approvals by the CLI are picked up by polling. */
  pinStore(): LedgerPinStore {
    return this.pins;
  }

  /** Group-commit counters of audit rows: writes of the pending file and the rows they carried. */
  commitCounters(): { batches: number; writes: number } {
    return this.pending.counters;
  }

  query(filter: AuditFilter = {}): AuditRow[] {
    this.sync();
    return this.reader.query(filter);
  }

  stats(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}): StatsRow[] {
    this.sync();
    return this.reader.stats(filter);
  }

  verify(): VerifyResult {
    this.sync();
    return this.reader.verify();
  }

  /** Moves queued rows into SQLite first so the chain is complete, then prunes (see LedgerReader.prune). */
  prune(beforeTs: number): number {
    this.sync();
    this.gc.flush();
    return this.reader.prune(beforeTs);
  }

  /** Commits what is queued, rejects idempotency waiters nobody will answer, closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.purgeTimer);
    const ingested = this.ingest();
    this.idempotency.close();
    this.pins.close();
    this.gc.close();
    this.pending.close(ingested);
    // The worker's connection goes first, so closing the writer's (the last) folds the WAL in.
    await this.checkpointer?.stop();
    this.db.close();
  }

  /** Rows left 'in_flight' by a process that died become 'unknown' (and are chained). */
  private recover(): void {
    const rows = this.db.prepare(`SELECT id FROM audit WHERE outcome = 'in_flight' ORDER BY id`).all() as { id: number }[];
    const keys = this.db.transaction(() => {
      this.chain.startBatch();
      for (const { id } of rows) {
        const row = this.finalize.get({
          id,
          outcome: 'unknown',
          error_kind: null,
          error_code: null,
          error_message: 'the hub stopped before this call finished',
          latency_ms: null,
          response_bytes: null,
          result_json: null,
          server: null,
          upstream_name: null,
          upstream_era: null,
        }) as AuditDbRow;
        this.chain.append(row);
      }
      this.chain.endBatch();
      return this.db.prepare(`UPDATE idempotency SET state = 'unknown' WHERE state = 'in_flight'`).run().changes;
    }).immediate();
    if (rows.length || keys) this.log.warn({ rows: rows.length, idempotencyKeys: keys }, 'ledger: calls in flight when the hub last stopped are now marked unknown');
  }

  private beginParams(id: number, b: AuditBegin): Params {
    return {
      id,
      ts: Math.trunc(Number(b.ts)) || 0,
      request_id: text(b.requestId) ?? '',
      principal: text(b.principal) ?? '',
      client_address: text(b.clientAddress),
      client_era: text(b.clientEra) ?? '',
      client_name: text(b.clientInfo?.name),
      client_version: text(b.clientInfo?.version),
      method: text(b.method) ?? '',
      hub_name: text(b.hubName),
      server: text(b.server),
      upstream_name: text(b.upstreamName),
      upstream_era: text(b.upstreamEra),
      idempotency_key: text(b.idempotencyKey),
      args_hash: text(b.argsHash),
      request_bytes: finiteOrNull(b.requestBytes),
      args_json: this.body(b.args),
    };
  }

  private endParams(e: AuditEnd): Params {
    return {
      outcome: e.outcome,
      error_kind: text(e.errorKind),
      error_code: finiteOrNull(e.errorCode),
      error_message: e.errorMessage == null ? null : redactString(String(e.errorMessage)).slice(0, MAX_ERROR_MESSAGE),
      latency_ms: finiteOrNull(e.latencyMs),
      response_bytes: finiteOrNull(e.responseBytes),
      result_json: this.body(e.result),
      server: text(e.server),
      upstream_name: text(e.upstreamName),
      upstream_era: text(e.upstreamEra),
    };
  }

  private body(v: unknown): string | null {
    if (!this.storeBodies || v === undefined) return null;
    let json: string;
    try {
      json = JSON.stringify(redact(v, this.redactKeys)) ?? 'null';
    } catch {
      return JSON.stringify('[unserializable]');
    }
    if (Buffer.byteLength(json) > this.maxBodyBytes) return JSON.stringify({ truncated: true, bytes: Buffer.byteLength(json) });
    return json;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('ledger is closed');
  }
}

const RESOLVED = Promise.resolve();
function noop(): void {}

class Handle implements AuditHandle {
  private finished: Promise<void> | null = null;
  constructor(
    private readonly ledger: Ledger,
    readonly rowId: number,
    private readonly start: Params,
    private readonly startJson: string,
  ) {}

  /** The first call wins; later calls return the same promise. */
  finish(end: AuditEnd): Promise<void> {
    this.finished ??= this.ledger.finishRow(this.rowId, this.start, this.startJson, end);
    return this.finished;
  }
}

/**
 * A finished row exactly as the database will hold it (every column; seq and hash are set
 * once its chain link is known), built from the values written: start and fin are already
 * normalised to what SQLite stores and returns (text() for text columns, finite numbers,
 * integers for ts), so the digest computed from it is the one verify() recomputes from the
 * stored row, and it is also what the statements bind. One literal on purpose: an object
 * spread from start and fin binds more than twice as slowly in better-sqlite3 (29 vs 13 µs
 * per INSERT, measured), which was most of the ledger's cost.
 */
function dbRow(start: Params, fin: Params): Params {
  return {
    id: start.id,
    ts: start.ts,
    request_id: start.request_id,
    principal: start.principal,
    client_address: start.client_address,
    client_era: start.client_era,
    client_name: start.client_name,
    client_version: start.client_version,
    method: start.method,
    hub_name: start.hub_name,
    server: fin.server,
    upstream_name: fin.upstream_name,
    upstream_era: fin.upstream_era,
    outcome: fin.outcome,
    error_kind: fin.error_kind,
    error_code: fin.error_code,
    error_message: fin.error_message,
    latency_ms: fin.latency_ms,
    request_bytes: start.request_bytes,
    response_bytes: fin.response_bytes,
    idempotency_key: start.idempotency_key,
    args_hash: start.args_hash,
    args_json: start.args_json,
    result_json: fin.result_json,
    seq: null,
    hash: null,
  };
}

function redactPattern(p: RegExp | string | undefined): RegExp {
  if (p === undefined) return DEFAULT_REDACT_KEYS;
  if (typeof p !== 'string') return p;
  try {
    return new RegExp(p, 'i');
  } catch {
    throw new Error('ledger.redactKeys is not a valid regular expression');
  }
}

const MAX_TEXT = 4096;

/** Text columns take whatever arrives (ids may be numbers) but never fail the insert. */
function text(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  const s = typeof v === 'string' ? v : typeof v === 'object' ? safeStringify(v) : String(v);
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s;
}

function safeStringify(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return '[unserializable]';
  }
}

function finiteOrNull(n: unknown): number | null {
  return typeof n === 'number' && Number.isFinite(n) ? n : null;
}
