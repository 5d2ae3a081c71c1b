/**
 * OAuth with a remote JWKS (a tiny loopback server): the key set is fetched lazily and cached,
 * refetched when a token names an unknown kid (key rotation works without a restart), but at
 * most once per cooldown, so random kids cannot make the hub hammer the issuer. The audience
 * defaults to the hub's own URI, which the Protected Resource Metadata names. A key gone from
 * the set (remote, once fetched again; or a `jwksFile`, within a second of the file's change)
 * stops working, tokens the hub remembers as verified included.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISSUER, challengeParams, jwksServer, signingKey, token, writeJwks, type JwksServer, type SigningKey } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type RawReply } from '../helpers/wire.js';

const COOLDOWN_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('remote JWKS and key rotation', () => {
  let jwks: JwksServer;
  let hub: HubProcess;
  let a: SigningKey;
  let b: SigningKey;
  let resource: string;
  let n = 0;

  beforeAll(async () => {
    a = await signingKey('key-a');
    b = await signingKey('key-b', 'RS256');
    jwks = await jwksServer([a]);
    hub = await startHub({
      auth: { oauth: { issuer: ISSUER, jwksUri: jwks.url, jwksCooldownMs: COOLDOWN_MS } },
      servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') },
    });
    const prm = (await (await fetch(new URL('/.well-known/oauth-protected-resource/mcp', hub.url))).json()) as { resource: string };
    resource = prm.resource;
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await jwks?.close();
  });

  function call(bearer: string): Promise<RawReply> {
    return post(hub.url, modernBody(++n, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${bearer}` });
  }

  it('the default audience is the hub\'s own URI', () => {
    expect(resource).toBe(hub.url);
  });

  it('fetches the JWKS on first use, refetches on an unknown kid, and accepts a rotated-in key', async () => {
    expect(jwks.fetches).toBe(0);
    expect((await call(await token(a, { aud: resource }))).status).toBe(200);
    expect(jwks.fetches).toBe(1);
    // Cached: no fetch for a known kid.
    expect((await call(await token(a, { aud: resource }))).status).toBe(200);
    expect(jwks.fetches).toBe(1);
    await sleep(COOLDOWN_MS + 100);
    const unknown = await call(await token(b, { aud: resource }));
    expect(unknown.status).toBe(401);
    expect(challengeParams(unknown.headers.get('www-authenticate')).error_description).toMatch(/unknown key/);
    expect(jwks.fetches).toBe(2);
    jwks.setKeys([a, b]);
    await sleep(COOLDOWN_MS + 100);
    expect((await call(await token(b, { aud: resource }))).status).toBe(200);
    expect(jwks.fetches).toBe(3);
  });

  it('a flood of unknown kids costs at most one fetch per cooldown', async () => {
    await sleep(COOLDOWN_MS + 100);
    const strangers = await Promise.all(Array.from({ length: 8 }, (_, i) => signingKey(`random-${i}`)));
    const tokens = await Promise.all(strangers.map((s) => token(s, { aud: resource })));
    const before = jwks.fetches;
    const t0 = Date.now();
    for (const t of tokens) expect((await call(t)).status).toBe(401);
    // One fetch, plus one per cooldown that passed (only on a very slow machine).
    expect(jwks.fetches - before).toBeLessThanOrEqual(1 + Math.floor((Date.now() - t0) / COOLDOWN_MS));
    expect(jwks.fetches - before).toBeLessThan(tokens.length);
  });

  it('a key gone from a fetched set stops its remembered tokens too', async () => {
    await sleep(COOLDOWN_MS + 100);
    const remembered = await token(a, { aud: resource, sub: 'remembered' });
    expect((await call(remembered)).status).toBe(200);
    expect((await call(remembered)).status).toBe(200); // from memory
    jwks.setKeys([b]);
    await sleep(COOLDOWN_MS + 100);
    const c = await signingKey('key-c');
    const before = jwks.fetches;
    expect((await call(await token(c, { aud: resource }))).status).toBe(401); // makes the hub fetch the set again
    expect(jwks.fetches).toBe(before + 1);
    const gone = await call(remembered);
    expect(gone.status).toBe(401);
    expect(challengeParams(gone.headers.get('www-authenticate')).error_description).toMatch(/unknown key/);
    expect((await call(await token(b, { aud: resource }))).status).toBe(200);
  });
});

describe('a JWKS file and key removal', () => {
  let hub: HubProcess;
  let dir: string;
  let k1: SigningKey;
  let k2: SigningKey;
  let resource: string;
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-jwks-file-'));
    [k1, k2] = await Promise.all([signingKey('k1', 'RS256'), signingKey('k2', 'RS256')]);
    writeJwks(join(dir, 'jwks.json'), [k1]);
    // A long cooldown: no unknown kid can make the hub read the file during the test.
    hub = await startHub(
      { auth: { oauth: { issuer: ISSUER, jwksFile: 'jwks.json', jwksCooldownMs: 600_000 } }, servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } },
      { dir },
    );
    resource = hub.url;
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  function call(bearer: string): Promise<RawReply> {
    return post(hub.url, modernBody(++n, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${bearer}` });
  }
  // A new subject each: no token is served from the hub's memory of verified ones unless meant to.
  const fresh = (k: SigningKey) => token(k, { aud: resource, sub: `user-${++n}` });

  it('a key removed from the file is refused within a second, fresh and remembered tokens alike, before any token names a new key', async () => {
    const remembered = await fresh(k1);
    expect((await call(remembered)).status).toBe(200);
    expect((await call(await fresh(k1))).status).toBe(200);
    writeJwks(join(dir, 'jwks.json'), [k2]);
    await sleep(1_200);
    const refused = await call(await fresh(k1));
    expect(refused.status).toBe(401);
    expect(challengeParams(refused.headers.get('www-authenticate')).error_description).toMatch(/unknown key/);
    expect((await call(remembered)).status).toBe(401);
    expect((await call(await fresh(k2))).status).toBe(200);
    expect(hub.logs.join('\n')).toContain('JWKS file re-read after it changed');
  });
});

describe('an issuer whose JWKS cannot be fetched', () => {
  let jwks: JwksServer;
  let hub: HubProcess;
  let a: SigningKey;
  let n = 0;
  const tokens: string[] = [];

  beforeAll(async () => {
    a = await signingKey('key-a');
    jwks = await jwksServer([a]);
    jwks.answer(503);
    hub = await startHub({
      auth: { oauth: { issuer: ISSUER, jwksUri: jwks.url, jwksCooldownMs: COOLDOWN_MS } },
      servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') },
    });
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await jwks?.close();
    for (const t of tokens) expect(hub.logs.join('\n')).not.toContain(t);
  });

  async function call(k: SigningKey, sub = `user-${++n}`): Promise<RawReply> {
    const t = await token(k, { aud: hub.url, sub });
    tokens.push(t);
    return post(hub.url, modernBody(++n, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${t}` });
  }

  /** A valid token the hub cannot check now: 503 to try again, not 401 invalid_token (a client would drop it and log in again). */
  function expectUnavailable(r: RawReply): void {
    expect(r.status, r.text).toBe(503);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.headers.get('www-authenticate')).toBeNull();
    expect(r.body?.error?.message).toMatch(/signing keys/);
  }

  it('answers 503 with Retry-After, asks the issuer at most once a second meanwhile, says so once in the log, and serves once the keys come', async () => {
    expectUnavailable(await call(a));
    expect(jwks.fetches).toBe(1);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) expectUnavailable(await call(a));
    // No fetch per request: one a second at most (a slow machine may see the second pass).
    expect(jwks.fetches - 1).toBeLessThanOrEqual(Math.floor((Date.now() - t0) / 1000));
    // A connection cut unanswered (as a refused one) is the same outage.
    jwks.answer('cut');
    await sleep(1_100);
    expectUnavailable(await call(a));
    const warned = hub.logs.filter((l) => l.includes('signing keys could not be fetched'));
    expect(warned).toHaveLength(1);
    jwks.answer('keys');
    await sleep(1_100);
    expect((await call(a)).status).toBe(200);
    expect(hub.logs.some((l) => l.includes('signing keys fetched again'))).toBe(true);
  });

  it('a fresh key set goes on serving its keys while the issuer is down; a new kid then is 503, not an unknown key', async () => {
    jwks.answer(500);
    await sleep(COOLDOWN_MS + 100);
    expect((await call(a)).status).toBe(200);
    expectUnavailable(await call(await signingKey('key-new')));
    expect((await call(a)).status).toBe(200);
  });
});
