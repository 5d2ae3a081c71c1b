/**
 * A tools/call let in with an OAuth access token, then held before it is sent (a plugin's
 * beforeCall), while the issuer rotates the token's signing key out of its JWKS: once the hub has
 * the new key set (another client's token with the new key had it fetched), the held call is not
 * sent, and is answered as a request with that token is now (401 invalid_token), its row saying
 * so. A token whose key stays in the set has its held call sent across the same rotation. Real
 * built hub, a real JWKS served over loopback (jose), the repo's mutable server, SDK v2 and raw
 * HTTP clients.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ISSUER, AUDIENCE, challengeParams, jwksServer, signingKey, token, type JwksServer, waitForReadyWith } from '../helpers/auth.js';
import { heldCallRig, heldNow } from '../helpers/hold-plugin.js';
import { rowsOf } from '../helpers/audit-rows.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

let hub: HubProcess | undefined;
let jwks: JwksServer | undefined;
afterEach(async () => {
  await hub?.stop();
  await jwks?.close();
  hub = jwks = undefined;
});

describe('a held tools/call whose OAuth token stopped working', () => {
  it('is not sent once its signing key left the key set, and is refused 401 invalid_token with its row; a token whose key stayed is sent', async () => {
    const [old, kept, next] = await Promise.all([signingKey('old'), signingKey('kept'), signingKey('next')]);
    jwks = await jwksServer([old, kept]);
    const dir = tmp();
    const { plugins, r, calls } = heldCallRig(dir);
    hub = await startHub({ auth: { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksUri: jwks.url, jwksCooldownMs: 0 } }, plugins, servers: { r } }, { dir });
    const h = hub;
    const alice = await token(old, { sub: 'alice' });
    const bob = await token(kept, { sub: 'bob' });
    await waitForReadyWith(h.url, ['r'], alice);

    const client = new Client({ name: 'alice-held-token', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(new StreamableHTTPClientTransport(new URL(h.url), { requestInit: { headers: { authorization: `Bearer ${alice}` } } }));
    try {
      const before = calls();
      const lapsed = client.callTool({ name: 'r__echo', arguments: { text: 'held' } }).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      await heldNow(dir);
      const sent = post(h.url, modernBody('kept', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${bob}` });
      await heldNow(dir);
      // The issuer rotates `old` out; a token of the new key has the hub fetch the set again.
      jwks.setKeys([kept, next]);
      const fetches = jwks.fetches;
      const carol = await post(h.url, modernBody('carol', 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${await token(next, { sub: 'carol' })}` });
      expect(carol.status).toBe(200);
      expect(jwks.fetches).toBe(fetches + 1);
      writeFileSync(join(dir, 'open'), '');

      const message = 'Unauthorized: the token is signed with an unknown key (it stopped working while the call was held; it was not sent)';
      expect(await lapsed).toMatch(/401|Unauthorized/);
      expect((await sent).status).toBe(200);
      // Bob's call alone reached the server.
      expect(calls()).toBe(before + 1);
      await expect.poll(() => rowsOf(h, 'alice'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', code: 401, message }]);
      await expect.poll(() => (rowsOf(h, 'bob')[0] as Json | undefined)?.outcome, { timeout: 10_000, interval: 50 }).toBe('ok');
      // Said as a request with that token is answered now: 401 invalid_token.
      const now = await post(h.url, modernBody('after', 'tools/call', { name: 'r__echo', arguments: { text: 'x' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${alice}` });
      expect(now.status).toBe(401);
      expect(challengeParams(now.headers.get('www-authenticate')).error).toBe('invalid_token');
    } finally {
      await client.close().catch(() => undefined);
    }
  }, 60_000);

  it('held over raw HTTP is answered 401 with the invalid_token challenge', async () => {
    const [old, next] = await Promise.all([signingKey('old'), signingKey('next')]);
    jwks = await jwksServer([old]);
    const dir = tmp();
    const { plugins, r } = heldCallRig(dir);
    hub = await startHub({ auth: { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksUri: jwks.url, jwksCooldownMs: 0 } }, plugins, servers: { r } }, { dir });
    const h = hub;
    const alice = await token(old, { sub: 'alice' });
    await waitForReadyWith(h.url, ['r'], alice);
    const pending = post(h.url, modernBody('held', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${alice}` });
    await heldNow(dir);
    jwks.setKeys([next]);
    expect((await post(h.url, modernBody('carol', 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${await token(next, { sub: 'carol' })}` })).status).toBe(200);
    writeFileSync(join(dir, 'open'), '');
    const reply = await pending;
    expect(reply.status).toBe(401);
    expect(reply.body?.error).toEqual({ code: -32600, message: 'Unauthorized: the token is signed with an unknown key (it stopped working while the call was held; it was not sent)' });
    expect(challengeParams(reply.headers.get('www-authenticate'))).toMatchObject({ error: 'invalid_token', realm: 'switchyard' });
  }, 60_000);
});
