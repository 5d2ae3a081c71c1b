/**
 * What `npm pack` ships (package.json `files`): what the installed CLI reads at run time, from
 * the package's folder whatever the cwd, is in it; the repository's tests, bench and CI are not.
 * A cheap check of the list, not a pack (which takes seconds).
 */
import { execSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SCHEMA_RELATIVE_PATH } from '../../src/config/schema.js';
import { ADMIN_PAGE_DIR } from '../../src/downstream/admin.js';
import { packageRoot } from '../../src/paths.js';

const pkg = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { files?: string[]; bin: Record<string, string>; scripts: Record<string, string> };
const shipped = (path: string) => (pkg.files ?? []).some((f) => path === f || path.startsWith(`${f}/`));

describe('the npm package', () => {
  it('ships the CLI and everything it reads from the package folder', () => {
    expect(pkg.files).toBeDefined();
    const bin = pkg.bin.switchyard!;
    expect(shipped(bin)).toBe(true);
    // npm links the bin as it is: without the shebang a shell would run it as a script of its own.
    expect(readFileSync(join(packageRoot, bin.replace(/^dist\//, '').replace(/\.js$/, '.ts')), 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
    for (const path of [
      SCHEMA_RELATIVE_PATH, // config validation, and the "$schema" init writes
      'migrations/0001_init.sql',
      `${relative(packageRoot, ADMIN_PAGE_DIR)}/index.html`,
      'dist/src/ledger/ingest-worker.js',
      'dist/src/config/hub-config-validator.generated.cjs', // made by the build (npm run build)
      'dist/plugins/redact-secrets.js', // the bundled plugins, imported from dist/src
      'docs/IDE-SETUP.md', // named by the README and by the hub's messages
    ])
      expect(shipped(path), path).toBe(true);
  });

  it('leaves out the tests, the bench, CI and the examples (which need devDependencies)', () => {
    for (const path of ['test/unit/package-files.test.ts', 'bench/run.mjs', '.ci/run', 'examples/legacy-notes.mjs', 'hub.config.json', 'vitest.config.ts'])
      expect(shipped(path), path).toBe(false);
  });

  it('is packed from a fresh build: the compiled files of a deleted source are not shipped', () => {
    // npm pack runs prepack, then prepare (the build): tsc alone leaves dist/ files it no longer makes.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-pack-'));
    mkdirSync(join(dir, 'dist/src'), { recursive: true });
    writeFileSync(join(dir, 'dist/src/deleted-since.js'), '');
    execSync(pkg.scripts.prepack!, { cwd: dir, stdio: 'ignore' });
    expect(existsSync(join(dir, 'dist/src/deleted-since.js'))).toBe(false);
    expect(pkg.scripts.prepare).toMatch(/build/);
  });
});
