/**
 * The upstream OAuth client (src/upstream/oauth-client.ts) against a small authorization server
 * and protected-resource metadata on loopback, in process: the parts whose timing the
 * integration test (upstream-oauth.test.ts) cannot reach without long waits.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { canonicalResource, MAX_SCOPES, OAuthClient, OAuthHttp, parseBearerChallenge, type HttpExchanges } from '../../src/upstream/oauth-client.js';
import type { HttpAnswer, HttpExchangeOptions } from '../../src/transport/http-client.js';
import fs, { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { Writable } from 'node:stream';
import pino from 'pino';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from '../../src/paths.js';
import { StoredTokenSource } from '../../src/upstream/oauth-stored-client.js';
import { clientToReuse, loginClient } from '../../src/upstream/oauth-register.js';
import { OAuthUrlPolicy } from '../../src/upstream/oauth-url-policy.js';
import { listenForRedirect } from '../../src/upstream/oauth-loopback.js';
import { login } from '../../src/upstream/oauth-login.js';
import { revokeLogin } from '../../src/upstream/oauth-revoke.js';
import { clientFileOf, removeTokenFile, writeStoredClient, writeTokenFile, type StoredTokens } from '../../src/upstream/oauth-token-store.js';
import { LOCK_STALE_MS, LOCK_WAIT_MS, lockTokenFile } from '../../src/upstream/oauth-token-lock.js';
import { logout } from '../../src/cli/logout.js';
import { processStart } from '../../src/process-alive.js';
import type { Logger } from '../../src/log.js';
import { freePortInRange } from '../helpers/port-range.js';

let server: Server;
let base = '';
let tokenStatus = 200;
let issued = 0;
/** Token requests, answered or refused. */
let posts = 0;
/** While set, token requests are answered only once it settles (a slow authorization server). */
let tokenGate: Promise<void> | undefined;
/** The body of a successful token answer, when not the default one. */
let tokenBody: ((n: number) => Record<string, unknown>) | undefined;
/** The OAuth error of a refused token request. */
let tokenError = 'temporarily_unavailable';
/** The form of the last token request. */
let lastTokenForm = new URLSearchParams();
/** The error_description of a refused token request (none by default). */
let tokenDescription: ((form: URLSearchParams) => string) | undefined;
/** The error_description of a refused revocation, when not the default one: from the form, the authorization header and the body as sent. */
let revokeDescription: ((form: URLSearchParams, authorization: string | undefined, body: string) => string) | undefined;

beforeAll(async () => {
  server = createServer((req, res) => {
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/.well-known/oauth-protected-resource/mcp') return json(200, { resource: `${base}/mcp`, authorization_servers: [base] });
    if (req.url === '/.well-known/oauth-authorization-server')
      return json(200, { issuer: base, token_endpoint: `${base}/token`, authorization_endpoint: `${base}/authorize`, revocation_endpoint: `${base}/revoke`, code_challenge_methods_supported: ['S256'] });
    // A revocation endpoint that refuses, quoting what it was sent.
    if (req.url === '/revoke' && req.method === 'POST') {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const f = new URLSearchParams(body);
        json(400, { error: 'invalid_request', error_description: revokeDescription?.(f, req.headers.authorization, body) ?? `not revoking ${f.get('token')} for ${f.get('client_id')}:${f.get('client_secret')}` });
      });
      return;
    }
    // Metadata that names another resource, and an authorization server whose metadata names another issuer.
    if (req.url === '/.well-known/oauth-protected-resource/other') return json(200, { resource: 'https://evil.example.com/mcp', authorization_servers: [base] });
    if (req.url === '/.well-known/oauth-protected-resource/liar') return json(200, { resource: `${base}/liar`, authorization_servers: [`${base}/liar-as`] });
    // Metadata that sends the hub to a cloud metadata address: as an authorization server, and by a redirect.
    if (req.url === '/.well-known/oauth-protected-resource/imds') return json(200, { resource: `${base}/imds`, authorization_servers: ['http://169.254.169.254'] });
    if (req.url === '/.well-known/oauth-protected-resource/hop') {
      res.writeHead(302, { location: 'http://[::ffff:169.254.169.254]/latest/meta-data/' });
      return res.end();
    }
    // A server that takes requests without a token, for a login.
    if (req.url === '/open' && req.method === 'POST') return json(200, { jsonrpc: '2.0', id: 1, result: {} });
    // A server whose challenge names cloud metadata (its query a signature), for a login.
    if (req.url === '/refused-login' && req.method === 'POST') {
      res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="http://169.254.169.254/latest/meta-data/iam?X-Amz-Signature=unit-query-secret"' });
      return res.end();
    }
    if (req.url === '/.well-known/oauth-authorization-server/liar-as') return json(200, { issuer: 'https://evil.example.com', token_endpoint: 'https://evil.example.com/token' });
    // The authorization endpoint of a login: approves at once, straight back to the redirect.
    if (req.url?.startsWith('/authorize?')) {
      const q = new URL(req.url, base).searchParams;
      const back = new URL(q.get('redirect_uri')!);
      back.searchParams.set('code', 'unit-login-code-5f1e');
      back.searchParams.set('state', q.get('state')!);
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (req.url === '/token' && req.method === 'POST') {
      posts++;
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        lastTokenForm = new URLSearchParams(body);
        void (tokenGate ?? Promise.resolve()).then(() => {
          if (tokenStatus !== 200) return json(tokenStatus, { error: tokenError, ...(tokenDescription ? { error_description: tokenDescription(lastTokenForm) } : {}) });
          const n = ++issued;
          json(200, tokenBody?.(n) ?? { access_token: `unit-token-${n}`, token_type: 'bearer', expires_in: 100 });
        });
      });
      return;
    }
    json(404, {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));
afterEach(() => {
  vi.restoreAllMocks();
  tokenStatus = 200;
  tokenGate = undefined;
  tokenBody = undefined;
  tokenError = 'temporarily_unavailable';
  tokenDescription = undefined;
  revokeDescription = undefined;
});

/** A stored login toward the unit server's /mcp, as `switchyard login` writes it. */
function storedLogin(file: string, accessToken: string, extra: Partial<StoredTokens> = {}): void {
  writeTokenFile(file, {
    serverUrl: `${base}/mcp`, resource: `${base}/mcp`, issuer: base, tokenEndpoint: `${base}/token`, clientId: 'stored', clientAuth: 'none',
    accessToken, refreshToken: 'unit-refresh-token', scopes: [], obtainedAt: Date.now(), ...extra,
  });
}

/** A logger that keeps its lines (JSON) in `lines`. */
function keptLog(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(...chunk.toString().split('\n').filter(Boolean)), done()) });
  return { log: pino({ level: 'info' }, sink) as unknown as Logger, lines };
}

/**
 * Makes a folder read-only for this process, or says it cannot (`false`): root writes through a
 * mode 0500, so as root the folder is made immutable (chattr +i) instead.
 */
function readOnly(dir: string, on: boolean): boolean {
  if (process.getuid?.() === 0) {
    try {
      execFileSync('chattr', [on ? '+i' : '-i', dir], { stdio: 'ignore' });
    } catch {
      return false;
    }
  } else chmodSync(dir, on ? 0o500 : 0o700);
  if (!on) return true;
  try {
    writeFileSync(join(dir, 'probe'), '');
    rmSync(join(dir, 'probe'));
    return false;
  } catch {
    return true;
  }
}

/** The upstream's side of the exchanges: 401 to a request without a token, 200 otherwise; records what was sent. */
function upstream(challenge = 'Bearer realm="x"'): HttpExchanges & { sent: (string | undefined)[] } {
  const sent: (string | undefined)[] = [];
  const answer = (o: HttpExchangeOptions = {}): Promise<HttpAnswer> => {
    const auth = o.headers?.authorization;
    sent.push(auth);
    return Promise.resolve(auth ? { status: 200, headers: {}, messages: 1 } : { status: 401, headers: { 'www-authenticate': challenge }, messages: 0 });
  };
  return { sent, post: (_b, o) => answer(o), get: answer, delete: answer, close: () => undefined };
}

describe('the upstream OAuth client', () => {
  it('keeps using a token about to expire when its replacement cannot be had, until it expires on the monotonic clock (the wall clock stepped back an hour)', async () => {
    const peer = upstream();
    const http = new OAuthHttp(peer, OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/mcp`, silentLogger));
    await http.post('{}');
    expect(peer.sent).toEqual([undefined, 'Bearer unit-token-1']);
    const now = performance.now();
    tokenStatus = 503;
    // Its lifetime is on the monotonic clock: the wall clock stepped back an hour changes nothing
    // (it had the token sent an hour past its expiry, to be refused).
    vi.spyOn(Date, 'now').mockReturnValue(Date.now() - 3_600_000);
    // 95 s into a 100 s token: due for renewal (the last 10 %), not expired.
    vi.spyOn(performance, 'now').mockReturnValue(now + 95_000);
    expect((await http.post('{}')).status).toBe(200);
    expect(peer.sent.at(-1)).toBe('Bearer unit-token-1');
    // Expired: the replacement's failure is the request's.
    vi.spyOn(performance, 'now').mockReturnValue(now + 101_000);
    await expect(http.post('{}')).rejects.toThrow(/OAuth: token endpoint http:\/\/127\.0\.0\.1:\d+\/token answered HTTP 503 temporarily_unavailable/);
    http.close();
  });

  it('a failed token request answers for the next ones for its second of cool-down, not for as long as a wall-clock step back', async () => {
    const real = Date.now;
    let step = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    const http = new OAuthHttp(upstream(), OAuthClient.acquire({ clientId: 'stepped', clientSecret: 'unit-secret-123' }, `${base}/mcp`, silentLogger));
    tokenStatus = 503;
    await expect(http.post('{}')).rejects.toThrow(/HTTP 503/);
    step = -3_600_000;
    tokenStatus = 200;
    await new Promise((r) => setTimeout(r, 1_100));
    // On the wall clock the failure was an hour ahead: its error answered every request for the hour.
    expect((await http.post('{}')).status).toBe(200);
    http.close();
  });

  it("a login's failed refresh answers for the next requests for its second of cool-down, not for as long as a wall-clock step back", async () => {
    const real = Date.now;
    let step = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    const t0 = real();
    writeTokenFile(file, {
      serverUrl: `${base}/mcp`, resource: `${base}/mcp`, issuer: base, tokenEndpoint: `${base}/token`, clientId: 'stored', clientAuth: 'none',
      accessToken: 'unit-refused-token', refreshToken: 'unit-refresh-token', scopes: [], obtainedAt: t0,
    });
    const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    tokenStatus = 503;
    // The upstream refused its access token (a 401): renewed with the refresh token.
    await expect(source.renew('unit-refused-token')).rejects.toThrow(/HTTP 503/);
    step = -3_600_000;
    tokenStatus = 200;
    await new Promise((r) => setTimeout(r, 1_100));
    // On the wall clock the failure was an hour ahead: its error answered every request for the hour.
    await expect(source.renew('unit-refused-token')).resolves.toMatch(/^unit-token-/);
    source.release();
  });

  it('a refresh in flight when a new login (or a logout) is stored leaves it standing, though a request read it meanwhile, and its request is not sent with the refreshed token after a logout', async () => {
    for (const change of ['login', 'logout'] as const) {
      const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
      storedLogin(file, 'unit-old-login');
      const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
      let open!: () => void;
      tokenGate = new Promise((r) => (open = r));
      const before = posts;
      // The upstream refused the old login's token: a refresh, held at the token endpoint.
      const refreshed = source.renew('unit-old-login');
      await vi.waitFor(() => expect(posts).toBe(before + 1), { timeout: 5_000, interval: 10 });
      if (change === 'login') storedLogin(file, 'unit-new-login', { expiresAt: Date.now() + 3_600_000 });
      else rmSync(file);
      // Another request reads the file meanwhile.
      expect(source.current()).toBe(change === 'login' ? 'unit-new-login' : undefined);
      open();
      if (change === 'login') {
        await expect(refreshed).resolves.toBe('unit-new-login');
        expect(JSON.parse(readFileSync(file, 'utf8')).accessToken).toBe('unit-new-login');
      } else {
        // The request that waited for the refresh is not sent with its token: the user logged out.
        await expect(refreshed).rejects.toThrow(/no login stored for this server .*; run `switchyard login u`/);
        expect(existsSync(file)).toBe(false);
      }
      source.release();
    }
  });

  it('refreshed tokens the token file cannot take (a read-only folder) are used from memory, their rotated refresh token spent next, and written at a later request', async (ctx) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const file = join(dir, 'u.json');
    storedLogin(file, 'unit-refused-token');
    const before = readFileSync(file, 'utf8');
    if (!readOnly(dir, true)) return ctx.skip('cannot make a folder read-only here (chattr +i as root, mode 0500 otherwise)');
    const { log, lines } = keptLog();
    let source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, log);
    tokenBody = (n) => ({ access_token: `unit-token-${n}`, token_type: 'Bearer', expires_in: 100, refresh_token: `unit-rotated-${n}` });
    try {
      // The refresh spent the stored refresh token (rotation): its answer is all the login has left.
      const first = await source.renew('unit-refused-token');
      expect(first).toMatch(/^unit-token-\d+$/);
      expect(source.current()).toBe(first);
      expect(readFileSync(file, 'utf8')).toBe(before);
      // Refused again: the rotated refresh token held in memory is the one sent, not the spent one in the file.
      const second = await source.renew(first);
      expect(lastTokenForm.get('refresh_token')).toBe(`unit-rotated-${first.slice('unit-token-'.length)}`);
      expect(source.current()).toBe(second);
      // The server restarted (its connection closed, then a new one): the tokens in memory are the new connection's.
      source.release();
      source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, log);
      expect(source.current()).toBe(second);
      const warnings = lines.filter((l) => l.includes('could not be written'));
      expect(warnings).toHaveLength(1);
      for (const secret of [first, second, 'unit-refresh-token', 'unit-rotated']) expect(lines.join('\n')).not.toContain(secret);
    } finally {
      readOnly(dir, false);
    }
    await Promise.resolve();
    // Writable again: the next request stores the tokens in use, 0600, and no temporary file is left.
    expect(source.current()).toMatch(/^unit-token-/);
    const now = JSON.parse(readFileSync(file, 'utf8')) as StoredTokens;
    expect(now.accessToken).toBe(source.current());
    expect(now.refreshToken).toMatch(/^unit-rotated-/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['u.json']);
    expect(lines.some((l) => l.includes('the refreshed tokens are stored now'))).toBe(true);
    source.release();
  });

  it('a token file that is a symlink is written in place of its target (the symlink kept), and locked as its target', async () => {
    const vault = mkdtempSync(join(tmpdir(), 'switchyard-stored-vault-'));
    const target = join(vault, 'u.json');
    storedLogin(target, 'unit-refused-token');
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    symlinkSync(target, file);
    const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    const token = await source.renew('unit-refused-token');
    source.release();
    expect(lstatSync(file).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(target, 'utf8')).accessToken).toBe(token);
    expect(statSync(target).mode & 0o777).toBe(0o600);
    // No temporary file left; the takeover lock's file (empty, owner-only) stays, never removed (oauth-token-lock.ts).
    expect(readdirSync(vault).sort()).toEqual(['u.json', 'u.json.takeover']);
    expect([statSync(join(vault, 'u.json.takeover')).size, statSync(join(vault, 'u.json.takeover')).mode & 0o777]).toEqual([0, 0o600]);
    // A process over the target's own name waits for one over the symlink.
    const release = await lockTokenFile(file);
    await expect(lockTokenFile(target, 200)).resolves.toBeUndefined();
    release!();
  });

  it('temporary token files a killed write left (they hold tokens) are removed by the next write when old, and by the logout', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const file = join(dir, 'u.json');
    const old = new Date(Date.now() - 120_000);
    for (const name of ['u.json.0123456789ab.tmp', 'u.client.json.0123456789ab.tmp']) {
      writeFileSync(join(dir, name), '{"refreshToken":"left"}');
      utimesSync(join(dir, name), old, old);
    }
    // Another process's write in flight: not touched by a write.
    writeFileSync(join(dir, 'u.json.ba9876543210.tmp'), '{"refreshToken":"in flight"}');
    storedLogin(file, 'unit-token');
    expect(readdirSync(dir).sort()).toEqual(['u.client.json.0123456789ab.tmp', 'u.json', 'u.json.ba9876543210.tmp']);
    expect(removeTokenFile(file)).toBe(true);
    expect(readdirSync(dir)).toEqual(['u.client.json.0123456789ab.tmp']);
  });

  it('a logout in a folder that does not let the token file go says so (permission), not ENOTDIR of a folder to empty', (ctx) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const file = join(dir, 'u.json');
    storedLogin(file, 'unit-token');
    if (!readOnly(dir, true)) return ctx.skip('cannot make a folder read-only here (chattr +i as root, mode 0500 otherwise)');
    try {
      expect(() => removeTokenFile(file)).toThrow(/^(EPERM|EACCES|EROFS)\b.*unlink/);
    } finally {
      readOnly(dir, false);
    }
    expect(existsSync(file)).toBe(true);
  });

  it("a refresh takes over a stale lock of the token file (its process gone, its pid another process's since, or too old), and leaves none behind", async () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    const lockOf = (file: string): string => `${file}.lock`;
    for (const stale of ['dead pid', 'reused pid', 'old'] as const) {
      const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
      storedLogin(file, 'unit-refused-token');
      if (stale === 'dead pid') writeFileSync(lockOf(file), JSON.stringify({ pid: gone, host: hostname() }));
      // A crashed holder's pid now another process's (this one's parent, started at another time).
      else if (stale === 'reused pid') writeFileSync(lockOf(file), JSON.stringify({ pid: process.ppid, host: hostname(), started: `${processStart(process.ppid)}0` }));
      else {
        writeFileSync(lockOf(file), '');
        utimesSync(lockOf(file), new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
      }
      const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
      const t0 = Date.now();
      await expect(source.renew('unit-refused-token'), stale).resolves.toMatch(/^unit-token-/);
      // Not the 12 s a live holder is waited for.
      expect(Date.now() - t0, stale).toBeLessThan(5_000);
      expect(existsSync(lockOf(file)), stale).toBe(false);
      source.release();
    }
  });

  it("a refresh lock taken over from its holder (judged stale by its age, as after a wall clock stepped forward) is not removed by that holder's release", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    const first = await lockTokenFile(file);
    expect(first).toBeDefined();
    utimesSync(`${file}.lock`, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const second = await lockTokenFile(file, 200);
    expect(second).toBeDefined();
    first!();
    // The second holder's lock stands: a third refresh waits for it.
    expect(existsSync(`${file}.lock`)).toBe(true);
    await expect(lockTokenFile(file, 200)).resolves.toBeUndefined();
    second!();
    expect(existsSync(`${file}.lock`)).toBe(false);
  });

  it('a refresh waits for a live holder its waitMs on the monotonic clock: a wall clock stepped back an hour does not keep it waiting that hour', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    const first = await lockTokenFile(file);
    expect(first).toBeDefined();
    // Only Date: the polls are real timers.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const second = lockTokenFile(file, 200);
      vi.setSystemTime(Date.now() - 3_600_000);
      const t0 = performance.now();
      await expect(Promise.race([second, new Promise((r) => setTimeout(() => r('still waiting'), 3_000))])).resolves.toBeUndefined();
      expect(performance.now() - t0).toBeLessThan(3_000);
    } finally {
      vi.useRealTimers();
      first!();
    }
  });

  it('a refresh lock held past LOCK_STALE_MS by a holder still at work (it touches the lock while held) is not taken over', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    try {
      const first = await lockTokenFile(file);
      expect(first).toBeDefined();
      // A logout revoking at a slow authorization server, or a refresh and its write, past the bound.
      vi.advanceTimersByTime(LOCK_STALE_MS + 5_000);
      await expect(lockTokenFile(file, 0)).resolves.toBeUndefined();
      first!();
      expect(existsSync(`${file}.lock`)).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a logout that finds the refresh lock held says it waits, and when still held stops saying so, revoking and removing nothing; released, it goes on', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(file, 'unit-logout-locked');
    const held = await lockTokenFile(file);
    const said: string[] = [];
    const opts = { id: 'u', file, serverUrl: `${base}/mcp`, revoke: false, forgetClient: false, say: (l: string) => void said.push(l) };
    const waiting = `another switchyard process (pid ${process.pid} on ${hostname()}) is refreshing or storing this login (it holds ${file}.lock); waiting for it…`;
    expect(await logout({ ...opts, lockWaitMs: 100 })).toBe(1);
    expect(said).toEqual([
      waiting,
      `logout of "u" stopped: another switchyard process (pid ${process.pid} on ${hostname()}) still holds ${file}.lock; nothing was revoked or removed. Run the logout again once it is done, or end that process`,
    ]);
    expect(existsSync(file)).toBe(true);
    said.length = 0;
    const later = logout({ ...opts, lockWaitMs: 10_000 });
    await vi.waitFor(() => expect(said).toEqual([waiting]));
    held!();
    expect(await later).toBe(0);
    expect(said).toEqual([waiting, `logged out of "u": removed ${file}`]);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.lock`)).toBe(false);
  });

  // Unlocked, a file that held no tokens was removed at once: a login storing its tokens under
  // the lock meanwhile lost them to a logout said to be of the file before.
  it('a logout of a token file that holds no tokens takes the lock too: it waits for a login storing under it', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    writeFileSync(file, '{"accessToken": "cut sho');
    const held = await lockTokenFile(file, 0, 'login');
    const said: string[] = [];
    expect(await logout({ id: 'u', file, serverUrl: `${base}/mcp`, revoke: false, forgetClient: false, say: (l) => void said.push(l), lockWaitMs: 100 })).toBe(1);
    expect(said.at(-1)).toMatch(/^logout of "u" stopped: another switchyard process .* still holds .*nothing was revoked or removed/);
    expect(readFileSync(file, 'utf8')).toBe('{"accessToken": "cut sho');
    held!();
  });

  // A refresh waited LOCK_WAIT_MS (12 s) behind a logout revoking at a slow authorization server,
  // then said another process was refreshing: "try again", which the logout made wrong.
  it('a refresh behind a logout fails at once saying so and what to do; released, the refresh goes ahead; a lock says what its holder does', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(file, 'unit-refused-token');
    const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    const holder = `(pid ${process.pid} on ${hostname()})`;
    let held = await lockTokenFile(file, 0, 'logout');
    const t0 = Date.now();
    await expect(source.renew('unit-refused-token')).rejects.toThrow(
      `servers.u: \`switchyard logout u\` ${holder} is removing this login (it holds ${file}.lock); once it is done, run \`switchyard login u\` to log in again`,
    );
    expect(Date.now() - t0).toBeLessThan(LOCK_WAIT_MS / 4);
    held!();
    // Released (the logout failed, the login stands): the next request's refresh goes ahead.
    await new Promise((r) => setTimeout(r, 1_100)); // the failure's cool-down
    await expect(source.renew('unit-refused-token')).resolves.toMatch(/^unit-token-/);
    source.release();
    held = await lockTokenFile(file, 0, 'login');
    expect(readFileSync(`${file}.lock`, 'utf8')).toContain('"doing":"login"');
    held!();
  });

  it('a lock that cannot be removed (a folder by its name, stale by its age) is waited for until the bound, not spun on', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    mkdirSync(`${file}.lock`);
    utimesSync(`${file}.lock`, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    await expect(lockTokenFile(file, 200)).resolves.toBeUndefined();
  });

  it("a stale lock taken over by a faster process meanwhile (its new lock with the old one's inode number) is left to it", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    const lock = `${file}.lock`;
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!;
    writeFileSync(lock, JSON.stringify({ pid: gone, host: hostname() }));
    // Another process (alive: this one's parent) takes the dead holder's lock over just after this
    // one read it; the file system gives its new lock the removed one's inode number (as it does
    // at once): the same file, written again, stands for it.
    const fresh = JSON.stringify({ pid: process.ppid, host: hostname(), nonce: 'other' });
    const real = fs.readFileSync;
    let raced = false;
    const read = vi.spyOn(fs, 'readFileSync').mockImplementation(((p: fs.PathOrFileDescriptor, o?: unknown) => {
      const text = real(p, o as BufferEncoding);
      if (p === lock && !raced) {
        raced = true;
        writeFileSync(lock, fresh);
      }
      return text;
    }) as typeof fs.readFileSync);
    syncBuiltinESMExports();
    try {
      await expect(lockTokenFile(file, 200)).resolves.toBeUndefined();
    } finally {
      read.mockRestore();
      syncBuiltinESMExports();
    }
    expect(readFileSync(lock, 'utf8')).toBe(fresh);
  });

  it('a lock that is a symlink pointing nowhere is waited for, and taken over when old, not spun on', () => {
    // In a child with a deadline: a synchronous spin would hang this worker past any test timeout.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const store = JSON.stringify(pathToFileURL(join(packageRoot, 'dist/src/upstream/oauth-token-lock.js')).href);
    const script = `import { lockTokenFile } from ${store};
import { lutimesSync, symlinkSync } from 'node:fs';
const file = process.argv[1] + '/u.json';
symlinkSync(process.argv[1] + '/nowhere', file + '.lock');
const fresh = await lockTokenFile(file, 200);
const old = new Date(Date.now() - 60_000);
lutimesSync(file + '.lock', old, old);
const stale = await lockTokenFile(file, 200);
console.log(fresh === undefined, typeof stale);`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, dir], { encoding: 'utf8', timeout: 10_000 });
    expect(r.error, r.stderr).toBeUndefined();
    expect(r.stdout.trim(), r.stderr).toBe('true function');
  });

  it('a stale lock left in a folder made read-only since is as no lock: the refresh goes ahead alone, not failing after the whole wait', async (ctx) => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const file = join(dir, 'u.json');
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: 1, host: 'another-host' }));
    utimesSync(`${file}.lock`, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    if (!readOnly(dir, true)) return ctx.skip('cannot make a folder read-only here (chattr +i as root, mode 0500 otherwise)');
    try {
      const release = await lockTokenFile(file, 1_000);
      expect(release).toBeTypeOf('function');
      release!();
    } finally {
      readOnly(dir, false);
    }
  });

  it("a reload's new connection over the same token file has its settings in force (a url moved), though the old connection is open still", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(file, 'unit-old-url-token');
    const old = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    expect(old.current()).toBe('unit-old-url-token');
    // The reload builds the new connection first, then retires the old one.
    const moved = StoredTokenSource.acquire(file, 'u', `${base}/moved`, undefined, silentLogger);
    old.release();
    // The user logs in for the new url.
    storedLogin(file, 'unit-new-url-token', { serverUrl: `${base}/moved`, resource: `${base}/moved` });
    await Promise.resolve();
    expect(moved.current()).toBe('unit-new-url-token');
    moved.release();
  });

  it("a login's token file is looked at once per request: with a current token, an expired one without a refresh token, and none stored", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stored-'));
    const file = join(dir, 'u.json');
    const stats = vi.spyOn(fs, 'statSync');
    syncBuiltinESMExports();
    const looks = (): number => stats.mock.calls.filter(([p]) => p === file).length;
    try {
      const peer = upstream();
      const http = new OAuthHttp(peer, StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger));
      // None stored: the request fails saying to log in, after one look.
      await expect(http.post('{}')).rejects.toThrow(/no login stored/);
      expect(looks()).toBe(1);
      storedLogin(file, 'unit-current-token', { expiresAt: Date.now() + 3_600_000 });
      stats.mockClear();
      await http.post('{}');
      await http.post('{}');
      expect(looks()).toBe(2);
      expect(peer.sent.at(-1)).toBe('Bearer unit-current-token');
      // Expired with no refresh token: one look, and the error says to log in.
      storedLogin(file, 'unit-expired-token', { expiresAt: Date.now() - 1, refreshToken: undefined });
      stats.mockClear();
      await expect(http.post('{}')).rejects.toThrow(/no refresh token; run `switchyard login u`/);
      expect(looks()).toBe(1);
      http.close();
    } finally {
      stats.mockRestore();
      syncBuiltinESMExports();
    }
  });

  it('a refreshed token whose lifetime is past a number (expires_in 1e306), or a stored expiry that is none, is current: no refresh per request', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(file, 'unit-refused-token');
    const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    tokenBody = (n) => ({ access_token: `unit-token-${n}`, token_type: 'Bearer', expires_in: 1e306 });
    const token = await source.renew('unit-refused-token');
    // Date.now() + 1e309 ms is Infinity, which the file held as null: never current, refreshed at every request.
    expect(source.current()).toBe(token);
    expect(source.due).toBe(false);
    expect(JSON.parse(readFileSync(file, 'utf8')).expiresAt).toBeUndefined();
    source.release();
    // A file edited by hand: times that are no numbers, scopes that are no list.
    const edited = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(edited, 'unit-edited-token', { expiresAt: 'tomorrow', obtainedAt: null, scopes: 'mcp' } as unknown as Partial<StoredTokens>);
    const again = StoredTokenSource.acquire(edited, 'u', `${base}/mcp`, undefined, silentLogger);
    expect(again.current()).toBe('unit-edited-token');
    again.release();
  });

  it('a refresh token refused (invalid_grant) is not sent again: the error, saying to log in, stands until a new login is stored', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(file, 'unit-refused-token');
    const source = StoredTokenSource.acquire(file, 'u', `${base}/mcp`, undefined, silentLogger);
    tokenStatus = 400;
    tokenError = 'invalid_grant';
    const before = posts;
    await expect(source.renew('unit-refused-token')).rejects.toThrow(/the refresh token was refused .*; run `switchyard login u`/);
    // Past the cool-down of a passing failure: the same refused refresh token is not tried again.
    await new Promise((r) => setTimeout(r, 1_100));
    await expect(source.renew('unit-refused-token')).rejects.toThrow(/run `switchyard login u`/);
    expect(posts).toBe(before + 1);
    // A new login stored: its refresh token is tried.
    tokenStatus = 200;
    storedLogin(file, 'unit-relogged-token', { expiresAt: Date.now() - 1 });
    await expect(source.renew('unit-relogged-token')).resolves.toMatch(/^unit-token-/);
    expect(posts).toBe(before + 2);
    source.release();
  });

  it('a refresh refused for its client (invalid_client) says what to do by how the client came (registered: forget it, and it is not sent again; configured: the secret)', async () => {
    tokenStatus = 401;
    tokenError = 'invalid_client';
    const registered = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'u.json');
    storedLogin(registered, 'unit-refused-token', { registeredRedirectUri: 'http://127.0.0.1:1/callback' });
    const source = StoredTokenSource.acquire(registered, 'u', `${base}/mcp`, undefined, silentLogger);
    const before = posts;
    await expect(source.renew('unit-refused-token')).rejects.toThrow(
      /servers\.u: the authorization server refused the client an earlier login registered \(token endpoint .* answered HTTP 401 invalid_client.*\); run `switchyard logout u --forget-client`, then `switchyard login u`$/,
    );
    // Past the cool-down of a passing failure: the refused client is not tried again.
    await new Promise((r) => setTimeout(r, 1_100));
    await expect(source.renew('unit-refused-token')).rejects.toThrow(/--forget-client/);
    expect(posts).toBe(before + 1);
    source.release();
    const configured = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'c.json');
    storedLogin(configured, 'unit-refused-token', { clientId: 'desk', clientAuth: 'client_secret_basic' });
    const other = StoredTokenSource.acquire(configured, 'c', `${base}/mcp`, 'unit-secret-123', silentLogger);
    await expect(other.renew('unit-refused-token')).rejects.toThrow(
      /servers\.c: the authorization server refused the client desk \(.*invalid_client.*\); check servers\.c\.oauth\.clientSecret \(a reload takes a new one\), or run `switchyard login c` with the client now configured$/,
    );
    other.release();
    // A public client has no secret to check: its id, or its metadata document.
    const pub = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'p.json');
    storedLogin(pub, 'unit-refused-token', { clientId: 'desk-public' });
    const publicSource = StoredTokenSource.acquire(pub, 'p', `${base}/mcp`, undefined, silentLogger);
    await expect(publicSource.renew('unit-refused-token')).rejects.toThrow(/refused the client desk-public \(.*\); check servers\.p\.oauth\.clientId \(a public client: no secret is sent\), or run `switchyard login p`/);
    publicSource.release();
    const doc = join(mkdtempSync(join(tmpdir(), 'switchyard-stored-')), 'd.json');
    storedLogin(doc, 'unit-refused-token', { clientId: 'https://hub.example.com/client.json' });
    const docSource = StoredTokenSource.acquire(doc, 'd', `${base}/mcp`, undefined, silentLogger);
    await expect(docSource.renew('unit-refused-token')).rejects.toThrow(
      /check that the authorization server can fetch the client metadata document https:\/\/hub\.example\.com\/client\.json \(servers\.d\.oauth\.clientMetadataUrl\) and takes what it says, or run `switchyard login d`/,
    );
    docSource.release();
  });

  it('a login takes the client an earlier one registered only when it would register one: not over a configured client or the metadata document, nor at another issuer', () => {
    const prior = { issuer: 'https://as.example.com', clientId: 'dyn-1', clientAuth: 'none' as const, registeredRedirectUri: 'http://127.0.0.1:1/callback' };
    const cimd = { client_id_metadata_document_supported: true };
    expect(clientToReuse({}, {}, prior.issuer, prior)).toBe(prior);
    expect(clientToReuse({ clientMetadataUrl: 'https://hub.example.com/client.json' }, {}, prior.issuer, prior)).toBe(prior);
    // Set since the registration: the metadata document comes first.
    expect(clientToReuse({ clientMetadataUrl: 'https://hub.example.com/client.json' }, cimd, prior.issuer, prior)).toBeUndefined();
    expect(clientToReuse({ clientId: 'configured' }, {}, prior.issuer, prior)).toBeUndefined();
    expect(clientToReuse({}, {}, 'https://other.example.com', prior)).toBeUndefined();
    expect(clientToReuse({}, {}, prior.issuer, undefined)).toBeUndefined();
  });

  it('registers no login client at a plain-http registration endpoint off loopback, as it uses no such authorization or token endpoint', async () => {
    await expect(loginClient({}, { registration_endpoint: 'http://as.invalid/register' }, 'https://as.invalid', 'http://127.0.0.1:1/callback', new OAuthUrlPolicy('https://as.invalid/mcp', undefined))).rejects.toThrow(
      /the registration endpoint http:\/\/as\.invalid\/register is plain http on a host that is not loopback: refused/,
    );
  });

  it("a login's redirect listener waits out a timeout past setTimeout's range (--timeout of 25 days and more)", async () => {
    const redirect = await listenForRedirect('unit-state', 3_000_000_000);
    try {
      await new Promise((r) => setTimeout(r, 20));
      const res = await fetch(`${redirect.redirectUri}?code=c&state=unit-state`);
      expect(res.status).toBe(200);
      expect((await redirect.callback).params.get('code')).toBe('c');
    } finally {
      redirect.close();
    }
  });

  it('asks no token for metadata of another resource, nor of an authorization server that names another issuer', async () => {
    for (const [path, why] of [
      ['other', /is for https:\/\/evil\.example\.com\/mcp, not for this server/],
      ['liar', /no authorization server metadata for http:\/\/127\.0\.0\.1:\d+\/liar-as; tried .*\(names issuer https:\/\/evil\.example\.com\)/],
    ] as const) {
      const before = posts;
      const http = new OAuthHttp(upstream(), OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/${path}`, silentLogger));
      await expect(http.post('{}')).rejects.toThrow(why);
      expect(posts).toBe(before);
      http.close();
    }
  });

  it('is not sent by what an upstream names to a cloud metadata address: a challenge, an authorization server, a redirect', async () => {
    for (const [path, challenge, why] of [
      ['nowhere', 'Bearer resource_metadata="http://169.254.169.254/latest/meta-data/"', /tried http:\/\/169\.254\.169\.254\/latest\/meta-data\/ \(not asked: 169\.254\.169\.254 is a link-local address/],
      ['imds', undefined, /the authorization server http:\/\/169\.254\.169\.254 is not asked: 169\.254\.169\.254 is a link-local address .*oauth\.issuer/],
      ['hop', undefined, /redirected to http:\/\/\[::ffff:a9fe:a9fe\]\/latest\/meta-data\/, not followed: ::ffff:a9fe:a9fe is a link-local address/],
    ] as const) {
      const http = new OAuthHttp(upstream(challenge), OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/${path}`, silentLogger));
      await expect(http.post('{}')).rejects.toThrow(why);
      http.close();
    }
  });

  it("warns of a challenge's resource_metadata the URL policy refuses (where it points and why, no query), though the well-known metadata serves; a later failure says it too", async () => {
    const imds = 'http://169.254.169.254/latest/meta-data/iam?X-Amz-Signature=unit-query-secret';
    const refusedLines = (lines: string[]): Record<string, unknown>[] =>
      lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => String(l.msg).includes('resource_metadata URL the hub does not ask'));
    // The well-known metadata of /mcp serves: a token, and a warning line all the same.
    const { log, lines } = keptLog();
    const client = OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/mcp`, log);
    const http = new OAuthHttp(upstream(`Bearer resource_metadata="${imds}"`), client);
    expect((await http.post('{}')).status).toBe(200);
    // A 401 naming the same refused URL again is no news: the discovery made for it stands (no second warning).
    const first = client.current();
    expect(await client.renew(first, parseBearerChallenge(`Bearer resource_metadata="${imds}"`))).not.toBe(first);
    expect(refusedLines(lines)).toEqual([
      expect.objectContaining({ level: 40, resourceMetadata: 'http://169.254.169.254/latest/meta-data/iam', reason: expect.stringMatching(/^not asked: 169\.254\.169\.254 is a link-local address/) }),
    ]);
    expect(lines.join('\n')).not.toContain('unit-query-secret');
    http.close();
    // A URL that is not http(s) is refused as such, not dropped unsaid; and the error of a discovery
    // that goes wrong after the fallback (an authorization server naming another issuer) says both.
    for (const [named, shown, reason] of [
      [imds, 'http://169.254.169.254/latest/meta-data/iam', /not asked: 169\.254\.169\.254 is a link-local address/],
      ['file:///etc/passwd', '(a file: URL)', /not asked: file: is not http\(s\)/],
    ] as const) {
      const kept = keptLog();
      const liar = new OAuthHttp(upstream(`Bearer resource_metadata="${named}"`), OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/liar`, kept.log));
      const err = await liar.post('{}').then(() => undefined, (e: Error) => e.message);
      expect(err).toMatch(/no authorization server metadata for http:\/\/127\.0\.0\.1:\d+\/liar-as; tried .*\(names issuer https:\/\/evil\.example\.com\)/);
      expect(err).toContain(`the resource_metadata of the server's challenge, ${shown}, was not asked: `);
      expect(err).toMatch(reason);
      expect(err).not.toContain('unit-query-secret');
      expect(refusedLines(kept.lines)).toEqual([expect.objectContaining({ resourceMetadata: shown, reason: expect.stringMatching(reason) })]);
      liar.close();
    }
  });

  it("a login says of a challenge's resource_metadata the URL policy refuses, and its error names it", async () => {
    const said: string[] = [];
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-login-unit-'));
    const err = await login({
      serverId: 'u', serverUrl: `${base}/refused-login`, oauth: { grant: 'authorization_code' }, tokenFile: join(dir, 'u.json'),
      open: () => undefined, timeoutMs: 1_000, say: (l) => said.push(l),
    }).then(() => undefined, (e: Error) => e.message);
    expect(said).toEqual([expect.stringMatching(/^warning: the server's challenge names resource_metadata http:\/\/169\.254\.169\.254\/latest\/meta-data\/iam, which is not asked \(not asked: 169\.254\.169\.254 is a link-local address.*\); trying the well-known locations$/)]);
    expect(err).toMatch(/no protected resource metadata for http:\/\/127\.0\.0\.1:\d+\/refused-login; tried http:\/\/169\.254\.169\.254\/latest\/meta-data\/iam \(not asked: 169\.254\.169\.254 is a link-local address/);
    expect(said.join('\n') + err).not.toContain('unit-query-secret');
  });

  it("a login's error never shows its client secret, code or PKCE verifier, though the authorization server echoes them", async () => {
    tokenStatus = 400;
    tokenError = 'invalid_grant';
    tokenDescription = (f) => `refused code ${f.get('code')} verifier ${f.get('code_verifier')} secret ${f.get('client_secret')}`;
    let verifier = '';
    const err = await login({
      serverId: 'u', serverUrl: `${base}/mcp`, oauth: { grant: 'authorization_code', clientId: 'desk', clientSecret: 'unit-login-secret-42', tokenEndpointAuth: 'client_secret_post' },
      tokenFile: join(mkdtempSync(join(tmpdir(), 'switchyard-login-unit-')), 'u.json'), timeoutMs: 5_000, say: () => undefined,
      open: async (url) => void (await (await fetch(url, { redirect: 'follow' })).text()),
    }).then(() => undefined, (e: Error) => e.message);
    verifier = lastTokenForm.get('code_verifier') ?? '';
    expect(verifier.length).toBeGreaterThan(20);
    expect(err).toMatch(/token endpoint http:\/\/127\.0\.0\.1:\d+\/token answered HTTP 400 invalid_grant: refused code \[redacted:config-secret\] verifier \[redacted:config-secret\] secret \[redacted:config-secret\]/);
    for (const s of ['unit-login-code-5f1e', verifier, 'unit-login-secret-42']) expect(err).not.toContain(s);
  });

  // Written after the lock's release (login) and removed after it (logout), a login storing as a
  // `logout --forget-client` ran could end with its tokens removed and its client kept, the
  // logout having said it forgot it. Both now happen under the lock, as the tokens do.
  it('a login writes the client it keeps apart, and logout --forget-client removes it, under the refresh lock (with no tokens stored too)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-login-unit-')), 'u.json');
    const clientFile = clientFileOf(file);
    const locked: string[] = [];
    let watch = false;
    const lockNow = (what: string): void => void (watch && locked.push(`${what} ${existsSync(`${file}.lock`) ? 'locked' : 'unlocked'}`));
    const renameReal = fs.renameSync;
    const unlinkReal = fs.unlinkSync;
    const rename = vi.spyOn(fs, 'renameSync');
    const unlink = vi.spyOn(fs, 'unlinkSync');
    rename.mockImplementation(((from: fs.PathLike, to: fs.PathLike) => {
      if (to === clientFile) lockNow('client written');
      renameReal(from, to);
    }) as typeof fs.renameSync);
    unlink.mockImplementation(((p: fs.PathLike) => {
      if (p === clientFile) lockNow('client removed');
      return unlinkReal(p);
    }) as typeof fs.unlinkSync);
    syncBuiltinESMExports();
    try {
      // A client an earlier login registered, on a redirect port free now: this login is it again, and keeps it.
      const port = await freePortInRange();
      const kept = { issuer: base, clientId: 'kept-client', clientAuth: 'none' as const, registeredRedirectUri: `http://127.0.0.1:${port}/callback` };
      writeStoredClient(file, kept);
      watch = true;
      const r = await login({
        serverId: 'u', serverUrl: `${base}/mcp`, oauth: { grant: 'authorization_code' }, tokenFile: file, timeoutMs: 5_000, say: () => undefined,
        open: async (url) => void (await (await fetch(url, { redirect: 'follow' })).text()),
      });
      expect(r.client).toBe('registered before');
      const said: string[] = [];
      const opts = { id: 'u', file, serverUrl: `${base}/mcp`, revoke: false, forgetClient: true, say: (l: string) => void said.push(l) };
      expect(await logout(opts)).toBe(0);
      // A logout before kept the client: forgetting it alone takes the lock too.
      watch = false;
      writeStoredClient(file, kept);
      watch = true;
      expect(await logout(opts)).toBe(0);
      expect(said).toEqual([
        `logged out of "u": removed ${file}; forgot the client registered with ${base} (the next login registers a new one)`,
        `no login stored for "u"; forgot the client registered with ${base} (the next login registers a new one)`,
      ]);
      expect(locked).toEqual(['client written locked', 'client removed locked', 'client removed locked']);
      expect(existsSync(clientFile)).toBe(false);
    } finally {
      rename.mockRestore();
      unlink.mockRestore();
      syncBuiltinESMExports();
    }
  });

  it('a login whose tokens find the refresh lock held says it waits, and when still held stores them all the same, saying so', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-login-unit-')), 'u.json');
    const held = await lockTokenFile(file);
    const said: string[] = [];
    try {
      const r = await login({
        serverId: 'u', serverUrl: `${base}/mcp`, oauth: { grant: 'authorization_code', clientId: 'desk' }, tokenFile: file, timeoutMs: 5_000, say: (l) => said.push(l), lockWaitMs: 100,
        open: async (url) => void (await (await fetch(url, { redirect: 'follow' })).text()),
      });
      expect(JSON.parse(readFileSync(file, 'utf8')).accessToken).toBe(r.tokens.accessToken);
    } finally {
      held!();
    }
    const holder = `another switchyard process (pid ${process.pid} on ${hostname()})`;
    expect(said.filter((l) => l.includes('.lock'))).toEqual([
      `${holder} is refreshing, storing or logging out of this login (it holds ${file}.lock); waiting for it…`,
      `warning: ${holder} still holds ${file}.lock; the tokens are stored without waiting longer (if it is a logout, it may remove them: \`switchyard doctor\` says whether the login is stored)`,
    ]);
  });

  it("a logout's account of a refused revocation shows neither the tokens nor the configured client secret the authorization server echoed", async () => {
    const t: StoredTokens = {
      serverUrl: `${base}/mcp`, resource: `${base}/mcp`, issuer: base, tokenEndpoint: `${base}/token`, clientId: 'desk', clientAuth: 'client_secret_post',
      accessToken: 'unit-revoked-access', refreshToken: 'unit-revoked-refresh', scopes: [], obtainedAt: Date.now(),
    };
    const said = await revokeLogin(t, `${base}/mcp`, { grant: 'authorization_code', clientId: 'desk', clientSecret: 'unit-logout-secret-77' });
    expect(said).toMatch(/^the authorization server did not revoke the refresh token \(.*HTTP 400 invalid_request: not revoking \[redacted\] for desk:\[redacted\].*\) nor the access token/);
    for (const s of ['unit-revoked-access', 'unit-revoked-refresh', 'unit-logout-secret-77']) expect(said).not.toContain(s);
  });

  it("a logout's account of a refused revocation shows no secret the authorization server quoted encoded: URL- or form-encoded, JSON-escaped, in the Basic authorization", async () => {
    const secret = 'unit/logout+secret "77" ~!';
    const t: StoredTokens = {
      serverUrl: `${base}/mcp`, resource: `${base}/mcp`, issuer: base, tokenEndpoint: `${base}/token`, clientId: 'desk', clientAuth: 'client_secret_basic',
      accessToken: 'unit+revoked/access=', refreshToken: 'unit-revoked-refresh!(1)', scopes: [], obtainedAt: Date.now(),
    };
    revokeDescription = (f, auth, body) =>
      `token ${encodeURIComponent(f.get('token')!)} json ${JSON.stringify({ token: f.get('token') })} body ${body} auth ${auth} decoded ${Buffer.from(auth!.slice(6), 'base64').toString()} rewrapped ${Buffer.from(`x${secret}`).toString('base64url')}`;
    const said = await revokeLogin(t, `${base}/mcp`, { grant: 'authorization_code', clientId: 'desk', clientSecret: secret });
    expect(said).toMatch(/^the authorization server did not revoke the refresh token \(.*HTTP 400 invalid_request: token \[redacted\] json .*\) nor the access token/);
    const forms = (v: string): string[] => [v, encodeURIComponent(v), new URLSearchParams({ v }).toString().slice(2), JSON.stringify(v).slice(1, -1), Buffer.from(v).toString('base64').slice(0, 12)];
    for (const v of [t.accessToken, t.refreshToken!, secret]) for (const f of forms(v)) expect(said, f).not.toContain(f);
    expect(said).not.toContain(Buffer.from(`desk:${new URLSearchParams({ v: secret }).toString().slice(2)}`).toString('base64'));
    expect(said).not.toContain(Buffer.from(`x${secret}`).toString('base64url').slice(4, 20));
  });

  it('an authorization server that quotes the client assertion it refused has it redacted whole, not cut after 300 characters', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    tokenStatus = 400;
    tokenError = 'invalid_client';
    tokenDescription = (f) => `assertion ${f.get('client_assertion')} refused`;
    const http = new OAuthHttp(upstream(), OAuthClient.acquire({ clientId: 'jwt-refused', privateKey: pem, signingAlgorithm: 'RS256' }, `${base}/mcp`, silentLogger));
    const err = await http.post('{}').then(() => '', (e: Error) => e.message);
    http.close();
    const assertion = lastTokenForm.get('client_assertion')!;
    expect(assertion.length).toBeGreaterThan(300);
    expect(err).toMatch(/answered HTTP 400 invalid_client: assertion \[redacted:config-secret\] refused \(client jwt-refused, private_key_jwt\)/);
    // No piece of it either: its signature's first characters are what a cut at 300 left.
    for (const seg of assertion.split('.')) expect(err).not.toContain(seg.slice(0, 16));
  });

  it("a login to a server that asks no token (or is not there) says so, not only the metadata URLs tried", async () => {
    for (const [path, hint] of [
      ['open', 'the server answered a request without a token with HTTP 200: it may need no login (then servers.u.oauth can go)'],
      ['nothing-here', 'the server answered a request without a token with HTTP 404: is servers.u.url right?'],
    ] as const) {
      const err = await login({
        serverId: 'u', serverUrl: `${base}/${path}`, oauth: { grant: 'authorization_code' }, tokenFile: join(mkdtempSync(join(tmpdir(), 'switchyard-login-unit-')), 'u.json'),
        open: () => undefined, timeoutMs: 1_000, say: () => undefined,
      }).then(() => undefined, (e: Error) => e.message);
      expect(err).toMatch(new RegExp(`^OAuth: discovery: no protected resource metadata for http://127\\.0\\.0\\.1:\\d+/${path}; tried .* \\(${hint.replace(/[().?]/g, '\\$&')}\\)$`));
    }
  });

  it('a login whose oauth.redirectPort another program listens on says so, naming the setting and what to do', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    try {
      const err = await login({
        serverId: 'u', serverUrl: `${base}/mcp`, oauth: { grant: 'authorization_code', clientId: 'desk', redirectPort: port },
        tokenFile: join(mkdtempSync(join(tmpdir(), 'switchyard-login-unit-')), 'u.json'), open: () => undefined, timeoutMs: 1_000, say: () => undefined,
      }).then(() => undefined, (e: Error) => e.message);
      expect(err).toBe(
        `OAuth: the redirect cannot listen on 127.0.0.1:${port}, the port of oauth.redirectPort (EADDRINUSE); another program listens there (another login still waiting?): end it and try again, or register the client with another redirect port and set oauth.redirectPort to it`,
      );
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });

  it("holds URLs an upstream names to its own kind of address, plain http to loopback, except the server's and oauth.issuer's hosts", async () => {
    const pub = new OAuthUrlPolicy('https://93.184.215.14/mcp', undefined);
    expect(await pub.refusal('http://127.0.0.1:7410/admin/servers')).toMatch(/127\.0\.0\.1 is a loopback address and the server is not on one/);
    expect(await pub.refusal('https://10.1.2.3/as')).toMatch(/10\.1\.2\.3 is a private address/);
    expect(await pub.refusal('https://[fd00:ec2::254]/')).toMatch(/is a link-local address/);
    expect(await pub.refusal('https://0x7f.1/')).toMatch(/127\.0\.0\.1 is a loopback address/);
    expect(await pub.refusal('http://93.184.215.15/as')).toMatch(/plain http/);
    expect(await pub.refusal('https://93.184.215.15/as')).toBeUndefined();
    // The server's own host, but plain http for an https server: refused (a downgrade).
    expect(await pub.refusal('http://93.184.215.14/.well-known/oauth-protected-resource')).toMatch(/plain http/);
    expect(await pub.refusal('https://93.184.215.14/.well-known/oauth-protected-resource')).toBeUndefined();
    expect(await new OAuthUrlPolicy('http://93.184.215.14/mcp', undefined).refusal('http://93.184.215.14/.well-known/oauth-protected-resource')).toBeUndefined();
    expect(await new OAuthUrlPolicy('https://93.184.215.14/mcp', 'https://10.1.2.3/as').refusal('https://10.1.2.3/token')).toBeUndefined();
    const lan = new OAuthUrlPolicy('https://10.0.0.5/mcp', undefined);
    expect(await lan.refusal('https://10.9.9.9/as')).toBeUndefined();
    expect(await lan.refusal('https://169.254.169.254/')).toMatch(/link-local/);
    expect(await new OAuthUrlPolicy('http://localhost:9/mcp', undefined).refusal('http://[::1]:8/as')).toBeUndefined();
    // The connection itself is held to the rule, as its host resolves then (a DNS answer changed since refusal() looked).
    const cause = await pub.fetch(`http://localhost:${new URL(base).port}/.well-known/oauth-authorization-server`, {}).then(
      () => 'connected',
      (err: Error) => String((err.cause as Error | undefined)?.message),
    );
    expect(cause).toMatch(/^not connected: (127\.0\.0\.1|::1) is a loopback address/);
  });

  it('a server naming a new scope at every 403 has the step-ups stop at the scope cap, not grow the token request for good', async () => {
    let n = 0;
    const peer: HttpExchanges = {
      post: (_b, o) => Promise.resolve(o?.headers?.authorization ? { status: 403, headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="s${++n}"` }, messages: 0 } : { status: 401, headers: {}, messages: 0 }),
      get: () => Promise.resolve({ status: 405, headers: {}, messages: 0 }),
      delete: () => Promise.resolve({ status: 405, headers: {}, messages: 0 }),
      close: () => undefined,
    };
    const http = new OAuthHttp(peer, OAuthClient.acquire({ clientId: 'c', clientSecret: 'unit-secret-123' }, `${base}/mcp`, silentLogger));
    // Two step-ups per request, one scope each.
    for (let i = 0; i < MAX_SCOPES / 2; i++) expect((await http.post('{}')).status).toBe(403);
    const asked = posts;
    expect((await http.post('{}')).status).toBe(403);
    expect(posts).toBe(asked);
    expect((lastTokenForm.get('scope') ?? '').split(' ').length).toBeLessThanOrEqual(MAX_SCOPES);
    http.close();
  });

  it("signs a private_key_jwt assertion for the issuer by default, and for the token endpoint with oauth.assertionAudience \"token_endpoint\"", async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    for (const [audience, aud] of [[undefined, () => base], ['issuer', () => base], ['token_endpoint', () => `${base}/token`]] as const) {
      const config = { clientId: 'jwt-client', privateKey: pem, signingAlgorithm: 'ES256', ...(audience !== undefined ? { assertionAudience: audience } : {}) };
      const http = new OAuthHttp(upstream(), OAuthClient.acquire(config, `${base}/mcp`, silentLogger));
      expect((await http.post('{}')).status).toBe(200);
      expect(lastTokenForm.get('client_assertion_type')).toBe('urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      const claims = JSON.parse(Buffer.from(lastTokenForm.get('client_assertion')!.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
      expect(claims, String(audience)).toMatchObject({ iss: 'jwt-client', sub: 'jwt-client', aud: aud() });
      http.close();
    }
  });

  it('reads the Bearer challenge and the canonical resource', () => {
    expect(parseBearerChallenge('Basic realm="a", Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/oauth-protected-resource"')).toEqual({
      error: 'insufficient_scope',
      scope: ['a', 'b'],
      resourceMetadata: 'https://x/.well-known/oauth-protected-resource',
    });
    expect(parseBearerChallenge('Basic realm="a"')).toBeUndefined();
    expect(canonicalResource('HTTPS://Example.COM:8443/mcp/?q=1#f')).toBe('https://example.com:8443/mcp');
  });
});
