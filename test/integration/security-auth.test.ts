/**
 * Attack table, authentication rows: every credential attack against the real built hub over
 * loopback HTTP, with keys and tokens made by jose. API keys and OAuth bearer JWTs (local JWKS
 * file) at once; Protected Resource Metadata; step-up challenges for tool scopes; Origin and
 * Host checks still on with valid credentials.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SignJWT } from 'jose';
import { spawn } from 'node:child_process';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { runCli } from '../helpers/cli.js';
import { waitForRows } from './ledger-helpers.js';
import { modernBody, modernHeaders, post, rawHttp, type RawReply } from '../helpers/wire.js';
import {
  AUDIENCE,
  ISSUER,
  challengeParams,
  confusedToken,
  sha256Hex,
  signingKey,
  token,
  unsignedToken,
  waitForReadyWith,
  writeJwks,
  type SigningKey,
} from '../helpers/auth.js';

const ALICE_KEY = 'sy_alice-test-key-0123456789abcdefghijklmnopqrstuv';
const BOB_KEY = 'sy_bob-test-key-0123456789abcdefghijklmnopqrstuvwxy';
const ROOT_KEY = 'sy_root-test-key-0123456789abcdefghijklmnopqrstuvw';
const PRM_URL = 'https://hub.test/.well-known/oauth-protected-resource/mcp';

describe('authentication at the HTTP endpoint', () => {
  let hub: HubProcess;
  let key: SigningKey;
  let stranger: SigningKey;
  let id = 0;
  const secrets: string[] = [ALICE_KEY, BOB_KEY, ROOT_KEY];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-auth-'));
    key = await signingKey('k1');
    stranger = await signingKey('k-unknown');
    writeJwks(join(dir, 'jwks.json'), [key]);
    hub = await startHub(
      {
        auth: {
          apiKeys: [
            { principal: 'alice', sha256: sha256Hex(ALICE_KEY), scopes: ['mcp', 'math'] },
            { principal: 'bob', sha256: sha256Hex(BOB_KEY) },
            { principal: 'root', sha256: sha256Hex(ROOT_KEY), scopes: ['switchyard:admin'] },
          ],
          oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', scopes: ['mcp'], toolScopes: { 'modern__add': 'math', 'modern__counter_*': ['math', 'write'] } },
        },
        servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') },
      },
      { dir },
    );
    await waitForReadyWith(hub.url, ['modern'], ALICE_KEY);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    // No credential ever reaches a log line.
    const logs = hub.logs.join('\n');
    for (const s of secrets) expect(logs).not.toContain(s);
  });

  function call(bearer: string | undefined, method = 'tools/list', params: Record<string, unknown> = {}, extra: Record<string, string> = {}): Promise<RawReply> {
    const name = typeof params.name === 'string' ? params.name : undefined;
    const headers: Record<string, string> = { ...modernHeaders(method, name), ...extra };
    if (bearer !== undefined) headers.authorization = `Bearer ${bearer}`;
    return post(hub.url, modernBody(++id, method, params), headers);
  }

  async function remember(t: string | Promise<string>): Promise<string> {
    const s = await t;
    secrets.push(s);
    return s;
  }

  function expect401(r: RawReply, error?: string): Record<string, string> {
    expect(r.status, r.text).toBe(401);
    const c = challengeParams(r.headers.get('www-authenticate'));
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect(c.resource_metadata).toBe(PRM_URL);
    expect(c.scope).toBe('mcp');
    if (error) expect(c.error).toBe(error);
    else expect(c.error).toBeUndefined();
    expect(r.body?.error?.message).toMatch(/^Unauthorized/);
    return c;
  }

  it('no token → 401 with resource_metadata and scope, no error code', async () => {
    expect401(await call(undefined));
  });

  it("the CLI knows the hub's own refusal under OAuth too (realm), whatever its audience: it asks for an admin key", async () => {
    expect(challengeParams((await call(undefined)).headers.get('www-authenticate')).realm).toBe('switchyard');
    const r = await runCli(['servers', '--url', hub.url], { env: { SWITCHYARD_API_KEY: '' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^switchyard servers: a switchyard daemon runs at http:\/\/127\.0\.0\.1:\d+ and needs an admin key: set SWITCHYARD_API_KEY to one/);
  });

  it('a bad API key → 401 invalid_token', async () => {
    expect401(await call('sy_not-a-key-at-all'), 'invalid_token');
    expect401(await call(undefined, 'tools/list', {}, { 'x-api-key': 'sy_nope' }), 'invalid_token');
  });

  it('a good API key, in Authorization or X-API-Key, is served', async () => {
    const a = await call(ALICE_KEY);
    expect(a.status, a.text).toBe(200);
    expect((a.body?.result?.tools as unknown[]).length).toBeGreaterThan(0);
    const b = await call(undefined, 'tools/list', {}, { 'x-api-key': BOB_KEY });
    expect(b.status, b.text).toBe(200);
  });

  it('`switchyard connect` without a key passes the 401 on with what to do, and with one is served', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bridge', version: '1' } } };
    const bridge = (env: Record<string, string>) =>
      new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn', SWITCHYARD_API_KEY: '', ...env } }));
    const without = bridge({});
    try {
      expect((await without.request(init)).error.message).toMatch(/authentication required.*\(pass --key, or set SWITCHYARD_API_KEY\)/);
    } finally {
      without.kill();
    }
    const keyed = bridge({ SWITCHYARD_API_KEY: ALICE_KEY });
    try {
      expect((await keyed.request(init)).result.protocolVersion).toBe('2025-11-25');
    } finally {
      keyed.kill();
    }
  });

  it('a valid token is served', async () => {
    const r = await call(await remember(token(key, { scope: 'mcp' })));
    expect(r.status, r.text).toBe(200);
  });

  it("a token whose subject is one of the ledger's own principals (hub, anonymous, local, (unauthenticated)), however written → 401 invalid_token", async () => {
    for (const sub of ['hub', 'anonymous', '(unauthenticated)', 'HUB', 'Anonymous', '(UNAUTHENTICATED)', 'ｈｕｂ', 'ＡＮＯＮＹＭＯＵＳ', 'local']) {
      const r = await call(await remember(token(key, { scope: 'mcp', sub })));
      const c = expect401(r, 'invalid_token');
      expect(c.error_description, sub).toMatch(/names a principal the hub keeps for itself/);
    }
  });

  it('a subject that would not read as itself (white space at an end, invisible characters, too long) → 401 invalid_token', async () => {
    const refused: [string, RegExp][] = [
      ['hub ', /white space/],
      [' alice', /white space/],
      ['alice\u00a0', /white space/],
      ['anonymous\u200b', /invisible/],
      ['hu\u00adb', /invisible/],
      ['alice\u202egnp.exe', /invisible/],
      ['alice\u0085', /invisible/],
      ['alice\u2028bob', /invisible/],
      ['\u3164', /invisible/],
      ['a'.repeat(257), /too long/],
    ];
    for (const [sub, why] of refused) {
      const c = expect401(await call(await remember(token(key, { scope: 'mcp', sub }))), 'invalid_token');
      expect(c.error_description, JSON.stringify(sub)).toMatch(why);
    }
    const c = expect401(await call(await remember(token(key, { scope: 'mcp', sub: '' }))), 'invalid_token');
    expect(c.error_description).toMatch(/no usable sub claim/);
  });

  it('ordinary subjects are served: emails, provider ids, UUIDs, names with inner spaces and any script', async () => {
    for (const sub of ['carol@example.com', 'auth0|5f7c8ec7c33c6c004bbafe82', '6f1c2b1e-8a8e-4c41-9d0b-3c1b5e0f2a77', 'Zoë Ångström', '李 小龙', 'Ольга Петрова', 'hubert', 'anonymous-coward', 'a'.repeat(256)]) {
      const r = await call(await remember(token(key, { scope: 'mcp', sub })));
      expect(r.status, `${sub}: ${r.text}`).toBe(200);
    }
  });

  it('an expired token → 401 invalid_token', async () => {
    const c = expect401(await call(await remember(token(key, { scope: 'mcp', expiresIn: -120 }))), 'invalid_token');
    expect(c.error_description).toMatch(/expired/);
  });

  it('a token not valid yet → 401', async () => {
    expect401(await call(await remember(token(key, { scope: 'mcp', notBefore: 600 }))), 'invalid_token');
  });

  it('a time claim that is no number (exp or nbf as a string) → 401 saying so, not "no expiry" or "not valid yet"', async () => {
    const now = Math.floor(Date.now() / 1000);
    const sign = (claims: Record<string, unknown>) =>
      remember(new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'alice', scope: 'mcp', iat: now, ...claims }).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'at+jwt' }).sign(key.privateKey));
    let c = expect401(await call(await sign({ exp: String(now + 300) })), 'invalid_token');
    expect(c.error_description).toBe("the token's exp claim is malformed");
    c = expect401(await call(await sign({ exp: now + 300, nbf: String(now - 60) })), 'invalid_token');
    expect(c.error_description).toBe("the token's nbf claim is malformed");
    // Absent is still said as before.
    c = expect401(await call(await sign({})), 'invalid_token');
    expect(c.error_description).toBe('the token has no expiry');
  });

  it('a wrong audience → 401', async () => {
    const c = expect401(await call(await remember(token(key, { scope: 'mcp', aud: 'switchyard' }))), 'invalid_token');
    expect(c.error_description).toMatch(/not meant for this resource/);
  });

  it('a token for another resource (another MCP server\'s URI) → 401', async () => {
    expect401(await call(await remember(token(key, { scope: 'mcp', aud: 'https://other-server.test/mcp' }))), 'invalid_token');
    expect401(await call(await remember(token(key, { scope: 'mcp', aud: ['https://a.test/mcp', 'https://b.test/mcp'] }))), 'invalid_token');
    // A group's resource is the hub's only with auth.oauth.groupResources (off here).
    expect401(await call(await remember(token(key, { scope: 'mcp', aud: `${AUDIENCE}/small` }))), 'invalid_token');
  });

  it('a wrong issuer → 401', async () => {
    const c = expect401(await call(await remember(token(key, { scope: 'mcp', iss: 'https://evil-issuer.test' }))), 'invalid_token');
    expect(c.error_description).toMatch(/another authorization server/);
  });

  it('an unknown kid → 401 (the JWKS file has no such key)', async () => {
    const c = expect401(await call(await remember(token(stranger, { scope: 'mcp' }))), 'invalid_token');
    expect(c.error_description).toMatch(/unknown key/);
  });

  it('a signature by another key under a known kid → 401', async () => {
    const forged = { ...stranger, kid: 'k1' };
    expect401(await call(await remember(token(forged, { scope: 'mcp' }))), 'invalid_token');
  });

  it('alg: none → 401', async () => {
    const now = Math.floor(Date.now() / 1000);
    const t = unsignedToken({ iss: ISSUER, aud: AUDIENCE, sub: 'alice', scope: 'mcp', exp: now + 300 });
    expect401(await call(t), 'invalid_token');
  });

  it('algorithm confusion (HS256 keyed with the public key) → 401', async () => {
    const now = Math.floor(Date.now() / 1000);
    const t = await confusedToken(key, { iss: ISSUER, aud: AUDIENCE, sub: 'mallory', scope: 'mcp math', exp: now + 300 });
    expect401(await call(t), 'invalid_token');
  });

  it('another scheme (Basic) → 401 without an error code; a malformed Bearer header → 400 invalid_request (RFC 6750 §3.1)', async () => {
    const basic = await post(hub.url, modernBody(++id, 'tools/list'), { ...modernHeaders('tools/list'), authorization: 'Basic YWxpY2U6c2VjcmV0' });
    expect401(basic);
    // Said, not only refused: a client configured with a Basic credential, or a key with no
    // "Bearer " before it, is sure it sent one. The credential is not repeated.
    const notBearer = 'Unauthorized: authentication required: the Authorization header is not a Bearer credential (send the API key or token as "Authorization: Bearer <credential>", or the key as X-API-Key; Basic is not taken)';
    expect(basic.body?.error?.message).toBe(notBearer);
    const bare = await post(hub.url, modernBody(++id, 'tools/list'), { ...modernHeaders('tools/list'), authorization: ALICE_KEY });
    expect401(bare);
    expect(bare.body?.error?.message).toBe(notBearer);
    expect(bare.text).not.toContain(ALICE_KEY);
    for (const authorization of ['Bearer', 'Bearer two tokens', 'Bearer   ']) {
      const r = await post(hub.url, modernBody(++id, 'tools/list'), { ...modernHeaders('tools/list'), authorization });
      expect(r.status, authorization).toBe(400);
      expect(challengeParams(r.headers.get('www-authenticate'))).toMatchObject({ error: 'invalid_request', resource_metadata: PRM_URL });
      expect(r.body?.error?.message).toMatch(/^Bad Request: malformed Authorization header/);
    }
  });

  it('two Authorization lines → 400 invalid_request, even when the first is a good key (node:http keeps only the first)', async () => {
    // An empty line beside a good one is a repeat too: once it passed the key on with ", " and
    // got 401 invalid_token; first, it was no credential at all (401 without an error code).
    for (const lines of [[`Bearer ${ALICE_KEY}`, 'Bearer not-a-key'], [`Bearer ${ALICE_KEY}`, `Bearer ${ALICE_KEY}`], [`Bearer ${ALICE_KEY}`, ''], ['', `Bearer ${ALICE_KEY}`], ['Basic YWxpY2U6c2VjcmV0', 'Basic YWxpY2U6c2VjcmV0']]) {
      const second = lines.join(' + ');
      const r = await rawHttp(hub.url, {
        headers: { ...modernHeaders('tools/list'), authorization: lines },
        chunks: [JSON.stringify(modernBody(++id, 'tools/list'))],
      });
      expect(r.status, second).toBe(400);
      expect(challengeParams(String(r.headers['www-authenticate']))).toMatchObject({ error: 'invalid_request' });
    }
    // One line is as before.
    const one = await rawHttp(hub.url, { headers: { ...modernHeaders('tools/list'), authorization: `Bearer ${ALICE_KEY}` }, chunks: [JSON.stringify(modernBody(++id, 'tools/list'))] });
    expect(one.status).toBe(200);
  });

  it('a token without a scope the hub requires → 403 insufficient_scope', async () => {
    const r = await call(await remember(token(key, { scope: 'profile', sub: 'scopeless-carol' })));
    expect(r.status, r.text).toBe(403);
    const c = challengeParams(r.headers.get('www-authenticate'));
    expect(c).toMatchObject({ error: 'insufficient_scope', scope: 'mcp', resource_metadata: PRM_URL });
    // Its row names who presented the (valid) token, not "(unauthenticated)".
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { principal: 'scopeless-carol' });
    expect(rows.map((x) => [x.outcome, x.errorCode])).toEqual([['denied', 403]]);
  });

  it('a tool whose scope is missing → 403 step-up naming every needed scope; with it → served', async () => {
    const plain = await remember(token(key, { scope: 'mcp' }));
    const r = await call(plain, 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 2 } });
    expect(r.status, r.text).toBe(403);
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope", scope="mcp math", resource_metadata="/);
    expect(r.body?.error?.message).toMatch(/modern__add needs scope math/);
    // Several scopes from one glob are named in one challenge.
    const r2 = await call(plain, 'tools/call', { name: 'modern__counter_bump', arguments: { label: 'x' } });
    expect(challengeParams(r2.headers.get('www-authenticate')).scope).toBe('mcp math write');
    // Tools without a scope rule need only the hub's scopes.
    const echo = await call(plain, 'tools/call', { name: 'modern__echo', arguments: { text: 'hi' } });
    expect(echo.status, echo.text).toBe(200);
    // Step-up: the union of scopes is served.
    const stepped = await call(await remember(token(key, { scope: 'mcp math' })), 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 2 } });
    expect(stepped.status, stepped.text).toBe(200);
    expect(stepped.body?.result).toMatchObject({ structuredContent: { sum: 3 } });
  });

  it('API keys carry their own scopes for tool scopes', async () => {
    const a = await call(ALICE_KEY, 'tools/call', { name: 'modern__add', arguments: { a: 2, b: 2 } });
    expect(a.status, a.text).toBe(200);
    const b = await call(BOB_KEY, 'tools/call', { name: 'modern__add', arguments: { a: 2, b: 2 } });
    expect(b.status, b.text).toBe(403);
    expect(challengeParams(b.headers.get('www-authenticate')).error).toBe('insufficient_scope');
  });

  it('serves Protected Resource Metadata at both RFC 9728 paths, without credentials', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const res = await fetch(new URL(path, hub.url));
      expect(res.status).toBe(200);
      const doc = (await res.json()) as Record<string, unknown>;
      expect(doc).toMatchObject({ resource: AUDIENCE, authorization_servers: [ISSUER], bearer_methods_supported: ['header'] });
      expect(doc.scopes_supported).toEqual(expect.arrayContaining(['mcp', 'math', 'write']));
    }
  });

  it('a foreign Origin is refused even with a valid credential', async () => {
    const r = await call(ALICE_KEY, 'tools/list', {}, { origin: 'https://evil.example' });
    expect(r.status).toBe(403);
    expect(r.body?.error?.message).toMatch(/Origin/);
  });

  it('a rebinding Host is refused even with a valid credential', async () => {
    const r = await rawHttp(hub.url, {
      headers: { ...modernHeaders('tools/list'), host: 'attacker.example:80', authorization: `Bearer ${ALICE_KEY}` },
      chunks: [JSON.stringify(modernBody(++id, 'tools/list'))],
    });
    expect(r.status).toBe(403);
  });

  it('/healthz names servers only to authenticated callers', async () => {
    const anon = await (await fetch(new URL('/healthz', hub.url))).json();
    expect(anon).toEqual({ status: 'ok' });
    const authed = (await (await fetch(new URL('/healthz', hub.url), { headers: { authorization: `Bearer ${ALICE_KEY}` } })).json()) as { servers: unknown[] };
    expect(authed.servers).toHaveLength(1);
  });

  it('the operator routes need credentials and the admin scope', async () => {
    const get = (path: string, key?: string) => fetch(new URL(path, hub.url), { headers: key ? { authorization: `Bearer ${key}` } : {} });
    expect((await get('/admin/ledger')).status).toBe(401);
    expect((await get('/metrics')).status).toBe(401);
    const notAdmin = await get('/admin/ledger', ALICE_KEY);
    expect(notAdmin.status).toBe(403);
    expect(challengeParams(notAdmin.headers.get('www-authenticate'))).toMatchObject({ error: 'insufficient_scope', scope: 'switchyard:admin' });
    const admin = await get('/admin/ledger', ROOT_KEY);
    expect(admin.status).toBe(200);
    const { rows } = (await admin.json()) as { rows: { principal: string }[] };
    expect(rows.some((r) => r.principal === 'alice')).toBe(true);
  });

  it('the live feed (/admin/events WebSocket) needs the admin scope too', async () => {
    const open = (key?: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(new URL('/admin/events', hub.url).href.replace(/^http/, 'ws'), { headers: key ? { authorization: `Bearer ${key}` } : {} });
        ws.on('open', () => {
          ws.close();
          resolve(101);
        });
        ws.on('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          ws.terminate();
        });
        ws.on('error', () => resolve(-1));
      });
    expect(await open()).toBe(401);
    expect(await open(ALICE_KEY)).toBe(403);
    expect(await open(ROOT_KEY)).toBe(101);
  });

  it("the status page's own files need no credential; what they show does", async () => {
    for (const path of ['/admin/', '/admin/app.js', '/admin/style.css']) {
      const res = await fetch(new URL(path, hub.url));
      expect(res.status, path).toBe(200);
      expect(await res.text()).not.toMatch(/alice|modern__|"id":"modern"/); // no data in them
    }
    expect((await fetch(new URL('/admin', hub.url), { redirect: 'manual' })).status).toBe(308);
    expect((await fetch(new URL('/admin/servers', hub.url))).status).toBe(401);
    expect((await fetch(new URL('/admin/nope.js', hub.url))).status).toBe(401);
    expect((await fetch(new URL('/admin/app.js', hub.url), { method: 'POST' })).status).toBe(401);
    expect((await fetch(new URL('/admin/app.js', hub.url), { headers: { origin: 'https://evil.example' } })).status).toBe(403);
  });

  it('the live feed opens with a one-use ticket from POST /admin/ticket (a browser cannot send the header)', async () => {
    const ticket = (key?: string, method = 'POST') => fetch(new URL('/admin/ticket', hub.url), { method, headers: key ? { authorization: `Bearer ${key}` } : {} });
    expect((await ticket()).status).toBe(401);
    expect((await ticket(ALICE_KEY)).status).toBe(403);
    expect((await ticket(ROOT_KEY, 'GET')).status).toBe(405);
    const issued = await ticket(ROOT_KEY);
    expect(issued.status).toBe(200);
    expect(issued.headers.get('cache-control')).toBe('no-store');
    const { ticket: t, expiresInMs } = (await issued.json()) as { ticket: string; expiresInMs: number };
    expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(expiresInMs).toBe(30_000);
    const open = (query: string) =>
      new Promise<{ status: number; first?: Record<string, unknown> }>((resolve) => {
        const ws = new WebSocket(new URL(`/admin/events${query}`, hub.url).href.replace(/^http/, 'ws'));
        ws.on('message', (m) => {
          resolve({ status: 101, first: JSON.parse(String(m)) as Record<string, unknown> });
          ws.close();
        });
        ws.on('unexpected-response', (_req, res) => {
          resolve({ status: res.statusCode ?? 0 });
          ws.terminate();
        });
        ws.on('error', () => resolve({ status: -1 }));
      });
    const first = await open(`?ticket=${t}`);
    expect(first.status).toBe(101);
    expect(first.first).toMatchObject({ type: 'hello', servers: [expect.objectContaining({ id: 'modern' })] });
    expect((await open(`?ticket=${t}`)).status).toBe(401); // once only
    expect((await open('?ticket=not-a-ticket')).status).toBe(401);
    expect((await open('?ticket=')).status).toBe(401);
    // A ticket does not open the other operator routes.
    const other = (await (await ticket(ROOT_KEY)).json()) as { ticket: string };
    expect((await fetch(new URL(`/admin/servers?ticket=${other.ticket}`, hub.url))).status).toBe(401);
  });

  it('GET and DELETE /mcp need credentials too', async () => {
    const g = await fetch(hub.url, { headers: { accept: 'text/event-stream', 'mcp-session-id': 'x' } });
    expect(g.status).toBe(401);
    const d = await fetch(hub.url, { method: 'DELETE', headers: { 'mcp-session-id': 'x' } });
    expect(d.status).toBe(401);
  });
});
