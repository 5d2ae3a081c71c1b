import { lineSlices, parseLines, PendingLog, WriteStatus } from './pending-log.js';

/**
 * The ledger's two pending files, written in turns. Rows move into SQLite on another thread
 * while the hub goes on appending, so a file cannot be emptied once its lines are in: newer
 * lines follow them. Instead, each time the lines written so far are handed to the ingest
 * thread (as batch n), new lines go to the other file, if that one is empty; the first file
 * is emptied once batch n is committed. A start that finds lines in both applies them in the
 * order their first lines give (`{"g":n}`; a file without one is the older).
 */
export interface PendingFilesOptions {
  /**
   * A hand-over that holds begins back switches files only once the file written holds this
   * many bytes, or `switchAfterMs` passed since its first line: each such switch writes the
   * held begins again, so at concurrency 64, where nearly every hand-over holds some, switching
   * at each (every few ms) cost the hub's thread more than the files' size saved. A hand-over
   * that holds nothing back switches whenever it can, so a quiet hub's files are emptied at its
   * last hand-over. Both 0 (the default): always switch when the other file is free.
   */
  switchBytes?: number;
  switchAfterMs?: number;
}

export class PendingFiles {
  private readonly files: [PendingLog, PendingLog];
  private readonly switchBytes: number;
  private readonly switchAfterMs: number;
  private active = 0;
  /** The batch whose commit lets the other file be emptied; 0 when it is empty. */
  private standbyNeeds = 0;
  private gen = 0;
  /** Emptying a file failed (warned once per streak by the ledger). */
  truncateFailing = false;
  /** How the last write of either file went. */
  readonly status = new WriteStatus();
  /** status.failures at the last hand-over (see handOver). */
  private seenFailures = 0;
  /** performance.now() at the last hand-over that came after a failed write: a line begun before it may be missing. */
  private refusedUntil = -Infinity;
  /** When the oldest begin held back at the last hand-over was begun (Infinity: none was). */
  private carriedSince = Infinity;

  constructor(dbPath: string, opts: PendingFilesOptions = {}) {
    const [a, b] = PendingFiles.paths(dbPath);
    this.files = [new PendingLog(a, this.status), new PendingLog(b, this.status)];
    this.switchBytes = opts.switchBytes ?? 0;
    this.switchAfterMs = opts.switchAfterMs ?? 0;
  }

  static paths(dbPath: string): [string, string] {
    const first = PendingLog.pathFor(dbPath);
    return [first, `${first}.2`];
  }

  /** The records both files hold, in the order they were written (see PendingLog.read). */
  static read(dbPath: string, torn?: { lines: number }): unknown[] {
    const files = PendingFiles.paths(dbPath).map((p) => PendingLog.read(p, torn));
    const gen = (records: unknown[]): number => {
      const g = (records[0] as { g?: unknown } | undefined)?.g;
      return typeof g === 'number' ? g : 0;
    };
    files.sort((x, y) => gen(x) - gen(y));
    return files.flat();
  }

  /** Both files' bytes, in the order they were written (as read()), read off the event loop: see lineSlices. */
  static async readBytes(dbPath: string): Promise<Buffer[]> {
    const files = await Promise.all(PendingFiles.paths(dbPath).map((p) => PendingLog.readBytes(p)));
    const gen = (bytes: Buffer): number => {
      // Its first record (a torn line is none): the header, if it is one.
      for (const [line] of lineSlices(bytes, 1)) {
        const [first] = parseLines([line!]) as ({ g?: unknown } | undefined)[];
        if (first !== undefined) return typeof first.g === 'number' ? first.g : 0;
      }
      return 0;
    };
    return gen(files[1]!) < gen(files[0]!) ? [files[1]!, files[0]!] : files;
  }

  append(line: string, join = false): Promise<void> {
    return this.files[this.active]!.append(line, join);
  }

  whenWritten(): Promise<void> | null {
    return this.files[this.active]!.whenWritten();
  }

  flush(): boolean {
    return this.files[this.active]!.flush();
  }

  /**
   * The file to empty once the next hand-over's batch is committed (the one written now), if
   * that hand-over is to switch files: the other one is free, and, when the hand-over `holds`
   * begins back (to be written again after a switch), this one is big or old enough
   * (PendingFilesOptions). Then call switched() with the batch's number.
   */
  switchable(holds: boolean): string | undefined {
    const f = this.files[this.active]!;
    if (this.standbyNeeds !== 0 || f.empty) return undefined;
    if (holds && f.bytes < this.switchBytes && performance.now() - f.since < this.switchAfterMs) return undefined;
    return f.path;
  }

  /** Everything written so far went to the ingest thread as batch n: write on in the other file. */
  switched(n: number): void {
    this.standbyNeeds = n;
    this.active ^= 1;
    this.files[this.active]!.lead(++this.gen);
  }

  /**
   * Lines already written that were not handed over (held begins), written again, now, to the
   * file written from now on. False when that failed.
   */
  rewrite(lines: string[]): boolean {
    return this.files[this.active]!.rewrite(lines);
  }

  /**
   * At each hand-over, once its lines are written (and the held begins written again, if the
   * files switched): whether some of its lines may be missing from the files, so that the
   * batch must be kept for a thread that replaces this one (Ingester.send's `keep`). A batch's
   * lines were written since the last hand-over, but for the begins that one held back
   * (`heldSince`: when the oldest of those held back now was begun), which may be older: a
   * failure while they were written counts too, until the hand-over that takes them. A batch
   * whose lines were all written stays in the files until it is committed (a file is emptied
   * only once the batch that switched away from it is), where a new thread reads it. Keeping
   * every batch after the first failure kept them all in memory twice while SQLite refused
   * them as well (here and in the thread's queue).
   */
  handOver(heldSince: number | undefined): boolean {
    const failures = this.status.failures;
    const refused = failures !== this.seenFailures || this.carriedSince <= this.refusedUntil;
    if (failures !== this.seenFailures) {
      this.seenFailures = failures;
      this.refusedUntil = performance.now();
    }
    this.carriedSince = heldSince ?? Infinity;
    return refused;
  }

  /**
   * Batches up to n are committed: empty the file they came from, unless the ingest thread
   * did (`emptied`, by path).
   */
  committed(n: number, emptied: readonly string[] = []): boolean {
    if (this.standbyNeeds === 0 || n < this.standbyNeeds) return true;
    const standby = this.files[this.active ^ 1]!;
    if (emptied.includes(standby.path)) standby.wasEmptied();
    else if (!standby.truncate()) return false;
    this.standbyNeeds = 0;
    return true;
  }

  /** Everything written is committed (nothing was written since): start over in the first file. */
  startOver(): boolean {
    this.flush();
    const ok = this.files[0].truncate() && this.files[1].truncate();
    if (ok) {
      this.active = 0;
      this.standbyNeeds = 0;
    }
    return ok;
  }

  /** write() calls and the lines they carried, both files (for metrics). */
  get counters(): { batches: number; writes: number } {
    const [a, b] = [this.files[0].counters, this.files[1].counters];
    return { batches: a.batches + b.batches, writes: a.writes + b.writes };
  }

  /**
   * Flushes and closes both; `empty`: everything is committed, so both files go. A file no
   * write succeeded in since it was emptied goes too, but for whole rows a failed write put
   * there: a disk with room for part of the rows a stop writes again (Ledger.close) took the
   * first of them, which were then thrown away with the torn end.
   */
  close(empty: boolean): void {
    for (const f of this.files) f.close(empty, !empty && f.empty && holdsRows(f.path));
  }
}

/** Whether a pending file holds a row's line (not only a header, `{"g":n}`, or a torn end). */
function holdsRows(path: string): boolean {
  return PendingLog.read(path).some((r) => Array.isArray(r) || (typeof r === 'object' && r !== null && 's' in r));
}
