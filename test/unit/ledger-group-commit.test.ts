/** The group commit against a real SQLite file: one failing write alone, or a whole batch refused once. */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { GroupCommit } from '../../src/ledger/group-commit.js';
import { tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir> | undefined;
const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
  t?.cleanup();
  t = undefined;
});

function db(path: string, busyMs: number): Database.Database {
  const d = new Database(path);
  d.pragma('journal_mode = WAL');
  d.pragma(`busy_timeout = ${busyMs}`);
  open.push(d);
  return d;
}

describe('GroupCommit', () => {
  it('rejects a write that fails alone and commits the others of its batch', async () => {
    t = tempDir();
    const d = db(t.db, 1000);
    d.exec('CREATE TABLE x (v INTEGER PRIMARY KEY)');
    const ins = d.prepare('INSERT INTO x (v) VALUES (?)');
    const gc = new GroupCommit(d, { before() {}, after() {} }, silentLogger);
    const results = await Promise.allSettled([1, 2, 1, 3].map((v) => gc.enqueue(() => void ins.run(v))));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(d.prepare('SELECT v FROM x ORDER BY v').pluck().all()).toEqual([1, 2, 3]);
  });

  it('fails a batch whole after one busy wait when another writer holds the lock', async () => {
    t = tempDir();
    const busyMs = 2000; // far from twice itself: a stall of the machine cannot look like a second wait
    const d = db(t.db, busyMs);
    d.exec('CREATE TABLE x (v INTEGER)');
    const other = db(t.db, 0);
    other.prepare('BEGIN IMMEDIATE').run();
    const ins = d.prepare('INSERT INTO x (v) VALUES (?)');
    const gc = new GroupCommit(d, { before() {}, after() {} }, silentLogger);
    const writes = [1, 2].map((v) => gc.enqueue(() => void ins.run(v)));
    const t0 = Date.now();
    expect(gc.flush()).toBe(false);
    const took = Date.now() - t0;
    // One wait of busy_timeout; trying each write alone after it would wait a second time.
    expect(took).toBeGreaterThanOrEqual(busyMs * 0.9);
    expect(took).toBeLessThan(busyMs * 1.5);
    for (const w of writes) await expect(w).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    other.prepare('ROLLBACK').run();
  });
});
