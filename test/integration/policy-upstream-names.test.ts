/**
 * `auth.oauth.toolScopes`, `policy.rateLimit.tools` and `policy.confirm` read a tool glob as a
 * group's `deny` does: one without `__` (`echo`, `ech*`) meets the tool's upstream name too, so
 * `r__echo` needs what `echo` asks; one with it (`x__*`) meets hub names alone. Real built hub,
 * the repo's mutable server, API keys over loopback HTTP on the raw wire.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AUDIENCE, ISSUER, challengeParams, sha256Hex, signingKey, writeJwks, waitForReadyWith } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { join } from 'node:path';
import { tmp } from './catalog-helpers.js';

const KEY = 'sy_upstream-names-key-0123456789abcdefghijklmnopq';
const TOOLS = JSON.stringify(['echo', 'other'].map((name) => ({ name, inputSchema: { type: 'object' } })));

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

async function started(extra: Json): Promise<HubProcess> {
  const dir = tmp();
  writeJwks(join(dir, 'jwks.json'), [await signingKey('k1')]);
  const r = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS });
  const { oauth, ...rest } = extra as { oauth?: Json };
  hub = await startHub({ auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(KEY) }], ...(oauth ? { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', ...oauth } } : {}) }, servers: { r }, ...rest }, { dir });
  const h = hub;
  await waitForReadyWith(h.url, ['r'], KEY);
  return h;
}

let n = 0;
function call(h: HubProcess, name: string, meta?: Json) {
  return post(h.url, modernBody(++n, 'tools/call', { name, arguments: {} }, meta), { ...modernHeaders('tools/call', name), authorization: `Bearer ${KEY}` });
}

describe('tool globs without `__` meet the upstream name', () => {
  it('toolScopes: `echo` makes r__echo need its scope (403 insufficient_scope); `x__*` does not reach it', async () => {
    const h = await started({ oauth: { toolScopes: { 'ech?': 'echo', 'x__*': 'x' } } });
    const refused = await call(h, 'r__echo');
    expect(refused.status).toBe(403);
    expect(challengeParams(refused.headers.get('www-authenticate'))).toMatchObject({ error: 'insufficient_scope', scope: 'echo' });
    expect((await call(h, 'r__other')).status).toBe(200);
  });

  it('rateLimit.tools: `echo` limits r__echo, in a bucket of its own', async () => {
    const h = await started({ policy: { rateLimit: { tools: { echo: { burst: 1, perSecond: 0.001 } } } } });
    expect((await call(h, 'r__echo')).status).toBe(200);
    const limited = await call(h, 'r__echo');
    expect(limited.status).toBe(429);
    expect(limited.text).toContain('rate limit of r__echo');
    expect((await call(h, 'r__other')).status).toBe(200);
    expect((await call(h, 'r__other')).status).toBe(200);
  });

  it('policy.confirm: `echo` has the user asked before r__echo runs', async () => {
    const h = await started({ policy: { confirm: ['echo'] } });
    const asked = await call(h, 'r__echo', modernMeta({ [META_CAPS]: { elicitation: { form: {} } } }));
    expect(asked.status).toBe(200);
    expect(asked.body?.result, asked.text).toMatchObject({ resultType: 'input_required' });
    const other = await call(h, 'r__other', modernMeta({ [META_CAPS]: { elicitation: { form: {} } } }));
    expect(other.body?.result?.resultType, other.text).not.toBe('input_required');
  });
});
