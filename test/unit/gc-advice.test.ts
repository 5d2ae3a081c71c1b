/**
 * The hub runs with `--single-threaded-gc` as shipped (npm start), and the daemon advises it on
 * machines of one or two CPUs when it was started without (docs/BENCHMARKS.md, "V8's garbage
 * collector on two cores"). The bench measures the hub with the same flags.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { availableParallelism } from 'node:os';
import { cgroupCpus, gcAdvice, SINGLE_THREADED_GC, usableCpus } from '../../src/cli/gc-advice.js';
import { shippedNodeFlags } from '../../bench/lib/targets.mjs';
import { ROOT } from '../helpers/hub-process.js';

describe('the garbage collector advice', () => {
  it('is given on one or two CPUs without the flag, and never with it or on more CPUs', () => {
    expect(gcAdvice([], 2)).toMatch(/^this machine has 2 CPUs: start the hub with `node --single-threaded-gc`/);
    expect(gcAdvice(['--max-old-space-size=512'], 1)).toMatch(/^this machine has 1 CPU: /);
    expect(gcAdvice([SINGLE_THREADED_GC], 2)).toBeUndefined();
    expect(gcAdvice([], 3)).toBeUndefined();
    expect(gcAdvice([], 64)).toBeUndefined();
    // V8's other spellings of the flag, the flag that implies it, and its explicit refusal.
    for (const f of ['--single_threaded_gc', '--single-threaded', '--no-single-threaded-gc', '--no_single_threaded_gc']) expect(gcAdvice([f], 2), f).toBeUndefined();
  });

  it('counts the CPUs a container quota allows, not only the affinity mask', () => {
    expect(cgroupCpus('200000 100000\n', undefined, undefined)).toBe(2);
    expect(cgroupCpus('150000 100000', undefined, undefined)).toBe(2);
    expect(cgroupCpus('max 100000', undefined, undefined)).toBeUndefined();
    expect(cgroupCpus(undefined, '50000\n', '100000\n')).toBe(1);
    expect(cgroupCpus(undefined, '-1', '100000')).toBeUndefined();
    expect(cgroupCpus(undefined, undefined, undefined)).toBeUndefined();
    const files: Record<string, string> = { '/sys/fs/cgroup/cpu.max': '100000 100000' };
    expect(usableCpus((p) => files[p])).toBe(1);
    expect(usableCpus(() => undefined)).toBe(availableParallelism());
  });
});

describe('the Node flags the hub is shipped and measured with', () => {
  it('npm start runs the hub with --single-threaded-gc, and the bench reads the flags from there', () => {
    expect(shippedNodeFlags(ROOT, {})).toEqual([SINGLE_THREADED_GC]);
  });

  it('the bench takes the flags between `node` and the script, none for a start script without them, or those it is told', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-flags-'));
    try {
      const pkg = (start: string) => writeFileSync(join(dir, 'package.json'), JSON.stringify({ scripts: { start } }));
      pkg('node --a --b=1 dist/src/cli/main.js start --port 1');
      expect(shippedNodeFlags(dir, {})).toEqual(['--a', '--b=1']);
      pkg('exec node --a dist/src/cli/main.js start');
      expect(shippedNodeFlags(dir, {})).toEqual(['--a']);
      pkg('node dist/src/cli/main.js start');
      expect(shippedNodeFlags(dir, {})).toEqual([]);
      pkg('tsx src/cli/main.ts start');
      expect(shippedNodeFlags(dir, {})).toEqual([]);
      pkg('node -r ./x.js dist/src/cli/main.js start');
      expect(() => shippedNodeFlags(dir, {})).toThrow(/--flag or --flag=value/);
      expect(shippedNodeFlags(dir, { SWITCHYARD_BENCH_NODE_FLAGS: '' })).toEqual([]);
      expect(shippedNodeFlags(dir, { SWITCHYARD_BENCH_NODE_FLAGS: ' --x  --y ' })).toEqual(['--x', '--y']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
