/**
 * doctor checks the ledger's hash chain: a ledger written by the real hub verifies; after a
 * row is altered behind the hub's back, doctor names the broken row and fails.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

function doctor(cwd: string): Promise<{ code: number | null; findings: Record<string, string>[] }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BIN, 'doctor', '--json'], { cwd, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'silent' } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, findings: JSON.parse(out) }));
  });
}

describe('doctor and the ledger', () => {
  it('verifies a healthy chain and names the row of a tampered one', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-doctor-ledger-'));
    writeFileSync(join(d, 'hub.config.json'), JSON.stringify({ listen: { port: 0 }, ledger: { path: './ledger.db' }, servers: { m: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } }));
    // Write a few rows with the real hub (stdio form), then let it exit at EOF.
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio'], { cwd: d, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    for (let i = 0; i < 3; i++) {
      const r = await c.request({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'm__echo', arguments: { text: `r${i}` }, _meta: META } });
      expect(r.result.content[0].text).toBe(`echo:r${i}`);
    }
    c.endInput();
    expect(await c.exited).toBe(0);

    const healthy = await doctor(d);
    const ok = healthy.findings.find((f) => f.check === 'ledger')!;
    expect(ok.level).toBe('ok');
    expect(ok.message).toMatch(/hash chain verified \(\d+ rows\)/);

    const db = new Database(join(d, 'ledger.db'));
    const row = db.prepare(`SELECT id FROM audit WHERE hub_name = 'm__echo' ORDER BY id LIMIT 1 OFFSET 1`).get() as { id: number };
    db.prepare(`UPDATE audit SET outcome = 'tool_error' WHERE id = ?`).run(row.id);
    db.close();

    const broken = await doctor(d);
    expect(broken.code).toBe(1);
    const bad = broken.findings.find((f) => f.check === 'ledger')!;
    expect(bad.level).toBe('fail');
    expect(bad.message).toMatch(new RegExp(`chain broken at row ${row.id}`));
  });
});
