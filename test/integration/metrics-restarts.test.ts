/**
 * switchyard_upstream_restarts_total is a counter: it must never go back. `servers restart` and
 * a reload that changes a server give it a fresh connection, which counts its own restarts from
 * 0; the metric goes on from the total (docs/RELIABILITY.md), also for a server removed and added again.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { metricValue, scrape } from '../helpers/prometheus.js';

/** A stdio server that exits at once: the hub restarts it with backoff (250 ms, 500 ms, …). */
const crashy = (tag: string) => ({ command: process.execPath, args: ['-e', `process.exit(1) // ${tag}`] });

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { crashy: crashy('one') } });
}, 60_000);
afterAll(async () => {
  await hub?.stop();
});

const restarts = async () => metricValue(await scrape(hub.url), 'switchyard_upstream_restarts_total', { server: 'crashy' });

/** The counter once it reaches `n`. */
async function atLeast(n: number): Promise<number> {
  const end = Date.now() + 20_000;
  for (;;) {
    const v = await restarts();
    if (v >= n || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('switchyard_upstream_restarts_total', () => {
  it('does not go back when the connection is replaced: servers restart, then a reload of the changed server', async () => {
    const before = await atLeast(3);
    expect(before).toBeGreaterThanOrEqual(3);
    // A process that exits is a failure, not a hang; the reasons' sum is the total (above).
    const text = await scrape(hub.url);
    expect(metricValue(text, 'switchyard_upstream_restarts_total', { server: 'crashy', reason: 'hung' })).toBe(0);
    expect(metricValue(text, 'switchyard_upstream_restarts_total', { server: 'crashy', reason: 'failure' })).toBeGreaterThanOrEqual(3);
    const r = await runCli(['servers', 'restart', 'crashy', '--no-wait', '--url', hub.url]);
    expect(r.code, r.stderr).toBe(0);
    const afterRestart = await restarts();
    expect(afterRestart).toBeGreaterThanOrEqual(before);
    // The fresh connection's own restarts add to it.
    expect(await atLeast(afterRestart + 1)).toBeGreaterThan(afterRestart);

    const beforeReload = await restarts();
    writeFileSync(hub.configFile, JSON.stringify({ ledger: { path: `${hub.dir}/ledger.db` }, servers: { crashy: crashy('two') } }, null, 2));
    const reload = await runCli(['reload', '--url', hub.url]);
    expect(reload.code, reload.stdout + reload.stderr).toBe(0);
    expect(await restarts()).toBeGreaterThanOrEqual(beforeReload);
  });

  it('a server removed by a reload and added again goes on from its total', async () => {
    // Far enough up that a fresh connection could not have caught up by the time it is read (backoff 250 ms, 500 ms, 1 s, 2 s).
    const before = await atLeast(4);
    expect(before).toBeGreaterThanOrEqual(4);
    const reloadWith = async (servers: Record<string, unknown>) => {
      writeFileSync(hub.configFile, JSON.stringify({ ledger: { path: `${hub.dir}/ledger.db` }, servers }, null, 2));
      const r = await runCli(['reload', '--url', hub.url]);
      expect(r.code, r.stdout + r.stderr).toBe(0);
    };
    await reloadWith({});
    expect(await scrape(hub.url)).not.toMatch(/switchyard_upstream_restarts_total\{server="crashy"\}/);
    await reloadWith({ crashy: crashy('three') });
    expect(await restarts()).toBeGreaterThanOrEqual(before);
  });
});
