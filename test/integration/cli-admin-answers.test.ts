/**
 * Who answered on the daemon's port, as the operator commands tell it: a switchyard daemon that
 * wants an admin key is named as one (and `doctor` does not start its upstreams a second time
 * to check them), and another program's page is not printed, only its status and content type.
 * The real built binary against a real built daemon, and against a plain HTTP server.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import { runCli, runCliBatch, type CliCase, type CliRun } from '../helpers/cli.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const ADMIN_KEY = 'sy_ops-answers-admin-key-0123456789abcdefghijklmno';
const USER_KEY = 'sy_user-answers-key-0123456789abcdefghijklmnopqrst';

/** The CLI with no admin key of the test's own environment unless `env` gives one. */
const run = (args: string[], env: NodeJS.ProcessEnv = {}, cwd?: string) => runCli(args, { cwd, env: { SWITCHYARD_API_KEY: '', ...env } });
/** The same cases in one process (runCliBatch), after a test's first in a real one. */
const batch = (cases: CliCase[]) => runCliBatch(cases.map((c) => ({ ...c, env: { SWITCHYARD_API_KEY: '', ...c.env } })));

type Json = Record<string, any>;

// doctor waits 5 s for the silent port's answer (the last test): it runs while the tests before
// it do, not after them, as nothing is shared.
let silentDoctor: Promise<{ d: CliRun; spawns: string }>;
let silent: NetServer | undefined;
beforeAll(async () => {
  silent = createNetServer(() => undefined); // takes connections, never answers
  await new Promise<void>((r) => silent!.listen(0, '127.0.0.1', r));
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-silent-daemon-'));
  const spawns = join(dir, 'spawns');
  const counted = `require('fs').appendFileSync(${JSON.stringify(spawns)}, process.pid + '\\n'); import(${JSON.stringify(pathToFileURL(join(ROOT, SDK1)).href)});`;
  const port = (silent.address() as { port: number }).port;
  writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ listen: { port }, ledger: { path: './ledger.db' }, servers: { counted: { command: process.execPath, args: ['-e', counted] } } }));
  silentDoctor = run(['doctor', '--json'], {}, dir).then((d) => ({ d, spawns }));
});
afterAll(async () => {
  await silentDoctor;
  silent?.close();
});

describe('a switchyard daemon that wants an admin key', () => {
  let hub: HubProcess;
  let spawns: string;
  const spawned = () => (existsSync(spawns) ? readFileSync(spawns, 'utf8').trim().split('\n').length : 0);
  beforeAll(async () => {
    hub = await startHub(
      { auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex(ADMIN_KEY), scopes: ['switchyard:admin'] }, { principal: 'user', sha256: sha256Hex(USER_KEY) }] }, servers: {} },
      { args: ['--no-watch'] },
    );
    // An upstream that counts its starts; and the daemon's real port in its config, so that
    // `doctor -c FILE` finds it there. (The file watch is off: the daemon reads neither.)
    spawns = join(hub.dir, 'spawns');
    const counted = `require('fs').appendFileSync(${JSON.stringify(spawns)}, process.pid + '\\n'); import(${JSON.stringify(pathToFileURL(join(ROOT, SDK1)).href)});`;
    const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Json;
    c.listen = { port: hub.port };
    c.servers = { counted: { command: process.execPath, args: ['-e', counted] } };
    writeFileSync(hub.configFile, JSON.stringify(c, null, 2));
    const r = await run(['reload', '--url', hub.url], { SWITCHYARD_API_KEY: ADMIN_KEY });
    expect(r.stdout, r.stderr).toMatch(/servers added: counted/);
    const ready = async () => {
      const res = await fetch(new URL('/admin/servers', hub.url), { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      return ((await res.json()) as { servers: { state: string }[] }).servers.every((x) => x.state === 'ready');
    };
    for (const end = Date.now() + 20_000; !(await ready()) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 100));
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('doctor -c FILE says so plainly and starts none of its upstreams; with the key it asks the daemon', async () => {
    expect(spawned()).toBe(1);
    const r = await run(['doctor', '-c', hub.configFile, '--json']);
    expect(r.code).toBe(1);
    const f = JSON.parse(r.stdout) as Json[];
    expect(f.find((x) => x.check === 'daemon')).toEqual({
      level: 'fail',
      check: 'daemon',
      message: `a switchyard daemon runs at http://127.0.0.1:${hub.port} and needs an admin key: set SWITCHYARD_API_KEY to one (HTTP 401: Unauthorized: authentication required)`,
    });
    expect(f.filter((x) => x.check === 'upstreams')).toEqual([
      { level: 'warn', check: 'upstreams', message: 'not checked: the daemon runs them (with its admin key in SWITCHYARD_API_KEY, doctor asks it)' },
    ]);
    expect(spawned()).toBe(1); // the daemon's own start only: no second copy to check it
    expect(r.stdout).not.toMatch(/another program/);

    // The other two keys in one process (runCliBatch).
    const [user, ok] = await batch([
      { args: ['doctor', '-c', hub.configFile, '--json'], env: { SWITCHYARD_API_KEY: USER_KEY } },
      { args: ['doctor', '-c', hub.configFile, '--json'], env: { SWITCHYARD_API_KEY: ADMIN_KEY } },
    ]);
    // A key that is no admin's: 403, said as such.
    expect(user!.code).toBe(1);
    expect((JSON.parse(user!.stdout) as Json[]).filter((x) => x.check === 'daemon' || x.check === 'upstreams')).toEqual([
      {
        level: 'fail',
        check: 'daemon',
        message: `a switchyard daemon runs at http://127.0.0.1:${hub.port}; the key in SWITCHYARD_API_KEY is not an admin key (HTTP 403: Forbidden: the operator routes need the admin scope): set it to a key with the switchyard:admin scope`,
      },
      { level: 'warn', check: 'upstreams', message: expect.stringMatching(/^not checked/) },
    ]);
    expect(spawned()).toBe(1);

    const g = JSON.parse(ok!.stdout) as Json[];
    expect(g.find((x) => x.check === 'daemon')).toMatchObject({ level: 'ok', message: expect.stringMatching(/running at/) });
    expect(g.filter((x) => x.check === 'upstreams')).toEqual([{ level: 'ok', check: 'upstreams', message: expect.stringMatching(/^counted \(stdio, 2025-11-25\) ready/) }]);
    expect(spawned()).toBe(1);
  });

  it('servers, tools and reload say the same, and a key the daemon does not know is named as refused', async () => {
    const base = `http://127.0.0.1:${hub.port}`;
    const cmds = [['servers'], ['tools'], ['reload']];
    const runs = [
      await run([...cmds[0]!, '-c', hub.configFile]),
      ...(await batch([
        ...cmds.slice(1).map((cmd) => ({ args: [...cmd, '-c', hub.configFile] })),
        { args: ['servers', '-c', hub.configFile], env: { SWITCHYARD_API_KEY: 'sy_not-a-key-of-this-daemon-0123456789abcdefghijk' } },
      ])),
    ];
    for (const cmd of cmds) {
      const r = runs.shift()!;
      expect([r.code, r.stdout], cmd[0]).toEqual([1, '']);
      expect(r.stderr, cmd[0]).toBe(`switchyard ${cmd[0]}: a switchyard daemon runs at ${base} and needs an admin key: set SWITCHYARD_API_KEY to one (HTTP 401: Unauthorized: authentication required)\n`);
    }
    const wrong = runs.shift()!;
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(new RegExp(`^switchyard servers: a switchyard daemon runs at ${base} and refused the key in SWITCHYARD_API_KEY \\(HTTP 401: Unauthorized: .+\\): set it to one of its admin keys\\n$`));
  });
});

describe('another program on the port', () => {
  let other: Server;
  let base: string;
  const page = `<!DOCTYPE html><html><head><title>Dev server</title></head><body>${'<p>Cannot GET this path</p>'.repeat(40)}</body></html>`;
  beforeAll(async () => {
    other = createServer((req, res) => {
      res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' });
      res.end(page);
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
  });
  afterAll(() => void other?.close());

  it('is told by status and content type, not by printing its page', async () => {
    const asked = [
      [['servers'], '/admin/servers'],
      [['tools'], '/admin/tools?all=1'],
      [['reload'], '/admin/reload'],
    ] as const;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-other-program-'));
    writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ listen: { port: Number(new URL(base).port) }, ledger: { path: './ledger.db' }, servers: {} }));
    const runs = [
      await run([...asked[0][0], '--url', base]),
      ...(await batch([...asked.slice(1).map(([cmd]) => ({ args: [...cmd, '--url', base] })), { args: ['doctor', '--json'], cwd: dir }])),
    ];
    for (const [cmd, path] of asked) {
      const r = runs.shift()!;
      expect([r.code, r.stdout], cmd[0]).toEqual([1, '']);
      expect(r.stderr, cmd[0]).toBe(`switchyard ${cmd[0]}: ${base}${path} answered HTTP 404 (text/html), which is not a switchyard daemon's answer: is another program on that port?\n`);
    }
    // doctor finds it at the address of the config it checks.
    const d = runs.shift()!;
    expect(d.code).toBe(1);
    expect((JSON.parse(d.stdout) as Json[]).find((x) => x.check === 'daemon')).toEqual({
      level: 'fail',
      check: 'daemon',
      message: `${base}/admin/servers answered HTTP 404 (text/html), which is not a switchyard daemon's answer: is another program on that port?`,
    });
    expect(d.stdout + d.stderr).not.toMatch(/<html|Cannot GET/i);
  });
});

describe('another program on the port that answers JSON', () => {
  let other: Server;
  let base: string;
  beforeAll(async () => {
    // JSON, but none of a hub's: its own fields, a "servers" that is no list, an array.
    other = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(req.url?.startsWith('/admin/tools') ? '[]' : JSON.stringify({ hello: 'world', servers: req.url?.includes('servers') ? 'nope' : undefined }));
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
  });
  afterAll(() => void other?.close());

  const notAHub = (route: string) => `the program on ${base} is not a switchyard hub (its answer to ${route} is not what a hub sends)`;

  it('is named as not a hub by every command that reads it (exit 1), never a TypeError', async () => {
    const asked = [
      [['servers'], '/admin/servers'],
      [['servers', '--json'], '/admin/servers'],
      [['tools'], '/admin/tools'],
      [['tools', '--json'], '/admin/tools'],
      [['tools', '--format', 'openai'], '/admin/tools'],
      [['tools', '--kind', 'prompt'], '/admin/tools'],
      [['reload'], '/admin/reload'],
      [['servers', 'restart', 'notes'], '/admin/servers/notes/restart'],
    ] as const;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-other-json-'));
    writeFileSync(join(dir, 'hub.config.json'), JSON.stringify({ listen: { port: Number(new URL(base).port) }, ledger: { path: './ledger.db' }, servers: {} }));
    const runs = [
      await run([...asked[0][0], '--url', base]),
      ...(await batch([...asked.slice(1).map(([cmd]) => ({ args: [...cmd, '--url', base] })), { args: ['doctor', '--json'], cwd: dir }])),
    ];
    for (const [cmd, route] of asked) {
      const r = runs.shift()!;
      expect([r.code, r.stdout, r.stderr], cmd.join(' ')).toEqual([1, '', `switchyard ${cmd[1] === 'restart' ? 'servers restart' : cmd[0]}: ${notAHub(route)}\n`]);
    }
    // doctor says so as its daemon finding, and goes on to its other checks.
    const d = runs.shift()!;
    expect([d.code, d.stderr]).toEqual([1, '']);
    const f = JSON.parse(d.stdout) as Json[];
    expect(f.find((x) => x.check === 'daemon')).toEqual({ level: 'fail', check: 'daemon', message: notAHub('/admin/servers') });
    expect(f.find((x) => x.check === 'config')).toMatchObject({ level: 'ok' });
  }, 60_000);
});

describe('a daemon older than `tools --kind`', () => {
  it('answers tools to a list of prompts: said, exit 1, not listed as prompts', async () => {
    const old = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ tools: [{ name: 'a__echo', server: 'a', upstreamName: 'echo', era: null, trust: 'untrusted', flags: [] }] }));
    });
    await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(old.address() as { port: number }).port}`;
    try {
      const [r, exported] = await batch([{ args: ['tools', '--kind', 'prompt', '--url', base] }, { args: ['tools', 'export', '--format', 'openai', '--kind', 'template', '--url', base] }]);
      expect([r.code, r.stdout, r.stderr]).toEqual([1, '', `switchyard tools: the daemon at ${base} is older than \`tools --kind\`: it lists tools only (\`tools diff NAME --kind prompt\` shows a pending change from the ledger)\n`]);
      // An export is of tools: --kind (of `tools`, which reaches export) is refused, not ignored.
      expect([exported.code, exported.stdout, exported.stderr]).toEqual([2, '', 'switchyard tools export: --kind template: --format exports tools only\n']);
    } finally {
      old.close();
    }
  });
});

describe('something on the port that does not answer in time', () => {
  it('doctor says so and starts none of the upstreams: it may be a busy daemon running them', async () => {
    const { d, spawns } = await silentDoctor;
    const f = JSON.parse(d.stdout) as Json[];
    expect(f.find((x) => x.check === 'daemon')?.message).toMatch(/^no answer within 5 s \[at http:\/\/127\.0\.0\.1:\d+\] \(a switchyard daemon that is busy, or another program\?\)$/);
    expect(f.find((x) => x.check === 'upstreams')).toMatchObject({ level: 'warn', message: expect.stringMatching(/^not checked/) });
    expect(existsSync(spawns)).toBe(false);
  }, 30_000);
});
