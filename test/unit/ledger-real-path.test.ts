/**
 * The ledger's pending files are named by the database's real path, as its writer lock is: a
 * hub that reaches the file through a symlink writes (and, after a crash, finds) the same
 * pending files as one that names it directly. Real Ledger, real files and symlinks.
 */
import { existsSync, mkdirSync, mkdtempSync, realpathSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { realLedgerPath } from '../../src/ledger/real-path.js';

it('a ledger opened through a symlink keeps its pending files beside the real file', async () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-ledger-real-')));
  mkdirSync(join(root, 'a'));
  mkdirSync(join(root, 'b'));
  const real = join(root, 'a', 'ledger.db');
  const link = join(root, 'b', 'ledger.db');
  symlinkSync(real, link); // dangling until the ledger creates it through the link
  expect(realLedgerPath(link)).toBe(real);
  const ledger = Ledger.open({ path: link, backgroundCheckpoint: false });
  try {
    await ledger.record({ ts: Date.now(), requestId: 'r1', principal: 'p', clientEra: '2026-07-28', method: 'tools/list' }, { outcome: 'ok', latencyMs: 1 });
    expect(existsSync(`${real}-pending`)).toBe(true);
    expect(existsSync(`${link}-pending`)).toBe(false);
  } finally {
    await ledger.close();
  }
});
