/**
 * The hub as an OAuth 2.1 client of an HTTP upstream (servers.<id>.oauth, client-credentials
 * grant): the real built hub toward oauth-protected-server.mjs, an SDK v1 server guarded by the
 * SDK's requireBearerAuth, with its own authorization server (issuer with a path). One token
 * serves every request until it expires or a 401 condemns it; one about to expire is replaced
 * before use; a 401 gets one new token and one resend, never a loop; a 403 insufficient_scope
 * steps the scopes up; a wrong secret is an error naming the token endpoint's answer; and
 * neither the secret nor any token reaches the hub's logs or its ledger.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { text } from './faults-helpers.js';
import { modernCall, type Answer } from './ledger-helpers.js';

const SECRET = 'upstream-oauth-secret-7f3a9c';
const WRONG = 'upstream-oauth-wrong-secret-41d2';

interface Stats {
  tokenRequests: { clientId: string; grantType: string; resource: string; scope: string | null; method: 'basic' | 'post' }[];
  unauthorized: number;
  forbidden: number;
  issued: string[];
}

let fixture: HttpFixture;
let hub: HubProcess;
let n = 0;

const origin = (): string => new URL(fixture.url).origin;
const stats = async (): Promise<Stats> => (await fetch(`${origin()}/stats`)).json() as Promise<Stats>;
const control = (path: string): Promise<Response> => fetch(`${origin()}${path}`, { method: 'POST' });
/** The good server's token requests (client_secret_basic; the wrong-secret one uses post). */
const basicRequests = async (): Promise<Stats['tokenRequests']> => (await stats()).tokenRequests.filter((r) => r.method === 'basic');
const call = (name: string, args: Record<string, unknown> = {}): Promise<Answer> => modernCall(hub.url, `oa${++n}`, 'tools/call', { name, arguments: args });

beforeAll(async () => {
  fixture = await startHttpFixture('test/fixtures/servers/oauth-protected-server.mjs', { CLIENT_ID: 'hub-client', CLIENT_SECRET: SECRET });
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-upauth-'));
  hub = await startHub(
    {
      ledger: { path: join(dir, 'ledger.db'), storeBodies: true },
      servers: {
        // A short circuit breaker: an OAuth failure counted against the server would open it.
        p: { url: fixture.url, circuitBreaker: { failures: 1, cooldownMs: 5000 }, oauth: { clientId: 'hub-client', clientSecret: '${env:UPSTREAM_OAUTH_SECRET}' } },
        // The same server under another URL (the fixture counts only the first one's requests).
        bad: { url: `${fixture.url}?tenant=bad`, oauth: { clientId: 'hub-client', clientSecret: '${env:UPSTREAM_OAUTH_WRONG}', tokenEndpointAuth: 'client_secret_post' } },
        // No oauth at all.
        plain: { url: `${fixture.url}?tenant=plain` },
        // Registered with another authorization server than the one this server names.
        pinned: { url: `${fixture.url}?tenant=pinned`, oauth: { clientId: 'pinned-client', issuer: 'https://as.example', clientSecret: '${env:UPSTREAM_OAUTH_SECRET}' } },
      },
    },
    { dir, args: ['--no-watch'], env: { UPSTREAM_OAUTH_SECRET: SECRET, UPSTREAM_OAUTH_WRONG: WRONG } },
  );
  await waitForReady(hub.url, ['p']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  await fixture?.stop();
});

describe('OAuth client credentials toward an HTTP upstream', () => {
  it('discovers the authorization server on the first 401 and reuses one token for every request', async () => {
    const before = await basicRequests();
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({ grantType: 'client_credentials', resource: fixture.url, scope: 'mcp' });
    for (let i = 0; i < 3; i++) expect(text(await call('p__whoami'))).toBe('client hub-client scopes mcp');
    expect(await basicRequests()).toHaveLength(1);
  });

  it('gets one new token after a 401 and sends the refused request again', async () => {
    const { unauthorized } = await stats();
    await control('/revoke');
    expect(text(await call('p__whoami'))).toBe('client hub-client scopes mcp');
    const s = await stats();
    expect(s.unauthorized).toBe(unauthorized + 1);
    expect(s.tokenRequests.filter((r) => r.method === 'basic')).toHaveLength(2);
  });

  it('replaces a token about to expire before sending, without waiting for the 401', async () => {
    await control('/ttl?s=1');
    await control('/revoke');
    expect(text(await call('p__whoami'))).toContain('hub-client');
    const { unauthorized } = await stats();
    const requests = (await basicRequests()).length;
    await new Promise((r) => setTimeout(r, 1_100));
    expect(text(await call('p__whoami'))).toContain('hub-client');
    expect((await basicRequests()).length).toBe(requests + 1);
    expect((await stats()).unauthorized).toBe(unauthorized);
    await control('/ttl?s=3600');
  });

  it('asks once for a new token when a fresh one is refused too, and fails the call saying so', async () => {
    const s0 = await stats();
    const requests = s0.tokenRequests.filter((r) => r.method === 'basic').length;
    await control('/reject-all?on=1');
    try {
      const a = await call('p__whoami');
      expect(JSON.stringify(a.body)).toMatch(/refused the hub's OAuth token, a freshly obtained one too/);
    } finally {
      await control('/reject-all?on=0');
    }
    const s1 = await stats();
    expect(s1.unauthorized).toBe(s0.unauthorized + 2);
    expect(s1.tokenRequests.filter((r) => r.method === 'basic')).toHaveLength(requests + 1);
    // The next call recovers (a new token after its 401).
    expect(text(await call('p__whoami'))).toContain('hub-client');
  });

  it('steps the scopes up on 403 insufficient_scope (the union) and sends the call again', async () => {
    const { forbidden } = await stats();
    expect(text(await call('p__admin_echo', { text: 'hi' }))).toBe('admin:hi');
    expect((await stats()).forbidden).toBe(forbidden + 1);
    expect((await basicRequests()).at(-1)!.scope).toBe('mcp admin');
    // The stepped-up token serves later calls too.
    expect(text(await call('p__admin_echo', { text: 'again' }))).toBe('admin:again');
    expect((await stats()).forbidden).toBe(forbidden + 1);
  });

  it('keeps the scopes it had when a step-up is refused by the authorization server', async () => {
    const a = await call('p__forbidden_echo', { text: 'x' });
    expect(JSON.stringify(a.body)).toMatch(/OAuth: token endpoint .* answered HTTP 400 invalid_scope/);
    expect((await basicRequests()).at(-1)!.scope).toBe('mcp admin forbidden');
    // No token to be had is no sign the server is unwell: its circuit stays closed.
    const servers = ((await (await fetch(new URL('/admin/servers', hub.url))).json()) as { servers: { id: string; circuit: string; state: string }[] }).servers;
    expect(servers.find((s) => s.id === 'p')).toMatchObject({ state: 'ready', circuit: 'closed' });
    // The next token (after a 401) is asked with the scopes granted before, not the refused one.
    await control('/revoke');
    expect(text(await call('p__admin_echo', { text: 'still' }))).toBe('admin:still');
    expect((await basicRequests()).at(-1)!.scope).toBe('mcp admin');
  });

  /** The server's lastError, once it has one. */
  async function lastErrorOf(id: string): Promise<string> {
    const deadline = Date.now() + 20_000;
    let lastError = '';
    while (Date.now() < deadline) {
      const servers = ((await (await fetch(new URL('/admin/servers', hub.url))).json()) as { servers: { id: string; lastError: string | null }[] }).servers;
      lastError = servers.find((s) => s.id === id)?.lastError ?? '';
      if (lastError) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return lastError;
  }

  it('says why a server whose secret the authorization server refuses is down, without the secret', async () => {
    const lastError = await lastErrorOf('bad');
    expect(lastError).toMatch(/OAuth: token endpoint http:\/\/127\.0\.0\.1:\d+\/as\/token answered HTTP 401 invalid_client: unknown client or wrong secret/);
    expect(lastError).not.toContain(WRONG);
  });

  it('tells the operator of a server without oauth that it asks for an OAuth token', async () => {
    expect(await lastErrorOf('plain')).toMatch(/HTTP 401: authorization required \(the server asks for an OAuth bearer token; give the hub a client of its authorization server in servers\.plain\.oauth, or a token in its headers\)/);
  });

  it('sends the credentials to no authorization server but the configured issuer', async () => {
    const lastError = await lastErrorOf('pinned');
    expect(lastError).toMatch(/names http:\/\/127\.0\.0\.1:\d+\/as as authorization server, not https:\/\/as\.example \(oauth\.issuer\); the client credentials are not sent elsewhere/);
    expect((await stats()).tokenRequests.filter((r) => r.clientId === 'pinned-client')).toEqual([]);
  });

  it('never lets the secret or a token into the logs or the ledger, even one the upstream echoes', async () => {
    const leaked = await call('p__leak');
    expect(leaked.body?.result?.isError).toBe(true);
    const { issued } = await stats();
    expect(issued.length).toBeGreaterThan(3);
    await hub.stop();
    const ledgerFiles = readdirSync(hub.dir).filter((f) => f.startsWith('ledger.db'));
    expect(ledgerFiles.length).toBeGreaterThan(0);
    const ledger = ledgerFiles.map((f) => readFileSync(join(hub.dir, f)).toString('latin1')).join('\n');
    // The echoed result reached the ledger, redacted.
    expect(ledger).toContain('is not welcome here');
    const logs = hub.logs.join('\n');
    expect(logs).toContain('OAuth: obtained an access token');
    for (const secret of [SECRET, WRONG, ...issued]) {
      expect(logs).not.toContain(secret);
      expect(ledger).not.toContain(secret);
    }
  });
});
