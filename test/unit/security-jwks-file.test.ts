/**
 * A `jwksFile` key set follows the file: a key removed from it stops working within a second
 * (its stat is looked at no more than once a second, never read per request), tokens remembered
 * as verified under the old keys included; a key added to it works at once when a token names it
 * (at most once per cooldown); a file caught broken keeps the old keys. The second and the
 * cooldown are measured on the monotonic clock, a wall clock stepped back notwithstanding. Only
 * Date and performance are faked; the file, the verifier and jose are real.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { OAuthVerifier } from '../../src/auth/oauth.js';
import { silentLogger } from '../../src/log.js';
import { AUDIENCE, ISSUER, signingKey, token, writeJwks, type SigningKey } from '../helpers/auth.js';

const COOLDOWN_MS = 30_000;

describe('a JWKS file', () => {
  let file: string;
  let k1: SigningKey;
  let k2: SigningKey;
  let k3: SigningKey;
  let verifier: OAuthVerifier;
  let n = 0;
  const tokenOf = (k: SigningKey) => token(k, { aud: AUDIENCE, sub: `user-${++n}` });
  const advance = (ms: number) => vi.advanceTimersByTime(ms);

  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    [k1, k2, k3] = await Promise.all(['k1', 'k2', 'k3'].map((kid) => signingKey(kid, 'RS256')));
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-jwks-file-'));
    file = join(dir, 'jwks.json');
    writeJwks(file, [k1]);
    verifier = new OAuthVerifier(
      { issuer: ISSUER, jwksFile: 'jwks.json', scopes: [], toolScopes: {}, algorithms: ['RS256'], principalClaim: 'sub', clockToleranceSec: 30, jwksCooldownMs: COOLDOWN_MS, groupResources: false },
      AUDIENCE,
      dir,
      silentLogger,
    );
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a key removed from the file is refused within a second, remembered tokens too, without a token of the new key', async () => {
    const remembered = await tokenOf(k1);
    expect(await verifier.verify(remembered)).toMatchObject({ ok: true });
    writeJwks(file, [k2]);
    // Within the second the file is not looked at again: the old keys still hold.
    expect(await verifier.verify(await tokenOf(k1))).toMatchObject({ ok: true });
    advance(1_000);
    expect(await verifier.verify(await tokenOf(k1))).toEqual({ ok: false, description: 'the token is signed with an unknown key' });
    expect(await verifier.verify(remembered)).toEqual({ ok: false, description: 'the token is signed with an unknown key' });
    expect(await verifier.verify(await tokenOf(k2))).toMatchObject({ ok: true });
  });

  it('a key removed from the file is refused within a second of the monotonic clock, the wall clock stepped back an hour meanwhile', async () => {
    expect(await verifier.verify(await tokenOf(k1))).toMatchObject({ ok: true });
    writeJwks(file, [k2]);
    vi.setSystemTime(Date.now() - 3_600_000);
    advance(1_000);
    // Before, the file was not looked at again until the wall clock had made up the hour: a key
    // removed from it (revoked) kept working that long.
    expect(await verifier.verify(await tokenOf(k1))).toEqual({ ok: false, description: 'the token is signed with an unknown key' });
  });

  it('a verified token is remembered a minute of the monotonic clock, the wall clock stepped back an hour meanwhile', async () => {
    const t = await token(k1, { aud: AUDIENCE, sub: 'user-nbf', notBefore: 0 });
    expect(await verifier.verify(t)).toMatchObject({ ok: true });
    vi.setSystemTime(Date.now() - 3_600_000);
    // Within the minute it is remembered: not verified again (which would find its nbf an hour ahead).
    expect(await verifier.verify(t)).toMatchObject({ ok: true });
    advance(61_000);
    // Past the minute it is verified again. Before, it was remembered until the wall clock had
    // made up the hour, whatever the verification would now say.
    expect(await verifier.verify(t)).toEqual({ ok: false, description: 'the token is not valid yet' });
  });

  it('a key added to the file works at once when a token names it, past the cooldown', async () => {
    writeJwks(file, [k1, k3]);
    // Inside the cooldown (and the second) an unknown kid does not make the file be read.
    expect(await verifier.verify(await tokenOf(k3))).toMatchObject({ ok: false, description: 'the token is signed with an unknown key' });
    // Past the cooldown: the once-a-second look happens first (and reads k1 alone back) ...
    advance(COOLDOWN_MS);
    writeJwks(file, [k1]);
    expect(await verifier.verify(await tokenOf(k1))).toMatchObject({ ok: true });
    // ... so k3, added now with no time passing, can only be found by the unknown kid's re-read.
    writeJwks(file, [k1, k3]);
    expect(await verifier.verify(await tokenOf(k3))).toMatchObject({ ok: true });
  });

  it('a file caught broken keeps the old keys, and is read again once mended', async () => {
    writeFileSync(file, '{"keys": [');
    advance(1_000);
    expect(await verifier.verify(await tokenOf(k1))).toMatchObject({ ok: true });
    writeJwks(file, [k2]);
    advance(1_000);
    expect(await verifier.verify(await tokenOf(k1))).toMatchObject({ ok: false });
    expect(await verifier.verify(await tokenOf(k2))).toMatchObject({ ok: true });
  });

  it('an access token is typed at+jwt, JWT or not at all; a token of another type from the same issuer is refused', async () => {
    for (const typ of ['at+jwt', 'application/at+JWT', 'JWT', 'jwt', null]) expect(await verifier.verify(await token(k1, { sub: `t-${++n}`, typ })), String(typ)).toMatchObject({ ok: true });
    for (const typ of ['id_token+jwt', 'logout+jwt', 'dpop+jwt', 'secevent+jwt', 'at+jwt+x'])
      expect(await verifier.verify(await token(k1, { sub: `t-${++n}`, typ })), typ).toEqual({ ok: false, description: `the token is typed "${typ}", not an access token` });
  });

  // What a held tools/call asks of its token before it is sent (router/call-tool.ts, Lapse.recheck).
  it("a held call's token: nothing to do while the key set and its expiry hold; verified again, and refused, once its key left the set or it expired", async () => {
    const held = await verifier.verify(await token(k1, { aud: AUDIENCE, sub: 'held', expiresIn: 120 }));
    if (!held.ok) throw new Error(held.description);
    expect(held.lapse.recheck()).toBeNull();
    // Past exp, within clockToleranceSec (30 s): still as good as a request's check says.
    advance(125_000);
    expect(held.lapse.recheck()).toBeNull();
    advance(30_000);
    expect(await held.lapse.recheck()).toEqual({ ok: false, description: 'the token has expired' });

    const other = await verifier.verify(await token(k1, { aud: AUDIENCE, sub: 'rotated' }));
    if (!other.ok) throw new Error(other.description);
    writeJwks(file, [k2]);
    advance(1_000);
    expect(await other.lapse.recheck()).toEqual({ ok: false, description: 'the token is signed with an unknown key' });
    // A token of a key that stayed, under a new set: verified again, and good.
    writeJwks(file, [k2, k3]);
    const kept = await verifier.verify(await token(k2, { aud: AUDIENCE, sub: 'kept' }));
    if (!kept.ok) throw new Error(kept.description);
    writeJwks(file, [k2]);
    advance(1_000);
    expect(await kept.lapse.recheck()).toMatchObject({ ok: true, principal: 'kept' });
  });

  it('a token let in within clockToleranceSec past its exp is good until exp + tolerance, in its verdict, from memory and for a held call alike', async () => {
    const t = await token(k1, { aud: AUDIENCE, sub: 'late', expiresIn: -10 });
    const exp = Math.floor(Date.now() / 1000) - 10;
    const first = await verifier.verify(t);
    if (!first.ok) throw new Error(first.description);
    // Not an expiry already past: streams it opens would end at once.
    expect(first.expiresAt).toBe(exp * 1000 + 30_000);
    expect(first.expiresAt).toBeGreaterThan(Date.now());
    advance(5_000);
    const again = await verifier.verify(t);
    expect(again).toMatchObject({ ok: true, principal: 'late', expiresAt: exp * 1000 + 30_000 });
    expect(first.lapse.recheck()).toBeNull();
    advance(15_000);
    expect(await verifier.verify(t)).toEqual({ ok: false, description: 'the token has expired' });
    expect(await first.lapse.recheck()).toEqual({ ok: false, description: 'the token has expired' });
  });

  it("what a verified token leaves with the request (Identity.lapse) shows no part of the token to JSON, a logger or inspect", async () => {
    const t = await tokenOf(k1);
    const v = await verifier.verify(t);
    if (!v.ok) throw new Error(v.description);
    const { inspect } = await import('node:util');
    for (const shown of [JSON.stringify(v), inspect(v, { depth: 10, showHidden: true })]) for (const part of t.split('.')) expect(shown).not.toContain(part);
  });
});
