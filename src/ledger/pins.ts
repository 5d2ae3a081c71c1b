import type { Database, Statement } from 'better-sqlite3';
import { keptVariants, type ItemPinKind, type PinRecord, type PinStore } from '../catalog/pins.js';
import type { ListKind } from '../catalog/lists.js';
import type { Logger } from '../log.js';
import type { GroupCommit } from './group-commit.js';
import { hasTable } from './migrate.js';

/**
 * How often the hub looks for pins changed by another process. The CLI's approval tells a
 * running hub to look at once (POST /admin/pins/changed); this poll is the fallback for one the
 * CLI cannot reach (another address, a refused key, an UPDATE by hand). It was 500 ms: an idle
 * hub's most frequent wake-up, a read and two lock calls, twice a second for an event that
 * comes a few times a year.
 */
export const PIN_POLL_MS = 5000;

interface PinRow {
  /** item_pins only (migration 0014). */
  kind?: ItemPinKind;
  server: string;
  /** tool_pins; item_pins' `name` is read as it (ITEM_SELECT). */
  tool: string;
  hash: string | null;
  body_hash: string | null;
  definition: string | null;
  pending_hash: string | null;
  pending_body_hash: string | null;
  pending_definition: string | null;
  pending_reason: 'changed' | 'renamed' | null;
  renamed_from: string | null;
  first_seen_ms: number;
  approved_ms: number | null;
  approved_by: string | null;
  pending_since_ms: number | null;
  /** JSON array of hashes (migration 0006); NULL: none. */
  variants: string | null;
  /** pin_changes.seq of the last change made elsewhere (migration 0010); NULL: none. */
  change_seq?: number | null;
  /** Counted up by each write of the hub (migration 0010). */
  hub_writes?: number | null;
}

function variantsOf(text: string | null): string[] {
  if (text === null) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v.filter((h): h is string => typeof h === 'string') : [];
  } catch {
    return [];
  }
}

export function recordOf(r: PinRow): PinRecord {
  return {
    ...(r.kind === undefined ? {} : { kind: r.kind }),
    server: r.server,
    tool: r.tool,
    hash: r.hash,
    variants: variantsOf(r.variants),
    bodyHash: r.body_hash,
    definition: r.definition,
    pendingHash: r.pending_hash,
    pendingBodyHash: r.pending_body_hash,
    pendingDefinition: r.pending_definition,
    pendingReason: r.pending_reason,
    renamedFrom: r.renamed_from,
    firstSeenMs: r.first_seen_ms,
    approvedMs: r.approved_ms,
    approvedBy: r.approved_by,
    pendingSinceMs: r.pending_since_ms,
    ...(r.change_seq === null || r.change_seq === undefined ? {} : { changeSeq: r.change_seq }),
    // Every write of a build with migration 0010 counts hub_writes up; the CLI's approval keeps
    // what was there. NULL: the row was last written by a build before it, which pinned no title.
    // (No build before this one wrote item_pins.)
    ...(r.kind === undefined && (r.hub_writes === null || r.hub_writes === undefined) ? { fromOlderBuild: true } : {}),
  };
}

export const PIN_UPSERT = `INSERT INTO tool_pins (server, tool, hash, body_hash, definition, pending_hash, pending_body_hash,
    pending_definition, pending_reason, renamed_from, first_seen_ms, approved_ms, approved_by, pending_since_ms, variants, hub_writes)
  VALUES (@server, @tool, @hash, @bodyHash, @definition, @pendingHash, @pendingBodyHash, @pendingDefinition,
    @pendingReason, @renamedFrom, @firstSeenMs, @approvedMs, @approvedBy, @pendingSinceMs, @variants, 1)
  ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, body_hash = excluded.body_hash, variants = excluded.variants,
    definition = excluded.definition, pending_hash = excluded.pending_hash, pending_body_hash = excluded.pending_body_hash,
    pending_definition = excluded.pending_definition, pending_reason = excluded.pending_reason,
    renamed_from = excluded.renamed_from, approved_ms = excluded.approved_ms, approved_by = excluded.approved_by,
    pending_since_ms = excluded.pending_since_ms, hub_writes = COALESCE(tool_pins.hub_writes, 0) + 1`;
// hub_writes: a write that moves it is the hub's own, which the triggers of migration 0010 do not count as a change from elsewhere.

/** PIN_UPSERT for item_pins (migration 0014): @tool is the item's name, @kind its kind. */
const ITEM_UPSERT = `INSERT INTO item_pins (kind, server, name, hash, body_hash, definition, pending_hash, pending_body_hash,
    pending_definition, pending_reason, renamed_from, first_seen_ms, approved_ms, approved_by, pending_since_ms, variants, hub_writes)
  VALUES (@kind, @server, @tool, @hash, @bodyHash, @definition, @pendingHash, @pendingBodyHash, @pendingDefinition,
    @pendingReason, @renamedFrom, @firstSeenMs, @approvedMs, @approvedBy, @pendingSinceMs, @variants, 1)
  ON CONFLICT (server, kind, name) DO UPDATE SET hash = excluded.hash, body_hash = excluded.body_hash, variants = excluded.variants,
    definition = excluded.definition, pending_hash = excluded.pending_hash, pending_body_hash = excluded.pending_body_hash,
    pending_definition = excluded.pending_definition, pending_reason = excluded.pending_reason,
    renamed_from = excluded.renamed_from, approved_ms = excluded.approved_ms, approved_by = excluded.approved_by,
    pending_since_ms = excluded.pending_since_ms, hub_writes = COALESCE(item_pins.hub_writes, 0) + 1`;

/**
 * The hub's own write of a pin is made only over the row it was judged with: one changed
 * elsewhere since (an approval by the CLI the hub has not read yet: change_seq moved) is kept,
 * and the hub reads it at its next look and judges the list again with it. Written over, the
 * approval was lost (the CLI had said "approved") whenever a list came between the two.
 */
const OWN_ROW = (table: string) => ` WHERE ${table}.change_seq IS @changeSeq`;

/** item_pins rows, their name read as `tool` (PinRecord's key). */
const ITEM_SELECT = 'SELECT *, name AS tool FROM item_pins';

/** The pins of prompts, resources or templates (a ledger from before migration 0014 has none); every kind when not given. */
export function readItemPins(db: Database, kind?: ItemPinKind): PinRecord[] {
  if (!hasTable(db, 'item_pins')) return [];
  const rows = (kind === undefined ? db.prepare(`${ITEM_SELECT} ORDER BY server, kind, name`).all() : db.prepare(`${ITEM_SELECT} WHERE kind = ? ORDER BY server, name`).all(kind)) as PinRow[];
  return rows.map(recordOf);
}

/** Every pin row (the CLI reads them too; a ledger from before migration 0004 has none). */
export function readPins(db: Database): PinRecord[] {
  if (!hasTable(db, 'tool_pins')) return [];
  return (db.prepare('SELECT * FROM tool_pins ORDER BY server, tool').all() as PinRow[]).map(recordOf);
}

/** The rows of a kind changed by another process after change `seq` (pin_changes, migration 0010; by index). */
function readPinsChangedSince(db: Database, kind: ListKind, seq: number): PinRecord[] {
  const rows = kind === 'tools' ? db.prepare('SELECT * FROM tool_pins WHERE change_seq > ?').all(seq) : db.prepare(`${ITEM_SELECT} WHERE change_seq > ? AND kind = ?`).all(seq, kind);
  return (rows as PinRow[]).map(recordOf);
}

function same(a: PinRecord, b: PinRecord): boolean {
  return a.hash === b.hash && a.pendingHash === b.pendingHash && a.approvedMs === b.approvedMs && a.pendingReason === b.pendingReason;
}

/**
 * Pins kept in the ledger file. The catalog reads them while it builds a list, so every row
 * is in memory; a put updates the map at once and is written by the group commit. Another
 * process (the CLI approving a change) writes the table directly: the triggers of migration
 * 0010 count each row it changes in pin_changes and mark the row with the count. poll() reads
 * that one row, and when it moved, the rows changed since: its cost does not grow with the
 * number of pins, nor with the hub's own writes (they are not counted). (It used to re-read the
 * whole table whenever `PRAGMA data_version` moved, which the hub's own ledger thread moves
 * after every batch: seconds of the event loop every 500 ms under traffic with 80k pins.)
 * The stores of one ledger share a PinChangeWatch: one timer and one read of the count.
 */
export class LedgerPinStore implements PinStore {
  private readonly map = new Map<string, PinRecord>();
  private readonly upsert: Statement;
  private readonly listeners: ((changed: PinRecord[]) => void)[] = [];
  /** Puts not committed yet: a re-read of the row they are based on must not lose them. */
  private readonly unflushed = new Map<string, PinRecord>();
  /** pin_changes.seq when last read: the changes made elsewhere up to it are in the map. */
  private seen: number;
  private polledRows = 0;

  constructor(
    private readonly db: Database,
    private readonly gc: GroupCommit,
    private readonly log: Logger,
    private readonly watch: PinChangeWatch,
    /** The kind it keeps: tools in tool_pins, the others in item_pins (migration 0014). */
    private readonly kind: ListKind = 'tools',
  ) {
    this.upsert = db.prepare(kind === 'tools' ? PIN_UPSERT + OWN_ROW('tool_pins') : ITEM_UPSERT + OWN_ROW('item_pins'));
    // The count first: a change committed between the two reads is read again at the first
    // poll, never missed.
    this.seen = watch.count();
    for (const r of kind === 'tools' ? readPins(db) : readItemPins(db, kind)) this.map.set(keyOf(r.server, r.tool), r);
  }

  /** Rows poll() has read since the start (for tests and measurements): 0 while nobody else writes pins. */
  get rowsPolled(): number {
    return this.polledRows;
  }

  get(server: string, tool: string): PinRecord | undefined {
    return this.map.get(keyOf(server, tool));
  }

  list(server?: string): PinRecord[] {
    const out: PinRecord[] = [];
    for (const r of this.map.values()) if (server === undefined || r.server === server) out.push(r);
    return out;
  }

  put(rec: PinRecord): void {
    const copy: PinRecord = { ...rec, variants: [...rec.variants], ...(this.kind === 'tools' ? {} : { kind: this.kind }) };
    const k = keyOf(rec.server, rec.tool);
    this.map.set(k, copy);
    this.unflushed.set(k, copy);
    this.gc
      .enqueue(() => {
        this.upsert.run({ ...copy, variants: copy.variants.length ? JSON.stringify(copy.variants) : null, changeSeq: copy.changeSeq ?? null });
      })
      .catch((err: unknown) => this.log.error({ err, server: rec.server, [this.kind === 'tools' ? 'tool' : 'item']: rec.tool, kind: this.kind }, 'ledger: could not store a pin'))
      .finally(() => {
        if (this.unflushed.get(k) === copy) this.unflushed.delete(k);
      });
  }

  onExternalChange(cb: (changed: PinRecord[]) => void): void {
    this.listeners.push(cb);
    this.watch.add(this);
  }

  /**
   * Reads the rows another process changed since the last poll, if any (the one-row count of
   * migration 0010 says); true when a pin changed.
   */
  poll(): boolean {
    let seq: number;
    try {
      seq = this.watch.count();
    } catch (err) {
      this.readFailed(err);
      return false;
    }
    return this.pollTo(seq);
  }

  /** poll() with the count already read (PinChangeWatch reads it once for every store). */
  pollTo(seq: number): boolean {
    // The count only grows; an older one (read before this store's own poll()) has nothing new.
    if (seq <= this.seen) return false;
    let rows: PinRecord[];
    try {
      rows = readPinsChangedSince(this.db, this.kind, this.seen);
    } catch (err) {
      // The count is not taken, so the next tick reads again; taking it would lose the change.
      this.readFailed(err);
      return false;
    }
    // Rows committed after the count was read are read again next time: same() finds them unchanged.
    this.seen = seq;
    this.polledRows += rows.length;
    const changed: PinRecord[] = [];
    for (const r of rows) {
      const k = keyOf(r.server, r.tool);
      // A put not committed yet over this very row is newer, and its write will replace it. One
      // judged with the row from before this change is not written (OWN_ROW): the row stands.
      if (this.unflushed.get(k)?.changeSeq === r.changeSeq) continue;
      const old = this.map.get(k);
      this.map.set(k, r);
      if (!old || !same(old, r)) changed.push(r);
    }
    if (!changed.length) return false;
    for (const cb of this.listeners) {
      try {
        cb(changed);
      } catch (err) {
        this.log.error({ err }, 'pin change listener failed');
      }
    }
    return true;
  }

  close(): void {
    this.watch.remove(this);
  }

  private readFailed(err: unknown): void {
    // Closed, or the read failed (busy): the next tick reads again.
    if (this.db.open) this.log.warn({ err, kind: this.kind }, 'ledger: could not read the changed pins; retrying');
  }
}

/**
 * One timer and one read of pin_changes for all the pin stores of a ledger that have a
 * listener (four kinds would read the one counter four times every PIN_POLL_MS); a store
 * reads its rows only when the count moved past what it has seen.
 */
export class PinChangeWatch {
  private readonly stores = new Set<LedgerPinStore>();
  private readonly countStmt: Statement;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
  ) {
    this.countStmt = db.prepare('SELECT seq FROM pin_changes WHERE id = 1').pluck();
  }

  /** pin_changes.seq now: the changes other processes made to pins, counted (migration 0010). */
  count(): number {
    return this.countStmt.get() as number;
  }

  add(store: LedgerPinStore): void {
    this.stores.add(store);
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), PIN_POLL_MS);
    this.timer.unref();
  }

  remove(store: LedgerPinStore): void {
    this.stores.delete(store);
    if (this.stores.size || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads the count once and lets each store catch up to it; false when none changed. */
  tick(): boolean {
    let seq: number;
    try {
      seq = this.count();
    } catch (err) {
      if (this.db.open) this.log.warn({ err }, 'ledger: could not read the pin change count; retrying');
      return false;
    }
    let changed = false;
    for (const s of this.stores) if (s.pollTo(seq)) changed = true;
    return changed;
  }
}

function keyOf(server: string, tool: string): string {
  return `${server}\0${tool}`;
}

/**
 * Pin rows an operator means by `name`: a hub name (as clients see it, from the names table),
 * "server/name", or an upstream name (a prompt's name, a resource's URI, a template's
 * uriTemplate); `server` narrows it, and `kinds` (default: tools only). No name: every row of
 * `server` of those kinds.
 */
export function matchPins(db: Database, name: string | undefined, server: string | undefined, kinds: readonly ListKind[] = ['tools']): PinRecord[] {
  const items = kinds.some((k) => k !== 'tools') ? readItemPins(db).filter((r) => kinds.includes(r.kind!)) : [];
  const all = [...(kinds.includes('tools') ? readPins(db) : []), ...items].filter((r) => server === undefined || r.server === server);
  if (name === undefined) return all;
  const byHub = new Set<string>();
  if (hasTable(db, 'names'))
    for (const r of db.prepare(`SELECT kind, server, upstream_name FROM names WHERE kind IN ('tool', 'prompt') AND hub_name = ?`).all(name) as { kind: string; server: string; upstream_name: string }[])
      byHub.add(`${r.kind === 'tool' ? 'tools' : 'prompts'}\0${keyOf(r.server, r.upstream_name)}`);
  const slash = name.indexOf('/');
  return all.filter(
    (r) =>
      byHub.has(`${r.kind ?? 'tools'}\0${keyOf(r.server, r.tool)}`) ||
      r.tool === name ||
      (slash > 0 && r.server === name.slice(0, slash) && r.tool === name.slice(slash + 1)),
  );
}

/**
 * Accept what is pending for these rows (a plain UPDATE: the triggers of migrations 0010 and
 * 0014 count it, and a running hub reads the rows at its next poll).
 */
export function approvePins(db: Database, recs: readonly PinRecord[], now: number): PinRecord[] {
  // The definition it replaces stays approved (a variant; see PinRecord.variants).
  const set = `hash = pending_hash, body_hash = pending_body_hash, definition = pending_definition,
      variants = @variants, pending_hash = NULL, pending_body_hash = NULL, pending_definition = NULL, pending_reason = NULL,
      renamed_from = NULL, pending_since_ms = NULL, approved_ms = @now, approved_by = 'cli'`;
  const tools = {
    update: db.prepare(`UPDATE tool_pins SET ${set} WHERE server = @server AND tool = @tool AND pending_hash = @pending`),
    current: db.prepare('SELECT * FROM tool_pins WHERE server = @server AND tool = @tool'),
  };
  const items = recs.some((r) => r.kind !== undefined)
    ? {
        update: db.prepare(`UPDATE item_pins SET ${set} WHERE server = @server AND kind = @kind AND name = @tool AND pending_hash = @pending`),
        current: db.prepare(`${ITEM_SELECT} WHERE server = @server AND kind = @kind AND name = @tool`),
      }
    : undefined;
  const done: PinRecord[] = [];
  db.transaction(() => {
    for (const r of recs) {
      if (!r.pendingHash) continue;
      const t = r.kind === undefined ? tools : items!;
      const key = { server: r.server, tool: r.tool, ...(r.kind === undefined ? {} : { kind: r.kind }) };
      const row = t.current.get(key) as PinRow | undefined;
      if (!row) continue;
      const kept = keptVariants(recordOf(row), r.pendingHash);
      if (t.update.run({ ...key, now, pending: r.pendingHash, variants: kept.length ? JSON.stringify(kept) : null }).changes) done.push(r);
    }
  }).immediate();
  return done;
}
