import { Worker } from 'node:worker_threads';

/**
 * Runs a regular expression in a worker thread with a hard time budget, synchronously (the
 * caller blocks on Atomics.wait), because ajv's pattern checks are synchronous and V8 regexps
 * cannot be interrupted on the thread that runs them. A run past its budget terminates the
 * worker, which stops even a catastrophically backtracking match; the next run starts a new one.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ready = new Int32Array(workerData);
Atomics.store(ready, 0, 1);
Atomics.notify(ready, 0);
const cache = new Map();
parentPort.on('message', ({ sab, pattern, flags, input }) => {
  const out = new Int32Array(sab);
  let r = 3;
  try {
    let re = cache.get(flags + '/' + pattern);
    if (!re) {
      if (cache.size > 500) cache.clear();
      re = new RegExp(pattern, flags);
      cache.set(flags + '/' + pattern, re);
    }
    re.lastIndex = 0;
    r = re.test(input) ? 1 : 2;
  } catch {
    r = 3;
  }
  Atomics.store(out, 0, r);
  Atomics.notify(out, 0);
});
`;

const STARTUP_BUDGET_MS = 5_000;

/** The least time a check that ran past its budget is given when it is run again (RegexSandbox.backtracks). */
const CONFIRM_MIN_MS = 500;

export class PatternBudgetError extends Error {
  override readonly name = 'PatternBudgetError';
  constructor(
    readonly pattern: string,
    readonly budgetMs: number,
    /** Length of the string checked: past a few dozen characters the time may be the value's doing. */
    readonly inputLength = 0,
    /**
     * The budget that ran out was the one every pattern check of one value shares (see
     * safeRegExpEngine): the value's many strings cost too much in all, which says nothing of
     * any one pattern.
     */
    readonly shared = false,
    /** The check that ran out (its pattern as the sandbox ran it, flags and string), to run it again: see RegexSandbox.backtracks. */
    readonly check?: { flags: string; input: string },
  ) {
    super(shared ? `checking the patterns took longer than ${budgetMs} ms in all` : `checking the pattern took longer than ${budgetMs} ms`);
  }
}

export class RegexSandbox {
  private worker: Worker | undefined;

  constructor(readonly budgetMs = 100) {}

  /** true/false like RegExp.test; throws PatternBudgetError when the budget (`budgetMs` at most) runs out. */
  test(pattern: string, flags: string, input: string, budgetMs = this.budgetMs): boolean {
    const w = this.ensure();
    const sab = new SharedArrayBuffer(4);
    const cell = new Int32Array(sab);
    w.postMessage({ sab, pattern, flags, input });
    const waited = Atomics.wait(cell, 0, 0, budgetMs);
    if (waited === 'timed-out') {
      this.kill();
      throw new PatternBudgetError(pattern, budgetMs, input.length, false, { flags, input });
    }
    const r = Atomics.load(cell, 0);
    if (r === 3) throw new Error('invalid pattern');
    return r === 1;
  }

  /**
   * Whether a check that ran past its budget backtracks, or only met a busy machine: run again
   * with five times its budget, half a second at least (on a fresh worker), a pattern that
   * backtracks exponentially on the same string is still running (its time grows by a factor
   * per character, not by a few milliseconds), while one whose worker was not scheduled in time
   * finishes.
   */
  backtracks(err: PatternBudgetError): boolean {
    if (!err.check) return true;
    try {
      this.test(err.pattern, err.check.flags, err.check.input, Math.max(5 * err.budgetMs, CONFIRM_MIN_MS));
      return false;
    } catch (again) {
      if (again instanceof PatternBudgetError) return true;
      throw again;
    }
  }

  close(): void {
    this.kill();
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    const sab = new SharedArrayBuffer(4);
    const w = new Worker(WORKER_SOURCE, { eval: true, workerData: sab, stdout: true, stderr: true });
    w.unref();
    w.on('error', () => {
      if (this.worker === w) this.worker = undefined;
    });
    if (Atomics.wait(new Int32Array(sab), 0, 0, STARTUP_BUDGET_MS) === 'timed-out') {
      void w.terminate();
      throw new Error('the pattern sandbox did not start');
    }
    this.worker = w;
    return w;
  }

  private kill(): void {
    const w = this.worker;
    this.worker = undefined;
    if (w) void w.terminate();
  }
}
