/**
 * The ledger's thread (started by ingester.ts): takes the pending file's lines as the hub
 * wrote them, moves them into SQLite on its own connection and chains them, so the hub's
 * event loop never holds a transaction for them. Each batch it has committed is published in
 * shared memory (for a reader that waits synchronously) and as a message (to empty files).
 * It also copies the WAL into the database file (see WRITER_AUTOCHECKPOINT_PAGES in db.ts).
 */
import { truncateSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { AuditApplier, type PendingRecord } from './audit-apply.js';
import { openLedgerWriter } from './db.js';
import { splitChunks } from './batch-lines.js';
import { PendingFiles } from './pending-files.js';
import { THREAD_CUT, THREAD_OPEN, THREAD_OPENING, THREAD_REFUSED } from './ingester.js';

export interface IngestWorkerData {
  path: string;
  /** Int32 [0]: the last batch number committed; [1]: THREAD_OPEN or THREAD_REFUSED (ingester.ts), 0 before the database is open. */
  applied: SharedArrayBuffer;
  retryMs: number;
  /** PASSIVE checkpoints this often, or none. */
  checkpointMs: number | null;
  /**
   * Set for a thread that replaces one that ended: batches up to this one may not be
   * committed, so it first applies what the pending files hold.
   */
  resume?: number;
  /**
   * With `resume`: lines of batches the hub handed over that may be their rows' only copy (a
   * write of the pending files failed, see Ingester.send), taken after what the files hold.
   */
  left?: string[];
}

/**
 * From the hub: lines of the pending file, in order, as batch `n` (1, 2, ...); see Ledger.ingest.
 * `lines`: the lines, joined by newlines in chunks of a few dozen KB (see joinChunks in batch-lines.ts).
 * `empty`: the pending file to empty once this batch is committed: the hub writes the other one
 * meanwhile (PendingFiles). Emptying it here keeps the truncate off the hub's event loop.
 * A tuple, not an object: V8's structured clone writes an object's keys and rebuilds it key by
 * key on this side (a map transition each), an array's elements in place.
 */
export type IngestBatch = [n: number, lines: string[], empty?: string];

/**
 * A commit: the last batch committed, as a bare number when it emptied no file (the usual
 * report, the cheapest to clone); `emptied`: the files this commit emptied, one that failed is
 * left to the hub. Or a line of the thread's log.
 */
export type IngestReport = number | { applied: number; emptied: string[] } | { log: string };

const port = parentPort!;
const data = workerData as IngestWorkerData;
const applied = new Int32Array(data.applied);
// Lines of pino JSON, logged again by the hub's own logger.
const log = pino({ base: undefined, timestamp: false }, { write: (line: string) => port.postMessage({ log: line } satisfies IngestReport) });
// Before the first SQLite call: a hub that cut this thread short first (Ingester.cutShort) ends
// it, and it must not be inside such a call then. Atomics.wait is left when the thread is ended.
if (Atomics.compareExchange(applied, 1, 0, THREAD_OPENING) !== 0) for (;;) Atomics.wait(applied, 1, THREAD_CUT);
const db = openLedgerWriter(data.path);
const applier = new AuditApplier(db, log);
Atomics.store(applied, 1, THREAD_OPEN);
Atomics.notify(applied, 0);
let taken = 0;
let retry: NodeJS.Timeout | null = null;
/** Files to empty once the batch named with each is committed, oldest first. */
const toEmpty: { path: string; n: number }[] = [];
// A replacement thread may meet lines twice (in the files and again in a batch) and rows its
// predecessor committed: it applies as a start does, skipping those.
const replay = data.resume !== undefined;
if (replay) {
  applier.take(PendingFiles.read(data.path) as PendingRecord[]);
  if (data.left) takeLines(data.left);
  taken = data.resume!;
}

/**
 * Applies the records of lines joined in chunks (IngestBatch's `lines`). The lines go with them
 * (but while SQLite refuses the queue): this hub's JSON.stringify wrote them, so a row's chain
 * digest is built from its line (AuditApplier.takeLines).
 */
function takeLines(chunks: string[]): void {
  applier.takeLines(splitChunks(chunks));
}

/**
 * The most rows one transaction takes. A backlog (batches SQLite refused for a while: a lock
 * held, a full disk) went in as one transaction when SQLite took rows again: at ~5 µs a row
 * (4.2–5.9 measured, 100,000 rows), more on a loaded machine, a synchronous call of seconds
 * from a few hundred thousand rows (an hour's refusals at a hundred calls a second), which a
 * stop could not wait out: ended inside a SQLite call, the thread can take the process down (see
 * Ingester.stop). In chunks of this many (17–23 ms each, up to ~0.1 s loaded; the backlog as a
 * whole took as long as in one transaction), with the event loop turning between them, a stop is
 * heard after the chunk under way. The hub's usual batches (a few dozen rows) are far below it,
 * and go in whole as they always did.
 */
const CHUNK_ROWS = 4096;
/** A backlog is being committed chunk by chunk (CHUNK_ROWS): the next chunk's turn. */
let chunk: NodeJS.Immediate | null = null;
/**
 * Batches taken while rows wait (SQLite refused them, or a backlog goes in chunk by chunk), or
 * that make a backlog, each with the applier's count of entries (AuditApplier.flushed) at which
 * all its rows are committed, oldest first: a batch is announced only once they are. (A finish
 * merged into a queued begin sits at the begin's place, before its own batch's end.) Empty
 * whenever nothing waits: the usual batch is committed whole as it comes.
 */
const ends: [n: number, flushed: number][] = [];

function commit(): void {
  retry = null;
  chunk = null;
  if (!applier.flush(replay, CHUNK_ROWS)) return refused();
  committedSince = true;
  checkpointsOn();
  Atomics.store(applied, 1, THREAD_OPEN);
  let done = taken;
  if (applier.queued === 0) ends.length = 0;
  else {
    // The event loop turns before the next chunk: a stop is heard there.
    chunk = setImmediate(commit);
    let i = 0;
    while (i < ends.length && ends[i]![1] <= applier.flushed) i++;
    if (i === 0) return; // no batch whole yet
    done = ends[i - 1]![0];
    ends.splice(0, i);
  }
  // Emptied before the commit is announced: the hub writes to a file again only once it hears
  // of the commit (by message, or by waiting on `applied`), so nothing it wrote is ever cut.
  const emptied: string[] = [];
  while (toEmpty.length > 0 && toEmpty[0]!.n <= done) {
    const { path } = toEmpty.shift()!;
    try {
      truncateSync(path, 0);
      emptied.push(path);
    } catch {
      // the hub empties it itself, and warns if it cannot either
    }
  }
  Atomics.store(applied, 0, done);
  Atomics.notify(applied, 0);
  port.postMessage((emptied.length > 0 ? { applied: done, emptied } : done) satisfies IngestReport);
}

/** The whole transaction was refused (disk full, a lock held too long): what it held stays queued, in order, and is tried again. */
function refused(): void {
  if (ends.length === 0 || ends[ends.length - 1]![0] !== taken) ends.push([taken, applier.flushed + applier.queued]);
  // The group commit logged the cause.
  if (Atomics.load(applied, 1) !== THREAD_REFUSED) log.warn('ledger: rows wait in the pending file until SQLite takes them again');
  Atomics.store(applied, 1, THREAD_REFUSED); // a reader waiting for this batch stops waiting
  Atomics.notify(applied, 0);
  retry = setTimeout(commit, data.retryMs);
}

let checkpointFailing = false;
/**
 * PASSIVE checkpoints every checkpointMs while there is something to copy: the timer stops once
 * a checkpoint finds the WAL copied with no commit of this thread since the one before, and the
 * next commit starts it again. Ticking on an idle ledger woke this thread ten times a second for
 * nothing (about 0.4 % of a core on an idle hub). The hub's own small writes (keys, pins) between
 * calls are copied at the next commit's checkpoints, or by their writer's (WRITER_AUTOCHECKPOINT_PAGES).
 */
let checkpoints: NodeJS.Timeout | null = null;
let committedSince = false;
function checkpointsOn(): void {
  if (data.checkpointMs === null || checkpoints) return;
  checkpoints = setInterval(checkpoint, data.checkpointMs);
}
/**
 * Prepared once, its row as an array: db.pragma() prepares its statement anew at each call and
 * builds the row as an object.
 */
const checkpointStmt = db.prepare('PRAGMA wal_checkpoint(PASSIVE)').raw();
function checkpoint(): void {
  try {
    // busy, log, checkpointed
    const r = checkpointStmt.get() as [number, number, number] | undefined;
    checkpointFailing = false;
    if (r && r[0] === 0 && r[2] >= r[1] && !committedSince) {
      clearInterval(checkpoints!);
      checkpoints = null;
    }
    committedSince = false;
  } catch (err) {
    // Busy or I/O trouble: the writers' own checkpoint still bounds the WAL. Report once.
    if (!checkpointFailing) log.warn({ err }, 'ledger: background checkpoint failed; writers checkpoint alone');
    checkpointFailing = true;
  }
}
// What an earlier run left in the WAL is copied too.
checkpointsOn();

if (replay) commit();

port.on('message', (m: IngestBatch | 'stop') => {
  if (m === 'stop') {
    // Between chunks of a backlog: the rest stays in the pending files, for the hub's close or the next start.
    if (chunk) clearImmediate(chunk);
    if (retry) clearTimeout(retry);
    if (checkpoints) clearInterval(checkpoints);
    db.close();
    port.close();
    return;
  }
  const n = m[0];
  const empty = m[2];
  takeLines(m[1]);
  taken = n;
  if (empty !== undefined) toEmpty.push({ path: empty, n });
  if (retry || chunk || applier.queued > CHUNK_ROWS) {
    ends.push([n, applier.flushed + applier.queued]);
    if (retry || chunk) return; // its turn comes
  }
  commit();
});
