import { existsSync, unlinkSync } from 'node:fs';
import type { Database } from 'better-sqlite3';
import type { Logger } from '../log.js';
import { AuditApplier, END_COLS, recordRow, type PendingRecord } from './audit-apply.js';
import { assertChainState, ChainWriter, chainEndsProblem } from './chain.js';
import { PendingFiles } from './pending-files.js';
import type { AuditDbRow } from './rows.js';

/**
 * What a ledger's start does to the file before the hub writes to it: checks the chain's ends,
 * applies the rows a hub that stopped left in the pending files (`files`: the path they are
 * named by, the database's real path), and marks the calls still in flight then `unknown`.
 * Throws when SQLite would not take the pending rows (they are kept for the next start), and
 * when the file has no chain state to chain them onto (ChainStateGoneError).
 */
export function recoverLedgerFile(db: Database, files: string, log: Logger, now: number): void {
  assertChainState(db);
  // The file as the last hub left it, before this one chains anything onto it: its ends must
  // hold together, or it was changed outside the hub (verify walks the rest).
  const broken = chainEndsProblem(db);
  if (broken !== undefined) {
    log.error({ chain: broken }, `ledger: the hash chain does not hold together at its ends: ${broken}; the file was changed outside the hub (\`switchyard ledger verify\` names the first row that does not match)`);
  }
  replay(db, files, log);
  if (files !== db.name) replayOldNames(db, db.name, log);
  recover(db, now, log);
}

/**
 * Pending files a build before this one left under the path as configured (it named them so,
 * not by the real path): applied too, once, then removed.
 */
function replayOldNames(db: Database, dbPath: string, log: Logger): void {
  const old = PendingFiles.paths(dbPath).filter((p) => existsSync(p));
  if (old.length === 0) return;
  replay(db, dbPath, log);
  for (const p of old) unlinkSync(p);
}

/** Rows a hub that died left in the pending files go into SQLite before recovery. */
function replay(db: Database, dbPath: string, log: Logger): void {
  const skipped = { lines: 0 };
  const records = PendingFiles.read(dbPath, skipped) as PendingRecord[];
  for (const r of records) if (recordRow(r) === undefined && !isHeader(r)) skipped.lines++;
  // Said, not dropped unsaid: a row an operator misses may be one of these.
  if (skipped.lines > 0) log.warn({ lines: skipped.lines }, `ledger: ${skipped.lines} line${skipped.lines === 1 ? ' of the pending files was' : 's of the pending files were'} no row (torn by a full disk, or changed by hand); skipped`);
  if (records.length === 0) return;
  const applier = new AuditApplier(db, log);
  applier.take(records);
  const rows = applier.queued;
  if (!applier.flush(true)) throw new Error(`ledger: could not apply ${PendingFiles.paths(dbPath).join(' and ')} (see the log); they are kept for the next start`);
  log.info({ rows }, 'ledger: applied rows the hub wrote before it last stopped');
}

/**
 * Rows left 'in_flight' by a process that died become 'unknown' (and are chained). So do their
 * idempotency keys, remembered for the TTL from now, the end the hub knows of (from the claim,
 * a long call's key would be forgotten soon after it ended, and a retry would run it again).
 */
function recover(db: Database, now: number, log: Logger): void {
  // Recovery's statement (the applier has the others).
  const ended = END_COLS.map((c) => `${c} = @${c}`).join(', ');
  const finalize = db.prepare(`UPDATE audit SET ${ended},
      server = COALESCE(@server, server), upstream_name = COALESCE(@upstream_name, upstream_name),
      upstream_era = COALESCE(@upstream_era, upstream_era) WHERE id = @id AND outcome = 'in_flight' RETURNING *`);
  const rows = db.prepare(`SELECT id FROM audit WHERE outcome = 'in_flight' ORDER BY id`).all() as { id: number }[];
  const chain = new ChainWriter(db);
  const keys = db.transaction(() => {
    chain.startBatch();
    for (const { id } of rows) {
      const row = finalize.get({
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
      chain.append(row);
    }
    chain.endBatch();
    return db.prepare(`UPDATE idempotency SET state = 'unknown', completed_ms = ? WHERE state = 'in_flight'`).run(now).changes;
  }).immediate();
  // Which rows, by id (the first 100): a row inserted by hand as in flight is chained here like
  // a killed hub's call, and the log of this start is where an auditor can still tell them apart.
  if (rows.length || keys) {
    log.warn({ rows: rows.length, ids: rows.slice(0, 100).map((r) => r.id), idempotencyKeys: keys }, 'ledger: calls in flight when the hub last stopped are now marked unknown');
  }
}

/** A pending file's first line, `{"g":n}` (PendingFiles), which is no row and no damage. */
function isHeader(r: unknown): boolean {
  return typeof r === 'object' && r !== null && !Array.isArray(r) && typeof (r as { g?: unknown }).g === 'number';
}
