import type { Database, Transaction } from 'better-sqlite3';
import type { Logger } from '../log.js';

interface Op {
  run: () => void;
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined); // observed by whoever awaits it; never an unhandled rejection
  return { promise, resolve, reject };
}

/** SQLite's answers about the database rather than about one write (constraints, bad values). */
const WHOLE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|NOMEM|CORRUPT|NOTADB|CANTOPEN|PROTOCOL)/;

function refusedWhole(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && WHOLE.test(code);
}

/** No op failed (shared, never written). */
const NONE: ReadonlyMap<number, Error> = new Map<number, Error>();

export interface BatchHooks {
  /** Runs first inside each batch transaction. */
  before(): void;
  /** Runs last inside each batch transaction. */
  after(): void;
}

/**
 * Group commit: every write is queued and all writes queued in one turn of the event loop
 * are committed by a single transaction on setImmediate. Each write's promise settles only
 * after COMMIT returned, so "resolved" means "durable" (see db.ts for what durable means).
 * A batch first runs as one plain transaction; only if an op throws is it rolled back and run
 * again with a savepoint per op, so one failing op is rolled back and rejected alone. A
 * refusal of the whole transaction (busy, disk full) fails the batch at once. (Ops are
 * database writes only, so running them twice after a rollback is safe; the hooks re-read
 * their state in before().) A savepoint per op costs about a sixth of the CPU of a
 * batch at concurrency 32.
 */
export class GroupCommit {
  private queue: Op[] = [];
  private batch: Deferred | null = null;
  /** Both run `run(0)` … `run(n - 1)` inside the hooks; tx isolates each in a savepoint and returns the failures by index. */
  private readonly tx: Transaction<(n: number, run: (i: number) => void) => Map<number, Error>>;
  private readonly fast: Transaction<(n: number, run: (i: number) => void, together?: () => void) => void>;
  private readonly sub: Transaction<(run: () => void) => void>;
  private batches = 0;
  private writes = 0;
  private closed = false;
  /** The connection's busy_timeout as opened, put back once a batch commits again. */
  private readonly busyMs: number;
  /** A batch was refused for another process's write lock, and none has committed since. */
  private locked = false;

  constructor(
    private readonly db: Database,
    hooks: BatchHooks,
    private readonly log: Logger,
    /**
     * For a connection on the hub's event loop: once a batch was refused for another process's
     * write lock (busy_timeout waited out), later batches wait this long at most until one
     * commits again. Each would otherwise hold the event loop for the whole busy_timeout, and
     * every request with it (a refused idempotency claim and its release: 10 s).
     */
    private readonly lockedWaitMs?: number,
  ) {
    this.busyMs = lockedWaitMs === undefined ? 0 : (db.pragma('busy_timeout', { simple: true }) as number);
    this.sub = db.transaction((run: () => void) => run());
    this.fast = db.transaction((n: number, run: (i: number) => void, together?: () => void) => {
      hooks.before();
      if (together) together();
      else for (let i = 0; i < n; i++) run(i);
      hooks.after();
    });
    this.tx = db.transaction((n: number, run: (i: number) => void) => {
      const failed = new Map<number, Error>();
      hooks.before();
      for (let i = 0; i < n; i++) {
        try {
          this.sub(() => run(i));
        } catch (err) {
          failed.set(i, err instanceof Error ? err : new Error(String(err)));
        }
      }
      hooks.after();
      return failed;
    });
  }

  /** Queues a write; resolves after the transaction holding it commits. */
  enqueue(run: () => void): Promise<void> {
    const d = deferred();
    if (this.closed) {
      d.reject(new Error('ledger is closed'));
      return d.promise;
    }
    this.queue.push({ run, resolve: d.resolve, reject: d.reject });
    this.schedule();
    return d.promise;
  }

  /** Resolves after the batch being gathered now has committed (at once if none). */
  whenCommitted(): Promise<void> {
    return this.batch ? this.batch.promise : Promise.resolve();
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Committed transactions and the writes they carried (for metrics). */
  get counters(): { batches: number; writes: number } {
    return { batches: this.batches, writes: this.writes };
  }

  /** Commits what is queued; later writes are refused. */
  close(): void {
    this.flush();
    this.closed = true;
  }

  private schedule(): void {
    if (this.batch) return;
    this.batch = deferred();
    setImmediate(() => this.flush());
  }

  /** Commits whatever is queued now, synchronously (also used by close()). False: the batch failed whole. */
  flush(): boolean {
    const ops = this.queue;
    const batch = this.batch;
    this.queue = [];
    this.batch = null;
    if (ops.length === 0) {
      batch?.resolve();
      return true;
    }
    const failed = this.commit(ops.length, (i) => ops[i]!.run());
    if (failed instanceof Error) {
      for (const op of ops) op.reject(failed);
      batch?.reject(failed);
      return false;
    }
    for (let i = 0; i < ops.length; i++) {
      const e = failed.get(i);
      if (e) ops[i]!.reject(e);
      else ops[i]!.resolve();
    }
    batch?.resolve();
    return true;
  }

  /**
   * Writes `run(item)` for each item in one transaction now, as flush() does a queue, without
   * a promise per write: for a caller that commits its own batches synchronously (the audit
   * applier, thousands of rows a second). An item that fails alone is logged and left out.
   * `together`, when given, is tried first in place of the items' writes: the same writes,
   * several in one statement; if it throws, the items are written one by one as without it.
   * False: the transaction failed whole (nothing was written).
   */
  commitEach<T>(items: readonly T[], run: (item: T) => void, together?: () => void): boolean {
    if (items.length === 0) return true;
    return !(this.commit(items.length, (i) => run(items[i]!), together) instanceof Error);
  }

  private waitForLock(locked: boolean): void {
    this.locked = locked;
    try {
      this.db.pragma(`busy_timeout = ${locked ? this.lockedWaitMs : this.busyMs}`);
    } catch {
      // A closed connection: nothing waits on it any more.
    }
  }

  /** The writes run(0) … run(n - 1) in one transaction: those that failed alone (logged), or the Error that refused them all. */
  private commit(n: number, run: (i: number) => void, together?: () => void): ReadonlyMap<number, Error> | Error {
    let failed: ReadonlyMap<number, Error>;
    try {
      try {
        this.fast.immediate(n, run, together);
        failed = NONE;
      } catch (err) {
        // The database refused the transaction itself (a lock held past busy_timeout, a full
        // disk): trying each op alone would only wait, or fail, a second time.
        if (refusedWhole(err)) throw err;
        // Some op failed and the whole batch was rolled back: find it, keep the others.
        failed = this.tx.immediate(n, run);
      }
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      this.log.error({ err: e, writes: n }, 'ledger: batch commit failed');
      if (this.lockedWaitMs !== undefined && !this.locked && (e as { code?: unknown }).code === 'SQLITE_BUSY') this.waitForLock(true);
      return e;
    }
    if (this.locked) this.waitForLock(false);
    this.batches++;
    this.writes += n;
    for (const e of failed.values()) this.log.error({ err: e }, 'ledger: write failed');
    return failed;
  }
}
