import type { Database } from 'better-sqlite3';
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import type { Ingester } from './ingester.js';
import { AuditApplier, recordRow, type PendingRecord } from './audit-apply.js';
import { splitChunks } from './batch-lines.js';
import { PendingFiles } from './pending-files.js';
import { lineSlices, parseLines } from './pending-log.js';

/** How long close() waits for the ingest thread; what it has not committed stays in the files. */
const CLOSE_TIMEOUT_MS = 10_000;

/** What whenIngested() needs of the ingest thread. */
export type IngestProgress = Pick<Ingester, 'whenApplied' | 'refusing' | 'down'>;

/**
 * For close(): whether every batch handed over (up to `handed`) is committed. While SQLite
 * refuses the thread's batches (a full disk), close() waits one retry for them (`retryMs`, plus
 * 500 ms), not CLOSE_TIMEOUT_MS: a hub stopped with its disk full took over 10 s to exit, past a
 * supervisor's patience (`docker stop` waits 10 s) after the drain, for nothing more kept: what
 * is in the pending files goes in at the next start either way.
 */
export async function whenIngested(ingester: IngestProgress, handed: number, retryMs: number): Promise<boolean> {
  const refusedMs = retryMs + 500;
  // On the monotonic clock: a wall clock stepped forward (NTP) gave up at once, one stepped back waited on.
  const deadline = monotonicNow() + CLOSE_TIMEOUT_MS;
  for (;;) {
    const left = deadline - monotonicNow();
    if (left <= 0) break;
    if (await ingester.whenApplied(handed, Math.min(left, refusedMs))) return true;
    // With no thread (it ended, its replacement not started) whenApplied answers at once:
    // this loop spun on resolved promises, holding the event loop (and the replacement's
    // timer) for all of CLOSE_TIMEOUT_MS. The rows are in the pending files either way.
    if (ingester.refusing || ingester.down) break;
  }
  return false;
}

/**
 * For close(), once the ingest thread is gone without having committed all it was handed
 * (whenIngested false), or was ended before it opened the database (Ingester.cutShort: a close
 * soon after the open, an idle hub's stop, then waits for no thread's start). `refused`: SQLite
 * refused its last batch. Otherwise the thread ended unasked, outlasted the wait, or was cut
 * short: what it left goes into SQLite here, from the pending files and the kept batches
 * (`kept`, see Ingester.send), as a replacement thread would have put it.
 * Left to the next start, lines a full disk had kept out of the files were lost unless the
 * files had room again, though SQLite might have taken them. When SQLite refuses, keepRefused.
 * True when everything is in SQLite.
 */
export async function afterStop(db: Database, files: string, kept: readonly string[], refused: boolean, rewrite: (lines: string[]) => boolean, log: Logger): Promise<boolean> {
  if (!refused && (await applyHere(db, files, kept, log))) return true;
  log.warn(NOT_TAKEN);
  keepRefused(kept, files, rewrite, db, log);
  return false;
}

const NOT_TAKEN = 'ledger: SQLite did not take the last rows before the stop; those in the pending files go in at the next start';

/**
 * The most lines applyHere reads, and rows it commits in one transaction, between two turns of
 * the event loop: as the ingest thread commits a backlog (CHUNK_ROWS, ingest-worker.ts).
 */
const CLOSE_CHUNK_ROWS = 4096;

/**
 * The pending files' rows, then the kept batches' (chunks of lines), into SQLite on the hub's
 * connection, as at a start, CLOSE_CHUNK_ROWS at a time with the event loop turning between
 * (the files read off it): a stop that found the thread ended, or that stopped it mid-backlog,
 * held the loop for the whole backlog in one piece (60,000 rows: 1.9 s, measured in the test),
 * while the hub may still be answering what it drains. Each chunk is a transaction of its own:
 * the files stay until every row is in (close() empties them only then), and a start after a
 * chunk SQLite refused skips the rows committed before it, as the applier's replay skips here
 * rows the thread committed. A begin committed in flight by one chunk is finished by a later
 * one (an UPDATE), as on the thread. False when SQLite refused a chunk.
 */
async function applyHere(db: Database, files: string, kept: readonly string[], log: Logger): Promise<boolean> {
  const applier = new AuditApplier(db, log);
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  // Once the queue is a chunk long: a begin whose finish is in the next slice waits for it otherwise.
  const commitFull = async (): Promise<boolean> => {
    while (applier.queued >= CLOSE_CHUNK_ROWS) {
      if (!applier.flush(true, CLOSE_CHUNK_ROWS)) return false;
      await turn();
    }
    return true;
  };
  for (const bytes of await PendingFiles.readBytes(files)) {
    for (const slice of lineSlices(bytes, CLOSE_CHUNK_ROWS)) {
      applier.take(parseLines(slice) as PendingRecord[]);
      if (!(await commitFull())) return false;
      await turn();
    }
  }
  const left = splitChunks(kept);
  for (let at = 0; at < left.length; at += CLOSE_CHUNK_ROWS) {
    applier.take(left.slice(at, at + CLOSE_CHUNK_ROWS).map((l) => JSON.parse(l) as PendingRecord));
    if (!(await commitFull())) return false;
  }
  while (applier.queued > 0) {
    if (!applier.flush(true, CLOSE_CHUNK_ROWS)) return false;
    if (applier.queued > 0) await turn();
  }
  return true;
}

/**
 * For close(), when SQLite did not take the last rows: those whose line a failed write kept
 * out of the pending files (`kept`: the thread's batches, see Ingester.send) are written there
 * now (`rewrite`, PendingFiles.rewrite), for the next start, should the disk have room again.
 * Otherwise they are lost, and the log says so: how many rows, and how many ends (a row whose
 * begin is in the files or in SQLite but not its finish is `unknown` at the next start). What
 * SQLite holds counts (`db`): a call forwarded before the disk filled has its begin there, and
 * the files it was in may be emptied since; counted as lost whole, its row was not.
 */
function keepRefused(kept: readonly string[], files: string, rewrite: (lines: string[]) => boolean, db: Database, log: Logger): void {
  const lines = splitChunks(kept);
  if (lines.length === 0) return;
  const filed = PendingFiles.read(files) as PendingRecord[];
  const written = new Set(filed.map((r) => JSON.stringify(r)));
  const missing = lines.filter((l) => !written.has(l));
  if (missing.length === 0 || rewrite(missing)) return;
  // The disk may have taken the first of them (PendingFiles.close keeps those): they count.
  const begun = new Set<number>();
  const ended = new Set<number>();
  for (const r of PendingFiles.read(files) as PendingRecord[]) {
    const row = recordRow(r);
    if (row) (row.done ? ended : begun).add(row.id);
  }
  // Of each row a line is missing of: whether that line was its end, and what is left elsewhere.
  const endMissing = new Map<number, boolean>();
  for (const l of missing) {
    const { id, done } = recordRow(JSON.parse(l) as PendingRecord)!;
    endMissing.set(id, (endMissing.get(id) ?? false) || done);
  }
  const stored = storedOutcomes(db, [...endMissing.keys()].filter((id) => !ended.has(id)), log);
  const rows: number[] = [];
  const ends: number[] = [];
  for (const [id, done] of endMissing) {
    const inDb = stored.get(id);
    if (ended.has(id) || (inDb !== undefined && inDb !== 'in_flight')) continue; // its end is kept
    if (!begun.has(id) && inDb === undefined) rows.push(id);
    else if (done) ends.push(id);
  }
  if (rows.length === 0 && ends.length === 0) return;
  log.error(
    { rows: rows.length, ends: ends.length, ids: [...rows, ...ends].slice(0, 100) },
    'ledger: rows the pending files refused (a full disk) are lost, SQLite did not take them before the stop either; `ends`: rows that lost only their end, `unknown` at the next start',
  );
}

/** The outcome SQLite holds for each of these rows that it has (reads work while a full disk refuses writes). */
function storedOutcomes(db: Database, ids: readonly number[], log: Logger): Map<number, string> {
  const out = new Map<number, string>();
  try {
    const get = db.prepare('SELECT outcome FROM audit WHERE id = ?').pluck();
    for (const id of ids) {
      const outcome = get.get(id) as string | undefined;
      if (outcome !== undefined) out.set(id, outcome);
    }
  } catch (err) {
    // Unreadable: each row counts as lost whole, as if SQLite held none of them.
    log.warn({ err }, 'ledger: could not read which of the lost rows SQLite holds');
  }
  return out;
}
