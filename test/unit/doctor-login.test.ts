/**
 * `switchyard doctor`'s word on each authorization-code login (src/cli/login-state.ts), read
 * from real token files as `switchyard login` writes them.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { loginFindings } from '../../src/cli/login-state.js';
import { clientFileOf, writeStoredClient, writeTokenFile, type StoredTokens } from '../../src/upstream/oauth-token-store.js';

const URL_ = 'https://mcp.example.com/mcp';

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-doctor-login-'));
  const server = { url: URL_, oauth: { grant: 'authorization_code', clientId: 'c' } };
  const config = parseConfig({ ledger: { path: join(dir, 'ledger.db') }, servers: { u: server, off: { ...server, disabled: true } } }, join(dir, 'hub.config.json'));
  const file = config.servers.u!.oauthTokenFile!;
  const tokens = (over: Partial<StoredTokens> = {}): StoredTokens => ({
    serverUrl: URL_, resource: URL_, issuer: 'https://as.example.com', tokenEndpoint: 'https://as.example.com/token', clientId: 'c', clientAuth: 'none',
    accessToken: 'doctor-secret-access-token', scopes: [], obtainedAt: 1_000, ...over,
  });
  return { config, file, tokens };
}

const said = (f: { level: string; message: string }[]) => f.map((x) => `${x.level}: ${x.message}`);

describe('doctor: upstream logins', () => {
  it('says what to do for a login missing, unusable, for another URL, or expired for good; ok otherwise; never shows a token', () => {
    const { config, file, tokens } = setup();
    expect(said(loginFindings(config, 10_000))).toEqual(['warn: servers.u: no login stored (oauth.grant authorization_code): its calls fail until you run `switchyard login u`']);
    writeTokenFile(file, tokens());
    writeFileSync(file, 'not json', { mode: 0o600 });
    expect(said(loginFindings(config, 10_000))[0]).toMatch(/^fail: servers\.u: the stored login is unusable \(.* cannot be read as JSON .*\); run `switchyard login u`$/);
    writeTokenFile(file, tokens({ serverUrl: 'https://elsewhere.example.com/mcp' }));
    expect(said(loginFindings(config, 10_000))).toEqual(['warn: servers.u: the stored login is for https://elsewhere.example.com/mcp, not for its url; run `switchyard login u`']);
    writeTokenFile(file, tokens({ expiresAt: 5_000 }));
    expect(said(loginFindings(config, 10_000))).toEqual(['warn: servers.u: the stored access token expired and there is no refresh token; run `switchyard login u`']);
    writeTokenFile(file, tokens({ expiresAt: 5_000, refreshToken: 'doctor-secret-refresh' }));
    expect(said(loginFindings(config, 10_000))).toEqual(['ok: servers.u: logged in (expired, refreshed at the next call, refreshable)']);
    writeTokenFile(file, tokens({ expiresAt: 10_000 + 3_600_000 }));
    const ok = said(loginFindings(config, 10_000));
    expect(ok).toEqual(['ok: servers.u: logged in (expires in 60 min)']);
    expect(JSON.stringify(ok)).not.toMatch(/doctor-secret/);
  });

  it('warns of a token file, or a kept client registration, other users can read', () => {
    const { config, file, tokens } = setup();
    writeTokenFile(file, tokens());
    chmodSync(file, 0o644);
    expect(said(loginFindings(config, 10_000))).toEqual(['ok: servers.u: logged in (no expiry given)', `warn: servers.u: ${file} is readable by other users (mode 644): \`chmod 600\` it`]);
    chmodSync(file, 0o600);
    // A registered confidential client's secret, kept after a logout.
    writeStoredClient(file, { issuer: 'https://as.example.com', clientId: 'dyn-1', clientSecret: 'doctor-secret-client', clientAuth: 'client_secret_basic', registeredRedirectUri: 'http://127.0.0.1:1/callback' });
    chmodSync(clientFileOf(file), 0o640);
    expect(said(loginFindings(config, 10_000))).toEqual([
      'ok: servers.u: logged in (no expiry given)',
      `warn: servers.u: ${clientFileOf(file)} is readable by other users (mode 640): \`chmod 600\` it`,
    ]);
  });

  it('warns of a login stored for a server that no longer logs in (its grant changed, or removed from the config), naming the logout', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-doctor-login-'));
    const config = parseConfig(
      { ledger: { path: join(dir, 'ledger.db') }, servers: { u: { url: URL_, oauth: { grant: 'authorization_code' } }, cc: { url: URL_, oauth: { clientId: 'c', clientSecret: 'doctor-cc-secret' } } } },
      join(dir, 'hub.config.json'),
    );
    const file = config.servers.u!.oauthTokenFile!;
    const stored = (id: string): string => join(file, '..', `${id}.json`);
    const tokens: StoredTokens = {
      serverUrl: URL_, resource: URL_, issuer: 'https://as.example.com', tokenEndpoint: 'https://as.example.com/token', clientId: 'c', clientAuth: 'none',
      accessToken: 'doctor-secret-access-token', refreshToken: 'doctor-secret-refresh', scopes: [], obtainedAt: 1_000,
    };
    // "constructor": a removed server's id that every object has as a property.
    for (const id of ['u', 'cc', 'gone', 'constructor']) writeTokenFile(stored(id), tokens);
    // A client kept after a logout is no login.
    writeStoredClient(stored('kept'), { issuer: 'https://as.example.com', clientId: 'dyn-1', clientAuth: 'none', registeredRedirectUri: 'http://127.0.0.1:1/callback' });
    const f = said(loginFindings(config, 10_000));
    expect(f).toEqual([
      'ok: servers.u: logged in (no expiry given, refreshable)',
      `warn: servers.cc no longer logs in (no oauth.grant "authorization_code"), but a login of it is stored in ${stored('cc')}: its refresh token stays valid until revoked; run \`switchyard logout cc\``,
      `warn: the config has no server "constructor", but a login of it is stored in ${stored('constructor')}: its refresh token stays valid until revoked; run \`switchyard logout constructor\``,
      `warn: the config has no server "gone", but a login of it is stored in ${stored('gone')}: its refresh token stays valid until revoked; run \`switchyard logout gone\``,
    ]);
    expect(JSON.stringify(f)).not.toMatch(/doctor-secret/);
  });
});
