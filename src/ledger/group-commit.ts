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
const NONE: ReadonlyMap<Op, Error> = new Map<Op, Error>();

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
  private readonly tx: Transaction<(ops: Op[]) => Map<Op, Error>>;
  private readonly fast: Transaction<(ops: Op[]) => void>;
  private readonly sub: Transaction<(run: () => void) => void>;
  private batches = 0;
  private writes = 0;
  private closed = false;

  constructor(
    db: Database,
    hooks: BatchHooks,
    private readonly log: Logger,
  ) {
    this.sub = db.transaction((run: () => void) => run());
    this.fast = db.transaction((ops: Op[]) => {
      hooks.before();
      for (const op of ops) op.run();
      hooks.after();
    });
    this.tx = db.transaction((ops: Op[]) => {
      const failed = new Map<Op, Error>();
      hooks.before();
      for (const op of ops) {
        try {
          this.sub(op.run);
        } catch (err) {
          failed.set(op, err instanceof Error ? err : new Error(String(err)));
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
    let failed: ReadonlyMap<Op, Error>;
    try {
      try {
        this.fast.immediate(ops);
        failed = NONE;
      } catch (err) {
        // The database refused the transaction itself (a lock held past busy_timeout, a full
        // disk): trying each op alone would only wait, or fail, a second time.
        if (refusedWhole(err)) throw err;
        // Some op failed and the whole batch was rolled back: find it, keep the others.
        failed = this.tx.immediate(ops);
      }
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err));
      this.log.error({ err: e, writes: ops.length }, 'ledger: batch commit failed');
      for (const op of ops) op.reject(e);
      batch?.reject(e);
      return false;
    }
    this.batches++;
    this.writes += ops.length;
    for (const op of ops) {
      const e = failed.get(op);
      if (e) {
        this.log.error({ err: e }, 'ledger: write failed');
        op.reject(e);
      } else op.resolve();
    }
    batch?.resolve();
    return true;
  }
}
