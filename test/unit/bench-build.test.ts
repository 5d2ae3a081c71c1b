/**
 * The rule by which the benchmark and the test suite's global setup decide that dist/ is the
 * build of the sources (bench/lib/build.mjs): one stamp, newer than every file of src/,
 * plugins/ and tsconfig.json. Outputs tsc left untouched say nothing.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isBuilt } from '../../bench/lib/build.mjs';

let root: string | undefined;
afterEach(() => root && rmSync(root, { recursive: true, force: true }));

function tree(): string {
  const r = mkdtempSync(join(tmpdir(), 'switchyard-build-rule-'));
  for (const d of ['src/cli', 'plugins', 'dist/src/cli']) mkdirSync(join(r, d), { recursive: true });
  for (const f of ['src/cli/main.ts', 'plugins/p.mjs', 'tsconfig.json', 'dist/src/cli/main.js']) writeFileSync(join(r, f), '');
  return r;
}
const at = (r: string, f: string, s: number) => utimesSync(join(r, f), s, s);

describe('bench/lib/build.mjs isBuilt', () => {
  it('needs a stamp newer than every source, plugin and tsconfig.json; an old output of its own does not count', () => {
    const r = (root = tree());
    for (const f of ['src/cli/main.ts', 'plugins/p.mjs', 'tsconfig.json']) at(r, f, 1_000);
    at(r, 'dist/src/cli/main.js', 5_000);
    expect(isBuilt(r)).toBe(false); // no stamp: main.js's time says nothing
    writeFileSync(join(r, 'dist/.build-stamp'), '');
    at(r, 'dist/.build-stamp', 2_000);
    expect(isBuilt(r)).toBe(true);
    for (const f of ['src/cli/main.ts', 'plugins/p.mjs', 'tsconfig.json']) {
      at(r, f, 3_000);
      expect(isBuilt(r), f).toBe(false);
      at(r, f, 1_000);
    }
  });
});
