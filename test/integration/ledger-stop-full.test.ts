/**
 * A hub stopped while its disk is full and SQLite refuses the ledger's rows too. A soft file
 * size cap on the hub (`prlimit --fsize`) makes its writes fail with EFBIG as a full disk's
 * do, and lifts again as room comes back; another writer (this test) holds the database's lock
 * past the ledger thread's busy_timeout, so SQLite takes nothing meanwhile. Rows whose lines
 * the pending files refused are then only in the hub's memory: at the stop they go to the
 * pending files if there is room by then, for the next start, or the log says how many rows
 * are lost, and which, and nothing else is.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { startHub } from '../helpers/hub-process.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { PendingFiles } from '../../src/ledger/pending-files.js';
import { fixture, inFlight, modernCall, SDK1, textOf, waitForReady } from './ledger-helpers.js';

/** The hub last started, killed after the tests whatever they did. */
let lastHub: ChildProcess | undefined;
afterAll(() => {
  lastHub?.kill('SIGKILL');
});

/** The hub's soft cap on the size of a file it writes, in bytes, or 'unlimited'. */
function cap(pid: number, soft: string): void {
  execFileSync('prlimit', ['--pid', String(pid), `--fsize=${soft}:`]);
}

const REFUSED = ['refused-0', 'refused-1', 'refused-2'];
const ANSWERED = ['ok-0', 'ok-1', 'ok-2'];

/**
 * A hub that answers three calls, forwards a slow one (its row committed as in flight), and
 * then has neither disk nor SQLite: three calls are refused (their rows' lines refused too)
 * and the slow one ends (its end refused). Stopped with room again or not; the lock is let go
 * once it has exited. Returns the ledger's path and the hub's log lines.
 */
async function stoppedFull(roomAtStop: boolean): Promise<{ db: string; logs: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-stop-full-'));
  const db = join(dir, 'ledger.db');
  const hub = await startHub({ ledger: { path: db }, servers: { f: fixture(SDK1, dir) } }, { dir });
  lastHub = hub.proc;
  await waitForReady(hub.url, ['f']);
  for (const id of ANSWERED) {
    const a = await modernCall(hub.url, id, 'tools/call', { name: 'f__echo', arguments: { text: id } });
    expect(a.body?.result, JSON.stringify(a.body)).toBeDefined();
  }
  const slow = modernCall(hub.url, 'slow', 'tools/call', { name: 'f__slow', arguments: { ms: 2500 } });
  await expect.poll(() => inFlight(db, ['slow']), { timeout: 10_000, interval: 20 }).toBe(1);
  const other = new Database(db);
  other.prepare('BEGIN IMMEDIATE').run();
  try {
    cap(hub.proc.pid!, '1');
    for (const id of REFUSED) {
      const a = await modernCall(hub.url, id, 'tools/call', { name: 'f__echo', arguments: { text: id } });
      expect(a.body?.error, JSON.stringify(a.body)).toMatchObject({ code: -32603, message: expect.stringMatching(/audit ledger cannot write \(EFBIG\)/) });
    }
    expect(textOf((await slow).body?.result)).toBe('slept 2500');
    // SQLite has refused the thread's batch (after its busy wait): the stop waits one retry for it, not 10 s.
    await expect.poll(() => hub.logs.some((l) => l.includes('rows wait in the pending file until SQLite takes them again')), { timeout: 20_000, interval: 50 }).toBe(true);
    if (roomAtStop) cap(hub.proc.pid!, 'unlimited');
    expect(await hub.stop()).toBe(0);
  } finally {
    other.prepare('ROLLBACK').run();
    other.close();
  }
  return { db, logs: hub.logs };
}

/** The hub's log lines that are JSON, parsed. */
function entries(logs: string[]): { level: number; msg: string; rows?: number; ends?: number; ids?: number[] }[] {
  return logs.flatMap((l) => {
    try {
      return [JSON.parse(l) as { level: number; msg: string }];
    } catch {
      return [];
    }
  });
}

describe('a hub stopped while its disk is full and SQLite refuses too', () => {
  it('with room again at the stop, writes the rows the pending files refused there, and the next start puts them into SQLite', async () => {
    const { db, logs } = await stoppedFull(true);
    expect(entries(logs).filter((e) => /are lost/.test(e.msg))).toEqual([]);
    // In the pending files: the refused calls' rows, each with its end, and the slow call's end.
    const filed = JSON.stringify(PendingFiles.read(db));
    for (const id of [...REFUSED, 'slow']) expect(filed).toContain(`"${id}"`);
    const ledger = Ledger.open({ path: db, backgroundCheckpoint: false });
    try {
      const rows = ledger.query({ limit: 100 });
      const outcome = (id: string) => rows.find((r) => r.requestId === id);
      for (const id of ANSWERED) expect(outcome(id)).toMatchObject({ outcome: 'ok' });
      expect(outcome('slow')).toMatchObject({ outcome: 'ok' });
      for (const id of REFUSED) expect(outcome(id)).toMatchObject({ outcome: 'rpc_error', errorCode: -32603, errorMessage: expect.stringMatching(/audit ledger cannot write \(EFBIG\)/) });
      expect(rows.filter((r) => r.outcome === 'in_flight' || r.outcome === 'unknown')).toEqual([]);
      expect(ledger.verify()).toMatchObject({ ok: true, rows: rows.length });
    } finally {
      await ledger.close();
    }
  }, 90_000);

  it('with no room at the stop, says exactly which rows are lost (three) and which lost only their end (one), and loses nothing else', async () => {
    const { db, logs } = await stoppedFull(false);
    const lost = entries(logs).filter((e) => /are lost/.test(e.msg));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ level: 50, rows: 3, ends: 1 });
    const ledger = Ledger.open({ path: db, backgroundCheckpoint: false });
    try {
      const rows = ledger.query({ limit: 100 });
      const outcome = (id: string) => rows.find((r) => r.requestId === id);
      for (const id of ANSWERED) expect(outcome(id)).toMatchObject({ outcome: 'ok' });
      // Begun in SQLite before the disk filled, its end lost: the start marks it unknown.
      const slow = outcome('slow');
      expect(slow).toMatchObject({ outcome: 'unknown' });
      for (const id of REFUSED) expect(outcome(id)).toBeUndefined();
      // Row ids are handed out in order: each one the ledger lacks is one the log named, and
      // the log named no other but the slow call's.
      const have = new Set(rows.map((r) => r.id));
      const named = lost[0]!.ids!;
      const top = Math.max(...have, ...named);
      const missing = Array.from({ length: top }, (_, i) => i + 1).filter((id) => !have.has(id));
      expect(missing).toHaveLength(3);
      expect([...named].sort((x, y) => x - y)).toEqual([...missing, slow!.id].sort((x, y) => x - y));
      expect(ledger.verify()).toMatchObject({ ok: true, rows: rows.length });
    } finally {
      await ledger.close();
    }
  }, 90_000);
});
