import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Integration tests run the real built binary; rebuild when any source is newer than the last
// build. A stamp file marks the build: tsc leaves unchanged outputs untouched, so their own
// times say nothing.
const STAMP = 'dist/.build-stamp';

function newest(dir: string): number {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

export default function setup(): () => void {
  const sources = Math.max(newest('src'), newest('plugins'), statSync('tsconfig.json').mtimeMs);
  if (!existsSync(STAMP) || statSync(STAMP).mtimeMs < sources) {
    execFileSync('npx', ['tsc', '-p', '.'], { stdio: 'inherit' });
    writeFileSync(STAMP, new Date().toISOString());
  }
  return ownTmpdir();
}

/**
 * One temp folder for the whole run, removed at its end: the tests (in forked workers) and the
 * hubs and servers they spawn inherit it as TMPDIR, so the folders they make with mkdtemp and
 * do not remove (about 120 a run) no longer pile up in the machine's /tmp.
 */
function ownTmpdir(): () => void {
  const before = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-test-'));
  process.env.TMPDIR = dir;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  };
}
