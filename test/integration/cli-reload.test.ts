/**
 * `switchyard reload`: the running daemon reads its config file again and says what changed,
 * what it refused and why, what waits for a restart and which plugins it runs without. The
 * real built binary against the real built daemon (its file watch off, so only the command
 * reloads; and on, so the watch applies an edit before the command asks), with and without
 * authentication.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import { runCli, runCliBatch } from '../helpers/cli.js';
import { loggedTimes } from '../helpers/config-edit.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, waitForReady } from '../helpers/wire.js';
import { freePortInRange } from '../helpers/port-range.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';
const ADMIN_KEY = 'sy_ops-reload-admin-key-0123456789abcdefghijklmnop';
const USER_KEY = 'sy_user-reload-key-0123456789abcdefghijklmnopqrstu';

/** The CLI with no admin key of the test's own environment unless `env` gives one. */
const run = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, { env: { SWITCHYARD_API_KEY: '', ...env } });

function edit(hub: HubProcess, change: (c: Record<string, any>) => void): void {
  const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Record<string, any>;
  change(c);
  writeFileSync(hub.configFile, JSON.stringify(c, null, 2));
}

describe('switchyard reload', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { a: nodeServer(SDK1, [], { SERVER_NAME: 'a' }) } }, { args: ['--no-watch'] });
    await waitForReady(hub.url, ['a']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('says there was nothing to change, then names the servers and sections it changed and what waits for a restart', async () => {
    const none = await run(['reload', '--url', hub.url]);
    expect([none.code, none.stdout, none.stderr]).toEqual([0, 'reloaded: nothing changed\n', '']);

    edit(hub, (c) => {
      c.servers.b = { command: process.execPath, args: [`${ROOT}/${SDK2}`] };
      c.pageSize = 5;
      c.listen = { port: 1 };
    });
    const r = await run(['reload', '--url', hub.url]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'reloaded:\n' +
        '  servers added: b\n' +
        '  applied: pageSize\n' +
        '  changed, but only a restart applies them (the running values are kept): listen.port\n',
    );
    await waitForReady(hub.url, ['a', 'b']);

    // Nothing new: the last reload that changed something is told, with its time.
    const json = await run(['reload', '--url', hub.url, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      status: 'applied',
      report: {
        added: [],
        removed: [],
        restarted: [],
        updated: [],
        disabled: [],
        applied: [],
        restartOnly: ['listen.port'],
        pluginsFailed: [],
        pluginsNotLoaded: [],
        earlier: { at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), report: { added: ['b'], removed: [], restarted: [], updated: [], disabled: [], applied: ['pageSize'], restartOnly: ['listen.port'], pluginsFailed: [] } },
      },
    });
    expect(hub.logs.filter((l) => l.includes('config reload requested (POST /admin/reload)'))).toHaveLength(3);
  }, 60_000); // three CLI processes and a server's start: at a load of 15 per CPU it ran past 30 s

  it('a config that does not load is refused with every problem, exit 2, and the hub runs on as it was', async () => {
    const before = readFileSync(hub.configFile, 'utf8');
    edit(hub, (c) => {
      c.servers.c = { command: 42 };
      c.pageSize = -1;
    });
    const r = await run(['reload', '--url', hub.url]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    // Said as the command's, as its other errors are.
    expect(r.stderr).toMatch(/^switchyard reload: config reload rejected; the running config is kept:\n/);
    expect(r.stderr).toContain('servers.c.command');
    expect(r.stderr).toContain('pageSize');
    expect((await health(hub.url)).servers.map((s) => s.id).sort()).toEqual(['a', 'b']);
    writeFileSync(hub.configFile, before);
  });

  it('a plugin that cannot be loaded is named (as the command\'s, on stderr), and the command fails although the rest was applied (said on stdout)', async () => {
    writeFileSync(join(hub.dir, 'broken.mjs'), 'export default {');
    edit(hub, (c) => {
      c.plugins = { paths: ['./broken.mjs'] };
    });
    // This and the same asked again (nothing new) in one process (runCliBatch).
    const [r, again] = await runCliBatch([0, 1].map(() => ({ args: ['reload', '--url', hub.url], env: { SWITCHYARD_API_KEY: '' } })));
    expect(r!.code).toBe(1);
    expect(r!.stdout).toMatch(/^reloaded:\n {2}applied: plugins\n/);
    expect(r!.stderr).toMatch(/^switchyard reload: plugins that could not be loaded \(the hub runs without them, but where a line says the version loaded before runs on\):\n {2}\S*broken\.mjs: .+\n$/);
    // Asked again with nothing new: the plugin is still not loaded, and the command still fails.
    expect(again!.code).toBe(1);
    expect(again!.stdout).toMatch(
      /^reloaded: nothing new since \S+, when the daemon applied this file \(its file watch, SIGHUP or an earlier reload\):\n {2}applied: plugins\n {2}changed, but only a restart applies them \(the running values are kept\): listen\.port\n$/,
    );
    expect(again!.stderr).toMatch(/^switchyard reload: plugins that could not be loaded \(the hub runs without them, but where a line says the version loaded before runs on\):\n {2}\S*broken\.mjs: .+\n$/);
    edit(hub, (c) => {
      delete c.plugins;
    });
    // (listen still differs from the first test's edit: it waits for a restart.)
    expect((await run(['reload', '--url', hub.url])).stdout).toBe('reloaded:\n  applied: plugins\n  changed, but only a restart applies them (the running values are kept): listen.port\n');
  });

  it('the route acts only on POST and refuses another origin; with no daemon the command exits 3', async () => {
    const origin = new URL(hub.url).origin;
    const get = await fetch(`${origin}/admin/reload`);
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
    const cross = await fetch(`${origin}/admin/reload`, { method: 'POST', headers: { origin: 'http://evil.example.com' } });
    expect(cross.status).toBe(403);
    expect(hub.logs.filter((l) => l.includes('config reload requested'))).toHaveLength(7); // neither reached it

    // A port that was free a moment ago: nothing listens there.
    const unused = await freePortInRange();
    const gone = await run(['reload', '--url', `http://127.0.0.1:${unused}`]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toBe(`switchyard reload: no switchyard daemon is running at http://127.0.0.1:${unused} (start one with \`switchyard start\`)\n`);
  });

  it('a disabled entry the config brings, then drops, is named each time: disabled, then removed', async () => {
    edit(hub, (c) => {
      c.servers.off = { command: process.execPath, args: [`${ROOT}/${SDK1}`], disabled: true };
    });
    const added = await run(['reload', '--url', hub.url]);
    expect([added.code, added.stdout]).toEqual([0, 'reloaded:\n  servers disabled in the config (not started): off\n  changed, but only a restart applies them (the running values are kept): listen.port\n']);
    edit(hub, (c) => {
      delete c.servers.off;
    });
    // It said nothing new, naming the reload that had brought the entry as the one that applied this file.
    const [removed, listed] = await runCliBatch([
      { args: ['reload', '--url', hub.url, '--json'], env: { SWITCHYARD_API_KEY: '' } },
      { args: ['servers', '--url', hub.url, '--json'], env: { SWITCHYARD_API_KEY: '' } },
    ]);
    expect(removed!.code).toBe(0);
    expect(JSON.parse(removed!.stdout)).toMatchObject({ status: 'applied', report: { removed: ['off'], disabled: [] } });
    expect(JSON.parse(removed!.stdout).report.earlier).toBeUndefined();
    expect(JSON.parse(listed!.stdout).disabled ?? []).toEqual([]);
  });
});

describe('switchyard reload against a daemon of a build before it', () => {
  it('says it is a switchyard daemon without the route and what to do instead (SIGHUP), not "another program" (reload, servers restart)', async () => {
    // Such a daemon's answers: /admin/servers as it has always been, no route /admin/reload
    // (a 405 without a body, as those builds gave an unknown admin path).
    const older = createHttpServer((req, res) => {
      if (req.url === '/admin/servers') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ servers: [], pid: 4242, version: '0.1.0' }));
      res.writeHead(405).end();
    });
    await new Promise<void>((r) => older.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(older.address() as { port: number }).port}`;
      const r = await run(['reload', '--url', url]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`switchyard reload: the switchyard daemon at ${url} (pid 4242) is of a build without \`switchyard reload\`: send it SIGHUP, which reloads its config file\n`);
      const restart = await run(['servers', 'restart', 'a', '--url', url]);
      expect(restart.code).toBe(1);
      expect(restart.stderr).toMatch(/^switchyard servers restart: the switchyard daemon at .* \(pid 4242\) is of a build without `switchyard servers restart`: restart the daemon/);
    } finally {
      await new Promise((r) => older.close(r));
    }
  });
});

describe('switchyard reload after the file watch applied the edit', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-reload-watch-'));
    writeFileSync(join(dir, 'early.mjs'), 'export default {');
    hub = await startHub({ servers: { a: nodeServer(SDK1, [], { SERVER_NAME: 'a' }) }, plugins: { paths: ['./early.mjs'] } }, { dir });
    await waitForReady(hub.url, ['a']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('says what that reload changed and when, and fails while a plugin is not loaded', async () => {
    // A plugin that could not be loaded at the start is not loaded now: nothing changed, but exit 1.
    const first = await run(['reload', '--url', hub.url]);
    expect([first.code, first.stdout]).toEqual([1, 'reloaded: nothing changed\n']);
    expect(first.stderr).toMatch(/^switchyard reload: plugins that could not be loaded \(the hub runs without them, but where a line says the version loaded before runs on\):\n {2}\S*early\.mjs: .+\n$/);
    await loggedTimes(hub, '"msg":"config reloaded"', 1);

    const before = Date.now();
    writeFileSync(join(hub.dir, 'broken.mjs'), 'export default {');
    edit(hub, (c) => {
      c.servers.b = { command: process.execPath, args: [`${ROOT}/${SDK2}`] };
      c.plugins = { paths: ['./broken.mjs'] };
    });
    // The daemon's watch applies the edit on its own, before the command asks.
    await loggedTimes(hub, '"msg":"config reloaded"', 2);
    const r = await run(['reload', '--url', hub.url]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^switchyard reload: plugins that could not be loaded \(the hub runs without them, but where a line says the version loaded before runs on\):\n {2}\S*broken\.mjs: .+\n$/);
    const m = /^reloaded: nothing new since (\S+), when the daemon applied this file \(its file watch, SIGHUP or an earlier reload\):\n {2}servers added: b\n {2}applied: plugins\n$/.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    const at = Date.parse(m![1]!);
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now());
    await waitForReady(hub.url, ['a', 'b']);

    // Fixed by the next edit (the watch again): nothing is wrong any more, exit 0.
    edit(hub, (c) => {
      delete c.plugins;
    });
    await loggedTimes(hub, '"msg":"config reloaded"', 4);
    const ok = await run(['reload', '--url', hub.url]);
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(ok.stdout).toMatch(/^reloaded: nothing new since \S+, when the daemon applied this file \(its file watch, SIGHUP or an earlier reload\):\n {2}applied: plugins\n$/);
   }, 60_000); // as the first test: three CLI processes and the watch's reloads
});

describe('switchyard reload with authentication on', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub(
      { auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex(ADMIN_KEY), scopes: ['switchyard:admin'] }, { principal: 'user', sha256: sha256Hex(USER_KEY) }] }, servers: {} },
      { args: ['--no-watch'] },
    );
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  it('needs an admin key, read from SWITCHYARD_API_KEY', async () => {
    const none = await run(['reload', '--url', hub.url]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^switchyard reload: a switchyard daemon runs at \S+ and needs an admin key: set SWITCHYARD_API_KEY to one \(HTTP 401: /);
    expect(hub.logs.some((l) => l.includes('config reload requested'))).toBe(false);
    // The user's key, then the admin's, in one process (runCliBatch).
    const [user, ops] = await runCliBatch([USER_KEY, ADMIN_KEY].map((key) => ({ args: ['reload', '--url', hub.url], env: { SWITCHYARD_API_KEY: key } })));
    expect(user!.code).toBe(1);
    expect(user!.stderr).toMatch(/^switchyard reload: a switchyard daemon runs at \S+; the key in SWITCHYARD_API_KEY is not an admin key \(HTTP 403: /);
    expect([ops!.code, ops!.stdout]).toEqual([0, 'reloaded: nothing changed\n']);
    // One reload reached the daemon, the admin's: neither the missing key nor the user's did.
    const requested = hub.logs.filter((l) => l.includes('config reload requested'));
    expect(requested).toHaveLength(1);
    expect(requested[0]).toContain('"principal":"ops"');
  });
});

describe('switchyard reload, servers and doctor of a config left mid-edit', () => {
  it('say the file gives no address (exit 2), not that no daemon runs at the default one; --url still reaches it', async () => {
    // The daemon runs at the port its config names, as `switchyard start` of that file runs it.
    const port = await freePortInRange();
    const hub = await startHub({ listen: { port }, servers: {} }, { port, args: ['--no-watch'] });
    try {
      const c = ['-c', hub.configFile];
      expect((await run(['servers', ...c])).code).toBe(0);
      // A trailing comma, as an edit leaves one: the default address (7410) was asked instead,
      // "no switchyard daemon is running … (start one with `switchyard start`)", exit 3.
      const broken = JSON.stringify({ listen: { port }, servers: {} }).replace(/}$/, ',}');
      writeFileSync(hub.configFile, broken);
      const [reload, servers, doctor, byUrl] = await runCliBatch([
        { args: ['reload', ...c], env: { SWITCHYARD_API_KEY: '' } },
        { args: ['servers', ...c], env: { SWITCHYARD_API_KEY: '' } },
        { args: ['doctor', ...c], env: { SWITCHYARD_API_KEY: '' } },
        { args: ['reload', ...c, '--url', hub.url], env: { SWITCHYARD_API_KEY: '' } },
      ]);
      const where = `${hub.configFile}: not valid JSON (line 1 column ${broken.length - 1}: a trailing comma before '}', which JSON does not allow: remove it)`;
      const line = (cmd: string) => `switchyard ${cmd}: ${where}: the daemon's address is read from it; fix the file, or give the address with --url\n`;
      expect([reload!.code, reload!.stdout, reload!.stderr]).toEqual([2, '', line('reload')]);
      expect([servers!.code, servers!.stdout, servers!.stderr]).toEqual([2, '', line('servers')]);
      // doctor fails the config and leaves the daemon unchecked: "ok  no daemon at …:7410" was no finding.
      expect(doctor!.code).toBe(1);
      expect(doctor!.stdout).toMatch(/^fail +config +.*not valid JSON/m);
      expect(doctor!.stdout).toMatch(/^warn +daemon +not checked: the config gives no address to find it at; pass --url to check a running daemon$/m);
      expect(doctor!.stdout).not.toContain('no daemon at');
      // Given the address, the daemon refuses the file and keeps running as it was.
      expect([byUrl!.code, byUrl!.stderr]).toEqual([2, expect.stringMatching(/^switchyard reload: config reload rejected; the running config is kept:\n {2}config: not valid JSON/)]);
    } finally {
      await hub.stop();
    }
  }, 60_000);
});
