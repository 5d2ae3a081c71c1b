/**
 * The hub started with Node and V8 flags of its own (a bigger heap, a larger young generation),
 * as operators do, must still start its ledger thread and record calls: a Worker refuses such
 * flags in its execArgv, so the thread must not inherit them; CPU profiling it accepts, and a
 * profiled hub profiles its ledger thread too.
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gcAdvice } from '../../src/cli/gc-advice.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { fixture, modernCall, SDK1, textOf, waitForReady, waitForRows } from './ledger-helpers.js';

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

describe('the hub under node flags', () => {
  // One hub for the flags operators give (V8 and per-process ones) and the one npm start gives
  // (--single-threaded-gc): a hub start with a fixture server is the bulk of each case's time.
  describe('given V8, per-process and GC flags', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-flags-'));
    let flagged: Promise<HubProcess>;
    beforeAll(() => {
      flagged = startHub({ servers: { f: fixture(SDK1, dir) } }, { dir, nodeArgs: ['--max-old-space-size=512', '--max-semi-space-size=8', '--title=switchyard-flags', '--single-threaded-gc'] });
    });
    afterAll(async () => {
      await (await flagged).stop();
    });

    it('starts with V8 and per-process flags and records a call in the ledger', async () => {
      const hub = await flagged;
      await waitForReady(hub.url, ['f']);
      const res = await modernCall(hub.url, 'flags-1', 'tools/call', { name: 'f__echo', arguments: { text: 'flags' } });
      expect(textOf(res.body?.result)).toBe('echo:flags');
      const rows = await waitForRows(join(dir, 'ledger.db'), { tool: 'f__echo' }, (r) => r.some((row) => row.requestId === 'flags-1'));
      expect(rows.filter((r) => r.requestId === 'flags-1')).toEqual([expect.objectContaining({ requestId: 'flags-1', outcome: 'ok' })]);
      expect(hub.logs.join('\n')).not.toMatch(/ingest thread (failed|ended)/);
    });

    it('runs with --single-threaded-gc (as npm start does)', async () => {
      const hub = await flagged;
      await waitForReady(hub.url, ['f']);
      const res = await modernCall(hub.url, 'gc-1', 'tools/call', { name: 'f__echo', arguments: { text: 'gc' } });
      expect(textOf(res.body?.result)).toBe('echo:gc');
      const rows = await waitForRows(join(dir, 'ledger.db'), { tool: 'f__echo' }, (r) => r.some((row) => row.requestId === 'gc-1'));
      expect(rows.filter((r) => r.requestId === 'gc-1')).toEqual([expect.objectContaining({ requestId: 'gc-1', outcome: 'ok' })]);
      expect(hub.logs.join('\n')).not.toContain('single-threaded-gc');
    });
  });

  it('profiles the ledger thread too when started with --cpu-prof', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-prof-'));
    const prof = join(dir, 'prof');
    hub = await startHub({ servers: { f: fixture(SDK1, dir) } }, { dir, nodeArgs: ['--max-semi-space-size=8', '--cpu-prof', '--cpu-prof-dir', prof] });
    await waitForReady(hub.url, ['f']);
    const res = await modernCall(hub.url, 'prof-1', 'tools/call', { name: 'f__echo', arguments: { text: 'prof' } });
    expect(textOf(res.body?.result)).toBe('echo:prof');
    await waitForRows(join(dir, 'ledger.db'), { tool: 'f__echo' });
    await hub.stop();
    hub = undefined;
    // One profile per thread: the hub's and the ledger's (whose file name carries thread id 1).
    const files = readdirSync(prof).filter((f) => f.endsWith('.cpuprofile'));
    expect(files).toHaveLength(2);
  });

  it('advises --single-threaded-gc on a machine of few CPUs when started without', async () => {
    // Without the flag, on one CPU (taskset pins the hub to CPU 0 on any machine): the advice,
    // once, at start-up.
    hub = await startHub({ servers: {} }, { wrap: ['taskset', '-c', '0'] });
    await waitForReady(hub.url, []);
    const said = hub.logs.filter((l) => l.includes('single-threaded-gc'));
    expect(said.map((l) => JSON.parse(l))).toEqual([expect.objectContaining({ level: 30, msg: gcAdvice([], 1) })]);
  });
});
