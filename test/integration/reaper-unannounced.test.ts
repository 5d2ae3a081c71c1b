/**
 * The exit watchdog (transport/reaper.ts) also ends a stdio server it was never told about: a
 * hub SIGKILLed while `spawn` ran (tens of milliseconds on a loaded machine: the fork of a large
 * process and the exec) left the server, and what it started, running for good (a crash-looping
 * server under repeated SIGKILLs of the hub orphaned one about every fifteenth time).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/hub-process.js';
import { expectAllGone, running } from './faults-helpers.js';
import { QUIRKS } from './faults-helpers.js';

describe.skipIf(process.platform !== 'linux')('exit watchdog', () => {
  it('ends a server, and its grandchild, whose group it never heard of when the hub dies', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-unannounced-'));
    const proc = spawn(process.execPath, [join(ROOT, 'test/fixtures/dies-while-spawning.mjs'), `${QUIRKS}/spawns-grandchild.mjs`, join(dir, 'g.log')], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => proc.on('exit', (_code, sig) => resolve(sig)));
    expect(signal).toBe('SIGKILL');
    const pids = /^PIDS (\d+) (\d+)$/m.exec(out)!.slice(1).map(Number);
    expect(pids.filter(running)).toHaveLength(2); // both were up when it died
    try {
      // The server ignores stdin EOF and SIGTERM; its grandchild ignores nothing but is no group leader.
      await expectAllGone(pids, 6_000);
    } finally {
      for (const p of pids.filter(running)) process.kill(p, 'SIGKILL');
    }
  }, 20_000);
});
