import type { Database, Statement } from 'better-sqlite3';
import { canonicalJson, sha256Hex } from './canonical.js';
import { hasTable } from './migrate.js';
import type { AuditDbRow } from './rows.js';

/**
 * Tamper evidence for finalized audit rows. In-flight rows are not chained (they still
 * change); when a row is finalized it takes the next `seq` and
 * hash = sha256(prevHash + "\n" + canonical JSON of its columns), in commit order.
 * Null columns are left out of the canonical form so a later migration that adds a
 * column (null in old rows) does not invalidate old hashes.
 * `chain_state` keeps the anchor (last pruned row) and the head (last appended row), so a
 * deleted middle row shows as a seq gap and a deleted last row as a head mismatch.
 */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * The digest of a row given as an object (a stored row from SELECT *, or any flat record): its
 * key order's ColumnsDigest over its values. canonicalJson of the row without `hash` and
 * without null/undefined columns, with keys sorted once per distinct key order (every row from
 * one statement shares it) instead of per row (the property test in
 * test/unit/ledger-digest.test.ts holds it to the generic form).
 */
export function rowDigest(prevHash: string, row: AuditDbRow | Record<string, unknown>): string {
  return digesterFor(Object.keys(row)).digest(prevHash, Object.values(row));
}

/**
 * rowDigest for rows held as arrays of values in one fixed column order (the applier binds
 * them positionally): the sorting and `"key":` prefixes are worked out once, and no object is
 * built per row. Scalars are encoded directly; anything else falls back to canonicalJson.
 */
export class ColumnsDigest {
  /** Indexes into a row's values, in the canonical (sorted) order of their columns, hash left out. */
  private readonly order: number[];
  /** The columns in that order. */
  private readonly sorted: string[];
  private readonly prefixes: string[];
  /**
   * An object given these keys in sorted order keeps that order in JSON.stringify: none is an
   * array index (those come first, in numeric order) or __proto__ (which sets no key).
   */
  private readonly plainKeys: boolean;
  /**
   * Every column (hash left out) in canonical order, each null, as JSON.parse makes an object:
   * with fast properties. A row's object is a copy of it with its values set in place. Built
   * key by key instead, an object of more than a dozen or so keys goes to V8's dictionary mode,
   * which JSON.stringify walks far slower: an audit row's digest (29 columns, SHA-256 included)
   * cost 4.6–4.9 µs of the ingest thread's CPU that way, 3.3–3.4 µs this way.
   */
  private readonly template: Record<string, null>;

  constructor(readonly columns: readonly string[]) {
    this.sorted = columns.filter((c) => c !== 'hash').sort();
    this.order = this.sorted.map((c) => columns.indexOf(c));
    this.prefixes = this.sorted.map((c) => JSON.stringify(c) + ':');
    this.plainKeys = this.sorted.every((c) => c !== '__proto__' && !/^(0|[1-9][0-9]*)$/.test(c));
    this.template = this.plainKeys ? (JSON.parse(`{${this.prefixes.map((p) => p + 'null').join(',')}}`) as Record<string, null>) : {};
  }

  /**
   * Text and numbers (every value of an audit row) are encoded by V8's JSON.stringify of an
   * object with its keys in canonical order, about 1.5 µs a row cheaper than concatenating
   * them; a null column is undefined there, which leaves it out. Any other value takes the
   * general path.
   */
  digest(prevHash: string, values: readonly unknown[], at = 0): string {
    if (!this.plainKeys) return this.general(prevHash, values, at);
    const fields: Record<string, string | number | null | undefined> = { ...this.template };
    for (let i = 0; i < this.order.length; i++) {
      const v = values[at + this.order[i]!];
      if (v === null || v === undefined) fields[this.sorted[i]!] = undefined;
      else if (typeof v === 'string' || typeof v === 'number') fields[this.sorted[i]!] = v;
      else return this.general(prevHash, values, at);
    }
    return sha256Hex(prevHash + '\n' + JSON.stringify(fields));
  }

  private general(prevHash: string, values: readonly unknown[], at: number): string {
    let out = '';
    for (let i = 0; i < this.order.length; i++) {
      const v = values[at + this.order[i]!];
      if (v === null || v === undefined) continue;
      out += (out === '' ? '' : ',') + this.prefixes[i] + encodeScalar(v);
    }
    return sha256Hex(prevHash + '\n{' + out + '}');
  }
}

function encodeScalar(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      return Number.isFinite(v) ? String(v) : 'null';
    default:
      return canonicalJson(v);
  }
}

/** A digest of rows held as values in one fixed column order: ColumnsDigest, or one that gives the same hashes. */
export interface RowValuesDigest {
  digest(prevHash: string, values: readonly unknown[], at?: number): string;
}

/** A few key orders are ever seen (the writer's params, SELECT *); remember their digesters. */
const digesters: ColumnsDigest[] = [];

function digesterFor(keys: string[]): ColumnsDigest {
  for (const d of digesters) if (sameKeys(d.columns, keys)) return d;
  const d = new ColumnsDigest(keys);
  if (digesters.length < 16) digesters.push(d);
  return d;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export interface ChainState {
  anchor_seq: number;
  anchor_hash: string;
  head_seq: number;
  head_hash: string;
}

function chainStateRow(db: Database): ChainState | undefined {
  // The table dropped by hand is the row deleted: said so, not as SQLite's "no such table".
  if (!hasTable(db, 'chain_state')) return undefined;
  return db.prepare('SELECT anchor_seq, anchor_hash, head_seq, head_hash FROM chain_state WHERE id = 1').get() as ChainState | undefined;
}

/** The chain's anchor and head; a ledger without them (the row deleted by hand) is refused, by name. */
export function readChainState(db: Database): ChainState {
  const state = chainStateRow(db);
  if (state === undefined) throw new Error(MISSING_STATE);
  return state;
}

const MISSING_STATE = "the ledger's chain state (its anchor and head, table chain_state) is gone: the file was changed outside the hub, and the chain cannot be checked";

/**
 * A hub cannot start on a ledger without its chain state: a row has no head to chain onto, and
 * a head made up here would hide the edit from `verify`.
 */
export class ChainStateGoneError extends Error {
  override readonly name = 'ChainStateGoneError';
  constructor() {
    super(`${MISSING_STATE}; no row can be chained onto it: keep the file as evidence, move it aside (with its -wal file) and start again for a new ledger`);
  }
}

/** Throws ChainStateGoneError when the ledger has no chain state. */
export function assertChainState(db: Database): void {
  if (chainStateRow(db) === undefined) throw new ChainStateGoneError();
}

/**
 * Called when the head in the file is not one this writer left there: rows were removed from the
 * chain's end and the head set back, or the chain rewritten, by something other than the hub.
 */
export type HeadMoved = (found: Witness, wrote: Witness) => void;

/** Appends rows to the chain inside the writer's transaction (one batch at a time). */
export class ChainWriter {
  private readonly getState: Statement;
  private readonly setRow: Statement;
  private readonly setHead: Statement;
  private seq = 0;
  private hash = GENESIS_HASH;
  private dirty = false;
  /**
   * The head this writer found or left at its last batch, and the one its last batch wrote
   * (committed or rolled back: either may be in the file now). Only this writer moves the head
   * while it runs (prune moves the anchor), so any other head at the next batch was put there
   * by hand: the tail the witnesses in the log do not reach yet is anchored in this memory.
   */
  private held: Witness | undefined;
  private wrote: Witness | undefined;

  constructor(
    db: Database,
    private readonly onMoved?: HeadMoved,
  ) {
    // Raw (an array): better-sqlite3 builds a row object by one keyed store per column through
    // V8's API, with a map transition each, at every batch.
    this.getState = db.prepare('SELECT head_seq, head_hash FROM chain_state WHERE id = 1').raw();
    this.setRow = db.prepare('UPDATE audit SET seq = ?, hash = ? WHERE id = ?');
    this.setHead = db.prepare('UPDATE chain_state SET head_seq = ?, head_hash = ? WHERE id = 1');
  }

  /** Re-reads the head inside the transaction: the database, not memory, is the truth. */
  startBatch(): void {
    const [seq, hash] = this.getState.get() as [number, string];
    const found = { seq, hash };
    if (this.held && !sameLink(found, this.held) && !(this.wrote && sameLink(found, this.wrote))) {
      this.onMoved?.(found, this.wrote ?? this.held);
    }
    this.held = found;
    this.wrote = undefined;
    this.seq = seq;
    this.hash = hash;
    this.dirty = false;
  }

  /**
   * The chain position and hash a finalized row will take, for a row held as values in the
   * digester's column order (from `at` on, in an array holding several rows): sets its seq
   * (at `seqAt`) and returns the hash; nothing is written. The values must be exactly what
   * the database will hold, so verify() agrees. Call advance() once the row is stored with
   * them (or, for rows stored together, before: a failed statement rolls back the batch).
   */
  next(values: unknown[], seqAt: number, digester: RowValuesDigest, at = 0): { seq: number; hash: string } {
    const seq = this.seq + 1;
    values[at + seqAt] = seq;
    return { seq, hash: digester.digest(this.hash, values, at) };
  }

  advance(link: { seq: number; hash: string }): void {
    this.seq = link.seq;
    this.hash = link.hash;
    this.dirty = true;
  }

  /** `row` is the finalized row as stored (from RETURNING *), seq still null. */
  append(row: AuditDbRow): void {
    const seq = this.seq + 1;
    const hash = rowDigest(this.hash, { ...row, seq });
    this.setRow.run(seq, hash, row.id);
    // Only advance once the row holds its seq: a failed op must not leave a hole.
    this.seq = seq;
    this.hash = hash;
    this.dirty = true;
  }

  endBatch(): void {
    if (this.dirty) {
      this.setHead.run(this.seq, this.hash);
      this.wrote = { seq: this.seq, hash: this.hash };
    }
    this.dirty = false;
  }
}

function sameLink(a: Witness, b: Witness): boolean {
  return a.seq === b.seq && a.hash === b.hash;
}

export type VerifyResult =
  | { ok: true; rows: number; anchorSeq: number; headSeq: number; headHash: string; witnesses: number; inFlight: InFlight }
  | { ok: false; rowId: number | null; seq: number | null; reason: string };

/**
 * The rows still in flight, which no chain covers yet: a call running, or one a stopped hub left,
 * which its next start finishes as `unknown` and chains like any other. A row inserted by hand
 * as in flight looks the same, so a verify that passes says how many there are, and which.
 */
export interface InFlight {
  rows: number;
  /** The lowest and highest id among them (null without any). */
  firstId: number | null;
  lastId: number | null;
}

/**
 * A chain position and its hash, recorded outside the database (`ledger verify` prints the
 * head as one). The chain is unkeyed and its head lives in the same file, so whoever can write
 * the file can recompute every hash after an edit; a witness kept elsewhere is what shows such
 * a rewrite, for every row up to its seq.
 */
export interface Witness {
  seq: number;
  hash: string;
}

/** `<seq>:<64 hex digits>`, as `ledger verify` prints it; null when the text is not one. */
export function parseWitness(text: string): Witness | null {
  const m = /^\s*(0|[1-9][0-9]{0,15}):([0-9a-fA-F]{64})\s*$/.exec(text);
  if (!m) return null;
  const seq = Number(m[1]);
  return Number.isSafeInteger(seq) ? { seq, hash: m[2]!.toLowerCase() } : null;
}

export function formatWitness(w: Witness): string {
  return `${w.seq}:${w.hash}`;
}

const short = (hash: string): string => hash.slice(0, 16) + '…';

/**
 * Recomputes the chain from the anchor, in seq order, stopping at the first row that does
 * not match. `uptoSeq` limits the walk (prune checks only what it is about to drop).
 * Must run inside a (read) transaction so the rows and the head are one snapshot.
 */
export function verifyChain(db: Database, uptoSeq?: number, witnesses: readonly Witness[] = []): VerifyResult {
  const state = chainStateRow(db);
  if (state === undefined) return { ok: false, rowId: null, seq: null, reason: MISSING_STATE };
  const held = new Map<number, string>();
  for (const w of witnesses) {
    if (w.seq < state.anchor_seq) {
      return {
        ok: false,
        rowId: null,
        seq: w.seq,
        reason: `the witness's row (seq ${w.seq}) was pruned: the chain now starts after seq ${state.anchor_seq}, so this witness can no longer be checked; if no prune you ran (see the anchor it printed) reached seq ${state.anchor_seq}, rows were deleted from the chain's start by hand; else use a witness recorded later`,
      };
    }
    if (w.seq === state.anchor_seq && w.hash !== state.anchor_hash) {
      return { ok: false, rowId: null, seq: w.seq, reason: rewritten(w, state.anchor_hash) };
    }
    if (w.seq > state.anchor_seq) held.set(w.seq, w.hash);
  }
  let expected = state.anchor_seq + 1;
  let prev = state.anchor_hash;
  let last: AuditDbRow | null = null;
  let count = 0;
  const end = uptoSeq ?? Number.MAX_SAFE_INTEGER;
  const rows = db
    .prepare('SELECT * FROM audit WHERE seq IS NOT NULL AND seq <= ? ORDER BY seq')
    .iterate(end) as IterableIterator<AuditDbRow>;
  for (const row of rows) {
    const seq = row.seq as number;
    if (seq <= state.anchor_seq) {
      return fail(row, `row has seq ${seq} at or before the chain anchor ${state.anchor_seq}`, rows);
    }
    if (seq !== expected) {
      // A row whose seq was made null or no chain position leaves the same gap as a deleted
      // one: the report names that row, not the intact one after it as a deletion.
      rows.return?.();
      return outsideTheChain(db) ?? fail(row, `chain broken before this row: expected seq ${expected}, found ${seq} (rows deleted?)`, rows);
    }
    if (rowDigest(prev, row) !== row.hash) {
      return fail(row, 'hash mismatch: the row was changed after it was written', rows);
    }
    const witnessed = held.get(seq);
    if (witnessed !== undefined && witnessed !== row.hash) {
      return fail(row, rewritten({ seq, hash: witnessed }, row.hash as string), rows);
    }
    prev = row.hash as string;
    last = row;
    expected++;
    count++;
  }
  if (uptoSeq === undefined) {
    // Rows the walk cannot reach come before the head: a chain row whose seq was made null
    // or a text also leaves the walk short of the head, and the report must name that row,
    // not the intact one before it.
    const outside = outsideTheChain(db);
    if (outside) return outside;
    const lastSeq = expected - 1;
    if (lastSeq !== state.head_seq || prev !== state.head_hash) {
      return {
        ok: false,
        rowId: last?.id ?? null,
        seq: lastSeq,
        reason: `chain ends at seq ${lastSeq} but its head is seq ${state.head_seq} (rows deleted from the end, or the head altered)`,
      };
    }
    const beyond = witnesses.find((w) => w.seq > lastSeq);
    if (beyond) {
      return {
        ok: false,
        rowId: null,
        seq: beyond.seq,
        reason: `the chain ends at seq ${lastSeq}, before the witness's seq ${beyond.seq}: rows were removed from its end, or it was rewritten`,
      };
    }
  } else if (expected - 1 !== uptoSeq) {
    return { ok: false, rowId: last?.id ?? null, seq: expected - 1, reason: `chain ends at seq ${expected - 1}, expected to reach ${uptoSeq}` };
  }
  const inFlight = db.prepare(`SELECT count(*) AS rows, min(id) AS firstId, max(id) AS lastId FROM audit WHERE outcome = 'in_flight'`).get() as InFlight;
  return { ok: true, rows: count, anchorSeq: state.anchor_seq, headSeq: expected - 1, headHash: prev, witnesses: witnesses.length, inFlight };
}

/**
 * What a look at the chain's two ends finds wrong, or undefined: the head row missing, holding
 * another hash, or rows chained past it (the end cut, or rows added, by hand); the first row
 * after the anchor missing (its start cut without moving the anchor). A few index lookups, so
 * the hub does it at every start; `verify` walks every row in between.
 */
export function chainEndsProblem(db: Database): string | undefined {
  const state = chainStateRow(db);
  if (state === undefined) return MISSING_STATE;
  const hashAt = db.prepare('SELECT hash FROM audit WHERE seq = ?').pluck();
  if (state.head_seq === state.anchor_seq) {
    if (state.head_hash !== state.anchor_hash) return `its head (seq ${state.head_seq}) is at its anchor but holds another hash`;
  } else {
    const head = hashAt.get(state.head_seq) as string | undefined;
    if (head === undefined) return `no row holds its head, seq ${state.head_seq} (rows deleted from its end?)`;
    if (head !== state.head_hash) return `the row at its head, seq ${state.head_seq}, holds another hash than the head`;
    if (hashAt.get(state.anchor_seq + 1) === undefined) return `no row holds its first seq, ${state.anchor_seq + 1}, after the anchor (rows deleted from its start?)`;
  }
  const past = db.prepare('SELECT quote(seq) FROM audit WHERE seq > ? LIMIT 1').pluck().get(state.head_seq) as string | undefined;
  if (past !== undefined) return `a row has seq ${past.slice(0, 40)}, past its head (seq ${state.head_seq})`;
  return undefined;
}

/** A finished row the walk cannot reach (no seq, or one no chain position can be), as verify reports it. */
function outsideTheChain(db: Database): VerifyResult | undefined {
  const unchained = db.prepare(`SELECT id FROM audit WHERE seq IS NULL AND outcome <> 'in_flight' ORDER BY id LIMIT 1`).get() as { id: number } | undefined;
  if (unchained) return { ok: false, rowId: unchained.id, seq: null, reason: 'finalized row is not in the chain (outcome changed?)' };
  const odd = rowPastTheWalk(db);
  if (odd) return { ok: false, rowId: odd.id, seq: null, reason: `row has seq ${odd.shown}, which is no chain position (inserted or edited by hand)` };
  return undefined;
}

/**
 * A row whose seq the walk cannot reach: the walk reads numbers up to MAX_SAFE_INTEGER (what
 * a chain position can be), but SQLite stores whatever a hand-made INSERT gives the column,
 * and a text, a blob or a larger number all sort after those in the seq index. One range of
 * that index finds them, so verify costs no second pass over the rows. `shown` is the value as SQL
 * writes it (a text quoted, a large integer exact), cut to 40 characters.
 */
function rowPastTheWalk(db: Database): { id: number; shown: string } | undefined {
  const row = db.prepare('SELECT id, quote(seq) AS shown FROM audit WHERE seq > ? ORDER BY seq LIMIT 1').get(Number.MAX_SAFE_INTEGER) as
    | { id: number; shown: string }
    | undefined;
  // Whoever inserted it chose its length: a line of the report, not the whole value.
  return row && row.shown.length > 40 ? { id: row.id, shown: row.shown.slice(0, 40) + '…' } : row;
}

function rewritten(w: Witness, found: string): string {
  return `the chain was rewritten: the row at seq ${w.seq} has hash ${short(found)} where the witness holds ${short(w.hash)}`;
}

function fail(row: AuditDbRow, reason: string, it: IterableIterator<AuditDbRow>): VerifyResult {
  it.return?.(); // release the statement before the caller runs another
  return { ok: false, rowId: row.id, seq: row.seq, reason };
}
