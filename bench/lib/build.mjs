// Whether dist/ is the build of the sources, and building it when it is not: one rule for the
// benchmark and the test suite's global setup, so neither rebuilds what the other just built
// (a rebuild while hubs are being spawned from dist/ could hand one a half-written file).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Marks a build: tsc leaves unchanged outputs untouched, so their own times say nothing. */
const STAMP = 'dist/.build-stamp';

function newest(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let t = 0;
  for (const e of readdirSync(path)) t = Math.max(t, newest(join(path, e)));
  return t;
}

/** True when dist/ was built after every change to src/, plugins/ and tsconfig.json. */
export function isBuilt(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(stamp)) return false;
  const sources = Math.max(newest(join(root, 'src')), newest(join(root, 'plugins')), newest(join(root, 'tsconfig.json')));
  return statSync(stamp).mtimeMs >= sources;
}

/**
 * The second step of `npm run build`: the config schema's validator as code. Without it (or
 * when it fails) hubs compile the schema at every start: slower, not wrong, so it only warns.
 */
function generateValidator(root, log) {
  try {
    execFileSync(process.execPath, ['dist/src/config/generate-validator.js'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (err) {
    log(`generating the config validator failed (hubs will compile the schema): ${err.message}`);
  }
}

/**
 * Builds with `tsc -p .`, then the config validator (as `npm run build` does), unless dist/ is
 * current. tsc still emits on type errors: what it emitted is used when the entry point exists
 * (`onErrors` is told), else the error is thrown.
 */
export function ensureBuilt(root, { log = () => {}, onErrors = () => {} } = {}) {
  if (isBuilt(root)) return false;
  log('building (tsc -p .)');
  try {
    execFileSync('npx', ['tsc', '-p', '.'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (err) {
    if (!existsSync(join(root, 'dist/src/cli/main.js'))) throw err;
    onErrors();
  }
  generateValidator(root, log);
  writeFileSync(join(root, STAMP), new Date().toISOString());
  return true;
}
