// The ledger alone, in-process: begin (committed) + finish pairs at a given concurrency, as a
// tools/call does them. Shows what the group commit (pending file) and the move of every row
// into SQLite cost without HTTP or an upstream.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HUB_ROOT as ROOT } from './targets.mjs';

export async function ledgerCommitBench({ pairs = 10_000, concurrency = 32 } = {}) {
  const { Ledger } = await import(join(ROOT, 'dist/src/ledger/ledger.js'));
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-commit-bench-'));
  const ledger = Ledger.open({ path: join(dir, 'ledger.db') });
  try {
    // One row through to SQLite first: the ledger's thread has started, and its start is not
    // billed to the calls measured.
    await ledger.record({ ts: Date.now(), requestId: 'warm-up', principal: 'anonymous', clientEra: '2026-07-28', method: 'tools/call' }, { outcome: 'ok' });
    ledger.sync();
    const before = ledger.commitCounters();
    let next = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < pairs) {
          const i = next++;
          const h = await ledger.beginCommitted({
            ts: Date.now(),
            requestId: String(i),
            principal: 'anonymous',
            clientEra: '2026-07-28',
            method: 'tools/call',
            hubName: 'echo__echo',
            server: 'echo',
            upstreamName: 'echo',
            upstreamEra: '2025-11-25',
            argsHash: 'a'.repeat(64),
            requestBytes: 200,
          });
          await h.finish({ outcome: 'ok', latencyMs: 0.5, responseBytes: 100 });
        }
      }),
    );
    ledger.sync(); // the last rows into SQLite too: every row's whole cost is in the window
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const c = ledger.commitCounters();
    return {
      pairs,
      concurrency,
      ms,
      perSec: pairs / (ms / 1000),
      cpuUsPerPair: (cpu.user + cpu.system) / pairs,
      writesPerCommit: (c.writes - before.writes) / Math.max(1, c.batches - before.batches),
    };
  } finally {
    await ledger.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const c of [1, 32]) {
    const r = await ledgerCommitBench({ pairs: c === 1 ? 3000 : 10_000, concurrency: c });
    console.log(`ledger commit: ${r.pairs} begin+finish pairs at concurrency ${c}: ${Math.round(r.perSec)} pairs/s, ${r.cpuUsPerPair.toFixed(0)} µs CPU per pair, ${r.writesPerCommit.toFixed(1)} rows per write of the pending file`);
  }
}
