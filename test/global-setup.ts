import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandOf, environOf, liveProcesses } from './helpers/procs.js';
import { ensureBuilt } from '../bench/lib/build.mjs';

// Integration tests run the real built binary: rebuilt when a source is newer than the last
// build, by the same rule (and stamp) as the benchmark's, so neither rebuilds mid-run.
export default function setup(): () => Promise<void> {
  // Unlike the benchmark, a build with type errors stops the run (as before the shared rule).
  ensureBuilt(process.cwd(), {
    onErrors: () => {
      throw new Error('tsc reported type errors (see above)');
    },
  });
  return ownTmpdir();
}

/**
 * One temp folder for the whole run, removed at its end: the tests (in forked workers) and the
 * hubs and servers they spawn inherit it as TMPDIR, so the folders they make with mkdtemp and
 * do not remove (about 120 a run) no longer pile up in the machine's /tmp.
 */
function ownTmpdir(): () => Promise<void> {
  const before = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-test-'));
  process.env.TMPDIR = dir;
  return async () => {
    const leaked = await leftovers(dir);
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
    // A hub a test left running holds its ledger, its port and its upstreams, and the next run's
    // tests can trip over it: the run fails, naming each, once they are killed.
    if (leaked.length) {
      // vitest reports an error thrown here but still exits 0: set the code, and say why.
      process.stderr.write(`\nFAIL: processes the tests left running (killed now):\n${leaked.join('\n')}\n`);
      process.exitCode = 1;
    }
  };
}

/** Live processes started under this run's TMPDIR (hubs, servers, peers), not vitest's own. */
function startedBy(dir: string): { pid: number; cmd: string }[] {
  return liveProcesses()
    .filter((p) => p.pid !== process.pid && environOf(p.pid).includes(`TMPDIR=${dir}`))
    .map((p) => ({ pid: p.pid, cmd: commandOf(p.pid) }))
    .filter((p) => !/node_modules\/(vitest|tinypool)\//.test(p.cmd));
}

/** What is still running 3 s after the last test file ended; each is killed. */
async function leftovers(dir: string): Promise<string[]> {
  const deadline = Date.now() + 3000;
  let left = startedBy(dir);
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = startedBy(dir);
  }
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return left.map((p) => `${p.pid} ${p.cmd.slice(0, 300)}`);
}
