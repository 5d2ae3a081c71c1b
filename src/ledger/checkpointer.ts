import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.js';

/**
 * Copies the WAL back into the database file from a worker thread, so the hub's event loop
 * never waits for a checkpoint's page copies and fsyncs. SQLite's own automatic checkpoint
 * runs inside the COMMIT that crosses the threshold, on the thread that committed: at
 * concurrency 32 that stalled every call in flight for the length of the copy.
 *
 * The worker's checkpoints are PASSIVE (they never block the writer). Only a writer can
 * rewind the WAL, and only once every frame is copied, so the writer keeps an automatic
 * checkpoint with a larger threshold (WRITER_AUTOCHECKPOINT_PAGES): by the time it fires,
 * the worker has copied nearly everything and the writer's share is small. The WAL file is
 * truncated to JOURNAL_SIZE_LIMIT when it rewinds.
 */
export const WRITER_AUTOCHECKPOINT_PAGES = 8000;
export const JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;
const DEFAULT_INTERVAL_MS = 100;

// CommonJS, evaluated in the worker: a file would need a build step the tests do not run.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.module);
const db = new Database(workerData.path, { fileMustExist: true });
let failed = false;
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    failed = false;
  } catch (err) {
    // Busy or I/O trouble: the writer's own checkpoint still bounds the WAL. Report once.
    if (!failed) parentPort.postMessage({ error: String(err && err.message || err) });
    failed = true;
  }
}, workerData.intervalMs);
parentPort.on('message', (m) => {
  if (m === 'stop') {
    clearInterval(timer);
    db.close();
    parentPort.close();
  }
});
`;

export class Checkpointer {
  private readonly worker: Worker;
  private stopped: Promise<void> | null = null;
  private exited = false;

  constructor(path: string, log: Logger, intervalMs = DEFAULT_INTERVAL_MS) {
    const module = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, module, intervalMs } });
    this.worker.unref();
    this.worker.once('exit', () => (this.exited = true));
    this.worker.on('message', (m: { error?: string }) => {
      if (m.error) log.warn({ error: m.error }, 'ledger: background checkpoint failed; the writer checkpoints alone');
    });
    this.worker.on('error', (err) => log.warn({ err }, 'ledger: checkpoint thread ended'));
  }

  /** Ends the thread after its current checkpoint; resolves once it is gone. */
  stop(): Promise<void> {
    this.stopped ??= new Promise<void>((resolve) => {
      if (this.exited) return resolve();
      this.worker.once('exit', () => resolve());
      this.worker.ref(); // an unref'd worker would let the process end with close() pending
      this.worker.postMessage('stop');
      // A checkpoint copying a large WAL finishes first; a stuck one is not waited for.
      setTimeout(() => void this.worker.terminate(), 2000).unref();
    });
    return this.stopped;
  }
}
