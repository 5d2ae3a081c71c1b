import { recordRow, type PendingRecord } from '../../ledger/audit-apply.js';
import { PendingFiles } from '../../ledger/pending-files.js';
import { PendingLog } from '../../ledger/pending-log.js';
import type { LedgerReader } from '../../ledger/reader.js';
import { realLedgerPath } from '../../ledger/real-path.js';
import { hasTable } from '../../ledger/migrate.js';
import { ledgerWriter } from '../ledger-lock.js';

/**
 * Calls a stopped hub left in its pending files (see src/ledger/pending-files.ts) that its next
 * start would change the database for: a row not there (and not pruned, see audit_pruned), or
 * one still in flight there whose finish is in a file. The files also hold lines of rows
 * already committed (a file is emptied only after its batch commits): those are not counted.
 * While a hub runs, the files hold only the last moments of calls, on their way in: no note.
 */
export function leftBehind(dbPath: string, reader: LedgerReader): { calls: number; files: string[] } {
  const left = { calls: 0, files: [] as string[] };
  if (ledgerWriter(dbPath)) return left;
  const outcome = reader.db.prepare('SELECT outcome FROM audit WHERE id = ?').pluck();
  // An older Switchyard's ledger (read as it is) may have no audit_pruned yet: nothing pruned is listed.
  const pruned = hasTable(reader.db, 'audit_pruned') ? reader.db.prepare('SELECT 1 FROM audit_pruned WHERE id = ?').pluck() : { get: (_id: number): unknown => undefined };
  const counted = new Set<number>();
  for (const file of PendingFiles.paths(realLedgerPath(dbPath))) {
    const before = counted.size;
    for (const r of PendingLog.read(file) as PendingRecord[]) {
      const row = recordRow(r);
      if (!row || counted.has(row.id)) continue;
      const now = outcome.get(row.id);
      if (now === undefined ? pruned.get(row.id) === undefined : now === 'in_flight' && row.done) counted.add(row.id);
    }
    if (counted.size > before) left.files.push(file);
  }
  left.calls = counted.size;
  return left;
}
