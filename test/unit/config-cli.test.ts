import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';

// The built command module, mounted in yargs exactly as src/cli/main.ts does, run from a
// foreign working directory: proves the schema is found from dist/. (A driver of our own
// keeps this test independent of the other commands main.js pulls in.)
const dir = mkdtempSync(join(tmpdir(), 'switchyard-cli-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CLI = join(dir, 'cli.mjs');
const url = (p: string) => JSON.stringify(pathToFileURL(join(packageRoot, p)).href);
writeFileSync(
  CLI,
  `import yargs from ${url('node_modules/yargs/index.mjs')};
import { configCommand } from ${url('dist/src/cli/config.js')};
await yargs(process.argv.slice(2)).scriptName('switchyard').command(configCommand).demandCommand(1).strict().parseAsync();
`,
);

function validate(config: unknown, args: string[] = [], env: Record<string, string> = {}) {
  const file = join(dir, 'hub.config.json');
  writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
  const r = spawnSync(process.execPath, [CLI, 'config', 'validate', ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('switchyard config validate', () => {
  it('prints "ok: N servers" for a valid config (hub.config.json in the current folder by default)', () => {
    const r = validate({
      $schema: './src/config/hub.config.schema.json',
      servers: { a: { command: 'node' }, b: { url: 'https://${env:HOST}/mcp' } },
    }, [], { HOST: 'example.test' });
    expect(r).toEqual({ status: 0, stdout: 'ok: 2 servers\n', stderr: '' });
  });

  it('warns of a setting the hub ignores (a group naming no configured server), exit 0', () => {
    const r = validate({ servers: { notes: { command: 'node' } }, groups: { g: { servers: ['ntoes'] } } });
    expect(r).toEqual({
      status: 0,
      stdout: 'ok: 1 server\n',
      stderr: 'switchyard config validate: warning: groups.g.servers names "ntoes", which is not a configured server: /mcp/g shows nothing of it (servers: notes)\n',
    });
  });

  // start refused these as the config's errors (exit 2) while validate said "ok".
  it('refuses an auth.oauth start would refuse: an unreadable jwksFile, a plain-http jwksUri off loopback', () => {
    const missing = validate({ auth: { oauth: { issuer: 'https://issuer.test', jwksFile: 'no-such-jwks.json' } }, servers: {} });
    expect(missing).toEqual({ status: 2, stdout: '', stderr: `switchyard config validate: hub.config.json: auth.oauth.jwksFile: cannot read a JSON Web Key Set from ${join(dir, 'no-such-jwks.json')} (ENOENT)\n` });
    const plain = validate({ auth: { oauth: { issuer: 'https://issuer.test', jwksUri: 'http://issuer.test/jwks' } }, servers: {} });
    expect(plain).toEqual({ status: 2, stdout: '', stderr: 'switchyard config validate: hub.config.json: auth.oauth.jwksUri: must be https (plain http only on loopback)\n' });
    writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [] }));
    expect(validate({ auth: { oauth: { issuer: 'https://issuer.test', jwksFile: 'jwks.json' } }, servers: {} })).toEqual({ status: 0, stdout: 'ok: 0 servers\n', stderr: '' });
  });

  it('reads --config and accepts mcpServers', () => {
    const other = join(dir, 'ide.json');
    writeFileSync(other, JSON.stringify({ mcpServers: { fs: { type: 'stdio', command: 'npx' } } }));
    const r = validate({}, ['--config', other]);
    expect(r.stdout).toBe('ok: 1 server\n');
    expect(r.status).toBe(0);
  });

  it('prints one line per problem and exits 2, a config error (as start and reload)', () => {
    const r = validate({
      listen: { port: 'x' },
      servers: { notes: { command: 'a', url: 'http://x' }, gh: { url: 'https://x', headers: { Authorization: '${env:GITHUB_TOKEN}' } } },
    });
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      'switchyard config validate: hub.config.json: servers.gh.headers.Authorization: environment variable GITHUB_TOKEN is not set',
      'switchyard config validate: hub.config.json: listen.port: must be integer',
      'switchyard config validate: hub.config.json: servers.notes: must have exactly one of "command" or "url"',
    ]);
  });

  it('reports a missing file and broken JSON without a stack trace', () => {
    const missing = spawnSync(process.execPath, [CLI, 'config', 'validate', '-c', join(dir, 'absent.json')], { encoding: 'utf8' });
    expect(missing.status).toBe(2);
    // A first run has no config yet: the line says what to run, quoted for a shell when it has to be.
    // One line, the file named once (it said "FILE: invalid config" above "config: cannot read FILE (ENOENT): no such file; …").
    expect(missing.stderr).toMatch(/^switchyard config validate: \/\S*absent\.json: no such config file; `switchyard init --config \/\S*absent\.json` writes a starter config there [^\n]*\n$/);
    const spaced = spawnSync(process.execPath, [CLI, 'config', 'validate', '-c', join(dir, "it's absent.json")], { encoding: 'utf8' });
    expect(spaced.stderr).toContain(`\`switchyard init --config '${join(dir, "it'\\''s absent.json")}'\``);
    const empty = mkdtempSync(join(dir, 'empty-'));
    const here = spawnSync(process.execPath, [CLI, 'config', 'validate'], { cwd: empty, encoding: 'utf8' });
    expect([here.status, here.stderr]).toEqual([2, 'switchyard config validate: hub.config.json: no such config file; `switchyard init` writes a starter config here (--from FILE imports an IDE\'s servers), or give the path of yours with --config\n']);
    // `start`, the first command of a first run, says it in the same one line, as its own.
    const start = spawnSync(process.execPath, [join(packageRoot, 'dist/src/cli/main.js'), 'start'], { cwd: empty, encoding: 'utf8' });
    expect([start.status, start.stderr]).toEqual([2, here.stderr.replace('switchyard config validate: ', 'switchyard start: ')]);
    // So does `stdio` (its stderr, an IDE's log of it), its stdout left to the protocol.
    const stdio = spawnSync(process.execPath, [join(packageRoot, 'dist/src/cli/main.js'), 'stdio'], { cwd: empty, encoding: 'utf8', input: '' });
    expect([stdio.status, stdio.stdout, stdio.stderr]).toEqual([2, '', here.stderr.replace('switchyard config validate: ', 'switchyard stdio: ')]);
    const broken = validate('{"servers": ');
    expect(broken.status).toBe(2);
    expect(broken.stderr).toBe('switchyard config validate: hub.config.json: config: not valid JSON (unexpected end of input)\n');
  });
});
