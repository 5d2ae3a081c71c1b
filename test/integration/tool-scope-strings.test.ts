/**
 * A `toolScopes` value written as OAuth writes a `scope`, space-separated ("files write"), is
 * two scopes: a token granted both may call the tool, and the 403 challenge names both. Taken as
 * one scope with a space in it, no token could hold it, and the challenge sent the client to log
 * in again and again. `switchyard keys add --scope "a b"` is refused before the config is
 * touched. Real built hub and CLI, a JWKS file made with jose, the repo's mutable server.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AUDIENCE, ISSUER, challengeParams, signingKey, token, writeJwks, waitForReadyWith } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

const TOOLS = JSON.stringify([{ name: 'echo', inputSchema: { type: 'object' } }]);

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

describe('a toolScopes string of several scopes', () => {
  it('needs each of them: a token granted both calls the tool, one without gets a challenge naming both', async () => {
    const dir = tmp();
    const key = await signingKey('k1');
    writeJwks(join(dir, 'jwks.json'), [key]);
    const r = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS });
    hub = await startHub({ auth: { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', toolScopes: { 'r__*': 'files write' } } }, servers: { r } }, { dir });
    const h = hub;
    const both = await token(key, { scope: 'write files' });
    await waitForReadyWith(h.url, ['r'], both);
    const call = (bearer: string) => post(h.url, modernBody(1, 'tools/call', { name: 'r__echo', arguments: {} }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${bearer}` });
    const ok = await call(both);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body?.error).toBeUndefined();
    const short = await call(await token(key, { scope: 'files' }));
    expect(short.status).toBe(403);
    expect(challengeParams(short.headers.get('www-authenticate'))).toMatchObject({ error: 'insufficient_scope', scope: 'files write' });
    const prm = (await (await fetch(new URL('/.well-known/oauth-protected-resource/mcp', h.url))).json()) as { scopes_supported?: string[] };
    expect(prm.scopes_supported).toEqual(['files', 'write']);
  });

  it('keys add refuses a --scope with a space, and leaves the config as it was', async () => {
    const dir = tmp();
    const config = join(dir, 'hub.json');
    writeFileSync(config, JSON.stringify({ servers: {} }));
    const before = readFileSync(config, 'utf8');
    const r = await runCli(['keys', 'add', 'bot', '--scope', 'files write', '--config', config]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('--scope "files write" is not one scope');
    expect(readFileSync(config, 'utf8')).toBe(before);
  });
});
