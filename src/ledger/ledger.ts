import type { Database } from 'better-sqlite3';
import { silentLogger, type Logger } from '../log.js';
import { afterStop, whenIngested } from './close-leftovers.js';
import type { VerifyResult, Witness } from './chain.js';
import { ChainHeadLog, HEAD_LOG_EVERY_MS } from './head-log.js';
import { openLedgerDb } from './db.js';
import { realLedgerPath } from './real-path.js';
import { recoverLedgerFile } from './startup.js';
import type { GroupCommit } from './group-commit.js';
import type { IdempotencyStore } from './idempotency.js';
import { Ingester } from './ingester.js';
import type { LedgerNameStore } from './names.js';
import type { LedgerCapabilityStore } from './capabilities.js';
import type { LedgerResourceRouteStore } from './resource-routes.js';
import type { LedgerSessionMemoryStore } from './session-memory.js';
import type { LedgerSpentStates } from './spent-states.js';
import { LedgerStores } from './stores.js';
import { PendingFiles, type PendingFilesOptions } from './pending-files.js';
import { writeFailed } from './pending-log.js';
import type { LedgerPinStore } from './pins.js';
import type { ItemPinKind } from '../catalog/pins.js';
import { LedgerReader, type StatsRow } from './reader.js';
import { beginLine, finishedLine, RowValues, type RowBodyOptions } from './row-values.js';
import type { AuditFilter, AuditRow } from './rows.js';
import type { AuditBegin, AuditEnd, AuditHandle, LedgerCounters } from './types.js';
import { joinChunks, liveLines } from './batch-lines.js';
import { RowHandle, type RowFinisher } from './row-handle.js';
import { IdTable } from '../keyed-table.js';
import { HOLD_FROM } from '../turn-end.js';

export interface LedgerOptions extends RowBodyOptions {
  path: string;
  idempotencyTtlMs?: number;
  /** Defaults to the package's migrations/ folder. */
  migrationsDir?: string;
  log?: Logger;
  /** Clock for idempotency TTL and bookkeeping (tests inject one). */
  now?: () => number;
  /** Checkpoint the WAL from the ingest thread every `checkpointEveryMs` (default true; see db.ts). */
  backgroundCheckpoint?: boolean;
  /** How often those checkpoints run while there is something to copy (default 500 ms). */
  checkpointEveryMs?: number;
  /** How long rows wait in the pending file before they go to the ingest thread (default 5 ms). */
  ingestDelayMs?: number;
  /**
   * The same while 4 or more begins wait in the hub for their finish (default 25 ms;
   * `ingestDelayMs` when only that is given, so a test that sets it gets that delay throughout).
   */
  ingestDelayBusyMs?: number;
  /** How long an in-flight row waits for its call's finish before it goes to SQLite alone (default 50 ms). */
  beginHoldMs?: number;
  /** When a hand-over switches pending files (PendingFilesOptions); default SWITCH_BYTES, SWITCH_AFTER_MS. */
  pendingSwitch?: PendingFilesOptions;
  /** How often the chain's head is logged, when it moved (default 1 h); also at open and close. */
  headLogMs?: number;
}

/**
 * How long a row waits in the pending file before it goes to the ingest thread (see ingest).
 * Each hand-over wakes the thread, and at concurrency 1 on two cores its burst of work delays
 * about one call by a millisecond or more: small, frequent bursts hurt the tail least. Measured
 * (stdio echo, 5 s, three alternating runs each): p99 0.92–1.07 ms at 5 ms against 1.31–1.52 at
 * 50 ms (10 ms: 1.15–1.23, with three times as many calls over 1 ms), p50 +0.005–0.017 ms; at
 * concurrency 64, 9.9k against 9.1–9.5k req/s.
 */
const INGEST_DELAY_MS = 5;
/**
 * The hand-over delay while at least BUSY_IN_FLIGHT begins wait in the hub for their finish
 * (calls in flight for under BEGIN_HOLD_MS: a busy hub of short calls). Each hand-over costs
 * the thread a transaction (its locks, the WAL frames of the pages every batch touches, the
 * chain head) and the hub a wake-up of the thread, whatever the batch holds: at concurrency 64
 * on two cores, 5 ms batches of ~20 rows cost the thread 53–64 µs per call, 25 ms batches
 * 40–43 (three runs each, bench/threads.mjs). 50 ms gave no more. The tail this delay protects
 * at concurrency 1 is not at stake here: busy calls already take milliseconds.
 */
const INGEST_DELAY_BUSY_MS = 25;
const BUSY_IN_FLIGHT = 4;
/**
 * How long an in-flight row waits in the hub for its call's finish before it goes to the ingest
 * thread alone. Handed over with its finish, a call's row is one INSERT on the thread; handed
 * over alone, it is an INSERT and later an UPDATE (with the chain link), ~10 µs more of the
 * thread's CPU. A call at concurrency 64 takes about as long as the hand-over period, so
 * without the hold nearly every call paid both (counted: 98 % of calls at 64, 62 % at 32,
 * 20 % at 8). Longer calls' rows still reach SQLite (and other processes' readers) this soon;
 * a reader in this process gets them at once (sync hands everything over).
 */
const BEGIN_HOLD_MS = 50;
/**
 * A hand-over that holds begins back switches pending files only once the one written holds
 * this much or is this old (see PendingFilesOptions): at concurrency 64 every few hand-overs
 * rather than at each of them, so held begins are written again that much less often. One that
 * holds nothing back switches as before, so a quiet hub's last hand-over empties its file.
 */
const SWITCH_BYTES = 256 * 1024;
const SWITCH_AFTER_MS = 100;
/** Lines waiting that make the hand-over happen at once instead. */
const INGEST_BATCH = 512;
/** After SQLite refused a whole batch (disk full, lock held too long). */
const INGEST_RETRY_MS = 1000;
/** A new ingest thread replaces one that ended after this (doubling while they keep ending). */
const INGEST_RESTART_MS = 1000;
/** How long a reader in this process waits for the ingest thread before it reads anyway. */
const SYNC_TIMEOUT_MS = 10_000;
/**
 * PASSIVE checkpoints on the ingest thread (see WRITER_AUTOCHECKPOINT_PAGES in db.ts). Each one
 * fsyncs the WAL and the database file, and the commit after one that copied everything fsyncs the
 * rewound WAL's header: at 100 ms that was ~13 % of the thread's CPU at concurrency 32, and
 * 20–25 fsyncs a second (docs/BENCHMARKS.md, sixty-seventh session). At 500 ms a checkpoint copies
 * a hot page (chain_state, sqlite_sequence, the indexes' last leaves) once for five times as many
 * commits. What the WAL holds meanwhile stays far below the writers' own threshold (8,000 pages)
 * at any rate the hub reaches; the ledger's durability is the page cache's either way (SIGKILL,
 * not a power loss: db.ts, pending-log.ts).
 */
const CHECKPOINT_EVERY_MS = 500;

/**
 * The hub's ledger: one writer per file. An audit row is committed when its line is written
 * to the pending file (PendingLog: one write() per turn of the event loop, durable against
 * SIGKILL); the lines go to the ingest thread every 5 ms (ingest), which moves them into
 * SQLite, where they are chained and where readers find them. A call's in-flight row and its
 * finished row usually reach SQLite together, as one INSERT. Idempotency keys, names and pins
 * are SQLite writes through the group commit, on this thread (LedgerStores).
 *
 * What stays here is the path of every call (begin, finish, the hand-over that holds begins
 * back for their finish) and what shares its state (sync, close): one class, so each call's
 * steps are field reads and calls on it, not calls through another object's interface.
 * Around it: startup.ts (the file before the first write), row-values.ts (a call's line),
 * row-handle.ts, batch-lines.ts, head-log.ts, stores.ts, close-leftovers.ts.
 *
 * Usage on the hot path: claim the idempotency key (if any), `await beginCommitted()`,
 * forward, `idempotency.complete()`, `await handle.finish()`, then answer the client.
 */
export class Ledger implements RowFinisher {
  /** A real ledger: the router measures response sizes only for one (see AuditSink.enabled). */
  readonly enabled = true;
  readonly idempotency: IdempotencyStore;
  /** The tables other than audit (names, pins, ...), written through `gc`. */
  private readonly stores: LedgerStores;
  private readonly reader: LedgerReader;
  /** The stores' group commit, a field of its own: whenCommitted() reads it on every call. */
  private readonly gc: GroupCommit;
  /** A call's begin and finish as a pending file's values. */
  private readonly values: RowValues;
  private readonly log: Logger;
  private readonly head: ChainHeadLog;
  private readonly pending: PendingFiles;
  /** The path the pending files are named by (the database file's real path). */
  private readonly files: string;
  private readonly ingester: Ingester;
  /**
   * Lines written (or refused by a full disk) since the last hand-over, in order; '' for a
   * begin finished since. Held begins (BEGIN_HOLD_MS) come first.
   */
  private lines: string[] = [];
  /** Of `lines`, the first ones, kept back at the last hand-over: they do not hurry the next. */
  private kept = 0;
  /** Begins among `lines` whose call has not finished, by row id. */
  private readonly begun = new IdTable<RowHandle>();
  /** The number of the last batch handed to the ingest thread. */
  private handed = 0;
  private ingestTimer: NodeJS.Timeout | null = null;
  /** Wakes a hand-over when the oldest held begin's time is up and nothing else comes. */
  private holdTimer: NodeJS.Timeout | null = null;
  private ingestSoon = false;
  private readonly ingestDelayMs: number;
  private readonly ingestDelayBusyMs: number;
  private readonly beginHoldMs: number;
  private nextId: number;
  private closed = false;
  /** close()'s work, once. */
  private closing: Promise<void> | null = null;
  /** A pending file could not be emptied (warned once per streak). */
  private truncateFailing = false;
  /** A read went ahead without the latest rows (warned once per streak). */
  private readBehind = false;

  private constructor(
    private readonly db: Database,
    opts: LedgerOptions,
  ) {
    this.log = opts.log ?? silentLogger;
    this.values = new RowValues(opts);
    this.ingestDelayMs = opts.ingestDelayMs ?? INGEST_DELAY_MS;
    this.ingestDelayBusyMs = opts.ingestDelayBusyMs ?? opts.ingestDelayMs ?? INGEST_DELAY_BUSY_MS;
    this.beginHoldMs = opts.beginHoldMs ?? BEGIN_HOLD_MS;
    const now = opts.now ?? Date.now;
    this.reader = new LedgerReader(db);
    const stores = (this.stores = new LedgerStores(db, opts.idempotencyTtlMs, now, this.log));
    this.gc = stores.gc;
    this.idempotency = stores.idempotency;

    // Named by the file's real path, as its lock is: a hub reaching it through a symlink finds
    // what one that used another spelling of its path left behind.
    const files = (this.files = realLedgerPath(db.name));
    recoverLedgerFile(db, files, this.log, now());
    // Everything the files held is in SQLite now; appends start them over.
    this.pending = new PendingFiles(files, opts.pendingSwitch ?? { switchBytes: SWITCH_BYTES, switchAfterMs: SWITCH_AFTER_MS });
    // With the files empty, no line is left for a pruned id to skip (see LedgerReader.prune).
    // A prune beside this start lists only lines it read: ones these files held (gone now) or
    // none. While the hub runs the list stays: a replacement ingest thread replays the files.
    if (this.pending.startOver()) db.prepare('DELETE FROM audit_pruned').run();
    // Ids are handed out here so begin() can return one synchronously; AUTOINCREMENT's
    // sequence remembers pruned ids, so they are never reused.
    const seq = db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'audit'`).get() as { seq: number } | undefined;
    const max = this.reader.maxId();
    this.nextId = Math.max(seq?.seq ?? 0, max) + 1;

    stores.startPurging();
    this.head = new ChainHeadLog(db, this.log, opts.headLogMs ?? HEAD_LOG_EVERY_MS);
    this.ingester = new Ingester(files, {
      log: this.log,
      onApplied: (n, emptied) => this.committed(n, emptied),
      retryMs: INGEST_RETRY_MS,
      restartMs: INGEST_RESTART_MS,
      checkpointMs: opts.backgroundCheckpoint === false ? null : (opts.checkpointEveryMs ?? CHECKPOINT_EVERY_MS),
    });
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
    const route = this.values.route(b);
    const h = new RowHandle(this, id, route, this.values.beginOpen(id, b, route), this.lines.length, performance.now());
    this.begun.set(id, h);
    // Waited for through whenCommitted() in this turn, or through `written` later.
    h.written = this.write(beginLine(h.startOpen));
    return h;
  }

  /** begin() and wait until the row is committed: call before forwarding. */
  async beginCommitted(b: AuditBegin): Promise<AuditHandle> {
    const h = this.begin(b);
    await this.whenCommitted(); // the row, and an idempotency claim made just before it
    return h;
  }

  /** Whether whenCommitted() waits for nothing: no line queued for the turn's end, no write failed in it, no SQLite write pending. */
  committedNow(): boolean {
    return this.pending.whenWritten() === null && this.gc.pending === 0;
  }

  /** Resolves once everything queued so far is committed (pending file and SQLite writes). */
  whenCommitted(): Promise<void> {
    const written = this.pending.whenWritten();
    // A batch fails only when SQLite refused it whole (a lock, a full disk): said as the pending
    // file's failure is, so the call is refused by name and its row is no `unknown`.
    const sql = this.gc.pending > 0 ? this.gc.whenCommitted().catch(refusedBySqlite) : null;
    if (written && sql) return Promise.all([written, sql]).then(noop);
    return written ?? sql ?? RESOLVED;
  }

  /** A finished row in one step (denials, protocol errors, replays). */
  record(b: AuditBegin, e: AuditEnd): Promise<void> {
    this.assertOpen();
    const id = this.nextId++;
    const route = this.values.route(b);
    return this.write(finishedLine(this.values.beginOpen(id, b, route), this.values.finish(route, e)));
  }

  /** @internal used by the handle once. */
  finishRow(h: RowHandle, e: AuditEnd): Promise<void> {
    if (this.closed) return Promise.reject(new Error('ledger is closed'));
    const fin = this.values.finish(h.route, e);
    // The finish line carries the begin's columns too (a restart can finish the row from it
    // alone), so a begin not yet handed over need not go to the thread at all.
    if (this.begun.delete(h.rowId)) this.lines[h.at] = '';
    void this.write(finishedLine(h.startOpen, fin));
    // Its line, and an idempotency answer stored just before it (a SQLite write).
    return this.whenCommitted();
  }

  /**
   * Moves every row written so far into SQLite before returning (readers in this process call
   * it first): hands the lines over and waits for the ingest thread, at most SYNC_TIMEOUT_MS.
   */
  sync(): void {
    this.ingest(true);
    if (this.ingester.waitSync(this.handed, SYNC_TIMEOUT_MS)) {
      this.readBehind = false;
      this.emptied(this.pending.startOver());
    } else if (!this.readBehind) {
      this.readBehind = true; // warned once until a read is whole again
      this.log.warn('ledger: rows are not all in SQLite yet (see earlier messages); reads may miss the latest');
    }
  }

  /**
   * A line into the pending file, and on its way to the ingest thread. A line the file
   * refused (disk full) goes too: its caller is refused, and the row says so once SQLite
   * takes it.
   */
  private write(line: string): Promise<void> {
    // From HOLD_FROM begins waiting for their finish, even the first line of a turn waits for
    // its end (PendingLog.append's `join`): one write() per turn instead of two. The line
    // written at once is for a lone call's latency; this busy, the answers leave at the turn's
    // end anyway, and the calls' frames still go out in the same turn, after the write
    // (src/turn-end.ts). Measured at concurrency 64 (stdio echo, seven alternating rounds):
    // writes per call 0.131 → 0.089, the event loop's CPU per call 60.3 → 58.5 µs (lower in 6
    // of 7 rounds), throughput +1 % (within the noise).
    const written = this.pending.append(line, this.begun.size >= HOLD_FROM);
    this.lines.push(line);
    this.scheduleIngest();
    return written;
  }

  private scheduleIngest(): void {
    if (this.lines.length - this.kept >= INGEST_BATCH) {
      if (!this.ingestSoon) {
        this.ingestSoon = true;
        setImmediate(() => this.ingest());
      }
    } else if (!this.ingestTimer) {
      const delay = this.begun.size >= BUSY_IN_FLIGHT ? this.ingestDelayBusyMs : this.ingestDelayMs;
      this.ingestTimer = setTimeout(() => this.ingest(), delay);
      this.ingestTimer.unref();
    }
  }

  /**
   * Hands the lines written since the last time to the ingest thread as one batch; new lines
   * go to the other pending file while this one waits for the batch's commit (PendingFiles).
   * Begins younger than BEGIN_HOLD_MS stay behind for their finish, unless `all`: they move
   * to the front of the next batch, and into the other file if new lines go there now, so the
   * file this batch empties never holds the only copy of a row. They are written there before
   * the batch goes: the thread may commit it and empty this file at once, and a hub killed
   * between the two would have lost them.
   */
  private ingest(all = false): void {
    if (this.ingestTimer) clearTimeout(this.ingestTimer);
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.ingestTimer = this.holdTimer = null;
    this.ingestSoon = false;
    if (this.lines.length === 0) return;
    let held = all ? [] : this.held();
    if (held.length > 0 && held.length === liveLines(this.lines)) {
      this.kept = this.lines.length;
      this.holdFor(held); // nothing but held begins: nothing to hand over yet
      return;
    }
    const batch = this.lines;
    this.pending.flush();
    // Decided once, before the batch goes: the thread empties the file only if the hub switches.
    const empties = this.pending.switchable(held.length > 0);
    if (empties !== undefined) {
      this.pending.switched(this.ingester.next);
      // The other file did not take them: SQLite is their only safe place now, in this batch.
      if (held.length > 0 && !this.pending.rewrite(held.map((h) => batch[h.at]!))) held = [];
    }
    const next: string[] = [];
    this.begun.clear();
    for (const h of held) {
      next.push(batch[h.at]!);
      batch[h.at] = '';
      h.at = next.length - 1;
      this.begun.set(h.rowId, h);
    }
    this.lines = next;
    this.kept = next.length;
    // A line a failed write left out of the files is only here: its batch is kept until committed.
    this.handed = this.ingester.send(joinChunks(batch), empties, this.pending.handOver(held[0]?.since));
    this.holdFor(held);
  }

  /** The begins to keep back from this hand-over, oldest first. */
  private held(): RowHandle[] {
    const out: RowHandle[] = [];
    if (this.begun.size === 0) return out;
    const now = performance.now();
    for (const h of this.begun.values()) if (now - h.since < this.beginHoldMs) out.push(h);
    return out;
  }

  /** A hand-over when the oldest of these has waited long enough, unless lines come first. */
  private holdFor(held: RowHandle[]): void {
    if (held.length === 0) return;
    const wait = this.beginHoldMs - (performance.now() - held[0]!.since);
    this.holdTimer = setTimeout(() => this.ingest(), Math.max(this.ingestDelayMs, Math.ceil(wait)));
    this.holdTimer.unref();
  }

  /** The ingest thread committed batches up to n (and emptied `emptied`). */
  private committed(n: number, emptied: readonly string[]): void {
    if (this.closed) return;
    this.emptied(this.pending.committed(n, emptied));
    if (n === this.handed && this.lines.length === 0) this.tidy();
  }

  /**
   * Everything written is committed and nothing waits, yet the file written holds lines: the
   * last hand-over could not switch (the other file still waited for its commit). A quiet hub
   * would keep them until its next call; an empty batch switches files and has the thread
   * empty this one now. (A start would only apply them again, which changes nothing: rows a
   * prune removed meanwhile are skipped, see LedgerReader.prune.)
   */
  private tidy(): void {
    const empties = this.pending.switchable(false);
    if (empties === undefined) return;
    this.pending.switched(this.ingester.next);
    this.handed = this.ingester.send([], empties);
  }

  private emptied(ok: boolean): void {
    if (!ok && !this.truncateFailing) this.log.warn('ledger: could not empty a pending file; its rows are in SQLite and a restart skips them');
    this.truncateFailing = !ok;
  }

  /** Hub-name assignments that outlive the process (the hub hands it to its NameAssigner). */
  nameStore(): LedgerNameStore {
    return this.stores.names;
  }

  /** Each server's capabilities when it was last ready (src/hub/known-capabilities.ts). */
  capabilityStore(): LedgerCapabilityStore {
    return this.stores.capabilities;
  }

  /** Resource URIs and templates each server last showed (src/catalog/resource-routes.ts). */
  resourceRouteStore(): LedgerResourceRouteStore {
    return this.stores.resourceRoutes;
  }

  /** The legacy sessions open at the hub, with their subscriptions and log levels (src/downstream/session-memory.ts). */
  sessionMemoryStore(): LedgerSessionMemoryStore {
    return this.stores.sessionMemory;
  }

  /** The hub's requestStates spent at this hub, so a restart does not take one again (src/router/request-state.ts). */
  spentStateStore(): LedgerSpentStates {
    return this.stores.spentStates;
  }

  /** Pinned tool definitions (src/catalog/pins.ts); approvals by the CLI are picked up by polling. */
  pinStore(): LedgerPinStore {
    return this.stores.pins;
  }

  /** Pinned prompts, resources and templates (item_pins), a store per kind. */
  itemPinStores(): Record<ItemPinKind, LedgerPinStore> {
    return this.stores.itemPins;
  }

  /**
   * Reads the pins other processes changed, now rather than at the next poll: the CLI asks after
   * an approval (POST /admin/pins/changed). true when a pin changed.
   */
  lookForPinChanges(): boolean {
    return this.closed ? false : this.stores.pinWatch.tick();
  }

  /** Group-commit counters of audit rows: writes of the pending file and the rows they carried. */
  commitCounters(): LedgerCounters {
    const { failures, failing } = this.pending.status;
    return { ...this.pending.counters, threadRestarts: this.ingester.restarts, batchesUnapplied: this.ingester.unapplied, writeFailures: failures, writeFailing: failing };
  }

  query(filter: AuditFilter = {}): AuditRow[] {
    this.sync();
    return this.reader.query(filter);
  }

  /**
   * query()'s rows (the newest first), a page at a time, each read when asked for: a reader that
   * stops early (/admin/ledger at its size bound) neither reads nor holds the rest, which with
   * stored bodies (up to 1 MiB each, two a row) can be far more than the hub's memory.
   * The ids are an array, not kept in SQLite as `ledger export`'s and `query`'s are (MatchedIds):
   * there are at most `limit` of them, which /admin/ledger caps at 1,000 (8 KB, less than the rows
   * its one answer holds), and a temporary table made and dropped per request would cost the
   * hub's event loop more than the array.
   */
  *queryPages(filter: Omit<AuditFilter, 'afterSeq'> = {}, size = 100): Generator<AuditRow[]> {
    this.sync();
    // Past `afterId`, the first `limit` rows oldest first by id, as query() reads them: the next
    // page goes on from the last id of this one (newest first, a poller going on from the highest
    // id it was given would skip the rows between).
    const forward = filter.afterId !== undefined;
    const ids = forward ? this.reader.idsAfter(filter) : this.reader.queryIds(filter).reverse();
    for (let i = 0; i < ids.length; i += size) {
      const page = [...this.reader.rowsOf(ids.slice(i, i + size), forward ? 'id' : 'ts', size)].flat();
      if (page.length) yield forward ? page : page.reverse();
    }
  }

  stats(filter: Omit<AuditFilter, 'limit' | 'afterId' | 'afterSeq'> = {}): StatsRow[] {
    this.sync();
    return this.reader.stats(filter);
  }

  verify(witnesses: readonly Witness[] = []): VerifyResult {
    this.sync();
    return this.reader.verify(witnesses);
  }

  /** Moves queued rows into SQLite first so the chain is complete, then prunes (see LedgerReader.prune). */
  prune(beforeTs: number): number {
    this.sync();
    this.gc.flush();
    return this.reader.prune(beforeTs);
  }

  /**
   * Commits what is queued, rejects idempotency waiters nobody will answer, closes the file. A
   * second call waits for the first's end: resolved at once, its caller could go on (exit, open
   * the file again) while rows were still on their way into SQLite.
   */
  close(): Promise<void> {
    return (this.closing ??= this.closeOnce());
  }

  private async closeOnce(): Promise<void> {
    this.closed = true;
    this.stores.stopPurging();
    this.head.stop();
    this.ingest(true);
    let ingested: boolean;
    const rewrite = (lines: string[]): boolean => this.pending.rewrite(lines);
    // A thread that has not begun to open the database is ended at once, and what it was handed
    // goes in here: the pending files, and the batches kept for lines a failed write (a full
    // disk) left out of them, whose only copy they are (see Ingester.send), as a thread
    // replacing it would take them.
    if (await this.ingester.cutShort()) ingested = await afterStop(this.db, this.files, this.ingester.keptLines, false, rewrite, this.log);
    else {
      ingested = await whenIngested(this.ingester, this.handed, INGEST_RETRY_MS);
      const refused = this.ingester.refusing; // read before the thread's end clears it
      await this.ingester.stop();
      ingested ||= await afterStop(this.db, this.files, this.ingester.keptLines, refused, rewrite, this.log);
    }
    this.head.close();
    this.stores.close();
    this.pending.close(ingested);
    // The thread's connection went first, so closing this one (the last) folds the WAL in.
    this.db.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('ledger is closed');
  }
}

const RESOLVED = Promise.resolve();

function noop(): void {}

function refusedBySqlite(err: unknown): never {
  throw writeFailed(err);
}
