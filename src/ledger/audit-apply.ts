import type { Database, Statement } from 'better-sqlite3';
import type { Logger } from '../log.js';
import { sha256Hex } from './canonical.js';
import { ChainWriter, ColumnsDigest, formatWitness, type RowValuesDigest } from './chain.js';
import { GroupCommit } from './group-commit.js';

type Params = Record<string, unknown>;

/**
 * The columns a begin writes, and the end's columns a finish adds (FIN_COLS: with the late facts).
 * tool_group (migration 0013), then the trace columns (0015), came last, so a line written
 * before them is the same line without them (see OLDER_BEGINS, valuesOf).
 */
export const BEGIN_COLS = ['id', 'ts', 'request_id', 'principal', 'client_address', 'client_era', 'client_name', 'client_version', 'method',
  'hub_name', 'server', 'upstream_name', 'upstream_era', 'idempotency_key', 'args_hash', 'request_bytes', 'args_json', 'tool_group',
  'trace_id', 'span_id', 'parent_span_id'] as const;
export const END_COLS = ['outcome', 'error_kind', 'error_code', 'error_message', 'latency_ms', 'response_bytes', 'result_json'] as const;
/** A finished row's columns, in the order of its values (linkedValues). */
export const LINKED_COLS = [...BEGIN_COLS, ...END_COLS, 'seq', 'hash'] as const;
const SEQ_AT = LINKED_COLS.indexOf('seq');
const HASH_AT = LINKED_COLS.indexOf('hash');
const linkedColumns = new ColumnsDigest(LINKED_COLS);
/** The most finished rows one INSERT takes (up to 30 parameters each). */
const MAX_RUN = 16;
/**
 * Run statements kept prepared, by length and shared columns (runFor); the oldest goes first.
 * A hub's traffic uses a few (7–10 for three servers, four principals and some errors).
 */
const MAX_RUN_STATEMENTS = 32;

/** What a finish adds to its begin's values: the end's columns, then the late facts. */
export const FIN_COLS = [...END_COLS, 'server', 'upstream_name', 'upstream_era'] as const;
const BEGIN_N = BEGIN_COLS.length;
const FINISHED_N = BEGIN_N + FIN_COLS.length;
/**
 * How many values a begin had as older hubs wrote it: before tool_group, and before the trace
 * columns. A finished line of theirs is as many longer as FIN_COLS. No two of these lengths, or
 * of this hub's, are the same.
 */
const OLDER_BEGINS = [BEGIN_COLS.indexOf('tool_group'), BEGIN_COLS.indexOf('trace_id')] as const;
if (OLDER_BEGINS[1] !== OLDER_BEGINS[0] + 1 || BEGIN_COLS.indexOf('parent_span_id') !== BEGIN_N - 1)
  throw new Error('audit columns: tool_group, then the trace columns, must stay the last of a begin (older lines are the same without them)');

/**
 * A line of the pending file. A begin is the JSON array of its BEGIN_COLS values; a finished
 * row, of its BEGIN_COLS values followed by its FIN_COLS values. Positional, not keyed: half
 * the bytes to write, hand over and parse; a begin's array is what its INSERT binds. (Hubs before this
 * format wrote `{"s": {column: value}, "e": {...}}`; such lines, left in a pending file by
 * an older hub, are still applied.) A file's first line may be its place in the order of
 * the two files (`{"g": n}`, see PendingFiles), which is no row.
 */
export type PendingRecord = unknown[] | { s?: Params; e?: Params; g?: number };

/**
 * An audit row on its way from the pending file into SQLite: `v` holds its begin's values,
 * and its finish's after them once `done`.
 */
interface Entry {
  id: number;
  v: unknown[];
  done: boolean;
  /** Its in-flight row is in SQLite already, so finishing it is an UPDATE. */
  inDb: boolean;
  /**
   * The line `v` was parsed from, when take() was given it (a begin's, or the finish's once
   * `done`): a finished row's chain digest is built from it (see LineDigest). Dropped with the
   * values parsed again by pack() while SQLite refuses the queue.
   */
  line: string | undefined;
}

/**
 * Moves pending-file records into SQLite and chains them, in the order they were written. It
 * runs on the ingest thread (ingest-worker.ts) for a running hub and on the opening thread for
 * the rows a stopped hub left behind (which a thread replacing one that ended applies too). A
 * call's begin and finish usually arrive in one batch and become one INSERT; a begin whose
 * finish has not arrived goes in as 'in_flight', and its finish later becomes an UPDATE.
 */
export class AuditApplier {
  private readonly gc: GroupCommit;
  private readonly chain: ChainWriter;
  private readonly insertBegin: Statement;
  private readonly finishLinked: Statement;
  private readonly finishKept: Statement;
  private readonly insertLinked: Statement;
  private readonly pruned: Statement;
  /** Taken, not yet in SQLite, in order. */
  private queue: Entry[] = [];
  /** Queued begins without their finish yet: the finish completes the entry. */
  private readonly unsaved = new Map<number, Entry>();
  /** Ids whose in-flight row this applier put in SQLite and whose finish has not come. */
  private readonly inFlight = new Set<number>();
  /** INSERTs of a run that took every row of it (a transaction may still roll them back): for tests. */
  runInserts = 0;
  /** The values those INSERTs bound (a column the rows of a run share is bound once): for tests. */
  runParams = 0;
  /** Chain digests built from a row's line (LineDigest) rather than from its values: for tests. */
  get lineDigests(): number {
    return this.lineDigest.taken;
  }
  private readonly lineDigest = new LineDigest();
  /** By run length: the values of that many finished rows, in LINKED_COLS order one row after another. */
  private readonly rowValues: (unknown[] | undefined)[] = [];
  /** By run length and shared columns (see runFor): the INSERT, and its parameters' array. */
  private readonly runs = new Map<number, { insert: Statement; values: unknown[] }>();

  constructor(
    private readonly db: Database,
    log: Logger,
  ) {
    // The head moving under the running hub is reported once per change, with the witness that shows it.
    this.chain = new ChainWriter(db, (found, wrote) =>
      log.error(
        { headInFile: formatWitness(found), headWritten: formatWitness(wrote) },
        `ledger: the chain's head in the file is ${formatWitness(found)}, not the ${formatWitness(wrote)} this hub wrote last: the ledger was changed outside the hub (rows removed from the chain's end, or the chain rewritten); \`switchyard ledger verify --witness ${formatWitness(wrote)}\` shows it`,
      ),
    );
    this.gc = new GroupCommit(db, { before: () => this.chain.startBatch(), after: () => this.chain.endBatch() }, log);
    // Parameters are positional: better-sqlite3 binds an array of values about twice as fast as
    // an object's named values (2.9 against 5.7 µs for a row's 26, measured). They are passed
    // spread, as arguments: an array argument it reads element by element through V8's API
    // (Object::Get, ~400 instructions a value), arguments it reads in place.
    const places = (n: number) => Array(n).fill('?').join(', ');
    const ended = END_COLS.map((c) => `${c} = ?`).join(', ');
    const inFlight = `WHERE id = ? AND outcome = 'in_flight'`;
    // OR IGNORE: rows replayed from the pending file may be in SQLite already (see apply).
    this.insertBegin = db.prepare(`INSERT OR IGNORE INTO audit (${BEGIN_COLS.join(', ')}, outcome) VALUES (${places(BEGIN_COLS.length)}, 'in_flight')`);
    // The finished row's chain link is computed from the values written (see linkedValues), so
    // finishing is one statement and needs no RETURNING.
    this.finishLinked = db.prepare(`UPDATE audit SET ${ended}, server = ?, upstream_name = ?, upstream_era = ?, seq = ?, hash = ? ${inFlight}`);
    // The usual finish: the call went where its begin said. Leaving server out of SET spares
    // SQLite rewriting its audit_server_ts entry.
    this.finishKept = db.prepare(`UPDATE audit SET ${ended}, seq = ?, hash = ? ${inFlight}`);
    this.insertLinked = db.prepare(`INSERT OR IGNORE INTO audit (${LINKED_COLS.join(', ')}) VALUES (${places(LINKED_COLS.length)})`);
    this.pruned = db.prepare('SELECT 1 FROM audit_pruned WHERE id = ?').pluck();
  }

  /**
   * Records queued for the next flush(), in the order they were written. `lines`: the text each
   * record was parsed from (lines[i] of records[i]), when that is a line this process's
   * JSON.stringify wrote (the hub's hand-overs to its ingest thread): a finished row's chain
   * digest is then built from it (LineDigest). Lines from a file, which an older hub or a hand
   * may have written, are not given.
   */
  take(records: Iterable<PendingRecord>, lines?: readonly string[]): void {
    let i = -1;
    for (const r of records) {
      i++;
      // Before valuesOf, which lengthens an older line's array to this hub's length in place.
      const line = lines !== undefined && Array.isArray(r) && (r.length === FINISHED_N || r.length === BEGIN_N) ? lines[i] : undefined;
      const v = valuesOf(r);
      if (!v) continue; // a header line, or not a row
      const id = v[0] as number;
      const done = v.length === FINISHED_N;
      if (!done) {
        if (this.unsaved.has(id)) continue; // a replayed line twice
        const entry: Entry = { id, v, done, inDb: false, line };
        this.queue.push(entry);
        this.unsaved.set(id, entry);
        continue;
      }
      const begun = this.unsaved.get(id);
      if (begun) {
        this.unsaved.delete(id);
        begun.v = v;
        begun.done = true;
        begun.line = line;
      } else this.queue.push({ id, v, done, inDb: this.inFlight.delete(id), line });
    }
  }

  /**
   * Lines this process's hub wrote (a hand-over to the ingest thread), as take()'s records and
   * lines. While SQLite refuses the queue (the last flush was refused) they are read by
   * JSON.parse and not kept, as pack() leaves the queue.
   */
  takeLines(lines: readonly string[]): void {
    if (this.refused) this.take(lines.map((l) => JSON.parse(l) as PendingRecord));
    else this.take(lines.map(parseLine), lines);
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Queued entries that keep the line their values were parsed from (see pack): for tests. */
  get linesHeld(): number {
    let n = 0;
    for (const e of this.queue) if (e.line !== undefined) n++;
    return n;
  }

  /** The last flush was refused whole: the queue waits, packed (see pack). */
  private refused = false;

  /**
   * Each queued entry that keeps its line, read again by JSON.parse, and the line let go: so
   * a queue SQLite refuses (a full disk, another writer's lock, for as long as that lasts) holds
   * each row once. A line's values as parseLine reads them are slices of it, and of the hand-over
   * chunk it was cut from, which they keep whole, with a string of their own for each short
   * value besides; JSON.parse's values keep nothing of the line, and its short strings (the
   * principal, the method, the server) are shared. 1,009 bytes of heap a queued row (a 309-byte
   * line, 728 with stored bodies) before, 277 (290) after (docs/BENCHMARKS.md, "The ingest
   * thread"). Their digests, once SQLite takes them, are built from their values (linkedDigest),
   * as for rows read from a pending file: no measurable cost in the commit's CPU.
   */
  private pack(): void {
    this.refused = true;
    for (const e of this.queue) {
      if (e.line === undefined) continue;
      e.v = valuesOf(JSON.parse(e.line) as PendingRecord)!;
      e.line = undefined;
    }
  }

  /** Entries flush() has taken out of the queue since this applier began (committed, or failed alone and dropped). */
  get flushed(): number {
    return this.out;
  }
  private out = 0;

  /**
   * Everything taken into SQLite in one transaction, chained in this order. A row that fails
   * alone is logged by the group commit and dropped. False when SQLite refused the whole batch:
   * it stays queued for the next flush. `replay`: rows may be in SQLite already (the file is
   * emptied only after its batch committed), in flight (finish them) or finished (skip them).
   * `max`: at most this many queued entries, the first, are committed; the rest stay queued.
   */
  flush(replay = false, max = Infinity): boolean {
    if (this.queue.length === 0) return true;
    if (this.queue.length > max) return this.flushHead(max, replay);
    const batch = this.queue;
    this.queue = [];
    this.unsaved.clear();
    const apply = (e: Entry): void => this.apply(e, replay);
    // New finished rows (the usual entry) go in several to an INSERT; replayed rows, which may
    // be in SQLite already, one by one.
    const together = replay ? undefined : () => this.applyInRuns(batch);
    if (this.gc.commitEach(batch, apply, together)) {
      for (const e of batch) if (!e.done) this.inFlight.add(e.id);
      this.out += batch.length;
      this.refused = false;
      return true;
    }
    this.queue = batch;
    for (const e of batch) if (!e.done) this.unsaved.set(e.id, e);
    this.pack();
    return false;
  }

  /**
   * The first `n` queued entries, as flush() commits a queue, the rest left queued. A begin
   * committed here is in flight in SQLite: its finish, taken later, is an UPDATE; one still
   * queued takes its finish in place, as before.
   */
  private flushHead(n: number, replay: boolean): boolean {
    const batch = this.queue.slice(0, n);
    const together = replay ? undefined : () => this.applyInRuns(batch);
    if (!this.gc.commitEach(batch, (e) => this.apply(e, replay), together)) {
      this.pack();
      return false;
    }
    this.refused = false;
    this.queue.splice(0, n);
    for (const e of batch) {
      if (e.done) continue;
      this.unsaved.delete(e.id);
      this.inFlight.add(e.id);
    }
    this.out += n;
    return true;
  }

  /**
   * The batch's writes, as apply() makes them one by one, with each run of new finished rows
   * (in order, up to MAX_RUN) as one INSERT: SQLite's cost per statement is then paid once per
   * run (1.3 µs a row less at 16, measured). Throws when a row of a run was not inserted; the
   * group commit then writes the batch again row by row, where the row that failed is found,
   * logged and left out as before.
   */
  private applyInRuns(batch: readonly Entry[]): void {
    let i = 0;
    while (i < batch.length) {
      let end = i;
      while (end < batch.length && end - i < MAX_RUN && batch[end]!.done && !batch[end]!.inDb) end++;
      if (end - i < 2) {
        this.apply(batch[i]!, false);
        i++;
        continue;
      }
      this.insertRun(batch, i, end);
      i = end;
    }
  }

  /** batch[from] … batch[to - 1], new finished rows, chained in order and inserted by one statement. */
  private insertRun(batch: readonly Entry[], from: number, to: number): void {
    const n = to - from;
    let values = this.rowValues[n];
    if (!values) values = this.rowValues[n] = packedNulls(n * LINKED_COLS.length);
    for (let k = 0, at = 0; k < n; k++, at += LINKED_COLS.length) {
      const e = batch[from + k]!;
      const r = e.v;
      for (let c = 0; c < LINKED_FROM.length; c++) values[at + c] = LINKED_FROM[c]! < 0 ? null : r[LINKED_FROM[c]!];
      const link = this.chain.next(values, SEQ_AT, this.digesterOf(e), at);
      values[at + HASH_AT] = link.hash;
      // The chain moves on before the INSERT: if it fails, so does the transaction, and the
      // next attempt starts from the head in SQLite (ChainWriter.startBatch).
      this.chain.advance(link);
    }
    // A column every row of the run holds the same value in (the principal, the server, the
    // eras, the nulls: about two thirds of a row) is bound once. better-sqlite3 binds each text
    // value by copying it twice (V8's UTF-8 conversion, then SQLite's own copy): 20.4k of the
    // thread's ~110k instructions a row went to binding, 7.0k now (docs/BENCHMARKS.md, sixty-fourth session).
    const same = sameColumns(values, n);
    const run = this.runFor(n, same);
    const params = run.values;
    let p = 0;
    for (let c = 0; c < LINKED_COLS.length; c++) if (same & (1 << c)) params[p++] = values[c];
    for (let k = 0, at = 0; k < n; k++, at += LINKED_COLS.length) {
      for (let c = 0; c < LINKED_COLS.length; c++) if (!(same & (1 << c))) params[p++] = values[at + c];
    }
    const changes = run.insert.run(...params).changes;
    if (changes !== n) throw new Error(`audit rows: ${n - changes} of a run of ${n} were not inserted`);
    this.runInserts++;
    this.runParams += params.length;
  }

  /**
   * The INSERT of `n` finished rows whose columns in `same` (a bit per LINKED_COLS index) hold one
   * value in every row: those are the parameters of a one-row SELECT, bound first, joined to the
   * rows' VALUES of the other columns. Parameters are positional (see the constructor), so a value
   * cannot be named twice in the VALUES themselves.
   */
  private runFor(n: number, same: number): { insert: Statement; values: unknown[] } {
    const key = n * 2 ** 30 + same;
    let run = this.runs.get(key);
    if (run) return run;
    const shared: string[] = [];
    const varying: string[] = [];
    const picked: string[] = [];
    for (let c = 0; c < LINKED_COLS.length; c++) {
      if (same & (1 << c)) {
        shared.push(`? AS s${c}`);
        picked.push(`s.s${c}`);
      } else {
        varying.push('?');
        picked.push(`v.column${varying.length}`);
      }
    }
    const row = `(${varying.join(', ')})`;
    const sql = same === 0
      ? `INSERT OR IGNORE INTO audit (${LINKED_COLS.join(', ')}) VALUES ${Array(n).fill(row).join(', ')}`
      : `INSERT OR IGNORE INTO audit (${LINKED_COLS.join(', ')}) SELECT ${picked.join(', ')} FROM (SELECT ${shared.join(', ')}) AS s, (VALUES ${Array(n).fill(row).join(', ')}) AS v`;
    if (this.runs.size >= MAX_RUN_STATEMENTS) this.runs.delete(this.runs.keys().next().value!);
    run = { insert: this.db.prepare(sql), values: packedNulls(shared.length + n * varying.length) };
    this.runs.set(key, run);
    return run;
  }

  private apply(e: Entry, replay: boolean): void {
    // A replayed line whose row a prune deleted (audit_pruned, see LedgerReader.prune) would
    // otherwise go in again as a row that never arrived: new seq, or `unknown` for a begin.
    if (replay && this.pruned.get(e.id) !== undefined) return;
    if (!e.done) {
      this.insertBegin.run(...e.v);
      return;
    }
    const v = linkedValues(e.v);
    const link = this.chain.next(v, SEQ_AT, this.digesterOf(e));
    v[HASH_AT] = link.hash;
    let changes = e.inDb ? this.finish(v, e.v) : this.insertLinked.run(...v).changes;
    if (changes === 0) changes = e.inDb ? this.insertLinked.run(...v).changes : this.finish(v, e.v);
    if (changes === 1) this.chain.advance(link);
    else if (!replay) throw new Error(`audit row ${e.id} is not in flight (it was finished already)`);
  }

  /** The digest of a finished entry's row: from its line when it has one. */
  private digesterOf(e: Entry): RowValuesDigest {
    return e.line === undefined ? linkedDigest : this.lineDigest.of(e.v, e.line);
  }

  /** Finishes the row's in-flight row in SQLite (`v`: linked, `r`: as recorded): the UPDATE's changes. */
  private finish(v: unknown[], r: unknown[]): number {
    const end = r.slice(BEGIN_N, BEGIN_N + END_COLS.length);
    const link = [v[SEQ_AT], v[HASH_AT], r[0]];
    const kept = r[LATE] === r[SERVER_AT] && r[LATE + 1] === r[SERVER_AT + 1] && r[LATE + 2] === r[SERVER_AT + 2];
    return kept ? this.finishKept.run(...end, ...link).changes : this.finishLinked.run(...end, r[LATE], r[LATE + 1], r[LATE + 2], ...link).changes;
  }
}

/** Columns a run may bind once: a bit each in an int32 (a column past them is bound row by row). */
const SHAREABLE = Math.min(LINKED_COLS.length, 30);

/**
 * Bit c set: column c (LINKED_COLS) holds the same value in each of the `n` rows of `values`
 * (id, seq and hash never do). Same as in `===`, which binds to the same stored value: equal
 * texts, or equal numbers (0 and -0 are stored alike).
 */
function sameColumns(values: readonly unknown[], n: number): number {
  let same = 0;
  const w = LINKED_COLS.length;
  for (let c = 1; c < SHAREABLE; c++) {
    if (c === SEQ_AT || c === HASH_AT) continue;
    const x = values[c];
    let k = 1;
    while (k < n && values[k * w + c] === x) k++;
    if (k === n) same |= 1 << c;
  }
  return same;
}

/**
 * `n` nulls in a packed array, as linkedValues' literal is: the chain digest then meets one
 * elements kind. A holey one (new Array(n)) beside it had V8 throw away the digest's optimised
 * code ("wrong map") at the first run of rows, and a hub warmed up on single rows ran it
 * unoptimised for a while after.
 */
function packedNulls(n: number): unknown[] {
  const a: unknown[] = [];
  for (let i = 0; i < n; i++) a.push(null);
  return a;
}

/** Where a finished record's late facts are, and where a begin's (server, upstream_name, upstream_era) are. */
const LATE = BEGIN_N + END_COLS.length;
export const SERVER_AT = BEGIN_COLS.indexOf('server');
// linkedValues, finish() and the hub's finValues take the late facts as these three, in this
// order, both in a begin and in a finish.
if (FIN_COLS.slice(END_COLS.length).join() !== BEGIN_COLS.slice(SERVER_AT, SERVER_AT + 3).join()) throw new Error('audit columns: the late facts are out of order');

/** A record's row id, and whether it is a finished row (not a begin alone); undefined for a header. */
export function recordRow(r: PendingRecord): { id: number; done: boolean } | undefined {
  const v = valuesOf(r);
  return v && { id: v[0] as number, done: v.length === FINISHED_N };
}

/** A record's values (see PendingRecord), or undefined for a line that is no row. */
function valuesOf(r: PendingRecord): unknown[] | undefined {
  if (Array.isArray(r)) {
    if (typeof r[0] !== 'number') return undefined;
    if (r.length === BEGIN_N || r.length === FINISHED_N) return r;
    // A line from before tool_group or the trace columns (a pending file an older hub left): what
    // it did not record is null, as in the rows the migrations found.
    for (const n of OLDER_BEGINS) {
      if (r.length === n || r.length === n + FIN_COLS.length) {
        r.splice(n, 0, ...Array<null>(BEGIN_N - n).fill(null));
        return r;
      }
    }
    return undefined;
  }
  if (r === null || typeof r !== 'object') return undefined; // a line of JSON that is no record
  const { s, e } = r;
  if (!s || typeof s.id !== 'number') return undefined;
  const begin = BEGIN_COLS.map((c) => s[c] ?? null);
  // A late fact the finish left out keeps the begin's value, as the hub writing it meant.
  return e ? [...begin, ...FIN_COLS.map((c, i) => e[c] ?? (i >= END_COLS.length ? s[c] : null) ?? null)] : begin;
}

/**
 * Where each of a finished row's LINKED_COLS values is in its record, -1 for seq and hash:
 * linkedValues of a record whose values are their own places, so the two never disagree.
 */
const LINKED_FROM: readonly number[] = linkedValues(Array.from({ length: FINISHED_N }, (_, i) => i)).map((at) => (at === null ? -1 : (at as number)));

/**
 * A finished row exactly as the database will hold it, as values in LINKED_COLS order (seq
 * and hash are set once its chain link is known), built from a finished record: its values
 * are already normalised to what SQLite stores and returns (text() for text columns, finite
 * numbers, integers for ts), so the digest computed from it is the one verify() recomputes
 * from the stored row, and it is also what the statements bind. The late facts (server,
 * upstream) are the finish's. One literal on purpose: it is built for every row.
 */
export function linkedValues(r: unknown[]): unknown[] {
  return [r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[28], r[29], r[30], r[13], r[14], r[15], r[16], r[17],
    r[18], r[19], r[20], r[21], r[22], r[23], r[24], r[25], r[26], r[27], null, null];
}

/**
 * The object ColumnsDigest builds for a finished row (LINKED_COLS in canonical order, hash left
 * out, a null column undefined so JSON.stringify leaves it out), written as one literal: V8
 * builds it with its shape known, where ColumnsDigest stores its columns one by one through a
 * variable key (a megamorphic keyed store each, ~200 instructions a column). Checked against
 * LINKED_COLS below, and against ColumnsDigest by a property test (ledger-digest.test.ts).
 */
function linkedFields(v: readonly unknown[], at: number): Record<string, unknown> {
  return {
    args_hash: v[at + 14] ?? undefined,
    args_json: v[at + 16] ?? undefined,
    client_address: v[at + 4] ?? undefined,
    client_era: v[at + 5] ?? undefined,
    client_name: v[at + 6] ?? undefined,
    client_version: v[at + 7] ?? undefined,
    error_code: v[at + 23] ?? undefined,
    error_kind: v[at + 22] ?? undefined,
    error_message: v[at + 24] ?? undefined,
    hub_name: v[at + 9] ?? undefined,
    id: v[at + 0] ?? undefined,
    idempotency_key: v[at + 13] ?? undefined,
    latency_ms: v[at + 25] ?? undefined,
    method: v[at + 8] ?? undefined,
    outcome: v[at + 21] ?? undefined,
    parent_span_id: v[at + 20] ?? undefined,
    principal: v[at + 3] ?? undefined,
    request_bytes: v[at + 15] ?? undefined,
    request_id: v[at + 2] ?? undefined,
    response_bytes: v[at + 26] ?? undefined,
    result_json: v[at + 27] ?? undefined,
    seq: v[at + 28] ?? undefined,
    server: v[at + 10] ?? undefined,
    span_id: v[at + 19] ?? undefined,
    tool_group: v[at + 17] ?? undefined,
    trace_id: v[at + 18] ?? undefined,
    ts: v[at + 1] ?? undefined,
    upstream_era: v[at + 12] ?? undefined,
    upstream_name: v[at + 11] ?? undefined,
  };
}

// The literal must hold every column but hash, in sorted order, each from its own place.
{
  const probe = linkedFields(LINKED_COLS.map((_, i) => i), 0);
  const want = LINKED_COLS.filter((c) => c !== 'hash').sort();
  if (HASH_AT !== LINKED_COLS.length - 1 || Object.keys(probe).join() !== want.join() || want.some((c) => probe[c] !== LINKED_COLS.indexOf(c)))
    throw new Error('audit columns: linkedFields does not match LINKED_COLS');
}

/**
 * linkedColumns' digest (the same text hashed) for rows of text and numbers (every audit row);
 * anything else takes linkedColumns' own path.
 */
export const linkedDigest: RowValuesDigest = {
  digest(prevHash: string, values: readonly unknown[], at = 0): string {
    for (let i = at; i < at + HASH_AT; i++) {
      const x = values[i];
      if (x !== null && x !== undefined && typeof x !== 'string' && typeof x !== 'number') return linkedColumns.digest(prevHash, values, at);
    }
    return sha256Hex(prevHash + '\n' + JSON.stringify(linkedFields(values, at)));
  },
};

/**
 * A line of the pending file as JSON.parse reads it, for a line this process's JSON.stringify
 * wrote (the hub's hand-overs to its ingest thread): an array of text, numbers and nulls with no
 * escape in it is read by slicing it at its quotes and commas; any other line (an escape, another
 * kind of value, not an array) by JSON.parse. Without an escape a string's text is what lies
 * between its quotes, and a number as JSON.stringify wrote it reads back (Number) as the same
 * number. ~0.4 µs of CPU less than JSON.parse for an audit row's line, measured alone and with
 * the thread's other work (its strings are not internalised, V8's string table not consulted),
 * though callgrind counts ~5k instructions a row more (docs/BENCHMARKS.md, sixty-fifth session).
 */
export function parseLine(line: string): PendingRecord {
  return sliced(line) ?? (JSON.parse(line) as PendingRecord);
}

function sliced(line: string): unknown[] | undefined {
  if (line.charCodeAt(0) !== 0x5b || line.indexOf('\\') !== -1) return undefined;
  // A finished row's length of nulls, written in place (put): pushing each value (~70
  // instructions) grew the array from empty; a shorter line's array is cut to its length.
  const values = FINISHED_NULLS.slice();
  let k = 0;
  const last = line.length - 1;
  let p = 1;
  for (;;) {
    const c = line.charCodeAt(p);
    let end: number;
    if (c === 0x22) {
      end = line.indexOf('"', p + 1);
      if (end < 0) return undefined;
      put(values, k++, line.slice(p + 1, end));
      end++;
    } else if (c === 0x6e && line.charCodeAt(p + 1) === 0x75 && line.charCodeAt(p + 2) === 0x6c && line.charCodeAt(p + 3) === 0x6c) {
      // 'null' by its codes: startsWith was ~230 instructions a call, eight calls a row.
      put(values, k++, null);
      end = p + 4;
    } else if (c >= 0x30 && c <= 0x39) {
      // A whole number of up to 15 digits (id, ts, the sizes) summed digit by digit, exact as
      // a double below 2^53: Number() of its slice went to V8's runtime (~500 instructions).
      // Anything else (a fraction, an exponent, more digits) is read by Number() as before.
      let n = c - 0x30;
      end = p + 1;
      let d = line.charCodeAt(end) - 0x30;
      while (d >= 0 && d <= 9) {
        n = n * 10 + d;
        d = line.charCodeAt(++end) - 0x30;
      }
      if (end - p > 15 || (c === 0x30 && end - p > 1) || (d !== 0x2c - 0x30 && d !== 0x5d - 0x30)) {
        const n2 = numberAt(line, p, last);
        if (n2 === undefined) return undefined;
        put(values, k++, n2[0]);
        end = n2[1];
      } else put(values, k++, n);
    } else if (c === 0x2d) {
      const n2 = numberAt(line, p, last);
      if (n2 === undefined) return undefined;
      put(values, k++, n2[0]);
      end = n2[1];
    } else return undefined;
    const d = line.charCodeAt(end);
    if (d === 0x5d) {
      if (end !== last) return undefined;
      if (k < values.length) values.length = k;
      return values;
    }
    if (d !== 0x2c) return undefined;
    p = end + 1;
  }
}

/** packedNulls(FINISHED_N): what sliced() fills in for each line. */
const FINISHED_NULLS = packedNulls(FINISHED_N);

function put(values: unknown[], k: number, v: unknown): void {
  if (k < values.length) values[k] = v;
  else values.push(v);
}

/** The number JSON.stringify wrote at `p` of the line, up to the next comma (or the closing bracket), and where it ends. */
function numberAt(line: string, p: number, last: number): [number, number] | undefined {
  let end = line.indexOf(',', p);
  if (end < 0) end = last;
  const n = Number(line.slice(p, end));
  return Number.isFinite(n) ? [n, end] : undefined;
}

/** LINKED_COLS but hash in canonical (sorted) order: each one's `,"name":` and its place in a finished record (-1: seq). */
const CANONICAL = LINKED_COLS.filter((c) => c !== 'hash').sort();
const CANONICAL_FIRST = CANONICAL.map((c) => `${JSON.stringify(c)}:`);
const CANONICAL_PREFIX = CANONICAL_FIRST.map((p) => `,${p}`);
const CANONICAL_FROM = CANONICAL.map((c) => LINKED_FROM[LINKED_COLS.indexOf(c)]!);
/** Where each value of a finished line is in its text: [start, end) of value i at 2i, 2i + 1. */
const spans = new Int32Array(2 * FINISHED_N);

/**
 * linkedDigest's text without encoding the row again: a finished line is the JSON.stringify of
 * its record (`[v0,v1,…]`), so each value's JSON is a slice of the line, and the canonical text
 * is those slices behind their keys in canonical order (nulls left out, seq put in). V8's JSON
 * of the row's object (linkedFields) was 2.2 µs of the ~2.9 a row's digest cost on the ingest
 * thread (docs/BENCHMARKS.md, sixty-fourth session); the slices take ~0.8 µs less (sixty-fifth).
 *
 * A slice is the value's canonical JSON only if the line was written by JSON.stringify and
 * nothing in it was escaped: a string's slice is then its quotes and its own text, which is what
 * JSON.stringify writes for a string that needs no escape, and a number's is JSON.stringify's
 * shortest form, which JSON.parse gives back as the same number. So only lines this process's
 * hub wrote are taken this way (AuditApplier.take's `lines`), and any line with a backslash, a
 * value that is no string, number or null, or a shape other than the compact array of its
 * record's values takes linkedDigest (a property test holds the two to the same hashes).
 */
export class LineDigest implements RowValuesDigest {
  private record: readonly unknown[] = [];
  private line = '';
  taken = 0;

  /** Itself, set to digest the row of this finished record and its line. */
  of(record: readonly unknown[], line: string): this {
    this.record = record;
    this.line = line;
    return this;
  }

  digest(prevHash: string, values: readonly unknown[], at = 0): string {
    const line = this.line;
    const r = this.record;
    if (!this.spanned(line, r)) return linkedDigest.digest(prevHash, values, at);
    this.taken++;
    // One string grown from its start: the hash then flattens it once (a `slice(1)` to drop the
    // first comma, flattening it first, cost ~0.2 µs more).
    let out = prevHash + '\n{';
    let prefix = CANONICAL_FIRST;
    for (let i = 0; i < CANONICAL_FROM.length; i++) {
      const from = CANONICAL_FROM[i]!;
      if (from >= 0 && r[from] === null) continue;
      out += prefix[i]! + (from < 0 ? values[at + SEQ_AT] : line.slice(spans[2 * from]!, spans[2 * from + 1]!));
      prefix = CANONICAL_PREFIX;
    }
    return sha256Hex(out + '}');
  }

  /** Fills `spans` for the record's line; false when the line is not the plain compact JSON of its values. */
  private spanned(line: string, r: readonly unknown[]): boolean {
    if (r.length !== FINISHED_N || line.charCodeAt(0) !== 0x5b || line.indexOf('\\') !== -1) return false;
    let p = 1;
    for (let i = 0; i < FINISHED_N; i++) {
      const v = r[i];
      let end: number;
      if (typeof v === 'string') {
        // Unescaped: the text between the quotes is the string itself.
        end = p + v.length + 2;
        if (line.charCodeAt(p) !== 0x22 || line.charCodeAt(end - 1) !== 0x22) return false;
      } else if (v === null) {
        end = p + 4;
        if (line.charCodeAt(p) !== 0x6e) return false;
      } else if (typeof v === 'number') {
        end = line.indexOf(i === FINISHED_N - 1 ? ']' : ',', p);
        const c = line.charCodeAt(p);
        if (end < 0 || !(c === 0x2d || (c >= 0x30 && c <= 0x39))) return false;
      } else return false;
      if (line.charCodeAt(end) !== (i === FINISHED_N - 1 ? 0x5d : 0x2c)) return false;
      spans[2 * i] = p;
      spans[2 * i + 1] = end;
      p = end + 1;
    }
    return p === line.length;
  }
}
