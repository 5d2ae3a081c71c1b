import { closeSync, existsSync, fstatSync, ftruncateSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { INTERNAL_ERROR, RpcError } from '../protocol/errors.js';
import { atTurnEnd, COMMIT } from '../turn-end.js';
import { monotonicNow } from '../monotonic.js';

/**
 * One of the ledger's two write-ahead files (`<ledger.path>-pending` and `-pending.2`; see
 * PendingFiles): audit rows are durable here first and move into SQLite in batches up to
 * a few ms later, on the ingest thread (see Ledger.ingest).
 *
 * Why: a call waits for its in-flight row before it is forwarded and for its finished row
 * before it is answered. As SQLite transactions those are two commits of ~6 WAL frames each
 * at concurrency 1 (~0.28 ms of a call's latency); here each is one `write()` of a line
 * (2–15 µs, measured). Durability is the same as SQLite's WAL at synchronous=NORMAL: the bytes are in
 * the OS page cache when write() returns, so they survive the process being SIGKILLed, not a
 * power loss. The first line of a turn of the event loop is written at once; lines that come
 * after it in the same turn share one write() at the end of the turn (group commit). A lone
 * call (concurrency 1) so never waits for the end of a turn, and a busy hub makes two writes
 * per turn however many calls it serves (one, from 16 calls in flight: see append's `join`).
 *
 * One writer per file (the hub's ledger lock). A hub that dies leaves the lines for the next
 * start to apply.
 */
/**
 * How the last write of either pending file went, shared by the two: while it failed, every
 * call the hub would forward is refused, which /healthz and /metrics must show (the hub's
 * upstreams and listener are fine meanwhile, so nothing else would).
 */
export class WriteStatus {
  /** The last write failed: its error code and when (monotonicNow(): only how long ago is read, never shown); cleared by the next that succeeds. */
  failing: { code: string; at: number } | undefined = undefined;
  /** Writes that failed since the start. */
  failures = 0;
}

export class PendingLog {
  private fd: number;
  private lines: string[] = [];
  private batch: Batch | null = null;
  /** A line was written in this turn of the event loop: later ones join the batch. */
  private turnOpen = false;
  /** A write at once failed in this turn: whoever waits in this turn hears of it. */
  private turnError: Error | null = null;
  private readonly endTurn = (): void => {
    this.turnOpen = false;
    this.turnError = null;
    this.flush();
  };
  private writes = 0;
  private records = 0;
  /** Written before the next line: the file's place in the order of the two (see lead). */
  private header = '';
  /** Something was written since the file was last emptied. */
  private used = false;
  /** The last write failed, perhaps halfway through a line. */
  private torn = false;
  /** Characters written since the file was last emptied, and when the first of them was. */
  bytes = 0;
  since = 0;

  constructor(
    readonly path: string,
    readonly status = new WriteStatus(),
  ) {
    this.fd = openSync(path, 'a', 0o600);
  }

  static pathFor(dbPath: string): string {
    return `${dbPath}-pending`;
  }

  /**
   * The records of a file a hub left behind, in order. A line that does not parse is the
   * torn end of a write cut short (a power loss, or a full disk, after which the hub went on
   * writing on a line of its own; see write) and is skipped: the lines after it are whole.
   * Only a regular file is read (a device such as /dev/full would never end).
   */
  static read(path: string, torn?: { lines: number }): unknown[] {
    if (!existsSync(path) || !statSync(path).isFile()) return [];
    return parseLines(readFileSync(path, 'utf8').split('\n'), torn);
  }

  /** Such a file's bytes (none if it is no regular file, as read()), read off the event loop. */
  static async readBytes(path: string): Promise<Buffer> {
    if (!existsSync(path) || !statSync(path).isFile()) return Buffer.alloc(0);
    return readFile(path);
  }

  /**
   * Writes a line (no newline) now, if it is the first of this turn of the event loop, or
   * queues it for the end of the turn; resolves once written. `join`: queue the first line
   * too (a busy hub: HOLD_FROM calls in flight, src/turn-end.ts), and the lines after it with it.
   */
  append(line: string, join = false): Promise<void> {
    if (!this.turnOpen) {
      this.turnOpen = true;
      atTurnEnd(COMMIT, this.endTurn);
      if (!join) {
        try {
          this.write(line + '\n');
        } catch (err) {
          this.turnError = writeFailed(err);
          return failed(this.turnError);
        }
        this.writes++;
        this.records++;
        return WRITTEN;
      }
    }
    this.lines.push(line);
    this.batch ??= new Batch();
    return this.batch.promise;
  }

  /** Resolves once every line queued so far is written (at once if none). */
  whenWritten(): Promise<void> | null {
    if (this.turnError) return failed(this.turnError);
    return this.batch ? this.batch.promise : null;
  }

  /** Writes whatever is queued now, synchronously. Returns false when the write failed. */
  flush(): boolean {
    const batch = this.batch;
    if (!batch) return true;
    const lines = this.lines;
    this.lines = [];
    this.batch = null;
    try {
      this.write(lines.join('\n') + '\n');
    } catch (err) {
      batch.reject(writeFailed(err));
      return false;
    }
    this.writes++;
    this.records += lines.length;
    batch.resolve();
    return true;
  }

  /**
   * Writes lines now, after what is queued (see PendingFiles.rewrite). They are copies, so
   * they are not counted. False when the write failed.
   */
  rewrite(lines: string[]): boolean {
    if (!this.flush()) return false;
    try {
      this.write(lines.join('\n') + '\n');
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Everything written is in SQLite now: start the file over. False when that failed; the
   * lines then stay, and the next start applies them again, which changes nothing.
   */
  truncate(): boolean {
    try {
      ftruncateSync(this.fd, 0);
      this.wasEmptied();
      return true;
    } catch {
      return false;
    }
  }

  /** The ingest thread emptied the file (by its path) after committing what it held. */
  wasEmptied(): void {
    this.used = false;
    this.torn = false;
    this.bytes = 0;
  }

  /** Nothing was written since the file was last emptied. */
  get empty(): boolean {
    return !this.used;
  }

  /**
   * The file's next lines come after those of generation gen - 1 (in the other file): its
   * first line says so, `{"g":gen}`, for a start that finds both files to apply in order.
   */
  lead(gen: number): void {
    this.header = `{"g":${gen}}\n`;
  }

  private write(text: string): void {
    // After a failed write, part of it may be in the file without its newline (a full disk
    // takes what fits): the next line must not be glued to it.
    const out = (this.torn ? '\n' : '') + this.header + text;
    try {
      writeAll(this.fd, out);
    } catch (err) {
      this.torn = true;
      this.status.failing = { code: errorCode(err), at: monotonicNow() };
      this.status.failures++;
      throw err;
    }
    this.torn = false;
    this.status.failing = undefined;
    this.header = '';
    if (!this.used) this.since = performance.now();
    this.used = true;
    this.bytes += out.length;
  }

  /** write() calls and the lines they carried (for metrics). */
  get counters(): { batches: number; writes: number } {
    return { batches: this.writes, writes: this.records };
  }

  /**
   * Flushes, closes, and removes the file if nothing in it is left to apply: everything is
   * committed (`empty`), or no write succeeded since it was emptied (what it holds is the torn
   * part of a failed one, which a start would skip), unless `whole`: that part holds whole
   * lines (see PendingFiles.close).
   */
  close(empty: boolean, whole = false): void {
    this.flush();
    if (empty || (!this.used && !whole)) this.truncate();
    const size = fstatSync(this.fd).size;
    closeSync(this.fd);
    this.fd = -1;
    if (size === 0) {
      try {
        unlinkSync(this.path);
      } catch {
        // already gone; nothing to keep
      }
    }
  }
}

class Batch {
  readonly promise: Promise<void>;
  resolve!: () => void;
  reject!: (err: Error) => void;
  constructor() {
    this.promise = new Promise<void>((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    this.promise.catch(() => undefined); // observed by whoever awaits it
  }
}

/** append()'s promise for a line written at once: a caller may tell it apart and not wait a turn on it. */
export const WRITTEN = Promise.resolve();

/**
 * A line that could not be written (disk full, I/O error), or a SQLite write the database
 * refused (its write lock held by another process past busy_timeout, a full disk): the caller's
 * call fails with a JSON-RPC error that says why, rather than an anonymous internal error.
 */
export function writeFailed(err: unknown): RpcError {
  return new RpcError(INTERNAL_ERROR, `the audit ledger cannot write (${errorCode(err)}); the hub does not run calls it cannot record`);
}

function errorCode(err: unknown): string {
  const code = (err as NodeJS.ErrnoException)?.code;
  // SQLite says only "database is locked": the operator needs to know that another process
  // (a sqlite3 shell in a transaction, a tool writing the file) holds it.
  if (code === 'SQLITE_BUSY') return `${code}: another process holds the ledger database's write lock`;
  return code ?? (err instanceof Error ? err.message : String(err));
}

/** A rejected promise that is never reported as unhandled (a caller may not wait for it). */
function failed(err: Error): Promise<void> {
  const p = Promise.reject(err);
  p.catch(() => undefined);
  return p;
}

function writeAll(fd: number, text: string): void {
  // A regular file takes the whole write unless the disk is full (then writeSync throws).
  const n = writeSync(fd, text);
  if (n === text.length) return; // ASCII, the usual case: bytes = characters
  const buf = Buffer.from(text);
  let off = n;
  while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
}

/** The records of a pending file's lines, as PendingLog.read gives them: an empty line is none, a torn one (see read) is skipped. */
export function parseLines(lines: readonly string[], torn?: { lines: number }): unknown[] {
  const out: unknown[] = [];
  for (const line of lines) {
    if (line === '') continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // torn: skipped (counted for a start's log)
      if (torn) torn.lines++;
    }
  }
  return out;
}

/**
 * A pending file's bytes (readBytes) as lines, `max` at a time, each decoded as its slice comes:
 * decoding and splitting 100,000 rows at once (30 MB) took ~0.2 s in one piece, a slice of
 * 4,096 ~2.5 ms.
 */
export function* lineSlices(bytes: Buffer, max: number): Generator<string[]> {
  let at = 0;
  while (at < bytes.length) {
    const slice: string[] = [];
    while (slice.length < max && at < bytes.length) {
      let end = bytes.indexOf(0x0a, at);
      if (end < 0) end = bytes.length;
      if (end > at) slice.push(bytes.toString('utf8', at, end));
      at = end + 1;
    }
    if (slice.length > 0) yield slice;
  }
}
