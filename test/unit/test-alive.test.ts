/** The tests' own check that a process is gone (test/integration/upstream-helpers.ts). */
import { execFileSync, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { alive } from '../helpers/procs.js';

describe('alive()', () => {
  it('a killed process nobody has reaped yet (a zombie) is not alive; a running one is', async () => {
    // sh starts `sleep 30` in the background, then becomes `sleep 30` itself, which never reaps
    // it. The child is killed only once the exec is done: killed before, it was reaped by sh
    // (a shell reaps its jobs as they end), and there was no zombie to look at (CI, under load).
    const parent = spawn('sh', ['-c', 'sleep 30 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const pid = await new Promise<number>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
    try {
      const ps = (field: string, p: number) => {
        try {
          return execFileSync('ps', ['-o', `${field}=`, '-p', String(p)], { encoding: 'utf8' }).trim();
        } catch {
          return ''; // no such process
        }
      };
      const state = () => ps('stat', pid);
      for (let i = 0; i < 250 && ps('comm', parent.pid!) !== 'sleep'; i++) await new Promise((r) => setTimeout(r, 20));
      expect(ps('comm', parent.pid!)).toBe('sleep');
      process.kill(pid, 'SIGKILL');
      for (let i = 0; i < 250 && !state().startsWith('Z'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(state()).toMatch(/^Z/);
      expect(() => process.kill(pid, 0)).not.toThrow(); // the pid still exists
      expect(alive(pid)).toBe(false);
      expect(alive(parent.pid!)).toBe(true);
    } finally {
      parent.kill('SIGKILL');
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone with its parent
      }
    }
  });
});
