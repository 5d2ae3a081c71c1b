/**
 * The "$schema" `switchyard init` writes (src/cli/init.ts schemaRef) resolves from the config as
 * an editor resolves it (a URL relative to the file's), and keeps resolving: not through the
 * folder a package manager keeps this version in, nor npx's cache.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { schemaRef } from '../../src/cli/init.js';

const dir = mkdtempSync(join(tmpdir(), 'switchyard-init-schema-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A switchyard package at `root`: its package.json and its schema. */
function pkg(root: string): string {
  mkdirSync(join(root, 'src', 'config'), { recursive: true });
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'switchyard' }));
  writeFileSync(join(root, 'src', 'config', 'hub.config.schema.json'), '{}');
  return root;
}

/** The file `ref` names, resolved from the config file as an editor does. */
function resolved(config: string, ref: string): string {
  return fileURLToPath(new URL(ref, pathToFileURL(config)));
}

describe('init: $schema', () => {
  it('in a clone: relative within it', () => {
    const clone = pkg(join(dir, 'clone'));
    expect(schemaRef(join(clone, 'hub.config.json'), clone)).toEqual({ ref: './src/config/hub.config.schema.json' });
    expect(schemaRef(join(clone, 'conf', 'hub.config.json'), clone)).toEqual({ ref: '../src/config/hub.config.schema.json' });
  });

  // pnpm runs the package from its store (a folder named for the version); the path written went
  // through it, and an upgrade left the config naming a folder that was gone.
  it("installed with the project: through the project's node_modules/switchyard, not the folder the package manager keeps this version in", () => {
    const proj = join(dir, 'proj');
    const root = pkg(join(proj, 'node_modules', '.pnpm', 'switchyard@0.1.0', 'node_modules', 'switchyard'));
    symlinkSync(join('.pnpm', 'switchyard@0.1.0', 'node_modules', 'switchyard'), join(proj, 'node_modules', 'switchyard'));
    const config = join(proj, 'conf', 'hub.config.json');
    expect(schemaRef(config, root)).toEqual({ ref: '../node_modules/switchyard/src/config/hub.config.schema.json' });
    expect(existsSync(resolved(config, schemaRef(config, root).ref))).toBe(true);
  });

  // `npx switchyard init` runs from npx's cache: a relative path into it broke when the config (or
  // the project) moved, and named a cache npm clears.
  it("from npx's cache or a global install: the schema's file URL, said in a note", () => {
    const root = pkg(join(dir, 'npm-cache', '_npx', '0123abcd', 'node_modules', 'switchyard'));
    const config = join(dir, 'elsewhere', 'hub.config.json');
    const r = schemaRef(config, root);
    expect(r.ref).toBe(pathToFileURL(join(root, 'src', 'config', 'hub.config.schema.json')).href);
    expect(existsSync(resolved(join(dir, 'moved', 'deeper', 'hub.config.json'), r.ref))).toBe(true);
    expect(r.outside).toMatch(/^"\$schema" names the schema of this switchyard, outside the config's project \(file:.*\): .*\(npx's cache, which npm clears now and then\); with switchyard a dependency of the project \(npm install --save-dev <your switchyard clone>, its folder: the npm registry's "switchyard" is another project\)/);
  });

  // The note said `npm install --save-dev switchyard`, which installs the registry's package of
  // that name: another project (README: never install it by name).
  it('elsewhere (a clone, or a global install of one): the note installs that folder, never the registry package by name', () => {
    const root = pkg(join(dir, 'my clone'));
    const r = schemaRef(join(dir, 'project', 'hub.config.json'), root);
    expect(r.outside).toContain(`(npm install --save-dev '${root}', its folder: the npm registry's "switchyard" is another project)`);
    expect(r.outside).not.toMatch(/npm install --save-dev switchyard\b/);
  });
});
