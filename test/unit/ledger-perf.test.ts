import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { begin, end, tempDir } from './ledger-helpers.js';

const ROWS = 1_000_000;
const DAY = 86_400_000;
const NOW = 1_800_000_000_000;
let t: ReturnType<typeof tempDir>;

beforeAll(() => {
  t = tempDir();
  Ledger.open({ path: t.db }).close(); // schema and indexes exactly as shipped
  const db = new Database(t.db);
  db.pragma('synchronous = OFF');
  const ins = db.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, server, outcome, latency_ms, tool_group, seq, hash)
    VALUES (?, ?, ?, '2026-07-28', 'tools/call', ?, ?, ?, ?, ?, NULL, NULL)`);
  const t0 = performance.now();
  db.transaction(() => {
    // 30 days of traffic over 20 servers and 50 principals, oldest first; a fifth of it through
    // tool group g1, one call in 5,000 through g2, the rest through /mcp.
    for (let i = 0; i < ROWS; i++) {
      const ts = NOW - 30 * DAY + Math.floor((i / ROWS) * 30 * DAY);
      const group = i % 5 === 0 ? 'g1' : i % 5000 === 1 ? 'g2' : null;
      ins.run(ts, String(i), `p${i % 50}`, `tool${i % 7}`, `s${i % 20}`, i % 97 ? 'ok' : 'rpc_error', (i % 1000) / 3, group);
    }
  })();
  db.close();
  console.log(`ledger perf: inserted ${ROWS} rows in ${Math.round(performance.now() - t0)} ms`);
}, 300_000);

afterAll(() => t.cleanup());

describe('ledger performance', () => {
  it('query by server and time over 1,000,000 rows takes well under 100 ms', () => {
    const reader = LedgerReader.open({ path: t.db });
    const cases = [
      { server: 's7', since: NOW - 3_600_000, limit: 100 },
      { server: 's7', since: NOW - 7 * DAY, until: NOW - 6 * DAY, limit: 1000 },
      { principal: 'p3', since: NOW - DAY, limit: 100 },
      { outcome: 'rpc_error', limit: 100 },
      { group: 'g1', limit: 100 },
      // A group seldom used: its own index (audit_group_ts), not a walk of every row by time.
      { group: 'g2', limit: 100 },
      { group: 'g2', since: NOW - DAY, limit: 100 },
      { since: NOW - 2 * DAY, limit: 100 },
    ];
    for (const filter of cases) {
      reader.query(filter); // warm the page cache once, as a running hub would have
      // The median of five, in CPU time: the target is the query's cost, and wall time counts
      // the time a loaded machine kept the process waiting for a CPU too (one run alone once took
      // 122 ms against ~11 ms; under two busy loops the median of five took 115 ms, 1 of 9 runs).
      // The query runs in this thread, synchronously: the process's CPU time is the query's.
      const times: number[] = [];
      const walls: number[] = [];
      let rows: unknown[] = [];
      for (let i = 0; i < 5; i++) {
        const [c0, t0] = [process.cpuUsage(), performance.now()];
        rows = reader.query(filter);
        const c = process.cpuUsage(c0);
        walls.push(performance.now() - t0);
        times.push((c.user + c.system) / 1000);
      }
      const ms = times.sort((a, b) => a - b)[2]!;
      console.log(`ledger perf: query ${JSON.stringify(filter)} → ${rows.length} rows in ${ms.toFixed(2)} ms of CPU (median of 5; slowest ${times[4]!.toFixed(2)}; wall ${walls.map((w) => w.toFixed(1)).join(', ')} ms)`);
      expect(rows.length).toBeGreaterThan(0);
      expect(ms).toBeLessThan(100);
    }
    const plan = reader.db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM audit WHERE server = 's7' AND ts >= 0 ORDER BY ts DESC, id DESC LIMIT 100`).all() as { detail: string }[];
    expect(plan.map((p) => p.detail).join(' ')).toMatch(/USING INDEX audit_server_ts/);
    const byGroup = reader.db.prepare(`EXPLAIN QUERY PLAN SELECT * FROM audit WHERE tool_group = 'g2' ORDER BY ts DESC, id DESC LIMIT 100`).all() as { detail: string }[];
    expect(byGroup.map((p) => p.detail).join(' ')).toMatch(/^SEARCH audit USING INDEX audit_group_ts \(tool_group=\?\)$/);
    reader.close();
  });

  it('group commit: 10,000 begin+finish pairs at concurrency 32', async () => {
    const d = tempDir();
    const ledger = Ledger.open({ path: d.db });
    await ledger.whenCommitted();
    const before = ledger.commitCounters();
    const PAIRS = 10_000;
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < PAIRS) {
          next++;
          const h = await ledger.beginCommitted(begin());
          await h.finish(end());
        }
      }),
    );
    const ms = performance.now() - t0;
    const c = ledger.commitCounters();
    const batches = c.batches - before.batches;
    const writes = c.writes - before.writes;
    console.log(
      `ledger perf: ${PAIRS} begin+finish pairs at concurrency 32 in ${Math.round(ms)} ms (${Math.round(PAIRS / (ms / 1000))} calls/s), ${batches} commits for ${writes} writes (${(writes / batches).toFixed(1)} per commit)`,
    );
    expect(writes).toBe(2 * PAIRS);
    expect(writes / batches).toBeGreaterThan(8); // commits are shared, not one per write
    expect(ledger.verify()).toMatchObject({ ok: true, rows: PAIRS });
    await ledger.close();
    d.cleanup();
  }, 120_000);
});
