/**
 * The hub runs with `--single-threaded-gc` as shipped (npm start), and the daemon advises it on
 * machines of one or two CPUs when it was started without (docs/BENCHMARKS.md, "V8's garbage
 * collector on two cores"). The bench measures the hub with the same flags.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gcAdvice, SINGLE_THREADED_GC } from '../../src/cli/gc-advice.js';
// @ts-expect-error plain JavaScript of the bench, without types
import { shippedNodeFlags } from '../../bench/lib/targets.mjs';
import { ROOT } from '../helpers/hub-process.js';

describe('the garbage collector advice', () => {
  it('is given on one or two CPUs without the flag, and never with it or on more CPUs', () => {
    expect(gcAdvice([], 2)).toMatch(/^this machine has 2 CPUs: start the hub with `node --single-threaded-gc`/);
    expect(gcAdvice(['--max-old-space-size=512'], 1)).toMatch(/^this machine has 1 CPU: /);
    expect(gcAdvice([SINGLE_THREADED_GC], 2)).toBeUndefined();
    expect(gcAdvice([], 3)).toBeUndefined();
    expect(gcAdvice([], 64)).toBeUndefined();
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
      pkg('node dist/src/cli/main.js start');
      expect(shippedNodeFlags(dir, {})).toEqual([]);
      pkg('tsx src/cli/main.ts start');
      expect(shippedNodeFlags(dir, {})).toEqual([]);
      expect(shippedNodeFlags(dir, { SWITCHYARD_BENCH_NODE_FLAGS: '' })).toEqual([]);
      expect(shippedNodeFlags(dir, { SWITCHYARD_BENCH_NODE_FLAGS: ' --x  --y ' })).toEqual(['--x', '--y']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
