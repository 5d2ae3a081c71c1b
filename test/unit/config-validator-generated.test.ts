/**
 * The config validator the build generates (src/config/generate-validator.ts): used only when it
 * was generated from the schema the hub reads, with the very messages of ajv compiling the schema
 * at run time, which remains the fallback (no build step, an old build, a schema edited since).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { writeValidatorModule } from '../../src/config/generate-validator.js';
import { compileSchema, schemaFile, validateWith, type Compiled } from '../../src/config/schema.js';
import { packageRoot } from '../../src/paths.js';

const schemaText = readFileSync(schemaFile(), 'utf8');
const built = join(packageRoot, 'dist/src/config/hub-config-validator.generated.cjs');

/** Bad configs reaching the root, the $defs compiled as functions of their own, inherited x-error, defaults. */
const BAD: unknown[] = [
  { listen: { port: 70000 }, servers: {} },
  { lisen: {}, servers: {} },
  { servers: {}, mcpServers: {} },
  { servers: { 'bad id': { command: 'x' } } },
  { servers: { a: { command: 'x', url: 'http://h' } } },
  { servers: { a: { command: 'x', prefix: '_p_' } } },
  { servers: { a: { url: 'http://h', oauth: { clientSecret: 's' } } } },
  { servers: { a: { command: 'x', timeoutMs: '5 parsecs', env: { A: 1 } } }, listen: { port: 'x' } },
  { auth: { apiKeys: [{ sha256: 'nothex' }] }, servers: {} },
  { servers: 'all of them' },
];

function outcome(c: Compiled, doc: unknown): { problems: string[]; filled: unknown } {
  const copy = structuredClone(doc);
  return { problems: validateWith(c, copy), filled: copy };
}

describe('the generated config validator', () => {
  it('is made by the build, from the schema the hub reads, and then used', () => {
    // The suite's build (test/global-setup.ts) runs the generator as `npm run build` does.
    expect(existsSync(built), built).toBe(true);
    expect(compileSchema(schemaText, built).from).toBe('generated');
    const pkg = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.build).toMatch(/^tsc -p \. && node dist\/src\/config\/generate-validator\.js$/);
  });

  it('gives the messages and the defaults of ajv compiling the schema at run time', () => {
    const generated = compileSchema(schemaText, built);
    const compiled = compileSchema(schemaText, join(tmpdir(), 'no-such-validator.cjs'));
    expect(compiled.from).toBe('compiled');
    for (const doc of [...BAD, { servers: {} }]) expect(outcome(generated, doc), JSON.stringify(doc)).toEqual(outcome(compiled, doc));
    expect(outcome(generated, BAD[3]).problems).toEqual(['servers.bad id: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "bad-id")']);
    expect(outcome(generated, { servers: {} }).filled).toMatchObject({ listen: { host: '127.0.0.1', port: 7410 } });
  });

  it('is not used once the schema changed (a stale build): the schema is compiled instead', () => {
    const edited = schemaText.replace('"maximum": 65535,', '"maximum": 60000,').replace('server id must match', 'an id must match');
    expect(edited).not.toBe(schemaText);
    // Inside the package, as the build's: the code requires ajv's runtime helpers.
    const dir = mkdtempSync(join(packageRoot, 'dist', '.validator-test-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const stale = join(dir, 'v.cjs');
    writeValidatorModule(edited, stale);
    // The module works for the schema it was made from...
    const forEdited = compileSchema(edited, stale);
    expect(forEdited.from).toBe('generated');
    expect(outcome(forEdited, { listen: { port: 62000 }, servers: { 'bad id': { command: 'x' } } }).problems).toEqual([
      'listen.port: must be <= 60000',
      'servers.bad id: an id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "bad-id")',
    ]);
    // ...and is not used for another.
    const forCurrent = compileSchema(schemaText, stale);
    expect(forCurrent.from).toBe('compiled');
    expect(outcome(forCurrent, { listen: { port: 62000 }, servers: { 'bad id': { command: 'x' } } }).problems).toEqual([
      'servers.bad id: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "bad-id")',
    ]);
  });

  it('falls back to compiling when the module is missing or broken', () => {
    for (const file of [join(tmpdir(), 'no-such-validator.cjs'), schemaFile() /* not a module */]) {
      const c = compileSchema(schemaText, file);
      expect(c.from).toBe('compiled');
      expect(outcome(c, BAD[0]).problems).toEqual(['listen.port: must be <= 65535']);
    }
  });
});

describe('ajv', () => {
  // ~0.2 s of CPU at every start: loaded only to compile, which a hub needs at its first
  // tool call (tool schemas) and never for its config once the build generated the validator.
  it('is loaded neither to read the config nor to make the hub\'s tool schema validator, only to compile', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-ajv-load-'));
    const config = join(dir, 'hub.config.json');
    writeFileSync(config, JSON.stringify({ servers: { a: { command: 'x' } } }));
    const at = (p: string) => JSON.stringify(pathToFileURL(join(packageRoot, 'dist/src', p)).href);
    const script = `
      import { createRequire } from 'node:module';
      const cache = createRequire(import.meta.url).cache;
      const ajv = () => Object.keys(cache).some((k) => /node_modules.ajv.dist.(2020|ajv|core)\\.js$/.test(k));
      const { loadConfig } = await import(${at('config/load.js')});
      const { SchemaValidator } = await import(${at('policy/validate.js')});
      const { silentLogger } = await import(${at('log.js')});
      const servers = Object.keys(loadConfig(${JSON.stringify(config)}).servers);
      const v = new SchemaValidator(silentLogger);
      const before = ajv();
      const verdict = v.checkArgs('t', { inputSchema: { type: 'object', required: ['a'] } }, {});
      console.log(JSON.stringify({ servers, before, verdict: verdict.ok, after: ajv() }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ servers: ['a'], before: false, verdict: false, after: true });
  });
});
