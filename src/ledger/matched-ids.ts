import type { Database, Statement } from 'better-sqlite3';

/** Row ids in the order they are to be read, handed over a slice at a time (an array is one). */
export interface IdList {
  readonly length: number;
  slice(start: number, end: number): number[];
}

/**
 * The temporary database's cache, some 80,000 ids: past it the ids of a large export spill to a
 * file of SQLite's temporary folder (SQLITE_TMPDIR, else TMPDIR, else /var/tmp), unlinked as it
 * is made, rather than stay in memory. SQLite's own sort of the ids (a filter an index serves)
 * spills there the same way.
 */
const TEMP_CACHE_KIB = 1024;

let made = 0;

/**
 * The ids one read of the ledger matched, in its order, kept in a table of the connection's
 * temporary database (not the ledger file, which a reading connection never writes) and read back
 * a slice at a time by position. An array of every id was 8 bytes a row in the CLI's memory at
 * once (80 MB for ten million rows), before the first row was written. The read is one statement,
 * so the ids are those of one snapshot of the ledger, as the array's were; reading them back holds
 * no read of the ledger open between slices (a slow reader of the output keeps no snapshot that
 * would stop the hub's WAL from being rewound). close() drops the table.
 */
export class MatchedIds implements IdList {
  private readonly range: Statement;

  private constructor(
    private readonly db: Database,
    private readonly table: string,
    readonly length: number,
    /** Kept in the reverse of the reading order: the read's ORDER BY is the one its index serves (query's newest first). */
    private readonly reversed: boolean,
  ) {
    this.range = db.prepare(`SELECT id FROM temp.${table} WHERE pos > @lo AND pos <= @hi ORDER BY pos ${reversed ? 'DESC' : 'ASC'}`).pluck();
  }

  /** The ids `select` (a SELECT of one column, the id, and its ORDER BY) gives, read in its order or, `reversed`, the other way round. */
  static keep(db: Database, select: string, params: Record<string, unknown>, reversed = false): MatchedIds {
    const table = `matched_ids_${++made}`;
    db.pragma(`temp.cache_size = -${TEMP_CACHE_KIB}`);
    // pos: the row's place in the read's order (rowids handed out in insertion order).
    db.exec(`CREATE TEMP TABLE ${table} (pos INTEGER PRIMARY KEY, id INTEGER NOT NULL)`);
    try {
      const { changes } = db.prepare(`INSERT INTO temp.${table} (id) ${select}`).run(params);
      return new MatchedIds(db, table, changes, reversed);
    } catch (err) {
      db.exec(`DROP TABLE IF EXISTS temp.${table}`);
      throw err;
    }
  }

  /** The ids from place `start` to before `end` in the reading order, as Array.prototype.slice. */
  slice(start: number, end: number): number[] {
    const [from, to] = [Math.max(0, start), Math.min(this.length, end)];
    if (to <= from) return [];
    const [lo, hi] = this.reversed ? [this.length - to, this.length - from] : [from, to];
    return this.range.all({ lo, hi }) as number[];
  }

  close(): void {
    if (this.db.open) this.db.exec(`DROP TABLE IF EXISTS temp.${this.table}`);
  }
}
