/**
 * A pending file left by a hub that stopped holds lines that are no row: a torn end (a write a
 * full disk cut short) or a line changed by hand. The next start applies the rows it can read,
 * and says in its log how many lines it skipped, rather than dropping them unsaid: an operator
 * missing a row then knows where it went.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { exportRows } from './ledger-helpers.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
});

describe('a pending file with lines that are no row', () => {
  it('applies the rows it holds and logs how many lines it skipped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-pending-unreadable-'));
    const db = join(dir, 'ledger.db');
    const ledger = Ledger.open({ path: db });
    await ledger.record({ ts: Date.now(), requestId: 'before', principal: 'alice', clientEra: '2026-07-28', method: 'tools/call' }, { outcome: 'ok', latencyMs: 1 });
    await ledger.close();
    const row = {
      s: { id: 500, ts: Date.now(), request_id: 'left', principal: 'alice', client_era: '2026-07-28', method: 'tools/call' },
      e: { outcome: 'ok', latency_ms: 2 },
    };
    writeFileSync(`${db}-pending`, ['{"g":1}', JSON.stringify(row), '{"not":"a row"}', '[501,17000000'].join('\n'));

    hub = await startHub({ servers: {} }, { dir });
    const skipped = hub.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => typeof l.msg === 'string' && l.msg.includes('no row'));
    expect(skipped).toEqual([expect.objectContaining({ level: 40, lines: 2, msg: expect.stringMatching(/^ledger: 2 lines of the pending files were no row \(torn by a full disk, or changed by hand\); skipped$/) })]);
    const rows = await exportRows(db);
    expect(rows.map((r) => [r.requestId, r.outcome])).toEqual([
      ['before', 'ok'],
      ['left', 'ok'],
    ]);
  }, 60_000);
});
