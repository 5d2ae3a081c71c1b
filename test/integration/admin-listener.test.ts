/**
 * The operator's own listener (listen.admin), in process: a flood of MCP connections at
 * listen.maxConnections refuses the admin routes on the MCP listener, never on the admin one
 * (TCP or unix socket); authentication there is as on the main listener; a socket file a dead
 * hub left is replaced, any other file never. The CLI over the socket, against the real built
 * hub during a flood, is in http-edge.test.ts (listen.maxConnections).
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { rawRequest } from '../helpers/raw-http.js';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { mkdir } from 'node:fs/promises';
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { parseConfig } from '../../src/config/load.js';
import { Hub } from '../../src/hub.js';
import { silentLogger } from '../../src/log.js';
import { sha256Hex } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders } from '../helpers/wire.js';
import { freePortInRange } from '../helpers/port-range.js';

const ADMIN_KEY = 'sy_admin-listener-admin-key-0123456789abcdefghijkl';
const USER_KEY = 'sy_admin-listener-user-key-0123456789abcdefghijklm';

function hubWith(listen: Record<string, unknown>, extra: Record<string, unknown> = {}): { hub: Hub; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-admin-'));
  return { hub: Hub.create(parseConfig({ ledger: { enabled: false }, listen, servers: {}, ...extra }, join(dir, 'hub.config.json'), {}), silentLogger), dir };
}

/**
 * A port free a moment ago (the config must name it: the CLI reads it from there), outside the
 * ephemeral range (TEST_PORTS): no listen(0) or outgoing connection elsewhere takes it meanwhile.
 */
const freePort = freePortInRange;

/** Connections held open to `port`, each with one request answered (so each is in, past the cap's check). */
async function holdConnections(port: number, n: number): Promise<Socket[]> {
  const held: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = await new Promise<Socket>((resolve, reject) => {
      const c = connect(port, '127.0.0.1', () => resolve(c));
      c.once('error', reject);
    });
    s.write(`GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    await new Promise((r) => s.once('data', r));
    held.push(s);
  }
  return held;
}

function overSocket(socketPath: string, path: string, opts: { method?: string; key?: string } = {}): Promise<{ status: number; body: string }> {
  return rawRequest({ socketPath }, path, opts.method ?? 'GET', opts.key ? { host: 'localhost', authorization: `Bearer ${opts.key}` } : { host: 'localhost' });
}

/** A GET to a TCP listener with the headers given. */
function getWith(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return rawRequest({ host: '127.0.0.1', port }, path, 'GET', { host: `127.0.0.1:${port}`, ...headers });
}

describe('listen.admin', () => {
  it('a TCP admin listener serves the admin routes and /healthz while the MCP listener is full, and has no MCP endpoint', async () => {
    const adminPort = await freePort();
    const { hub } = hubWith({ maxConnections: 2, admin: { port: adminPort }, allowedOrigins: ['https://app.example'] });
    let held: Socket[] = [];
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      expect(await hub.listenAdmin()).toBe(`http://127.0.0.1:${adminPort}`);
      held = await holdConnections(addr.port, 2);
      // The MCP listener refuses the operator with everyone else...
      const main = await fetch(`http://127.0.0.1:${addr.port}/admin/servers`, { signal: AbortSignal.timeout(5_000) });
      expect(main.status).toBe(503);
      // ...the admin listener does not.
      const admin = `http://127.0.0.1:${adminPort}`;
      const servers = await fetch(`${admin}/admin/servers`, { signal: AbortSignal.timeout(5_000) });
      expect([servers.status, ((await servers.json()) as { servers: unknown[] }).servers]).toEqual([200, []]);
      expect((await fetch(`${admin}/healthz`)).status).toBe(200);
      // The status page's live feed too.
      const ws = new WebSocket(`ws://127.0.0.1:${adminPort}/admin/events`);
      const first = await new Promise<string>((resolve, reject) => {
        ws.once('message', (d) => resolve(String(d)));
        ws.once('error', reject);
      });
      ws.close();
      expect(JSON.parse(first)).toMatchObject({ servers: [] });
      const mcp = await fetch(`${admin}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
      expect([mcp.status, ((await mcp.json()) as { error: string }).error]).toEqual([404, expect.stringContaining('this is the admin listener (listen.admin)')]);
      // Told only past the Host check, as any other answer: a DNS-rebinding page is refused.
      const rebound = await getWith(adminPort, '/mcp', { host: `attacker.example:${adminPort}` });
      expect([rebound.status, rebound.body]).toEqual([403, expect.stringContaining('the Host header does not name this hub')]);
      // Nor does a browser app's preflight hear that an MCP endpoint is there (it got 204).
      const preflight = await fetch(`${admin}/mcp`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
      expect(preflight.status).toBe(404);
    } finally {
      for (const s of held) s.destroy();
      await hub.stop(0);
    }
  });

  it('exclusive: the operator routes only on the admin listener; the main one keeps MCP and /healthz and says where they went', async () => {
    const { hub, dir } = hubWith({ admin: { path: 'admin.sock', exclusive: true } });
    const sock = join(dir, 'admin.sock');
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      expect(await hub.listenAdmin()).toBe(sock);
      const main = `http://127.0.0.1:${addr.port}`;
      for (const path of ['/admin/servers', '/admin/', '/admin', '/metrics', '/admin/app.js']) {
        const r = await fetch(`${main}${path}`, { signal: AbortSignal.timeout(5_000) });
        expect([path, r.status, ((await r.json()) as { error: string }).error]).toEqual([path, 404, expect.stringContaining('on the admin listener only (listen.admin.exclusive)')]);
        // A page of another site (DNS rebinding, a cross-site request) is refused as on any
        // route, before it is told where the operator routes went.
        for (const headers of [{ host: `attacker.example:${addr.port}` }, { origin: 'http://attacker.example' }] as Record<string, string>[]) {
          const refused = await getWith(addr.port, path, headers);
          expect([path, refused.status, refused.body]).toEqual([path, 403, expect.stringMatching(/Forbidden: (the Host header|Origin not allowed)/)]);
        }
      }
      // The live feed is not on the main listener either.
      const ws = new WebSocket(`ws://127.0.0.1:${addr.port}/admin/events`);
      const refused = await new Promise<string>((resolve) => {
        ws.once('open', () => resolve('open'));
        ws.once('unexpected-response', (_req, res) => resolve(`status ${res.statusCode}`));
        ws.once('error', () => resolve('error'));
      });
      ws.terminate();
      expect(refused).not.toBe('open');
      expect((await fetch(`${main}/healthz`)).status).toBe(200);
      const list = await fetch(`${main}/mcp`, { method: 'POST', headers: modernHeaders('tools/list'), body: JSON.stringify(modernBody(1, 'tools/list')) });
      expect([list.status, ((await list.json()) as { result?: unknown }).result]).toEqual([200, expect.objectContaining({ tools: [] })]);
      // The socket serves them, as without exclusive.
      expect((await overSocket(sock, '/admin/servers')).status).toBe(200);
      expect((await overSocket(sock, '/metrics')).body).toContain('switchyard_');
      // The CLI pointed at the main listener says where to go, and doctor does not take the
      // daemon for a busy one or another program.
      const servers = await runCli(['servers', '--url', main]);
      expect([servers.code, servers.stderr]).toEqual([1, expect.stringContaining(`a switchyard daemon runs at ${main}, and serves the admin routes on its admin listener alone (listen.admin.exclusive): give --url that listener's address`)]);
      const doctor = await runCli(['doctor', '--json', '--url', main, '--config', join(dir, 'none.json')]);
      const findings = JSON.parse(doctor.stdout) as { check: string; message: string }[];
      expect(findings.find((f) => f.check === 'daemon')?.message).toMatch(/^a switchyard daemon runs at .*\(listen\.admin\.exclusive\): give --url/);
      expect(findings.find((f) => f.check === 'upstreams')?.message).toBe('not checked: the daemon runs them (at its admin listener, doctor asks it)');
    } finally {
      await hub.stop(0);
    }
  });

  it('over the admin socket, with authentication on, the admin routes still want an admin key (as on the main listener); exclusive, the main listener says so to an admin only', async () => {
    const { hub, dir } = hubWith({ admin: { path: 'admin.sock', exclusive: true } }, { auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex(ADMIN_KEY), scopes: ['switchyard:admin'] }, { principal: 'user', sha256: sha256Hex(USER_KEY) }] } });
    const sock = join(dir, 'admin.sock');
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      // listen.admin.exclusive: the main listener tells where the operator routes went only to
      // an admin; anyone else is refused as without it (401 without a key, 403 for a user's).
      const said = (r: { body: string }) => r.body.includes('listen.admin.exclusive');
      const anon = await getWith(addr.port, '/admin/servers', {});
      const user = await getWith(addr.port, '/admin/servers', { authorization: `Bearer ${USER_KEY}` });
      const ops = await getWith(addr.port, '/admin/servers', { authorization: `Bearer ${ADMIN_KEY}` });
      expect([anon.status, said(anon), user.status, said(user), ops.status, said(ops)]).toEqual([401, false, 403, false, 404, true]);
      expect((await getWith(addr.port, '/admin', {})).status).toBe(401);
      expect(await hub.listenAdmin()).toBe(sock);
      expect(statSync(sock).mode & 0o777).toBe(0o600);
      expect((await overSocket(sock, '/admin/servers')).status).toBe(401);
      expect((await overSocket(sock, '/admin/servers', { key: USER_KEY })).status).toBe(403);
      expect((await overSocket(sock, '/admin/servers', { key: ADMIN_KEY })).status).toBe(200);
      expect((await overSocket(sock, '/admin/reload', { method: 'POST', key: USER_KEY })).status).toBe(403);
    } finally {
      await hub.stop(0);
    }
    expect(existsSync(sock)).toBe(false);
  });

  it("makes the admin socket 0600 without touching the process's umask (which files and folders made meanwhile on libuv's threads would get too)", async () => {
    const { hub, dir } = hubWith({ admin: { path: 'admin.sock' } });
    const sock = join(dir, 'admin.sock');
    const umask = vi.spyOn(process, 'umask');
    try {
      await hub.listen('127.0.0.1', 0);
      // Folders made at the same moment by other code: each keeps the mode the umask gives it (0700 | 0755), with its x.
      const made = Array.from({ length: 20 }, (_, i) => mkdir(join(dir, `d${i}`)));
      expect(await hub.listenAdmin()).toBe(sock);
      await Promise.all(made);
      expect(umask.mock.calls.filter((c) => c.length > 0)).toEqual([]);
      expect(statSync(sock).mode & 0o777).toBe(0o600);
      for (let i = 0; i < 20; i++) expect(statSync(join(dir, `d${i}`)).mode & 0o100).toBe(0o100);
      // Nothing left beside it (the folder it was made in).
      expect(readdirSync(dir).filter((f) => f.startsWith('.'))).toEqual([]);
      expect((await overSocket(sock, '/admin/servers')).status).toBe(200);
    } finally {
      umask.mockRestore();
      await hub.stop(0);
    }
    expect(existsSync(sock)).toBe(false);
  });

  it('the CLI reaches a daemon started before listen.admin was added to its config on its main listener (listen is restart-only)', async () => {
    const { hub, dir } = hubWith({});
    const file = join(dir, 'hub.config.json');
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      writeFileSync(file, JSON.stringify({ listen: { port: addr.port, admin: { path: 'admin.sock' } }, servers: {} }));
      const servers = await runCli(['servers', '--config', file, '--json']);
      expect([servers.code, servers.stderr, servers.stdout]).toEqual([0, '', '[]\n']);
    } finally {
      await hub.stop(0);
    }
    const none = await runCli(['servers', '--config', file]);
    expect([none.code, none.stderr]).toEqual([3, `switchyard servers: no switchyard daemon is running at unix:${join(dir, 'admin.sock')} (listen.admin) nor at http://127.0.0.1:${JSON.parse(readFileSync(file, 'utf8')).listen.port} (start one with \`switchyard start\`)\n`]);
  });

  it('doctor looks for the daemon at the admin socket even when listen.port is 0 (any free port)', async () => {
    const { hub, dir } = hubWith({ port: 0, admin: { path: 'admin.sock' } });
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { enabled: false }, listen: { port: 0, admin: { path: 'admin.sock' } }, servers: {} }));
    try {
      await hub.listen('127.0.0.1', 0);
      await hub.listenAdmin();
      const doctor = await runCli(['doctor', '--json', '--config', file]);
      const findings = JSON.parse(doctor.stdout) as { check: string; message: string }[];
      expect(findings.find((f) => f.check === 'daemon')?.message).toMatch(new RegExp(`^switchyard \\S+ running at unix:${join(dir, 'admin.sock')} \\(pid ${process.pid}\\)$`));
    } finally {
      await hub.stop(0);
    }
  });

  it('start refuses an admin socket path too long to bind (exit 2, its length in bytes), and the CLI a --url unix: one', async () => {
    // Node cut it short and bound at another path: the hub started and no CLI could reach it ("no daemon").
    const dir = join(mkdtempSync(join(tmpdir(), 'switchyard-admin-')), 'd'.repeat(100));
    await mkdir(dir);
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { enabled: false }, listen: { port: 0, admin: { path: 'admin.sock' } }, servers: {} }));
    const sock = join(dir, 'admin.sock');
    const start = await runCli(['start', '--config', file]);
    expect([start.code, start.stderr]).toEqual([2, expect.stringContaining(`listen.admin.path: ${sock} is ${sock.length} bytes, longer than a unix socket's path can be`)]);
    const servers = await runCli(['servers', '--url', `unix:${sock}`]);
    expect([servers.code, servers.stderr]).toEqual([2, expect.stringContaining(`--url: ${sock} is ${sock.length} bytes, longer than a unix socket's path can be`)]);
  });

  it('waits for another hub holding the socket path\'s lock (starting or stopping) to be done with it', async () => {
    const { hub, dir } = hubWith({ admin: { path: 'admin.sock' } });
    const holder = new Database(join(dir, 'admin.sock.lock'));
    holder.exec('BEGIN EXCLUSIVE');
    setTimeout(() => holder.close(), 300);
    try {
      await hub.listen('127.0.0.1', 0);
      expect(await hub.listenAdmin()).toBe(join(dir, 'admin.sock'));
    } finally {
      if (holder.open) holder.close();
      await hub.stop(0);
    }
  });

  it('says a socket path whose folder is not there is so, naming the folder', async () => {
    const { hub, dir } = hubWith({ admin: { path: 'run/admin.sock' } });
    try {
      await hub.listen('127.0.0.1', 0);
      await expect(hub.listenAdmin()).rejects.toMatchObject({ code: 'ENOENT', message: `the folder ${join(dir, 'run')} is not there: create it, or set listen.admin.path to a path in a folder that is` });
    } finally {
      await hub.stop(0);
    }
  });

  it('refuses a TCP admin listener off loopback without authentication', async () => {
    const { hub } = hubWith({ admin: { host: '0.0.0.0', port: await freePort() } });
    try {
      await hub.listen('127.0.0.1', 0);
      await expect(hub.listenAdmin()).rejects.toThrow(/^listen\.admin: refusing to listen on 0\.0\.0\.0 without authentication/);
    } finally {
      await hub.stop(0);
    }
  });

  it('never takes the socket of a live listener too busy to take a connection (its backlog full) for a stale one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-admin-'));
    const sock = join(dir, 'admin.sock');
    // A hub whose event loop is busy: it accepts nothing, so once its backlog is full a connect is EAGAIN, not ECONNREFUSED.
    const busy = spawn(process.execPath, ['-e', `require('net').createServer().listen({ path: ${JSON.stringify(sock)}, backlog: 1 }, () => { console.log('up'); const end = Date.now() + 20000; while (Date.now() < end); })`], { stdio: ['ignore', 'pipe', 'ignore'] });
    const held: Socket[] = [];
    const hub = Hub.create(parseConfig({ ledger: { enabled: false }, listen: { admin: { path: sock } }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      await new Promise((r) => busy.stdout.once('data', r));
      for (let full = false; !full && held.length < 64; ) {
        const c = connect(sock);
        held.push(c);
        full = (await new Promise<string | undefined>((r) => (c.once('connect', () => r(undefined)), c.once('error', (e: NodeJS.ErrnoException) => r(e.code))))) === 'EAGAIN';
      }
      await hub.listen('127.0.0.1', 0);
      await expect(hub.listenAdmin()).rejects.toMatchObject({ code: 'EADDRINUSE', message: expect.stringContaining('it is left alone') });
      expect(statSync(sock).isSocket()).toBe(true);
    } finally {
      for (const c of held) c.destroy();
      busy.kill('SIGKILL');
      await hub.stop(0);
    }
  });

  it("never removes another user's live socket it may not open (EACCES) as a stale one", async (ctx) => {
    const dist = join(import.meta.dirname, '../../dist/src/downstream/admin-socket.js');
    const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    if (process.getuid?.() !== 0 || spawnSync(asNobody[0]!, [...asNobody.slice(1), process.execPath, '-e', `require('node:fs').accessSync(${JSON.stringify(dist)})`]).status !== 0)
      return ctx.skip('needs root (to be another user with setpriv) and a checkout that user may read');
    // A folder both may write, without the sticky bit: nothing but the probe keeps nobody's hub from
    // unlinking root's socket. Under /tmp itself: this run's TMPDIR is root's alone (0700).
    const dir = mkdtempSync('/tmp/switchyard-admin-');
    chmodSync(dir, 0o777);
    const sock = join(dir, 'admin.sock');
    const live = createServer((c) => c.end('live\n'));
    await new Promise<void>((r) => live.listen(sock, () => r()));
    chmodSync(sock, 0o600);
    try {
      const src = `import(${JSON.stringify(pathToFileURL(dist).href)}).then((m) => m.clearStaleSocket(${JSON.stringify(sock)})).then(() => console.log('cleared'), (e) => console.log(e.code))`;
      const probe = spawnSync(asNobody[0]!, [...asNobody.slice(1), process.execPath, '-e', src], { encoding: 'utf8' });
      expect(probe.stdout.trim()).toBe('EACCES');
      expect(statSync(sock).isSocket()).toBe(true);
    } finally {
      await new Promise((r) => live.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the CLI sends no admin key to a socket at the config's listen.admin.path that another user made while the hub was stopped", async (ctx) => {
    const asNobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    if (process.getuid?.() !== 0) return ctx.skip('needs root (to be another user with setpriv)');
    // /tmp-like: a folder anyone may make a name in. Under /tmp itself: this run's TMPDIR is root's alone (0700).
    const dir = mkdtempSync('/tmp/switchyard-admin-');
    chmodSync(dir, 0o1777);
    const sock = join(dir, 'admin.sock');
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ listen: { port: await freePort(), admin: { path: sock } }, servers: {} }));
    const src = `require('http').createServer((q, s) => { console.log('AUTH ' + q.headers.authorization); s.setHeader('content-type', 'application/json'); s.end(JSON.stringify({ version: '9', pid: 1, servers: [], disabled: [] })); }).listen(${JSON.stringify(sock)}, () => { require('fs').chmodSync(${JSON.stringify(sock)}, 0o777); console.log('up'); })`;
    const spy = spawn(asNobody[0]!, [...asNobody.slice(1), process.execPath, '-e', src], { stdio: ['ignore', 'pipe', 'inherit'] });
    let seen = '';
    spy.stdout.on('data', (d: Buffer) => (seen += d.toString()));
    try {
      await expect.poll(() => seen, { timeout: 5_000 }).toContain('up');
      const run = await runCli(['servers', '--config', file], { env: { SWITCHYARD_API_KEY: ADMIN_KEY } });
      expect([run.code, run.stderr]).toEqual([1, expect.stringContaining('the admin socket belongs to uid 65534, neither this user, root nor the owner of')]);
      expect(seen).not.toContain('AUTH');
      // Named by hand, it is asked.
      const named = await runCli(['servers', '--url', `unix:${sock}`, '--json']);
      expect([named.code, named.stdout]).toEqual([0, '[]\n']);
    } finally {
      spy.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('of two real hubs starting at once on a dead hub\'s socket, one takes it and the other exits naming the path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-admin-'));
    const sock = join(dir, 'admin.sock');
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    await new Promise((r) => child.once('exit', r));
    const config = { listen: { admin: { path: sock } }, servers: {} };
    const preload = ['--import', join(ROOT, 'test/fixtures/slow-unlink.mjs')];
    // The first hub found the stale socket refusing and is about to remove it, held there
    // (slow-unlink.mjs) until the second one, started then, is done.
    const go = join(dir, 'go');
    mkdirSync(join(dir, 'first'));
    mkdirSync(join(dir, 'second'));
    const first = startHub(config, { dir: join(dir, 'first'), nodeArgs: preload, env: { SLOW_UNLINK_PATH: sock, SLOW_UNLINK_UNTIL: go }, args: ['--no-watch'] });
    let second: Promise<HubProcess> | undefined;
    let firstUp: HubProcess | undefined;
    try {
      await expect.poll(() => existsSync(`${go}.held`), { timeout: 20_000 }).toBe(true);
      second = startHub(config, { dir: join(dir, 'second'), nodeArgs: preload, env: { SLOW_UNLINK_PATH: sock }, args: ['--no-watch'] });
      // Without the lock the second one removed the stale file, linked its own and served; the
      // first then removed the second one's live socket as the stale one, and linked its own.
      await expect(second).rejects.toThrow(`switchyard start: cannot listen on ${sock} (listen.admin): another process holds ${sock}.lock (another hub starting or stopping on ${sock}?)`);
      writeFileSync(go, '');
      firstUp = await first;
      expect(JSON.parse((await overSocket(sock, '/admin/servers')).body)).toMatchObject({ pid: firstUp.proc.pid });
    } finally {
      writeFileSync(go, '');
      await (firstUp ?? (await first.catch(() => undefined)))?.stop('SIGKILL');
      await (await second?.catch(() => undefined))?.stop('SIGKILL');
    }
  }, 30_000);

  it('replaces a socket file a killed hub left, never another file, nor a socket something answers on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-admin-'));
    const sock = join(dir, 'admin.sock');
    // A process that dies with its socket listening leaves the file behind (kill -9, a crash).
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    await new Promise((r) => child.once('exit', r));
    expect(statSync(sock).isSocket()).toBe(true);
    const first = Hub.create(parseConfig({ ledger: { enabled: false }, listen: { admin: { path: sock } }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    const second = Hub.create(parseConfig({ ledger: { enabled: false }, listen: { admin: { path: sock } }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      await first.listen('127.0.0.1', 0);
      expect(await first.listenAdmin()).toBe(sock);
      expect((await overSocket(sock, '/healthz')).status).toBe(200);
      // A second hub on the same socket: the first one answers there, so it is not taken over.
      await second.listen('127.0.0.1', 0);
      await expect(second.listenAdmin()).rejects.toMatchObject({ code: 'EADDRINUSE', message: `another switchyard hub (pid ${process.pid}) listens on ${sock}` });
      expect((await overSocket(sock, '/healthz')).status).toBe(200);
    } finally {
      await second.stop(0);
      await first.stop(0);
    }
    const file = join(dir, 'notes.txt');
    writeFileSync(file, 'mine');
    const third = Hub.create(parseConfig({ ledger: { enabled: false }, listen: { admin: { path: file } }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      await third.listen('127.0.0.1', 0);
      await expect(third.listenAdmin()).rejects.toThrow(/is a file that is not a socket: it is left alone/);
      expect(readFileSync(file, 'utf8')).toBe('mine');
    } finally {
      await third.stop(0);
    }
  });
});
