/** The requestState key's text (config/state-key.ts) and where a bad one is said to come from. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeStateKey } from '../../src/config/state-key.js';
import { loadStateKey } from '../../src/router/request-state.js';

const before = process.env.SWITCHYARD_STATE_KEY;
afterEach(() => {
  if (before === undefined) delete process.env.SWITCHYARD_STATE_KEY;
  else process.env.SWITCHYARD_STATE_KEY = before;
});

describe('the requestState key', () => {
  it('is 64 hex characters or base64 of 32 bytes', () => {
    expect(decodeStateKey('ab'.repeat(32))?.length).toBe(32);
    expect(decodeStateKey(Buffer.alloc(32, 9).toString('base64'))?.equals(Buffer.alloc(32, 9))).toBe(true);
    for (const bad of ['short', 'ab'.repeat(31), 'ab'.repeat(33)]) expect(decodeStateKey(bad), bad).toBeUndefined();
  });

  // `start` printed "<config file>: the requestState key must be 32 bytes" for a bad SWITCHYARD_STATE_KEY too.
  it('a bad one is named by where it came from: the config or the environment', () => {
    const keyFile = join(mkdtempSync(join(tmpdir(), 'switchyard-state-key-')), 'state.key');
    expect(() => loadStateKey('short', keyFile)).toThrow(/^policy\.requestStateKey must be 32 bytes/);
    process.env.SWITCHYARD_STATE_KEY = 'short';
    expect(() => loadStateKey(undefined, keyFile)).toThrow(/^the environment variable SWITCHYARD_STATE_KEY must be 32 bytes/);
    expect(loadStateKey('ab'.repeat(32), keyFile).length).toBe(32);
  });
});
