/** The tests' own check that a process is gone (test/integration/upstream-helpers.ts). */
import { execFileSync, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { alive } from '../integration/upstream-helpers.js';

describe('alive()', () => {
  it('a killed process nobody has reaped yet (a zombie) is not alive; a running one is', async () => {
    // sh starts `sleep 0` in the background, then becomes `sleep 30` (killed at the end), which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const pid = await new Promise<number>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
    try {
      const state = () => execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).trim();
      for (let i = 0; i < 100 && !state().startsWith('Z'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(state()).toMatch(/^Z/);
      expect(() => process.kill(pid, 0)).not.toThrow(); // the pid still exists
      expect(alive(pid)).toBe(false);
      expect(alive(parent.pid!)).toBe(true);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
