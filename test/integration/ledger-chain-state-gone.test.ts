/**
 * A ledger whose chain state (anchor and head, table chain_state) was deleted by hand: the
 * hub cannot chain a row onto it. `switchyard start` refuses it by name (exit 1, the ledger
 * and what is wrong with it, what to do), not as a config problem with a TypeError's text, and
 * `ledger verify` says the same of a table dropped as of a row deleted.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { BIN, ROOT } from '../helpers/hub-process.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ledgerCli } from './ledger-helpers.js';

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

/** A ledger with a few chained rows, its chain state then removed by `sql`; the config starting a hub on it. */
async function ledgerWithout(sql: string): Promise<{ db: string; config: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-chain-state-'));
  const db = join(dir, 'ledger.db');
  const ledger = Ledger.open({ path: db });
  for (let i = 0; i < 3; i++) await ledger.record({ ts: Date.now(), requestId: String(i), principal: 'alice', clientEra: '2026-07-28', method: 'tools/call' }, { outcome: 'ok', latencyMs: 1 });
  await ledger.close();
  const raw = new Database(db);
  raw.exec(sql);
  raw.close();
  const config = join(dir, 'hub.config.json');
  writeFileSync(config, JSON.stringify({ listen: { host: '127.0.0.1', port: 0 }, ledger: { path: db }, servers: {} }));
  return { db, config };
}

describe('a ledger whose chain state is gone', () => {
  for (const [what, sql] of [
    ['its row deleted', 'DELETE FROM chain_state'],
    ['its table dropped', 'DROP TABLE chain_state'],
  ] as const) {
    it(`${what}: start refuses it by name, exit 1, and verify fails saying so`, async () => {
      const { db, config } = await ledgerWithout(sql);
      const started = await run(['start', '--config', config]);
      expect(started.code).toBe(1);
      const said = started.stderr.split('\n').filter((l) => l.startsWith('switchyard start:'));
      expect(said).toEqual([
        `switchyard start: the ledger ${db}: the ledger's chain state (its anchor and head, table chain_state) is gone: the file was changed outside the hub, and the chain cannot be checked; no row can be chained onto it: keep the file as evidence, move it aside (with its -wal file) and start again for a new ledger`,
      ]);
      const v = await ledgerCli(db, ['verify']);
      expect([v.code, v.stdout]).toEqual([1, expect.stringMatching(/^FAILED: the ledger's chain state \(its anchor and head, table chain_state\) is gone: the file was changed outside the hub/)]);
    }, 60_000);
  }
});
