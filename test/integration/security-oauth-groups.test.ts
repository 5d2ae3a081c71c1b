/**
 * `auth.oauth.groupResources`: each tool group's endpoint is a protected resource of its own
 * (RFC 8707), `<audience>/<group>`. A client connected to `/mcp/<group>` is pointed at that
 * resource's metadata (401 and step-up challenges), so it asks its authorization server for a
 * token for the group; a token issued for group resources alone is limited to those endpoints,
 * as an API key with `groups`; a token for the hub's audience works everywhere. Before, tokens
 * could not be limited to groups at all. The real built hub, jose-made tokens, raw HTTP.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIENCE, ISSUER, challengeParams, signingKey, token, waitForReadyWith, writeJwks, type SigningKey } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type Json, type RawReply } from '../helpers/wire.js';
import { SDK1, SDK2 } from './ledger-helpers.js';

const PRM = 'https://hub.test/.well-known/oauth-protected-resource/mcp';

describe('OAuth with a resource per tool group', () => {
  let hub: HubProcess;
  let key: SigningKey;
  let hubWide: string;
  let n = 0;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-oauth-groups-'));
    key = await signingKey('k1');
    writeJwks(join(dir, 'jwks.json'), [key]);
    hub = await startHub(
      {
        auth: { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', scopes: ['mcp'], toolScopes: { 'b__*': 'write' }, groupResources: true } },
        groups: { small: { servers: ['a'] }, other: { servers: ['b'] } },
        servers: { a: nodeServer(SDK1), b: nodeServer(SDK2) },
      },
      { dir },
    );
    hubWide = await token(key, { scope: 'mcp' });
    await waitForReadyWith(hub.url, ['a', 'b'], hubWide);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const call = (path: string, bearer: string | undefined, method = 'tools/list', params: Record<string, unknown> = {}): Promise<RawReply> =>
    post(`${new URL(hub.url).origin}${path}`, modernBody(`r${++n}`, method, params), {
      ...modernHeaders(method, typeof params.name === 'string' ? params.name : undefined),
      ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
    });
  const names = (r: RawReply) => ((r.body?.result?.tools as Json[]) ?? []).map((t) => String(t.name));

  it("a group's endpoint points to its own resource; its metadata names it; the hub's stays the hub's", async () => {
    const small = await call('/mcp/small', undefined);
    expect(small.status).toBe(401);
    expect(challengeParams(small.headers.get('www-authenticate')).resource_metadata).toBe(`${PRM}/small`);
    expect(challengeParams((await call('/mcp', undefined)).headers.get('www-authenticate')).resource_metadata).toBe(PRM);
    const doc = async (path: string) => {
      const r = await fetch(new URL(path, hub.url));
      return { status: r.status, resource: r.status === 200 ? ((await r.json()) as Json).resource : undefined };
    };
    expect(await doc('/.well-known/oauth-protected-resource/mcp/small')).toEqual({ status: 200, resource: `${AUDIENCE}/small` });
    expect(await doc('/.well-known/oauth-protected-resource/mcp')).toEqual({ status: 200, resource: AUDIENCE });
    // Only configured groups have one.
    expect((await doc('/.well-known/oauth-protected-resource/mcp/nope')).status).toBe(404);
    // A step-up challenge on a group's endpoint names the group's resource too.
    const stepUp = await call('/mcp/other', hubWide, 'tools/call', { name: 'b__add', arguments: { a: 1, b: 2 } });
    expect(stepUp.status).toBe(403);
    expect(challengeParams(stepUp.headers.get('www-authenticate'))).toMatchObject({ error: 'insufficient_scope', resource_metadata: `${PRM}/other` });
  });

  it("a token for a group's resource alone uses that group's endpoint only; one for the hub, every endpoint", async () => {
    const smallOnly = await token(key, { scope: 'mcp', aud: `${AUDIENCE}/small` });
    const own = await call('/mcp/small', smallOnly);
    expect(own.status, own.text).toBe(200);
    expect(names(own).length).toBeGreaterThan(0);
    expect(names(own).every((t) => t.startsWith('a__'))).toBe(true);
    for (const path of ['/mcp', '/mcp/other']) {
      const r = await call(path, smallOnly);
      expect(r.status, path).toBe(403);
      expect(r.body?.error?.message).toBe('Forbidden: this token may use only /mcp/small');
    }
    expect((await fetch(new URL('/metrics', hub.url), { headers: { authorization: `Bearer ${smallOnly}` } })).status).toBe(403);
    // Two groups' resources: both endpoints.
    const both = await token(key, { scope: 'mcp', aud: [`${AUDIENCE}/small`, `${AUDIENCE}/other`] });
    expect([(await call('/mcp/small', both)).status, (await call('/mcp/other', both)).status, (await call('/mcp', both)).status]).toEqual([200, 200, 403]);
    for (const path of ['/mcp', '/mcp/small', '/mcp/other']) expect((await call(path, hubWide)).status, path).toBe(200);
    // Near misses are not the hub's resources.
    for (const aud of [`${AUDIENCE}/small/x`, `${AUDIENCE}small`, `${AUDIENCE}/`, 'https://hub.test/small']) {
      const r = await call('/mcp/small', await token(key, { scope: 'mcp', aud }));
      expect(r.status, aud).toBe(401);
      expect(challengeParams(r.headers.get('www-authenticate')).error_description).toBe('the token is not meant for this resource');
    }
  });
});
