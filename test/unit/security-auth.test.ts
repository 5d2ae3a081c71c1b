/**
 * The pure parts of authentication: key hashing and constant-time lookup, bearer parsing and
 * challenges, scopes from claims, the loopback rule.
 */
import { describe, expect, it } from 'vitest';
import { ApiKeyStore, generateApiKey, hashApiKey } from '../../src/auth/api-keys.js';
import { Authenticator } from '../../src/auth/authenticator.js';
import { bearerChallenge, protectedResourceMetadata, resourceMetadataUrl } from '../../src/auth/challenge.js';
import { exposureProblem } from '../../src/auth/exposure.js';
import { scopesOf } from '../../src/auth/oauth.js';
import { silentLogger } from '../../src/log.js';

describe('API keys', () => {
  it('are random, prefixed, and found only by their exact value', () => {
    const k1 = generateApiKey();
    const k2 = generateApiKey();
    expect(k1).toMatch(/^sy_[A-Za-z0-9_-]{43}$/);
    expect(k1).not.toBe(k2);
    const store = new ApiKeyStore([
      { principal: 'alice', sha256: hashApiKey(k1), scopes: ['a'] },
      { principal: 'bob', sha256: hashApiKey(k2) },
    ]);
    expect(store.lookup(k1)).toEqual({ principal: 'alice', scopes: ['a'], key: hashApiKey(k1) });
    expect(store.lookup(k2)).toEqual({ principal: 'bob', scopes: [], key: hashApiKey(k2) });
    expect(store.lookup(`${k1} `)).toBeUndefined();
    expect(store.lookup('')).toBeUndefined();
  });

  it('the authenticator reads Bearer (any case) or X-API-Key, never anything else', async () => {
    const key = generateApiKey();
    const auth = new Authenticator({ apiKeys: [{ principal: 'alice', sha256: hashApiKey(key) }] }, '.', silentLogger);
    const with_ = (h: Record<string, string>) => auth.authenticate((n) => h[n]);
    expect(await with_({ authorization: `Bearer ${key}` })).toMatchObject({ ok: true, principal: 'alice', via: 'apiKey', authContext: 'principal:alice' });
    expect(await with_({ authorization: `bearer ${key}` })).toMatchObject({ ok: true, principal: 'alice' });
    expect(await with_({ 'x-api-key': key })).toMatchObject({ ok: true, principal: 'alice' });
    expect(await with_({})).toMatchObject({ ok: false, status: 401, headers: { 'www-authenticate': 'Bearer realm="switchyard"' } });
    expect(await with_({ authorization: `Token ${key}` })).toMatchObject({ ok: false, status: 401 });
    expect(await with_({ authorization: `Bearer ${key}x` })).toMatchObject({ ok: false, status: 401, headers: { 'www-authenticate': expect.stringContaining('error="invalid_token"') } });
    const none = new Authenticator(undefined, '.', silentLogger);
    expect(none.required).toBe(false);
    expect(await none.authenticate(() => undefined)).toMatchObject({ ok: true, principal: 'anonymous', via: 'none' });
    // Only an OAuth token's check is waited for (test/integration/security-auth.test.ts): the rest are answered at once.
    expect(none.authenticate(() => undefined)).not.toBeInstanceOf(Promise);
    expect(with_({ authorization: `Bearer ${key}` })).not.toBeInstanceOf(Promise);
    expect(with_({})).not.toBeInstanceOf(Promise);
  });
});

describe('challenges and metadata', () => {
  it('builds RFC 9728 metadata URLs from the resource', () => {
    expect(resourceMetadataUrl('https://hub.example.com/mcp')).toBe('https://hub.example.com/.well-known/oauth-protected-resource/mcp');
    expect(resourceMetadataUrl('https://hub.example.com/')).toBe('https://hub.example.com/.well-known/oauth-protected-resource');
    expect(resourceMetadataUrl('http://127.0.0.1:7410/t/mcp/')).toBe('http://127.0.0.1:7410/.well-known/oauth-protected-resource/t/mcp');
    expect(resourceMetadataUrl('https://hub.example.com/mcp///')).toBe('https://hub.example.com/.well-known/oauth-protected-resource/mcp');
    expect(protectedResourceMetadata({ resource: 'https://h/mcp', issuer: 'https://as', scopes: ['mcp:tools'] }).scopes_supported).toEqual(['mcp:tools']);
    expect(protectedResourceMetadata({ resource: 'https://h/mcp', issuer: 'https://as', scopes: [] })).toEqual({
      resource: 'https://h/mcp',
      authorization_servers: ['https://as'],
      bearer_methods_supported: ['header'],
      resource_name: 'Switchyard MCP hub',
    });
  });

  it('quotes parameters safely and leaves out empty ones', () => {
    expect(bearerChallenge({ error: 'insufficient_scope', scope: 'a b', resource_metadata: 'https://h/x', error_description: undefined })).toBe(
      'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://h/x"',
    );
    expect(bearerChallenge({ error_description: 'bad "quote"\r\ninjected: header' })).toBe('Bearer error_description="bad quoteinjected: header"');
    expect(bearerChallenge({ error: '', scope: 'a' })).toBe('Bearer scope="a"');
    expect(bearerChallenge({ error: undefined })).toBe('Bearer');
  });

  it('reads scopes from scope (string) and scp (array or string)', () => {
    expect(scopesOf({ scope: 'a b  c' })).toEqual(['a', 'b', 'c']);
    expect(scopesOf({ scp: ['x', 'y', 3] })).toEqual(['x', 'y']);
    expect(scopesOf({ scope: 'a', scp: 'a b' })).toEqual(['a', 'b']);
    expect(scopesOf({})).toEqual([]);
  });
});

describe('the loopback rule', () => {
  it('without authentication only loopback hosts are allowed', () => {
    for (const h of ['127.0.0.1', 'localhost', '::1', '[::1]', '127.1.2.3']) expect(exposureProblem(h, false)).toBeUndefined();
    for (const h of ['0.0.0.0', '::', '192.168.1.10', 'hub.example.com']) expect(exposureProblem(h, false)).toMatch(/refusing to listen/);
    expect(exposureProblem('0.0.0.0', true)).toBeUndefined();
  });
});
