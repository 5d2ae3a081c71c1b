/**
 * The exit watchdog (transport/reaper.ts) killed while the hub runs (the OOM killer, an
 * operator's kill) is replaced at once: it used to be started again only at the hub's next
 * spawn, so a hub SIGKILLed meanwhile left a server that ignores the end of its stdin, and what
 * it started, running for good.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeServer, startHub } from '../helpers/hub-process.js';
import { commandOf, liveProcesses } from '../helpers/procs.js';
import { descendants, expectAllGone, QUIRKS, running, waitForState, waitUntil } from './faults-helpers.js';
import { quirkLog } from './upstream-helpers.js';

/** The hub's watchdog: its child whose command line carries the hub's mark. */
function watchdogOf(hubPid: number): number | undefined {
  return liveProcesses().find((p) => p.ppid === hubPid && commandOf(p.pid).includes('SWITCHYARD_HUB_MARK='))?.pid;
}

describe.skipIf(process.platform !== 'linux')('exit watchdog killed while the hub runs', () => {
  it('is replaced without waiting for a spawn, and the replacement ends a stubborn server and its grandchild when the hub is SIGKILLed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-watchdog-killed-'));
    const gLog = join(dir, 'g.log');
    const hub = await startHub({ servers: { g: nodeServer(`${QUIRKS}/spawns-grandchild.mjs`, [], { QUIRK_LOG: gLog, QUIRK_STUBBORN: '1' }) } }, { dir });
    const pids: number[] = [];
    try {
      await waitForState(hub.url, 'g', ['ready']);
      const grandchild = await waitUntil('grandchild pid', async () => quirkLog(gLog).find((e) => e.grandchild !== undefined)?.grandchild);
      const first = await waitUntil('the watchdog', async () => watchdogOf(hub.proc.pid!));
      process.kill(first, 'SIGKILL');
      const second = await waitUntil('a new watchdog', async () => {
        const w = watchdogOf(hub.proc.pid!);
        return w !== undefined && w !== first ? w : undefined;
      }, 5_000);
      pids.push(...descendants(hub.proc.pid!));
      expect(pids).toEqual(expect.arrayContaining([grandchild, second]));
      hub.proc.kill('SIGKILL');
      // The server ignores stdin EOF and SIGTERM: only the watchdog's SIGKILL ends it.
      await expectAllGone(pids, 6_000);
    } finally {
      // Failed before the kill: what the hub started is ended here, the hub's watchdog or not.
      if (hub.proc.exitCode === null && hub.proc.signalCode === null) {
        pids.push(...descendants(hub.proc.pid!));
        hub.proc.kill('SIGKILL');
      }
      for (const p of pids.filter(running)) process.kill(p, 'SIGKILL');
    }
  }, 30_000);
});
