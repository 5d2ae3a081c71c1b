import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
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

export default function setup(): void {
  const sources = Math.max(newest('src'), newest('plugins'), statSync('tsconfig.json').mtimeMs);
  if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= sources) return;
  execFileSync('npx', ['tsc', '-p', '.'], { stdio: 'inherit' });
  writeFileSync(STAMP, new Date().toISOString());
}
