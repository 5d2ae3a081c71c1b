import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import type { IngestBatch, IngestReport, IngestWorkerData } from './ingest-worker.js';

export interface IngesterOptions {
  log: Logger;
  /** The thread committed batches up to n, and emptied these pending files (see IngestBatch's `empty`). */
  onApplied: (n: number, emptied: readonly string[]) => void;
  /** After SQLite refused a whole batch. */
  retryMs: number;
  /** PASSIVE checkpoints this often, or none. */
  checkpointMs: number | null;
  /** The first wait before a thread that ended is replaced; it doubles while replacements fail. */
  restartMs: number;
}

/** Slot 1 of the shared memory: the thread has opened the database, or SQLite refuses its batches. */
export const THREAD_OPEN = 1;
export const THREAD_REFUSED = 2;
/** Slot 1: the thread is in its first SQLite calls (opening the database); or, set by the hub first, it is being cut short and makes none. */
export const THREAD_OPENING = 3;
export const THREAD_CUT = 4;

const NONE: readonly string[] = [];

/**
 * The hub's side of the ingest thread (ingest-worker.ts). Batches are numbered from 1 in the
 * order they are sent; the thread commits them in that order, and `applied` is the last one
 * committed. Moving rows into SQLite on the hub's thread held its event loop for the whole
 * transaction and took a quarter of its CPU per call at concurrency 64 (the bound, measured
 * by A/B with the move skipped: 100–112 against 133–141 µs).
 */
export class Ingester {
  private worker!: Worker;
  /** [0]: the last batch committed; [1]: 0 until the thread has opened the database, then THREAD_OPEN or THREAD_REFUSED. */
  private readonly shared = new Int32Array(new SharedArrayBuffer(8));
  private sent = 0;
  /** No thread is running: it ended, and the next one is not started yet. */
  private gone = false;
  private stopping: Promise<void> | null = null;
  private readonly waiters: { n: number; resolve: (ok: boolean) => void }[] = [];
  /** Batches sent with `keep` (see send), oldest first, until they are committed. */
  private readonly kept: [n: number, lines: string[]][] = [];
  private restartMs: number;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Threads that ended unasked and were replaced (for metrics). */
  restarts = 0;

  private readonly log: Logger;

  constructor(
    private readonly path: string,
    private readonly opts: IngesterOptions,
  ) {
    this.log = opts.log;
    this.restartMs = opts.restartMs;
    this.start(undefined);
  }

  /** `resume`: a thread that replaces one that ended, taking over batches up to this one. */
  private start(resume: number | undefined): void {
    const { retryMs, checkpointMs, onApplied } = this.opts;
    const left = resume === undefined || this.kept.length === 0 ? undefined : this.keptLines;
    const workerData: IngestWorkerData = { path: this.path, applied: this.shared.buffer as SharedArrayBuffer, retryMs, checkpointMs, resume, left };
    // A small young generation: with V8's default the thread's new space grew to 32 MB under
    // load (the hub's RSS +20 MB, and the soak's growth check failed); at 6 MB its heap stays
    // at ~16 MB, for no measurable CPU.
    const resourceLimits = { maxYoungGenerationSizeMb: 6 };
    // None of the hub's flags but CPU profiling: a Worker refuses V8 and per-process ones
    // (`node --max-old-space-size=… switchyard start` would not start), and the thread, plain
    // JS from dist/, needs none; V8's flags reach it anyway, being process-wide. A profiled hub
    // (`node --cpu-prof`) profiles this thread too, into a file of its own.
    const worker = new Worker(workerFile(), { workerData, execArgv: cpuProfileFlags(process.execArgv), resourceLimits });
    this.worker = worker;
    this.gone = false;
    if (this.waiters.length === 0) worker.unref();
    worker.on('message', (m: IngestReport) => {
      if (typeof m !== 'number' && 'log' in m) return relog(this.log, m.log);
      this.restartMs = this.opts.restartMs; // it works: a later end starts the wait afresh
      if (typeof m === 'number') onApplied(m, NONE);
      else onApplied(m.applied, m.emptied);
      this.settle();
    });
    worker.on('error', (err) => this.log.error({ err }, 'ledger: the ingest thread failed'));
    worker.once('exit', (code) => {
      this.gone = true;
      Atomics.store(this.shared, 1, 0); // the next thread has not opened the database yet
      if (!this.stopping) this.restart(code);
      this.settle();
    });
  }

  /**
   * A thread that ended unasked is replaced, after a wait that doubles while replacements
   * fail (up to RESTART_MAX_MS). Meanwhile rows wait in the pending files, and the new thread
   * starts by applying them: everything handed to the old one that it may not have committed,
   * and the kept batches' lines (see send), which a full disk may have kept out of the files.
   */
  private restart(code: number): void {
    const inMs = this.restartMs;
    this.restartMs = Math.min(inMs * 2, RESTART_MAX_MS);
    this.log.error({ exitCode: code, restartInMs: inMs }, 'ledger: the ingest thread ended; audit rows wait in the pending files, and a new thread takes them over');
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      this.restarts++;
      this.start(this.sent);
      this.log.info({ batches: this.unapplied }, 'ledger: a new ingest thread started');
    }, inMs);
    this.restartTimer.unref();
  }

  /** The last batch committed. */
  get applied(): number {
    return Atomics.load(this.shared, 0);
  }

  /** No thread runs: the last one ended, and its replacement has not started yet. */
  get down(): boolean {
    return this.gone;
  }

  /** SQLite refused the thread's last batch (a full disk): it is retried every retryMs. */
  get refusing(): boolean {
    return Atomics.load(this.shared, 1) === THREAD_REFUSED;
  }

  /** The number the next batch sent will have. */
  get next(): number {
    return this.sent + 1;
  }

  /** The lines of the batches sent with `keep` that are not committed yet, in order (chunks, as sent). */
  get keptLines(): string[] {
    this.release();
    return this.kept.flatMap(([, lines]) => lines);
  }

  /** Batches sent and not yet committed. */
  get unapplied(): number {
    return this.sent - this.applied;
  }

  /**
   * Sends lines of the pending file (chunks of lines joined by newlines); returns the batch's number. `empty`:
   * the pending file the thread empties once the batch is committed. `keep`: some lines may not
   * be in the pending files (a write of them failed): the batch is kept until it is committed,
   * for a thread that replaces this one (which otherwise starts from the files alone).
   */
  send(lines: string[], empty?: string, keep = false): number {
    const n = ++this.sent;
    if (keep) this.kept.push([n, lines]);
    // Without a thread the lines are in the pending files, where the next thread reads them
    // (those a failed write kept out of the files, in the kept batch it is given).
    if (!this.gone) this.worker.postMessage((empty === undefined ? [n, lines] : [n, lines, empty]) satisfies IngestBatch);
    return n;
  }

  /**
   * Blocks until batch n is committed or timeoutMs passed (for readers in this process). Not
   * at all while SQLite refuses the thread's batches (a full disk): they are retried every
   * second, and the hub's event loop must not stop for that. The thread's end is an event this
   * loop cannot see while it waits, so a thread that has not opened the database within
   * STARTUP_MS is not waited for any longer.
   */
  waitSync(n: number, timeoutMs: number): boolean {
    // The monotonic clock: on the wall clock a step forward ended the wait at once, one back blocked the loop past timeoutMs.
    const t0 = monotonicNow();
    for (;;) {
      const now = this.applied;
      if (now >= n) return true;
      const state = Atomics.load(this.shared, 1);
      if (state === THREAD_REFUSED || this.gone) return false;
      // The thread notifies slot 0 when it opens, commits or is refused: each wakes this wait.
      const left = (state === THREAD_OPEN ? timeoutMs : Math.min(timeoutMs, STARTUP_MS)) - (monotonicNow() - t0);
      if (left <= 0) return false;
      Atomics.wait(this.shared, 0, now, left);
    }
  }

  /** Resolves true once batch n is committed, false if the thread ends or timeoutMs passes first. */
  whenApplied(n: number, timeoutMs: number): Promise<boolean> {
    if (this.applied >= n) return Promise.resolve(true);
    if (this.gone) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const w = { n, resolve };
      this.waiters.push(w);
      this.worker.ref(); // the hub may be stopping: wait for the thread
      setTimeout(() => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(false);
      }, timeoutMs).unref();
    });
  }

  /**
   * Ends a thread that has not opened the database yet at once, rather than after its start
   * (65–72 ms of an idle ledger's close, most of it the thread's own start-up: a hub stopped
   * before any call, a one-shot `switchyard stdio`). Resolves true once it is gone: it has
   * committed nothing of what it was handed, or perhaps some of it (it opened meanwhile), and
   * the caller applies all of it from the pending files and the kept batches (keptLines), as a
   * replacement thread does. False when the thread
   * has begun to open the database (or is gone): stop() it as usual. Cut short while it works, it leaves no
   * transaction behind: better-sqlite3 closes a thread's connections as the thread ends, and
   * SQLite rolls back what was not committed.
   */
  cutShort(): Promise<boolean> {
    // Only a thread that has not begun to open the database: ended inside one of its first
    // SQLite calls, an open that then failed took the process down (see stop). The thread marks
    // the open as begun the same way, so one of the two marks wins and the other stands aside.
    if (this.gone || this.stopping || Atomics.compareExchange(this.shared, 1, 0, THREAD_CUT) !== 0) return Promise.resolve(false);
    const worker = this.worker;
    this.stopping = new Promise<void>((resolve) => {
      clearTimeout(this.restartTimer);
      worker.once('exit', () => resolve());
    });
    void worker.terminate();
    return this.stopping.then(() => true);
  }

  /** Ends the thread once it has committed what it holds; resolves when it is gone. */
  stop(): Promise<void> {
    this.stopping ??= new Promise<void>((resolve) => {
      clearTimeout(this.restartTimer);
      if (this.gone) return resolve();
      this.worker.once('exit', () => resolve());
      this.worker.ref();
      this.worker.postMessage('stop');
      setTimeout(() => {
        // One that has not begun to open the database by now makes no SQLite call after this (see cutShort).
        Atomics.compareExchange(this.shared, 1, 0, THREAD_CUT);
        void this.worker.terminate();
      }, STOP_TERMINATE_MS).unref();
    });
    return this.stopping;
  }

  /** Kept batches that are committed now are let go. */
  private release(): void {
    const applied = this.applied;
    let i = 0;
    while (i < this.kept.length && this.kept[i]![0] <= applied) i++;
    if (i > 0) this.kept.splice(0, i);
  }

  private settle(): void {
    if (this.kept.length > 0) this.release();
    const applied = this.applied;
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (applied >= w.n || this.gone) {
        this.waiters.splice(i, 1);
        w.resolve(applied >= w.n);
      }
    }
    if (this.waiters.length === 0 && !this.stopping) this.worker.unref();
  }
}

/** How long a thread may take to open the database before a synchronous reader stops waiting. */
const STARTUP_MS = 5000;
/**
 * How long stop() lets the thread end on its own before ending it. Longer than its longest
 * SQLite call, a commit waiting out another writer's lock (busy_timeout, 5 s, db.ts): ended
 * inside one, the thread took the whole process down as the call returned (better-sqlite3
 * makes the call's error in an isolate being ended: "FATAL ERROR: v8::ToLocalChecked Empty
 * MaybeLocal", an abort). At 5 s that was a stop asked for just as such a wait began.
 */
const STOP_TERMINATE_MS = 7_000;
/** The longest wait before replacing a thread that ended. */
const RESTART_MAX_MS = 60_000;

/**
 * The compiled thread. Tests run this module from src/ through vitest, where the .ts file
 * cannot be a worker: they use the build in dist/ (test/global-setup.ts keeps it current).
 */
function workerFile(): URL {
  const here = new URL('./ingest-worker.js', import.meta.url);
  if (!import.meta.url.endsWith('.ts')) return here;
  const built = new URL(here.href.replace(/\/src\/ledger\/ingest-worker\.js$/, '/dist/src/ledger/ingest-worker.js'));
  if (!existsSync(fileURLToPath(built))) throw new Error(`the ledger's ingest thread is not built (${fileURLToPath(built)}); run npm run build`);
  return built;
}

const LEVELS: Record<number, 'debug' | 'info' | 'warn' | 'error' | 'fatal'> = { 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** A pino line from the thread, through the hub's logger (its level and destination). */
function relog(log: Logger, line: string): void {
  try {
    const { level, msg, ...fields } = JSON.parse(line) as { level: number; msg?: string } & Record<string, unknown>;
    log[LEVELS[level] ?? 'info'](fields, msg ?? '');
  } catch {
    log.warn({ line }, 'ledger: an unreadable line from the ingest thread');
  }
}

/**
 * The `--cpu-prof*` flags among `argv` (with a separate value where one follows), which a
 * Worker accepts: the rest of a hub's flags it refuses. Not `--cpu-prof-name`: the thread's
 * profile would overwrite the hub's; without it the file name tells the threads apart.
 */
export function cpuProfileFlags(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--cpu-prof')) continue;
    const separate = a !== '--cpu-prof' && !a.includes('=') && i + 1 < argv.length;
    const value = separate ? argv[++i]! : undefined;
    if (a.startsWith('--cpu-prof-name')) continue;
    out.push(a);
    if (value !== undefined) out.push(value);
  }
  return out;
}
