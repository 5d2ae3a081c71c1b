/**
 * `switchyard keys` and the loopback rule of `switchyard start`, through the real binary.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import { runCli, runCliBatch, type CliRun } from '../helpers/cli.js';
import { BIN, ROOT, nodeServer, startHub } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post } from '../helpers/wire.js';

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Several cases in one process (runCliBatch), after a test's first in a real one: `run`'s shape. */
async function batch(...cases: string[][]): Promise<ReturnType<typeof run>[]> {
  return (await runCliBatch(cases.map((args) => ({ args })))).map((r: CliRun) => ({ status: r.code, stdout: r.stdout, stderr: r.stderr }));
}

describe('switchyard keys', () => {
  it('add prints a new key once and stores only its SHA-256; the hub accepts it; remove takes it away', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-keys-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } }, null, 2));
    const add = run(['keys', 'add', 'carol', '--config', file, '--scope', 'math']);
    expect(add.status, add.stderr).toBe(0);
    const key = add.stdout.trim();
    expect(key).toMatch(/^sy_[A-Za-z0-9_-]{43}$/);
    expect(add.stderr).toMatch(/^switchyard keys add: API key for carol added to \S+hub\.config\.json\. It is shown only this once/);
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(key);
    expect(JSON.parse(text).auth.apiKeys).toEqual([{ principal: 'carol', sha256: sha256Hex(key), scopes: ['math'] }]);
    const [second, list, validate] = await batch(['keys', 'add', 'dave', '--config', file], ['keys', 'list', '--config', file], ['config', 'validate', '--config', file]);
    expect(second!.stdout.trim()).not.toBe(key);
    expect(list!.stdout).toMatch(/^carol\t[0-9a-f]{12}…\tmath\ndave\t[0-9a-f]{12}…\n$/);
    expect(validate!.status).toBe(0);

    const hub = await startHub(JSON.parse(readFileSync(file, 'utf8')), { dir });
    try {
      const ok = await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
      expect(ok.status, ok.text).toBe(200);
      const bad = await post(hub.url, modernBody(2, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}x` });
      expect(bad.status).toBe(401);
      expect(hub.logs.join('\n')).not.toContain(key);
    } finally {
      await hub.stop();
    }

    const [rm, again, rmDave, none] = await batch(['keys', 'remove', 'carol', '--config', file], ['keys', 'remove', 'carol', '--config', file], ['keys', 'remove', 'dave', '--config', file], ['keys', 'list', '--config', file]);
    expect(rm!.status, rm!.stderr).toBe(0);
    expect(again!.status).toBe(1);
    expect(rmDave!.status, rmDave!.stderr).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8')).auth.apiKeys).toEqual([]);
    // No key left: said on stderr (it printed nothing at all), exit 0, stdout empty for scripts.
    expect([none!.status, none!.stdout, none!.stderr]).toEqual([0, '', `switchyard keys list: note: no API keys in ${file} (\`switchyard keys add PRINCIPAL\` makes one)\n`]);
  }, 60_000); // a hub and CLI cases: at a load of 13 per CPU it ran past 30 s

  it('refuses a bad principal and a missing config file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-keys-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, '{}');
    // A config that is not valid JSON is located, never quoted: it may hold a literal secret.
    const brokenFile = join(dir, 'broken.json');
    writeFileSync(brokenFile, '{ "servers": { "x": { "headers": { "authorization": Bearer sk-live-SECRET123 } } } }');
    const bad = run(['keys', 'add', 'not a principal', '--config', file]);
    expect(bad.status).toBe(2);
    expect(bad.stdout).toBe('');
    expect(readFileSync(file, 'utf8')).toBe('{}');
    // The other cases in one process (runCliBatch).
    const names = ['hub', 'anonymous', 'Hub', 'ANONYMOUS', 'local'];
    const runs = await batch(...names.map((name) => ['keys', 'add', name, '--config', file]), ['keys', 'add', 'erin', '--config', join(dir, 'nope.json')], ['keys', 'add', 'erin', '--config', brokenFile]);
    // The ledger's own principals: a key holder of that name could not be told from them.
    for (const name of names) {
      const reserved = runs.shift()!;
      expect(reserved.status, name).toBe(2);
      expect(reserved.stderr).toContain(`"${name}" is reserved`);
    }
    expect(readFileSync(file, 'utf8')).toBe('{}');
    const missing = runs.shift()!;
    expect(missing.status).toBe(2);
    // A first run has no config yet: the line says what makes one.
    expect(missing.stderr).toMatch(/^switchyard keys add: \/\S*nope\.json: no such config file; `switchyard init --config \/.*nope\.json` writes a starter config there .*\n$/);
    const broken = runs.shift()!;
    expect(broken.status).toBe(2);
    expect(broken.stderr).toMatch(/^switchyard keys add: \S+broken\.json: .*not valid JSON \(unexpected character 'B'\)/);
    expect(broken.stderr).not.toContain('SECRET');
  }, 60_000); // eight CLI cases: at a load of 10 and more eight processes took over 30 s
});

describe('switchyard keys add of a --scope or --group given no value', () => {
  it('is a usage error (exit 2) and writes no key: without it the key was made for every group, and every scope it lacks', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-keys-'));
    const file = join(dir, 'hub.config.json');
    const config = JSON.stringify({ groups: { ro: { servers: ['x'] } }, servers: { x: { command: 'x' } } });
    writeFileSync(file, config);
    // The real process for the first; the others in one (runCliBatch).
    const first = run(['keys', 'add', 'carol', '--group', '--config', file]);
    const rest = await batch(['keys', 'add', 'carol', '--config', file, '--group'], ['keys', 'add', 'carol', '--scope', '--config', file], ['keys', 'add', 'carol', '--scope', '', '--config', file], ['keys', 'add', 'carol', '--scope', 'math', '--scope=', '--config', file]);
    const [last, scope, emptyScope, secondEmpty] = rest;
    for (const r of [first, last!]) expect([r.status, r.stdout, r.stderr]).toEqual([2, '', 'switchyard keys add: --group needs a value after it (see switchyard keys add --help)\n']);
    expect([scope!.status, scope!.stdout, scope!.stderr]).toEqual([2, '', 'switchyard keys add: --scope needs a value after it (see switchyard keys add --help)\n']);
    // An empty scope (a script's unset variable) is no scope a token could hold.
    for (const r of [emptyScope!, secondEmpty!]) expect([r.status, r.stdout, r.stderr]).toEqual([2, '', 'switchyard keys add: --scope is empty: give a scope, or leave the option out (an unset variable in a script?)\n']);
    expect(readFileSync(file, 'utf8')).toBe(config);
  });

  it('keys remove of an empty principal is a usage error naming it, as keys add of one is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-keys-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, '{}');
    const [r] = await batch(['keys', 'remove', '', '--config', file]);
    expect([r!.status, r!.stdout, r!.stderr]).toEqual([2, '', 'switchyard keys remove: the principal is empty: give one as `switchyard keys list` shows it (an unset variable in a script?)\n']);
  });
});

describe('switchyard keys through a symlinked config', () => {
  it('changes the file the link points to, the one the running hub reads: a removed key stops working', async () => {
    const OPS = 'sy_ops-symlink-keys-0123456789abcdefghijklmnopqrst';
    const hub = await startHub(
      { auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex(OPS), scopes: ['switchyard:admin'] }] }, servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } },
      { args: ['--no-watch'] },
    );
    try {
      chmodSync(hub.configFile, 0o640);
      const link = join(mkdtempSync(join(tmpdir(), 'switchyard-keys-link-')), 'live.json');
      symlinkSync(hub.configFile, link);
      const reload = async () => {
        const r = await runCli(['reload', '--url', hub.url], { env: { SWITCHYARD_API_KEY: OPS } });
        expect([r.code, r.stderr]).toEqual([0, '']);
        return r.stdout;
      };
      const status = async (key: string) => (await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` })).status;

      const add = run(['keys', 'add', 'erin', '--config', link]);
      expect(add.status, add.stderr).toBe(0);
      const key = add.stdout.trim();
      expect(await reload()).toBe('reloaded:\n  applied: auth.apiKeys\n');
      expect(await status(key)).toBe(200);

      const rm = run(['keys', 'remove', 'erin', '--config', link]);
      expect([rm.status, rm.stdout]).toEqual([0, 'removed 1 key of erin\n']);
      expect(await reload()).toBe('reloaded:\n  applied: auth.apiKeys\n');
      expect(await status(key)).toBe(401);
      // The link is still a link, its target kept its mode, and no temporary file was left.
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(statSync(hub.configFile).mode & 0o777).toBe(0o640);
      expect(readdirSync(dirname(hub.configFile)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
      expect(JSON.parse(readFileSync(hub.configFile, 'utf8')).auth.apiKeys.map((k: { principal: string }) => k.principal)).toEqual(['ops']);
    } finally {
      await hub.stop();
    }
  }, 60_000);
});

describe('switchyard start without authentication', () => {
  it('refuses a non-loopback host before binding anything, naming --host as where it came from', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-expose-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: {} }));
    // 192.0.2.1 (TEST-NET-1) is never a local address: even a broken check could not listen there.
    const r = run(['start', '--config', file, '--host', '192.0.2.1', '--port', '0']);
    expect(r.status).toBe(2);
    // Named as the option it came from.
    expect(r.stderr).toMatch(/^switchyard start: --host 192\.0\.2\.1: refusing to listen on 192\.0\.2\.1 without authentication/);
    expect(r.stdout).toBe('');
  });
});

describe('a config start refuses for its listen.host without authentication', () => {
  it('start refuses it naming the file and key, config validate refuses it too (exit 2, as start), and doctor fails it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-expose-config-'));
    const file = join(dir, 'hub.config.json');
    // 192.0.2.1 (TEST-NET-1): never a local address, so start cannot get as far as listening.
    const config = { listen: { host: '192.0.2.1', port: 0 }, ledger: { path: join(dir, 'ledger.db') }, servers: {} };
    writeFileSync(file, JSON.stringify(config));
    // With an API key configured the same host is fine for all three (the last case below).
    const keyed = join(dir, 'keyed.json');
    writeFileSync(keyed, JSON.stringify({ ...config, auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex('sy_test') }] } }));
    const start = run(['start', '--config', file]);
    expect(start.status).toBe(2);
    const refusal = /refusing to listen on 192\.0\.2\.1 without authentication/;
    // Named as the file and key it came from, as config validate names them.
    expect(start.stderr.startsWith(`switchyard start: ${file}: listen.host: `)).toBe(true);
    expect(start.stderr).toMatch(refusal);

    // The others in one process (runCliBatch).
    const [validate, doctor, fine] = (await batch(['config', 'validate', '--config', file], ['doctor', '--json', '--config', file], ['config', 'validate', '--config', keyed])) as ReturnType<typeof run>[];
    expect(validate!.status).toBe(2);
    expect(validate!.stdout).toBe('');
    expect(validate!.stderr).toMatch(/^switchyard config validate: \S+hub\.config\.json: listen\.host: refusing to listen on 192\.0\.2\.1 without authentication/);

    expect(doctor!.status).toBe(1);
    const findings = JSON.parse(doctor!.stdout) as { level: string; check: string; message: string }[];
    expect(findings.filter((f) => f.check === 'config')).toEqual([{ level: 'fail', check: 'config', message: expect.stringMatching(refusal) }]);

    expect(fine).toMatchObject({ status: 0, stdout: 'ok: 0 servers\n' });
  });

  it('the same for a TCP admin listener (listen.admin.host) off loopback: start, config validate and doctor refuse it, naming the key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-expose-admin-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ listen: { port: 0, admin: { host: '192.0.2.1', port: 7411 } }, ledger: { path: join(dir, 'ledger.db') }, servers: {} }));
    const start = run(['start', '--config', file]);
    expect([start.status, start.stdout]).toEqual([2, '']);
    expect(start.stderr.startsWith(`switchyard start: ${file}: listen.admin.host: refusing to listen on 192.0.2.1 without authentication`)).toBe(true);
    // The others in one process (runCliBatch).
    const [validate, doctor] = (await batch(['config', 'validate', '--config', file], ['doctor', '--json', '--url', 'http://127.0.0.1:1', '--config', file])) as ReturnType<typeof run>[];
    expect([validate!.status, validate!.stdout]).toEqual([2, '']);
    expect(validate!.stderr).toMatch(/^switchyard config validate: \S+hub\.config\.json: listen\.admin\.host: refusing to listen on 192\.0\.2\.1 without authentication/);
    const findings = JSON.parse(doctor!.stdout) as { level: string; check: string; message: string }[];
    expect(findings.filter((f) => f.check === 'config')).toEqual([{ level: 'fail', check: 'config', message: expect.stringContaining('listen.admin.host: refusing to listen on 192.0.2.1') }]);
  });
});
