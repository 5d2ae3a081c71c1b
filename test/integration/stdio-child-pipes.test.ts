/**
 * A stdio server's pipes are let go when it exits, even while something it left behind, out of
 * its process group, still holds them: the hub kept reading that process's output under the
 * server's name, and kept two file descriptors per restart of a crash-looping server.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { StdioChild, type ExitInfo } from '../../src/transport/stdio-child.js';
import { silentLogger } from '../../src/log.js';
import { expectAllGone, QUIRKS, running, waitUntil } from './faults-helpers.js';

describe.skipIf(process.platform === 'win32')('StdioChild exit', () => {
  it('closes its ends of the pipes a grandchild in a session of its own still holds', async () => {
    const log = join(mkdtempSync(join(tmpdir(), 'switchyard-escaped-')), 'q.log');
    const child = new StdioChild({ command: process.execPath, args: [`${QUIRKS}/escapes-and-exits.mjs`], env: { QUIRK_LOG: log }, maxFrameBytes: 1 << 20, log: silentLogger });
    const exit: ExitInfo = await child.exit;
    expect(exit.code).toBe(1);
    const g = await waitUntil('grandchild pid', async () => {
      try {
        return (JSON.parse(readFileSync(log, 'utf8').split('\n').find((l) => l.includes('grandchild'))!) as { grandchild: number }).grandchild;
      } catch {
        return undefined;
      }
    });
    try {
      // Its writes fail once the hub's end of its stdout is closed; it ignores SIGTERM, and no group signal reaches it.
      await expectAllGone([g], 5_000);
    } finally {
      if (running(g)) process.kill(g, 'SIGKILL');
    }
  }, 20_000);
});
