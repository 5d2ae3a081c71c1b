/** The test run's own temp folder (test/global-setup.ts): what tests leave there goes with it. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('the test run', () => {
  it('makes its temp folders inside a folder of its own, which the global setup removes at the end', () => {
    expect(basename(tmpdir())).toMatch(/^switchyard-test-/);
    expect(dirname(mkdtempSync(`${tmpdir()}/x-`))).toBe(tmpdir());
  });
});
