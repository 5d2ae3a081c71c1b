/**
 * The OS lock beside a ledger (`<ledger>.owner`, src/cli/ledger-owner.ts) is a file like the
 * ledger's others: owner-only (0600), not the 0644 SQLite gives a file it creates.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ownerFile, ownerLockHeldElsewhere, releaseOwnerLock, takeOwnerLock } from '../../src/cli/ledger-owner.js';

describe('the ledger owner lock file', () => {
  let dir: string | undefined;
  afterEach(() => {
    releaseOwnerLock();
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('is created owner-only, and locks as before', () => {
    dir = mkdtempSync(join(tmpdir(), 'sy-owner-'));
    const real = join(dir, 'ledger.db');
    expect(takeOwnerLock(real)).toBe(true);
    expect(statSync(ownerFile(real)).mode & 0o777).toBe(0o600);
    // This process holds it: not "elsewhere".
    expect(ownerLockHeldElsewhere(real)).toBe(false);
  });
});
