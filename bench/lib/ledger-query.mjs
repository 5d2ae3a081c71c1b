// `ledger query` over a large audit table: fills a ledger created by the shipped schema with
// `rows` synthetic rows (30 days, 20 servers, 50 principals), then times the reader's
// queries (warm page cache, median of 5) and one end-to-end `switchyard ledger query` run.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './targets.mjs';

const require = createRequire(join(ROOT, 'package.json'));
const DAY = 86_400_000;

export async function ledgerQueryBench(rows) {
  const Database = require('better-sqlite3');
  const { Ledger } = await import(join(ROOT, 'dist/src/ledger/ledger.js'));
  const { LedgerReader } = await import(join(ROOT, 'dist/src/ledger/reader.js'));
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-bench-'));
  const path = join(dir, 'ledger.db');
  try {
    (await Ledger.open({ path })).close();
    const now = Date.now();
    const db = new Database(path);
    db.pragma('synchronous = OFF');
    const ins = db.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, server, outcome, latency_ms, seq, hash)
      VALUES (?, ?, ?, '2026-07-28', 'tools/call', ?, ?, ?, ?, NULL, NULL)`);
    const t0 = performance.now();
    db.transaction(() => {
      for (let i = 0; i < rows; i++) {
        const ts = now - 30 * DAY + Math.floor((i / rows) * 30 * DAY);
        ins.run(ts, String(i), `p${i % 50}`, `tool${i % 7}`, `s${i % 20}`, i % 97 ? 'ok' : 'rpc_error', (i % 1000) / 3);
      }
    })();
    db.close();
    const fillMs = performance.now() - t0;
    const reader = LedgerReader.open({ path });
    const cases = [
      { label: 'server + last hour', filter: { server: 's7', since: now - 3_600_000, limit: 100 } },
      { label: 'server + one day a week ago (limit 1000)', filter: { server: 's7', since: now - 7 * DAY, until: now - 6 * DAY, limit: 1000 } },
      { label: 'principal + last day', filter: { principal: 'p3', since: now - DAY, limit: 100 } },
      { label: 'outcome = rpc_error', filter: { outcome: 'rpc_error', limit: 100 } },
    ];
    const queries = [];
    for (const c of cases) {
      reader.query(c.filter);
      const times = [];
      let n = 0;
      for (let i = 0; i < 5; i++) {
        const q0 = performance.now();
        n = reader.query(c.filter).length;
        times.push(performance.now() - q0);
      }
      times.sort((a, b) => a - b);
      queries.push({ label: c.label, rows: n, ms: times[2] });
    }
    reader.close();
    const c0 = performance.now();
    execFileSync(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), 'ledger', 'query', '--db', path, '--server', 's7', '--since', '1h', '--json'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const cliMs = performance.now() - c0;
    return { rows, fillMs, queries, cliMs };
  } catch (err) {
    return { rows, error: String(err?.message ?? err).split('\n')[0] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
