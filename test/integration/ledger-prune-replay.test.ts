/**
 * A prune after a crash, then a start: rows the prune removed stay removed, rows that never
 * reached SQLite still come back. A pending file holds the lines of rows already committed
 * until it is emptied; a start applies every line whose row it does not find, so a pruned row
 * came back (with its old id and ts and a new seq) and a pruned call's begin came back as
 * `unknown`.
 *
 * Deterministic: a process running the built ledger with begins held for an hour and no file
 * switch while one is held commits two calls ('done', 'begun') to SQLite while their lines stay
 * in the file, next to a begin that never reached SQLite ('held', a lower id than theirs), and
 * SIGKILLs itself.
 * The real CLI prunes everything, the real hub starts on the folder and stops with SIGTERM.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { BEGIN_COLS } from '../../src/ledger/audit-apply.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { exportRows, ledgerCli } from './ledger-helpers.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
});

/** Runs the built ledger in a child that SIGKILLs itself once `body` is done. */
async function diesAfter(db: string, body: string): Promise<void> {
  const dist = pathToFileURL(join(ROOT, 'dist/src/ledger/ledger.js')).href;
  const script = `
    const { Ledger } = await import(${JSON.stringify(dist)});
    const { default: Database } = await import('better-sqlite3');
    const l = Ledger.open({ path: ${JSON.stringify(db)}, ingestDelayMs: 1, beginHoldMs: 3_600_000,
      pendingSwitch: { switchBytes: 1 << 20, switchAfterMs: 3_600_000 }, backgroundCheckpoint: false });
    const b = (id) => ({ ts: Date.now(), requestId: id, principal: 'p', clientEra: 'e', method: 'tools/call', server: 's' });
    const inSqlite = async (requestId) => {
      const r = new Database(${JSON.stringify(db)}, { readonly: true });
      const q = r.prepare('SELECT 1 FROM audit WHERE request_id = ?');
      while (!q.get(requestId)) await new Promise((res) => setTimeout(res, 2));
      r.close();
    };
    ${body}
    process.kill(process.pid, 'SIGKILL');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  const signal = await new Promise((r) => child.once('exit', (_code, sig) => r(sig)));
  expect(signal).toBe('SIGKILL');
}

describe('prune after a crash, then a start', () => {
  it('does not bring back pruned rows (finished or begun), and still applies the row that never reached SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-prune-replay-'));
    const db = join(dir, 'ledger.db');
    const pending = `${db}-pending`;
    await diesAfter(
      db,
      `await l.beginCommitted(b('held'));
       await l.record(b('done'), { outcome: 'ok', latencyMs: 1 });
       await l.record(b('begun'), { outcome: 'ok', latencyMs: 1 });
       await inSqlite('begun');`,
    );
    const lines = readFileSync(pending, 'utf8').split('\n').filter(Boolean);
    const requestIdAt = BEGIN_COLS.indexOf('request_id');
    const values = lines.map((l) => JSON.parse(l) as unknown[]);
    expect(values.map((v) => [v[0], v[requestIdAt], v.length > BEGIN_COLS.length])).toEqual([
      [1, 'held', false],
      [2, 'done', true],
      [3, 'begun', true],
    ]);
    // Of 'begun' only its begin's line, as a file holds it when the call's begin went in alone
    // and its finish is no longer in the files.
    writeFileSync(pending, [lines[0], lines[1], JSON.stringify(values[2]!.slice(0, BEGIN_COLS.length))].join('\n') + '\n');
    expect((await exportRows(db)).map((r) => [r.id, r.requestId, r.outcome])).toEqual([
      [2, 'done', 'ok'],
      [3, 'begun', 'ok'],
    ]);

    const pruned = await ledgerCli(db, ['prune', '--before', '2099-01-01', '--allow-future']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toMatch(/^pruned 2 rows/);
    const listed = new Database(db, { readonly: true });
    expect(listed.prepare('SELECT id FROM audit_pruned').pluck().all()).toEqual([2, 3]);
    listed.close();

    hub = await startHub({ servers: {} }, { dir });
    expect(await hub.stop('SIGTERM')).toBe(0);
    hub = undefined;

    // 'held' (id 1, older than the cutoff and below the pruned ids) never reached SQLite: it
    // is applied and, left in flight, is unknown. 'done' and 'begun' stay pruned.
    expect((await exportRows(db)).map((r) => [r.id, r.requestId, r.outcome])).toEqual([[1, 'held', 'unknown']]);
    const verify = await ledgerCli(db, ['verify']);
    expect(verify.code, verify.stdout).toBe(0);
    expect(verify.stdout).toMatch(/^ok: 1 row verified \(chain seq 3\.\.3\)/);
    // The files are gone with the hub, and the ids the prune listed with them.
    expect(existsSync(pending) ? readFileSync(pending, 'utf8') : '').toBe('');
    const sql = new Database(db, { readonly: true });
    expect(sql.prepare('SELECT COUNT(*) FROM audit_pruned').pluck().get()).toBe(0);
    sql.close();
  });
});
