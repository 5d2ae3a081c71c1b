/**
 * A user's login to an HTTP upstream (servers.<id>.oauth.grant "authorization_code"): the real
 * built `switchyard login` toward oauth-protected-server.mjs, whose authorization server
 * registers clients dynamically, checks the PKCE verifier and the `resource`, approves at once and
 * redirects straight back (the test's opener, follow-login.mjs, fetches the URL and follows the
 * redirects as a browser would). The daemon runs meanwhile: without a login the server's start
 * fails saying to log in; after `switchyard login` the next call works without a restart of the
 * daemon; a refused token is refreshed with the stored refresh token and written back, and a
 * second daemon over the same token file refreshes in turn with it, spending the rotating
 * refresh token once; `logout` removes the tokens (keeping the registered client, which the next
 * login is again, unless --forget-client); a response naming another issuer is refused; and no
 * token reaches the logs, the ledger or the CLI's output.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliRun } from '../helpers/cli.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { text, waitUntil } from './faults-helpers.js';
import { modernCall, type Answer } from './ledger-helpers.js';
import { freePortInRange } from '../helpers/port-range.js';

interface Stats {
  tokenRequests: { clientId: string; grantType: string; resource: string; scope: string | null; codeVerifier?: boolean; redirectUri?: string | null }[];
  issued: string[];
  authorizations: Record<string, string>[];
  registrations: Record<string, unknown>[];
  revocations: { token: string; hint: string; clientId: string; known: boolean }[];
  lastAccepted?: string;
}

let fixture: HttpFixture;
let hub: HubProcess;
let other: HubProcess;
let tokenFile: string;
let n = 0;
const cliOutput: string[] = [];

const origin = (): string => new URL(fixture.url).origin;
const stats = async (): Promise<Stats> => (await fetch(`${origin()}/stats`)).json() as Promise<Stats>;
const control = (path: string): Promise<Response> => fetch(`${origin()}${path}`, { method: 'POST' });
const call = (name: string, args: Record<string, unknown> = {}): Promise<Answer> => modernCall(hub.url, `lg${++n}`, 'tools/call', { name, arguments: args });
const clientFile = (): string => tokenFile.replace(/\.json$/, '.client.json');
const stored = (): { accessToken: string; refreshToken?: string; clientId: string; resource: string } => JSON.parse(readFileSync(tokenFile, 'utf8'));

async function cli(...args: string[]): Promise<CliRun> {
  const r = await runCli([...args, '--config', hub.configFile]);
  cliOutput.push(r.stdout, r.stderr);
  return r;
}
/** `daemon`: the address login tells of the new tokens (default: the hub's). */
const login = (daemon = hub.url, ...more: string[]): Promise<CliRun> =>
  cli('login', 'u', '--opener', `"${process.execPath}" "${join(ROOT, 'test/fixtures/follow-login.mjs')}"`, '--timeout', '20', '--url', daemon, ...more);

/** An address where nothing listens (a free port, closed again). */
async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePortInRange()}`;
}

async function lastErrorOf(id: string): Promise<string> {
  return waitUntil(`a lastError of ${id}`, async () => {
    const servers = ((await (await fetch(new URL('/admin/servers', hub.url))).json()) as { servers: { id: string; lastError: string | null }[] }).servers;
    return servers.find((s) => s.id === id)?.lastError ?? undefined;
  });
}

beforeAll(async () => {
  fixture = await startHttpFixture('test/fixtures/servers/oauth-protected-server.mjs');
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-login-'));
  tokenFile = join(dir, 'oauth-tokens', 'u.json');
  const servers = { u: { url: fixture.url, oauth: { grant: 'authorization_code' } } };
  [hub, other] = await Promise.all([
    startHub({ ledger: { path: join(dir, 'ledger.db'), storeBodies: true }, servers }, { dir, args: ['--no-watch'] }),
    // A second process over the same login: its ledger beside the first one's, so the same state directory and token file.
    startHub({ ledger: { path: join(dir, 'other.db') }, servers }, { dir: mkdtempSync(join(tmpdir(), 'switchyard-login-other-')), args: ['--no-watch'] }),
  ]);
}, 60_000);

afterAll(async () => {
  await other?.stop();
  await hub?.stop();
  await fixture?.stop();
});

describe('switchyard login: the authorization-code grant toward an HTTP upstream', () => {
  it('fails the start of a server with no stored login, saying to run switchyard login', async () => {
    expect(await lastErrorOf('u')).toMatch(/OAuth: servers\.u: no login stored for this server \(grant authorization_code\); run `switchyard login u`/);
    // Nothing was sent to the authorization server: the daemon cannot log a user in.
    expect((await stats()).tokenRequests).toEqual([]);
  });

  it('registers, authorizes with PKCE S256 and the resource, stores the tokens 0600, and the running daemon uses them', async () => {
    const r = await login();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/(?:^|\n)switchyard login: open this URL to authorize switchyard for "u":\n\n {2}http:\/\/127\.0\.0\.1:\d+\/as\/authorize\?/);
    expect(r.stderr).toContain('client registered dynamically');
    // Every line said as the command's, but the URL itself, alone on its line to be copied whole.
    expect(r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('switchyard login: ') && !/^ {2}http:\/\/\S+$/.test(l))).toEqual([]);
    const s = await stats();
    expect(s.registrations).toHaveLength(1);
    expect(s.registrations[0]).toMatchObject({ application_type: 'native', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] });
    expect((s.registrations[0]!.redirect_uris as string[])[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    expect(s.authorizations).toHaveLength(1);
    expect(s.authorizations[0]).toMatchObject({ response_type: 'code', code_challenge_method: 'S256', resource: fixture.url, scope: 'mcp' });
    expect(s.authorizations[0]!.state!.length).toBeGreaterThan(20);
    expect(s.tokenRequests).toHaveLength(1);
    expect(s.tokenRequests[0]).toMatchObject({ grantType: 'authorization_code', resource: fixture.url, codeVerifier: true });
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(tokenFile, '..')).mode & 0o777).toBe(0o700);
    const t = stored();
    expect(t.clientId).toMatch(/^dyn-/);
    expect(t.refreshToken).toMatch(/^ref-/);
    expect(r.stderr).toMatch(/\nswitchyard login: the daemon at \S+ restarted "u" with the new login\n/);
    // At once: the daemon was told (its own retry of the failed start may be seconds away).
    expect(text(await call('u__whoami'))).toBe('client hub-client scopes mcp');
  });

  it('refreshes a refused token with the refresh token and writes the new tokens back', async () => {
    const before = stored();
    await control('/revoke');
    expect(text(await call('u__whoami'))).toContain('scopes mcp');
    const refreshes = (await stats()).tokenRequests.filter((r) => r.grantType === 'refresh_token');
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]).toMatchObject({ clientId: before.clientId, resource: fixture.url });
    const after = stored();
    expect(after.accessToken).not.toBe(before.accessToken);
    expect(after.refreshToken).not.toBe(before.refreshToken);
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    // The new one serves the next calls; no more refreshes.
    expect(text(await call('u__whoami'))).toContain('scopes mcp');
    expect((await stats()).tokenRequests.filter((r) => r.grantType === 'refresh_token')).toHaveLength(1);
  });

  it('a second process over the same login (another daemon) takes turns refreshing: the rotating refresh token is spent once, and both go on', async () => {
    // Started without a login: told of it as `switchyard login` tells a daemon.
    expect((await fetch(new URL('/admin/servers/u/restart', other.url), { method: 'POST' })).status).toBe(200);
    try {
      const callOther = (): Promise<Answer> => modernCall(other.url, `lo${++n}`, 'tools/call', { name: 'u__whoami', arguments: {} });
      expect(text(await callOther())).toContain('scopes mcp');
      const refreshes = async (): Promise<number> => (await stats()).tokenRequests.filter((r) => r.grantType === 'refresh_token').length;
      const before = await refreshes();
      // Both refused at once, and the refresh answered late: both processes want to refresh together.
      await control('/revoke');
      await control('/refresh-delay?ms=400');
      const [a, b] = await Promise.all([call('u__whoami'), callOther()]);
      expect(text(a)).toContain('scopes mcp');
      expect(text(b)).toContain('scopes mcp');
      expect(await refreshes()).toBe(before + 1);
      expect(other.logs.join('\n') + hub.logs.join('\n')).not.toContain('the refresh token was refused');
    } finally {
      await control('/refresh-delay?ms=0');
    }
  });

  it('says that more scopes need a new login (the daemon cannot ask the user) naming the command, on a 403 insufficient_scope; login --scope asks for them and the ones held', async () => {
    const a = await call('u__admin_echo', { text: 'x' });
    expect(JSON.stringify(a.body)).toMatch(/the upstream wants scopes the login did not grant \(it names: mcp admin\); run `switchyard login u --scope 'mcp admin'`/);
    // Nothing was asked of the token endpoint for it.
    expect((await stats()).tokenRequests.filter((r) => r.grantType !== 'authorization_code' && r.grantType !== 'refresh_token')).toEqual([]);
    // Digest §7: the union of the scopes held (mcp, from the metadata) and those asked for.
    const r = await login(hub.url, '--scope', 'admin');
    expect(r.code, r.stderr).toBe(0);
    expect((await stats()).authorizations.at(-1)?.scope).toBe('mcp admin');
    expect(text(await call('u__admin_echo', { text: 'x' }))).toBe('admin:x');
  });

  it('refuses an authorization response that names another issuer (RFC 9207), keeping the stored login', async () => {
    const before = readFileSync(tokenFile, 'utf8');
    await control('/iss?mode=wrong');
    try {
      const r = await login();
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/switchyard login: login to "u" failed: the authorization response names issuer "https:\/\/evil\.example", not http:\/\/127\.0\.0\.1:\d+\/as: refused/);
      expect(readFileSync(tokenFile, 'utf8')).toBe(before);
    } finally {
      await control('/iss?mode=correct');
    }
  });

  it("shows the authorization server's refusal with its terminal control characters made harmless", async () => {
    const q = new URLSearchParams({ error: 'access_denied\x1b]0;owned\x07', description: 'no \x1b[2J\x1b[31mred\x1b[0m \u202eevil' });
    await control(`/deny?${q}`);
    try {
      const r = await login();
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('login to "u" failed: the authorization server refused: access_denied?]0;owned?: no ?[2J?[31mred?[0m ?evil');
      expect(r.stderr).not.toMatch(/[\x1b\x07\u202e]/);
    } finally {
      await control('/deny');
    }
  });

  it('logout revokes the tokens at the authorization server and removes them, keeps the registered client, and the next call says to log in', async () => {
    const had = stored();
    const r = await cli('logout', 'u');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /logged out of "u": removed \S+u\.json; revoked the tokens at http:\/\/127\.0\.0\.1:\d+\/as\/revoke; kept the client registered with http:\/\/127\.0\.0\.1:\d+\/as for the next login \(--forget-client forgets it\)/,
    );
    // RFC 7009: the refresh token first (it ends the grant), then the access token, each known to the server until then.
    expect((await stats()).revocations).toEqual([
      { token: had.refreshToken, hint: 'refresh_token', clientId: had.clientId, known: true },
      { token: had.accessToken, hint: 'access_token', clientId: had.clientId, known: true },
    ]);
    expect(existsSync(tokenFile)).toBe(false);
    expect(statSync(clientFile()).mode & 0o777).toBe(0o600);
    const a = await call('u__whoami');
    expect(JSON.stringify(a.body)).toMatch(/no login stored for this server \(grant authorization_code\); run `switchyard login u`/);
  });

  it('uses a new login at the next call of a running server, the daemon not told', async () => {
    // A lock a crashed refresh left: the login stores its tokens taking turns with refreshes, and takes it over.
    writeFileSync(`${tokenFile}.lock`, JSON.stringify({ pid: spawnSync(process.execPath, ['-e', '0']).pid, host: hostname() }));
    const r = await login(await closedPortUrl());
    expect(existsSync(`${tokenFile}.lock`)).toBe(false);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('restarted');
    // The client the first login registered (the logout kept it), on its redirect port again: no client per login.
    expect(r.stderr).toContain('client registered by an earlier login');
    expect((await stats()).registrations).toHaveLength(1);
    const now = stored().accessToken;
    expect(text(await call('u__whoami'))).toContain('scopes mcp');
    expect((await stats()).lastAccepted).toBe(now);
  });

  it('logout --no-revoke removes the tokens without asking the authorization server, through the refresh lock (a stale one taken over)', async () => {
    const kept = readFileSync(tokenFile, 'utf8');
    const revocations = (await stats()).revocations.length;
    // A lock a crashed refresh left: the logout takes turns with refreshes as a revoking one does, and takes it over.
    writeFileSync(`${tokenFile}.lock`, JSON.stringify({ pid: spawnSync(process.execPath, ['-e', '0']).pid, host: hostname() }));
    try {
      const r = await cli('logout', 'u', '--no-revoke');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/switchyard logout: logged out of "u": removed \S+u\.json; kept the client registered with http:\/\/127\.0\.0\.1:\d+\/as for the next login/);
      expect(r.stderr).not.toMatch(/revoke|stay valid/);
      expect((await stats()).revocations).toHaveLength(revocations);
      expect(existsSync(tokenFile)).toBe(false);
      expect(existsSync(`${tokenFile}.lock`)).toBe(false);
      expect(JSON.stringify((await call('u__whoami')).body)).toMatch(/no login stored for this server/);
    } finally {
      // Not revoked: the same login, put back, works again.
      writeFileSync(tokenFile, kept, { mode: 0o600 });
      rmSync(`${tokenFile}.lock`, { force: true });
    }
    expect(text(await call('u__whoami'))).toContain('scopes mcp');
  });

  it('logout from an authorization server that offers no revocation says the tokens stay valid, and removes them', async () => {
    const kept = readFileSync(tokenFile, 'utf8');
    const revocations = (await stats()).revocations.length;
    await control('/revocation?on=0');
    try {
      const r = await cli('logout', 'u');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        /logged out of "u": removed \S+u\.json; the authorization server http:\/\/127\.0\.0\.1:\d+\/as offers no token revocation: the tokens stay valid until they expire; kept the client/,
      );
      expect((await stats()).revocations).toHaveLength(revocations);
      expect(existsSync(tokenFile)).toBe(false);
    } finally {
      await control('/revocation?on=1');
      writeFileSync(tokenFile, kept, { mode: 0o600 });
    }
    expect(text(await call('u__whoami'))).toContain('scopes mcp');
  });

  it('a login whose kept client the authorization server no longer knows says to forget it; logout --forget-client removes it too, and the next call says to log in', async () => {
    await control('/forget-clients');
    // The authorization server answers its error page to the browser and redirects nowhere.
    const stale = await cli('login', 'u', '--opener', `"${process.execPath}" "${join(ROOT, 'test/fixtures/follow-login.mjs')}"`, '--timeout', '1', '--url', await closedPortUrl());
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/login to "u" failed: no authorization arrived within 1 s; the client an earlier login registered was used again: if the authorization server no longer knows it, run `switchyard logout u --forget-client` and log in again/);
    const r = await cli('logout', 'u', '--forget-client');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/logged out of "u": removed \S+u\.json; revoked the tokens at \S+; forgot the client registered with http:\/\/127\.0\.0\.1:\d+\/as \(the next login registers a new one\)/);
    expect(existsSync(tokenFile)).toBe(false);
    expect(existsSync(clientFile())).toBe(false);
    const a = await call('u__whoami');
    expect(JSON.stringify(a.body)).toMatch(/no login stored for this server \(grant authorization_code\); run `switchyard login u`/);
  });

  it('logout revokes and removes a login stored for a server that no longer logs in (its oauth.grant changed, or the server removed)', async () => {
    // A daemon that refuses the restart (it runs no "u"): its words, its address once.
    const refusing = createHttpServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'no server "u" is running (switchyard servers lists them)' }));
    });
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
    const daemon = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    const l = await login(daemon).finally(() => refusing.close());
    expect(l.code, l.stderr).toBe(0);
    expect(l.stderr).toContain(
      `\nswitchyard login: the daemon was not told of the new login: no server "u" is running (switchyard servers lists them) [HTTP 404 from ${daemon}]; it uses the login at its next attempt, or run \`switchyard servers restart u\`\n`,
    );
    expect(l.stderr.split(daemon)).toHaveLength(2);
    const had = stored();
    const before = (await stats()).revocations.length;
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Record<string, unknown>;
    const changed = join(hub.dir, 'left-login.json');
    const logoutWith = async (servers: Record<string, unknown>, ...more: string[]): Promise<CliRun> => {
      writeFileSync(changed, JSON.stringify({ ...config, servers }));
      const r = await runCli(['logout', 'u', ...more, '--config', changed]);
      cliOutput.push(r.stdout, r.stderr);
      return r;
    };
    // Moved to the client-credentials grant: another client, whose secret the revocation must not carry.
    const r = await logoutWith({ u: { url: fixture.url, oauth: { clientId: 'hub-client', clientSecret: 'hub-client-secret-0000' } } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /switchyard logout: \S*left-login\.json: servers\.u no longer logs in \(no oauth\.grant "authorization_code"\); logging out of the login stored for it before\nswitchyard logout: logged out of "u": removed \S+u\.json; revoked the tokens at http:\/\/127\.0\.0\.1:\d+\/as\/revoke; kept the client registered/,
    );
    expect((await stats()).revocations.slice(before)).toEqual([
      { token: had.refreshToken, hint: 'refresh_token', clientId: had.clientId, known: true },
      { token: had.accessToken, hint: 'access_token', clientId: had.clientId, known: true },
    ]);
    expect(existsSync(tokenFile)).toBe(false);
    // The server gone from the config: the client the login registered can still be forgotten.
    const gone = await logoutWith({ v: { url: fixture.url } }, '--forget-client');
    expect(gone.code, gone.stderr).toBe(0);
    expect(gone.stderr).toMatch(/switchyard logout: \S*left-login\.json: no server "u"; logging out of the login stored for it before\nswitchyard logout: no login stored for "u"; forgot the client registered with/);
    expect(existsSync(clientFile())).toBe(false);
  });

  // Its warnings came unprefixed ("warning: could not open a browser…"), where every other
  // command's say whose they are (`switchyard config validate: warning: …`).
  it("says login's warnings as the command's: a browser that cannot be opened", async () => {
    // No opener on the PATH (xdg-open, open): the platform's opener fails to start.
    const noOpener = mkdtempSync(join(tmpdir(), 'switchyard-no-opener-'));
    try {
      const r = await runCli(['login', 'u', '--open', '--timeout', '1', '--url', await closedPortUrl(), '--config', hub.configFile], { env: { PATH: noOpener } });
      cliOutput.push(r.stdout, r.stderr);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/\nswitchyard login: warning: could not open a browser \(spawn \S+ ENOENT\); open the URL above yourself\n/);
      expect(r.stderr).not.toMatch(/^warning:/m);
    } finally {
      rmSync(noOpener, { recursive: true, force: true });
    }
  });

  it('never lets a token into the logs, the ledger or the CLI output', async () => {
    const { issued } = await stats();
    expect(issued.length).toBeGreaterThanOrEqual(4);
    await hub.stop();
    const ledger = readdirSync(hub.dir)
      .filter((f) => f.startsWith('ledger.db'))
      .map((f) => readFileSync(join(hub.dir, f)).toString('latin1'))
      .join('\n');
    await other.stop();
    const logs = [...hub.logs, ...other.logs].join('\n');
    expect(logs).toContain('OAuth: refreshed the stored access token');
    for (const secret of issued) {
      expect(logs).not.toContain(secret);
      expect(ledger).not.toContain(secret);
      expect(cliOutput.join('\n')).not.toContain(secret);
    }
  });
});
