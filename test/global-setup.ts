import { execFileSync } from 'node:child_process';
import { existsSync, statSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// Integration tests run the real built binary; rebuild when any source is newer than dist.
function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

export default function setup(): void {
  const entry = 'dist/src/cli/main.js';
  if (!existsSync(entry) || statSync(entry).mtimeMs < newest('src')) {
    execFileSync('npx', ['tsc', '-p', '.'], { stdio: 'inherit' });
  }
}
