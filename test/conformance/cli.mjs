// How run.mjs and run-client.mjs start an official conformance CLI on this Node.
//
// Both lines import `globSync` from `node:fs`, which Node has only from 22. The shim
// (shim/register.mjs) redirects `fs` to shim/fs.mjs through a module-resolution hook, but a
// hook runs on a loader thread of its own that every ESM import of the process goes through:
// ~0.5 s of CPU per CLI start (a third of it), and the suite starts one per client scenario.
// So, where it can, this prepares a copy of the CLI's bundle that takes `globSync` from
// shim/fs.mjs itself and needs no hook: the bundle's one `fs` import is split in two, and
// `import.meta.url` is pinned to the bundle's own URL (conformance-next finds its
// `requirements/` folder from it). The copy lives under .tmp/ in the repository, so its bare
// imports resolve to the same node_modules as the bundle's (only when the package has no
// node_modules of its own; else the hook). Anything unexpected in the bundle: the hook.
// CONFORMANCE_CLI=hook forces the hook (to tell the copy from the suite when something differs).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SHIM = path.join(ROOT, 'test/conformance/shim/register.mjs');
const SHIM_FS = pathToFileURL(path.join(ROOT, 'test/conformance/shim/fs.mjs')).href;
export const PACKAGES = {
  '0.1': 'node_modules/@modelcontextprotocol/conformance',
  '0.2': 'node_modules/conformance-next',
};
const FS_IMPORT = /import\{([^}]*?)\bglobSync as (\w+),([^}]*)\}from"fs";/g;

/** The copy of `bundle` that needs no hook, written once per bundle content; undefined if it cannot be made. */
function preparedCopy(pkgDir, bundle) {
  if (fs.existsSync(path.join(pkgDir, 'node_modules'))) return undefined;
  const source = fs.readFileSync(bundle, 'utf8');
  const imports = [...source.matchAll(FS_IMPORT)];
  if (imports.length !== 1) return undefined;
  const file = path.join(ROOT, '.tmp/conformance-cli', `${path.basename(pkgDir)}-${createHash('sha256').update(source).digest('hex').slice(0, 16)}.mjs`);
  if (fs.existsSync(file)) return file;
  const [, before, local, after] = imports[0];
  const patched = source
    .replace(FS_IMPORT, `import{globSync as ${local}}from${JSON.stringify(SHIM_FS)};import{${before}${after}}from"fs";`)
    .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(bundle).href));
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Several runners may prepare it at once: each writes its own file and renames it into place.
  const tmp = `${file}.${process.pid}.${Date.now()}`;
  fs.writeFileSync(tmp, patched);
  fs.renameSync(tmp, file);
  return file;
}

/**
 * The node arguments that start the CLI of conformance line `line` ('0.1' or '0.2'): Node's own
 * globSync when it has one, else the prepared copy, else the bundle through the hook shim.
 * `how` says which, for the test that keeps the copy working.
 */
export function conformanceCli(line) {
  const pkgDir = path.join(ROOT, PACKAGES[line]);
  const bundle = path.join(pkgDir, 'dist/index.js');
  if (typeof fs.globSync === 'function') return { args: [bundle], how: 'native' };
  const copy = process.env.CONFORMANCE_CLI === 'hook' ? undefined : preparedCopy(pkgDir, bundle);
  if (copy) return { args: [copy], how: 'copy' };
  return { args: ['--import', SHIM, bundle], how: 'hook' };
}
