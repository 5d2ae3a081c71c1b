/**
 * The applier's runs of finished rows as they were before a run bound each shared column once
 * (sixty-fourth session): every row's LINKED_COLS values bound, one INSERT of up to 16 rows by
 * `VALUES (…), (…)`, chained in order inside one transaction. Kept so a test can hold the
 * present path to the rows, ids and chain digests this one wrote for the same records.
 */
import type { Database } from 'better-sqlite3';
import { LINKED_COLS, linkedDigest, linkedValues } from '../../src/ledger/audit-apply.js';
import { ChainWriter } from '../../src/ledger/chain.js';

const RUN = 16;
const SEQ_AT = LINKED_COLS.indexOf('seq');
const HASH_AT = LINKED_COLS.indexOf('hash');

/** Finished records (begin's values, then the finish's), all new, into `db` in one transaction. */
export function applyFinishedAsBefore(db: Database, records: readonly unknown[][]): void {
  const chain = new ChainWriter(db);
  const row = `(${LINKED_COLS.map(() => '?').join(', ')})`;
  const insert = (n: number) => db.prepare(`INSERT INTO audit (${LINKED_COLS.join(', ')}) VALUES ${Array(n).fill(row).join(', ')}`);
  db.transaction(() => {
    chain.startBatch();
    for (let i = 0; i < records.length; i += RUN) {
      const run = records.slice(i, i + RUN);
      const values: unknown[] = [];
      for (const r of run) {
        const v = linkedValues(r);
        const link = chain.next(v, SEQ_AT, linkedDigest);
        v[HASH_AT] = link.hash;
        chain.advance(link);
        values.push(...v);
      }
      insert(run.length).run(...values);
    }
    chain.endBatch();
  }).immediate();
}
