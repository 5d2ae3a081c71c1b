import type { Database, Statement } from 'better-sqlite3';
import { silentLogger, type Logger } from '../log.js';
import { Checkpointer } from './checkpointer.js';
import { ChainWriter, type VerifyResult } from './chain.js';
import { openLedgerDb } from './db.js';
import { GroupCommit } from './group-commit.js';
import { IdempotencyStore } from './idempotency.js';
import { LedgerNameStore } from './names.js';
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
}

const DAY_MS = 24 * 60 * 60 * 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
const MAX_ERROR_MESSAGE = 4096;

/**
 * The hub's ledger: one writer per file. Every write goes through the group commit, so a
 * call is cheap (no synchronous disk write on the hot path) and a promise from begin/
 * finish/record resolves only once its row is committed.
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
  private nextId: number;
  private closed = false;

  private constructor(
    private readonly db: Database,
    opts: LedgerOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    this.storeBodies = opts.storeBodies ?? false;
    this.redactKeys = redactPattern(opts.redactKeys);
    this.maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
    const now = opts.now ?? Date.now;
    this.reader = new LedgerReader(db);
    this.chain = new ChainWriter(db);
    this.gc = new GroupCommit(db, { before: () => this.chain.startBatch(), after: () => this.chain.endBatch() }, this.log);
    this.idempotency = new IdempotencyStore(db, this.gc, opts.idempotencyTtlMs ?? DAY_MS, now, this.log);
    this.names = new LedgerNameStore(db, this.gc, now, this.log);
    this.pins = new LedgerPinStore(db, this.gc, this.log);

    const cols = `id, ts, request_id, principal, client_address, client_era, client_name, client_version, method,
      hub_name, server, upstream_name, upstream_era, idempotency_key, args_hash, request_bytes, args_json, outcome`;
    const vals = `@id, @ts, @requestId, @principal, @clientAddress, @clientEra, @clientName, @clientVersion, @method,
      @hubName, @server, @upstreamName, @upstreamEra, @idempotencyKey, @argsHash, @requestBytes, @argsJson`;
    this.insertBegin = db.prepare(`INSERT INTO audit (${cols}) VALUES (${vals}, 'in_flight')`);
    // What every finish sets; the statements differ only in the upstream columns and the link.
    const ended = `outcome = @outcome, error_kind = @errorKind, error_code = @errorCode, error_message = @errorMessage,
      latency_ms = @latencyMs, response_bytes = @responseBytes, result_json = @resultJson`;
    const inFlight = `WHERE id = @id AND outcome = 'in_flight'`;
    // The finished row's chain link is computed from the values written (see dbRow), so
    // finishing is one statement and needs no RETURNING.
    this.finishLinked = db.prepare(`UPDATE audit SET ${ended},
      server = @server, upstream_name = @upstreamName, upstream_era = @upstreamEra, seq = @seq, hash = @hash ${inFlight}`);
    // The usual finish: the call went where its begin said. Leaving server out of SET spares
    // SQLite rewriting its audit_server_ts entry.
    this.finishKept = db.prepare(`UPDATE audit SET ${ended}, seq = @seq, hash = @hash ${inFlight}`);
    this.insertLinked = db.prepare(`INSERT INTO audit (${cols}, error_kind, error_code, error_message, latency_ms, response_bytes, result_json, seq, hash)
      VALUES (${vals}, @outcome, @errorKind, @errorCode, @errorMessage, @latencyMs, @responseBytes, @resultJson, @seq, @hash)`);
    this.finalize = db.prepare(`UPDATE audit SET ${ended},
      server = COALESCE(@server, server), upstream_name = COALESCE(@upstreamName, upstream_name),
      upstream_era = COALESCE(@upstreamEra, upstream_era) ${inFlight} RETURNING *`);

    this.recover();
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

  /** Queues the 'in_flight' row; it is inserted by the next group commit. */
  begin(b: AuditBegin): AuditHandle {
    this.assertOpen();
    const id = this.nextId++;
    const start = this.beginParams(id, b);
    const inserted = this.gc.enqueue(() => {
      this.insertBegin.run(start);
    });
    inserted.catch(() => undefined); // logged by the group commit; finish() reports it
    return new Handle(this, id, inserted, start);
  }

  /** begin() and wait until the row is committed: call before forwarding. */
  async beginCommitted(b: AuditBegin): Promise<AuditHandle> {
    const h = this.begin(b) as Handle;
    await h.committed;
    return h;
  }

  /** Resolves once everything queued so far is committed. */
  whenCommitted(): Promise<void> {
    return this.gc.whenCommitted();
  }

  /** A finished row in one step (denials, protocol errors, replays). */
  record(b: AuditBegin, e: AuditEnd): Promise<void> {
    this.assertOpen();
    const id = this.nextId++;
    const start = this.beginParams(id, b);
    const fin = this.finalParams(start, e);
    return this.gc.enqueue(() => {
      const link = this.chain.next(dbRow(start, fin));
      this.insertLinked.run({ ...start, ...fin, ...link });
      this.chain.advance(link);
    });
  }

  /** @internal used by the handle; `start` is what its begin() wrote. */
  finishRow(id: number, start: Record<string, unknown>, e: AuditEnd): Promise<void> {
    if (this.closed) return Promise.reject(new Error('ledger is closed'));
    const fin = this.finalParams(start, e);
    const kept = fin.server === start.server && fin.upstreamName === start.upstreamName && fin.upstreamEra === start.upstreamEra;
    return this.gc.enqueue(() => {
      const link = this.chain.next(dbRow(start, fin));
      // Extra keys are ignored by a statement that does not name them.
      const changes = (kept ? this.finishKept : this.finishLinked).run({ id, ...fin, ...link }).changes;
      if (changes !== 1) throw new Error(`audit row ${id} is not in flight (its begin was not committed, or it was finished already)`);
      this.chain.advance(link);
    });
  }

  /** The end's columns; late facts (server, upstream) win, otherwise the begin's stay. */
  private finalParams(start: Record<string, unknown>, e: AuditEnd): Record<string, unknown> {
    const fin = this.endParams(e);
    for (const k of ['server', 'upstreamName', 'upstreamEra'] as const) fin[k] ??= start[k];
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

  /** Group-commit counters: committed transactions and the writes they carried. */
  commitCounters(): { batches: number; writes: number } {
    return this.gc.counters;
  }

  query(filter: AuditFilter = {}): AuditRow[] {
    return this.reader.query(filter);
  }

  stats(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}): StatsRow[] {
    return this.reader.stats(filter);
  }

  verify(): VerifyResult {
    return this.reader.verify();
  }

  /** Flushes queued writes first so the chain is complete, then prunes (see LedgerReader.prune). */
  prune(beforeTs: number): number {
    this.gc.flush();
    return this.reader.prune(beforeTs);
  }

  /** Commits what is queued, rejects idempotency waiters nobody will answer, closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.purgeTimer);
    this.idempotency.close();
    this.pins.close();
    this.gc.close();
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
          errorKind: null,
          errorCode: null,
          errorMessage: 'the hub stopped before this call finished',
          latencyMs: null,
          responseBytes: null,
          resultJson: null,
          server: null,
          upstreamName: null,
          upstreamEra: null,
        }) as AuditDbRow;
        this.chain.append(row);
      }
      this.chain.endBatch();
      return this.db.prepare(`UPDATE idempotency SET state = 'unknown' WHERE state = 'in_flight'`).run().changes;
    }).immediate();
    if (rows.length || keys) this.log.warn({ rows: rows.length, idempotencyKeys: keys }, 'ledger: calls in flight when the hub last stopped are now marked unknown');
  }

  private beginParams(id: number, b: AuditBegin): Record<string, unknown> {
    return {
      id,
      ts: Math.trunc(Number(b.ts)) || 0,
      requestId: text(b.requestId) ?? '',
      principal: text(b.principal) ?? '',
      clientAddress: text(b.clientAddress),
      clientEra: text(b.clientEra) ?? '',
      clientName: text(b.clientInfo?.name),
      clientVersion: text(b.clientInfo?.version),
      method: text(b.method) ?? '',
      hubName: text(b.hubName),
      server: text(b.server),
      upstreamName: text(b.upstreamName),
      upstreamEra: text(b.upstreamEra),
      idempotencyKey: text(b.idempotencyKey),
      argsHash: text(b.argsHash),
      requestBytes: finiteOrNull(b.requestBytes),
      argsJson: this.body(b.args),
    };
  }

  private endParams(e: AuditEnd): Record<string, unknown> {
    return {
      outcome: e.outcome,
      errorKind: text(e.errorKind),
      errorCode: finiteOrNull(e.errorCode),
      errorMessage: e.errorMessage == null ? null : redactString(String(e.errorMessage)).slice(0, MAX_ERROR_MESSAGE),
      latencyMs: finiteOrNull(e.latencyMs),
      responseBytes: finiteOrNull(e.responseBytes),
      resultJson: this.body(e.result),
      server: text(e.server),
      upstreamName: text(e.upstreamName),
      upstreamEra: text(e.upstreamEra),
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

class Handle implements AuditHandle {
  private finished: Promise<void> | null = null;
  constructor(
    private readonly ledger: Ledger,
    readonly rowId: number,
    /** Settles when the in-flight row is committed. */
    readonly committed: Promise<void>,
    private readonly start: Record<string, unknown>,
  ) {}

  /** The first call wins; later calls return the same promise. */
  finish(end: AuditEnd): Promise<void> {
    this.finished ??= this.ledger.finishRow(this.rowId, this.start, end);
    return this.finished;
  }
}

/**
 * A finished row exactly as the database will hold it (snake_case, every column but seq and
 * hash), built from the values written: the params are already normalised to what SQLite
 * stores and returns (text() for text columns, finite numbers, integers for ts), so the chain
 * digest computed here is the one verify() recomputes from the stored row.
 */
function dbRow(start: Record<string, unknown>, fin: Record<string, unknown>): Record<string, unknown> {
  return {
    id: start.id,
    ts: start.ts,
    request_id: start.requestId,
    principal: start.principal,
    client_address: start.clientAddress,
    client_era: start.clientEra,
    client_name: start.clientName,
    client_version: start.clientVersion,
    method: start.method,
    hub_name: start.hubName,
    server: fin.server,
    upstream_name: fin.upstreamName,
    upstream_era: fin.upstreamEra,
    outcome: fin.outcome,
    error_kind: fin.errorKind,
    error_code: fin.errorCode,
    error_message: fin.errorMessage,
    latency_ms: fin.latencyMs,
    request_bytes: start.requestBytes,
    response_bytes: fin.responseBytes,
    idempotency_key: start.idempotencyKey,
    args_hash: start.argsHash,
    args_json: start.argsJson,
    result_json: fin.resultJson,
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
