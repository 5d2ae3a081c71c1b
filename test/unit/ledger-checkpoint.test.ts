import { statSync } from 'node:fs';
import type { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { closeAndRemove, begin, end, tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir> | undefined;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

async function writeRows(l: Ledger, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => l.begin(begin()).finish(end())));
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

describe('ledger checkpoints off the event loop', () => {
  it('the ledger thread copies committed WAL pages into the database file; the writer does not wait for it', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    await ledger.whenCommitted();
    const before = statSync(t.db).size;
    await writeRows(ledger, 2000);
    // Well under the writer's own threshold (8000 pages): only the worker can have grown the file.
    expect(await until(() => statSync(t!.db).size > before, 3000)).toBe(true);
    expect(statSync(`${t.db}-wal`).size).toBeGreaterThan(0);
  });

  it('without background checkpoints, the same writes stay in the WAL (the writer checkpoints only at its threshold)', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    await ledger.whenCommitted();
    const before = statSync(t.db).size;
    await writeRows(ledger, 2000);
    await new Promise((r) => setTimeout(r, 400));
    expect(statSync(t.db).size).toBe(before);
  });

  it('the thread rests while nothing is written (an idle hub\'s ledger woke it ten times a second), and checkpoints again after the next commit', async () => {
    t = tempDir();
    // Ticking every 100 ms (not the default 500) is ~3 ms of work a second, which the measure below tells from resting.
    ledger = Ledger.open({ path: t.db, checkpointEveryMs: 100 });
    await ledger.whenCommitted();
    const first = statSync(t.db).size;
    await writeRows(ledger, 2000);
    expect(await until(() => statSync(t!.db).size > first, 3000)).toBe(true);
    // Two checkpoint intervals (100 ms) with nothing new end the ticking.
    await new Promise((r) => setTimeout(r, 500));
    const worker = (ledger as unknown as { ingester: { worker: Worker } }).ingester.worker;
    const elu = worker.performance.eventLoopUtilization();
    await new Promise((r) => setTimeout(r, 1000));
    const idle = worker.performance.eventLoopUtilization(elu);
    // Milliseconds of work in that second: ticking, about 3 (more on a loaded machine); resting, none.
    expect(idle.active).toBeLessThan(1);
    const second = statSync(t.db).size;
    await writeRows(ledger, 2000);
    expect(await until(() => statSync(t!.db).size > second, 3000)).toBe(true);
  });

  it('close() ends the thread and folds the WAL into the file', async () => {
    t = tempDir();
    const l = Ledger.open({ path: t.db });
    await writeRows(l, 300);
    await l.close();
    expect(() => statSync(`${t!.db}-wal`)).toThrow();
    const again = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(again.query({ limit: 1000 })).toHaveLength(300);
    expect(again.verify().ok).toBe(true);
    await again.close();
  });
});
