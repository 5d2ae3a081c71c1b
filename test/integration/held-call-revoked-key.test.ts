/**
 * A modern client's tools/call let in with an API key, then held before it is sent (a plugin's
 * beforeCall), while a reload revokes that key (`switchyard keys remove`) or narrows its groups:
 * the call is not sent, and is answered as a request with that key is now (401 with its
 * challenge, or 403 for an endpoint its groups lost), its row saying so. A key the reload kept
 * has its held call sent. A legacy client's held call, whose session that reload ended, is
 * answered as that session's calls in flight are (404 -32001), its row cancelled so; so is one
 * whose session that reload ended by removing its group. A key that lost the scope its tool
 * needs is refused 403 insufficient_scope, as the edge refuses it now. Real built
 * hub and CLI, SDK v2 and v1 clients, the repo's mutable server.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sha256Hex, signingKey, writeJwks, ISSUER, AUDIENCE, waitForReadyWith } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { heldCallRig, heldNow } from '../helpers/hold-plugin.js';
import { rowsOf } from '../helpers/audit-rows.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

const ALICE = 'sy_alice-heldcall-key-0123456789abcdefghijklmnopq';
const BOB = 'sy_bob-heldcall-key-0123456789abcdefghijklmnopqrs';

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

async function rigged(server: Json = {}): Promise<{ hub: HubProcess; dir: string; calls: () => number }> {
  const dir = tmp();
  const rig = heldCallRig(dir);
  const r = { ...rig.r, ...server };
  const apiKeys = [
    { principal: 'alice', sha256: sha256Hex(ALICE) },
    { principal: 'bob', sha256: sha256Hex(BOB) },
  ];
  hub = await startHub({ auth: { apiKeys }, groups: { g: { servers: ['r'] }, h: { servers: ['r'] } }, plugins: rig.plugins, servers: { r } }, { dir });
  const h = hub;
  await waitForReadyWith(h.url, ['r'], ALICE);
  return { hub: h, dir, calls: rig.calls };
}

/** `switchyard keys remove alice` on the hub's config, and the reload it makes. */
async function aliceRevoked(h: HubProcess): Promise<void> {
  const removed = await runCli(['keys', 'remove', 'alice', '--config', h.configFile]);
  expect(removed.code, removed.stderr).toBe(0);
  await loggedTimes(h, 'config reloaded', 1);
}

/**
 * A hub whose key ALICE holds the scope `echo` that r__echo needs (oauth.toolScopes), for a call
 * the plugin holds; `scopesTaken` reloads it with that key's scopes gone and lets the call go.
 */
async function scopedRig(): Promise<{ h: HubProcess; dir: string; calls: () => number; scopesTaken: () => Promise<void> }> {
  const dir = tmp();
  const rig = heldCallRig(dir);
  writeJwks(join(dir, 'jwks.json'), [await signingKey('k1')]);
  hub = await startHub(
    {
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE), scopes: ['echo'] }], oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', toolScopes: { '*__echo': 'echo' } } },
      plugins: rig.plugins,
      servers: { r: rig.r },
    },
    { dir },
  );
  const h = hub;
  await waitForReadyWith(h.url, ['r'], ALICE);
  const scopesTaken = async (): Promise<void> => {
    const config = JSON.parse(readFileSync(h.configFile, 'utf8')) as { auth: { apiKeys: { principal: string; scopes?: string[] }[] } };
    config.auth.apiKeys[0]!.scopes = [];
    writeFileSync(h.configFile, JSON.stringify(config));
    await loggedTimes(h, 'config reloaded', 1);
    writeFileSync(join(dir, 'open'), '');
  };
  return { h, dir, calls: rig.calls, scopesTaken };
}

/**
 * POSTs `body` with Expect: 100-continue: the hub says 100 Continue as it takes the request (its
 * credential checked on the head), and the body waits for `meanwhile`.
 */
function slowPost(mcpUrl: string, body: string, headers: Record<string, string>, meanwhile: () => Promise<void>): Promise<{ status: number; text: string }> {
  const url = new URL(mcpUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body), expect: '100-continue' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.on('continue', () => void meanwhile().then(() => req.end(body), reject));
    req.flushHeaders();
  });
}


describe('a held tools/call whose API key a reload revoked', () => {
  it('is not sent, and is refused 401 with its row; a kept key held across the same reload is sent', async () => {
    const r = await rigged();
    const client = new ClientV2({ name: 'alice-held', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(new TransportV2(new URL(r.hub.url), { requestInit: { headers: { authorization: `Bearer ${ALICE}` } } }));
    try {
      const before = r.calls();
      const revoked = client.callTool({ name: 'r__echo', arguments: { text: 'held' } }).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      await heldNow(r.dir);
      const kept = post(r.hub.url, modernBody('kept', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${BOB}` });
      await heldNow(r.dir);
      await aliceRevoked(r.hub);
      writeFileSync(join(r.dir, 'open'), '');
      expect(await revoked).toMatch(/401|Unauthorized/);
      expect((await kept).status).toBe(200);
      // Bob's call alone reached the server.
      expect(r.calls()).toBe(before + 1);
      await expect
        .poll(() => rowsOf(r.hub, 'alice'), { timeout: 10_000, interval: 50 })
        .toEqual([{ outcome: 'denied', code: 401, message: 'Unauthorized: unknown API key (revoked while the call was held; it was not sent)' }]);
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  // The edge checks the key as the request's head comes; its body may come much later. A reload
  // then was read as before the call: its key was never looked up again, and the call ran.
  it('whose body was still on its way when the reload came is not sent either, and is refused 401', async () => {
    const r = await rigged();
    const before = r.calls();
    const body = JSON.stringify(modernBody('slow', 'tools/call', { name: 'r__echo', arguments: { text: 'slow body' } }));
    const reply = await slowPost(r.hub.url, body, { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${ALICE}` }, () => aliceRevoked(r.hub));
    const message = 'Unauthorized: unknown API key (revoked while the call was held; it was not sent)';
    expect(reply.status, reply.text).toBe(401);
    expect(reply.text).toContain(message);
    expect(r.calls()).toBe(before);
    await expect.poll(() => rowsOf(r.hub, 'alice'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', code: 401, message }]);
  });

  // So for a request that calls no tool: a read served to a key revoked before its body came.
  it('a resources/read whose body was still on its way when the reload came is not sent either, and is refused 401', async () => {
    const r = await rigged();
    const stats = (): number => (JSON.parse(readFileSync(join(r.dir, 'stats.json'), 'utf8')) as Record<string, number>)['resources/read'] ?? 0;
    const before = existsSync(join(r.dir, 'stats.json')) ? stats() : 0;
    const body = JSON.stringify(modernBody('slow-read', 'resources/read', { uri: 'mut://doc' }));
    const reply = await slowPost(r.hub.url, body, { ...modernHeaders('resources/read', 'mut://doc'), authorization: `Bearer ${ALICE}` }, () => aliceRevoked(r.hub));
    const message = 'Unauthorized: unknown API key (revoked while the call was held; it was not sent)';
    expect(reply.status, reply.text).toBe(401);
    expect(reply.text).toContain(message);
    expect(stats()).toBe(before);
    await expect.poll(() => rowsOf(r.hub, 'alice', 'resources/read'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', code: 401, message }]);
  });

  // Nor from the read cache, which another principal's read of the same connection filled.
  it('a resources/read the cache holds, whose body was on its way when the reload came, is refused 401 too', async () => {
    const r = await rigged({ cacheTtlMs: 60_000 });
    const read = (id: string, key: string) => post(r.hub.url, modernBody(id, 'resources/read', { uri: 'mut://doc' }), { ...modernHeaders('resources/read', 'mut://doc'), authorization: `Bearer ${key}` });
    expect((await read('bob-fills', BOB)).status).toBe(200);
    const body = JSON.stringify(modernBody('slow-cached', 'resources/read', { uri: 'mut://doc' }));
    const reply = await slowPost(r.hub.url, body, { ...modernHeaders('resources/read', 'mut://doc'), authorization: `Bearer ${ALICE}` }, () => aliceRevoked(r.hub));
    expect(reply.status, reply.text).toBe(401);
    expect(reply.text).not.toContain('first version');
    // Bob's key stays: his next read is still a hit.
    expect((await read('bob-again', BOB)).text).toContain('first version');
  });

  it('whose groups no longer take its endpoint is not sent, and is refused 403 as the edge refuses that key there', async () => {
    const r = await rigged();
    const before = r.calls();
    const g = r.hub.url.replace(/\/mcp$/, '/mcp/g');
    const pending = post(g, modernBody('narrowed', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${ALICE}` });
    await heldNow(r.dir);
    const config = JSON.parse(readFileSync(r.hub.configFile, 'utf8')) as { auth: { apiKeys: { principal: string; groups?: string[] }[] } };
    config.auth.apiKeys.find((k) => k.principal === 'alice')!.groups = ['h'];
    writeFileSync(r.hub.configFile, JSON.stringify(config));
    await loggedTimes(r.hub, 'config reloaded', 1);
    writeFileSync(join(r.dir, 'open'), '');
    const reply = await pending;
    const message = 'Forbidden: this API key may use only /mcp/h (revoked while the call was held; it was not sent)';
    expect(reply.status).toBe(403);
    expect(reply.body?.error).toEqual({ code: -32600, message });
    expect(r.calls()).toBe(before);
    await expect.poll(() => rowsOf(r.hub, 'alice'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', code: 403, message }]);
    // A request with the key there now is refused the same way by the edge.
    const now = await post(g, modernBody('after', 'tools/call', { name: 'r__echo', arguments: { text: 'x' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${ALICE}` });
    expect(now.status).toBe(403);
  });

  /**
   * A legacy client's call held (the plugin) while `reload` ends its session: answered 404
   * -32001 saying `why`, not sent, its row cancelled with that reason.
   */
  async function legacySessionEndedWhileHeld(name: string, path: string, reload: (r: Awaited<ReturnType<typeof rigged>>) => Promise<void>, why: string): Promise<void> {
    const r = await rigged();
    const client = new ClientV1({ name, version: '1.0.0' });
    await client.connect(new TransportV1(new URL(r.hub.url.replace(/\/mcp$/, path)), { requestInit: { headers: { authorization: `Bearer ${ALICE}` } } }));
    try {
      const before = r.calls();
      // The SDK's StreamableHTTPError carries the HTTP status as its code.
      const held = client.callTool({ name: 'r__echo', arguments: { text: 'held' } }).then(
        () => 'answered',
        (err: Error & { code?: number }) => `${err.code} ${err.message}`,
      );
      await heldNow(r.dir);
      await reload(r);
      writeFileSync(join(r.dir, 'open'), '');
      const outcome = await held;
      expect(outcome).toMatch(/^404 /);
      expect(outcome).toContain(JSON.stringify({ code: -32001, message: `Session not found: ${why}` }).slice(1, -1));
      expect(r.calls()).toBe(before);
      await expect.poll(() => rowsOf(r.hub, 'alice'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'cancelled', code: null, message: why }]);
    } finally {
      await client.close().catch(() => undefined);
    }
  }

  it('of a legacy session the reload ended is answered 404 -32001 saying why, and its row says so (cancelled), as a call in flight then is', async () => {
    await legacySessionEndedWhileHeld(
      'alice-legacy-held',
      '/mcp',
      (r) => aliceRevoked(r.hub),
      'the client session ended while the request was in flight: the API key that opened it was revoked',
    );
  });

  it("of a legacy session a reload ended by removing its group is answered 404 -32001 saying so, and its row says so (cancelled)", async () => {
    await legacySessionEndedWhileHeld(
      'alice-legacy-group',
      '/mcp/g',
      async (r) => {
        setSection(r.hub, 'groups', { h: { servers: ['r'] } });
        await loggedTimes(r.hub, 'config reload: groups replaced', 1);
      },
      'the client session ended while the request was in flight: the group it was opened on (/mcp/g) was removed',
    );
  });

  it("whose scopes a reload took the tool's scope from is not sent, and is refused 403 insufficient_scope as the edge refuses that key now", async () => {
    const { h, dir, calls, scopesTaken } = await scopedRig();
    const pending = post(h.url, modernBody('shrunk', 'tools/call', { name: 'r__echo', arguments: { text: 'held' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${ALICE}` });
    await heldNow(dir);
    await scopesTaken();
    const reply = await pending;
    const message = 'Forbidden: calling r__echo needs scope echo (the key lost it while the call was held; it was not sent)';
    expect(reply.status).toBe(403);
    expect(reply.body?.error).toEqual({ code: -32600, message });
    expect(reply.headers.get('www-authenticate')).toContain('insufficient_scope');
    expect(calls()).toBe(0);
    await expect.poll(() => rowsOf(h, 'alice'), { timeout: 10_000, interval: 50 }).toEqual([{ outcome: 'denied', code: 403, message }]);
    // A request with the key now is refused by the edge for the same scope.
    const now = await post(h.url, modernBody('after', 'tools/call', { name: 'r__echo', arguments: { text: 'x' } }), { ...modernHeaders('tools/call', 'r__echo'), authorization: `Bearer ${ALICE}` });
    expect(now.status).toBe(403);
  });

  it("of a legacy session whose key a reload left without the tool's scope is refused 403 insufficient_scope too, as the edge refuses it now", async () => {
    const { h, dir, scopesTaken } = await scopedRig();
    const client = new ClientV1({ name: 'alice-legacy-scoped', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(h.url), { requestInit: { headers: { authorization: `Bearer ${ALICE}` } } }));
    try {
      const held = client.callTool({ name: 'r__echo', arguments: { text: 'held' } }).then(
        () => 'answered',
        (err: Error & { code?: number }) => `${err.code} ${err.message}`,
      );
      await heldNow(dir);
      await scopesTaken();
      const message = 'Forbidden: calling r__echo needs scope echo (the key lost it while the call was held; it was not sent)';
      const outcome = await held;
      // What the edge answers this key's request now, 403 with the challenge, not a 200 -32600.
      const now = await client.callTool({ name: 'r__echo', arguments: { text: 'x' } }).then(
        () => 'answered',
        (err: Error & { code?: number }) => `${err.code} ${err.message}`,
      );
      expect(now).toMatch(/^403 /);
      expect(outcome).toMatch(/^403 /);
      expect(outcome).toContain(message);
      await expect.poll(() => rowsOf(h, 'alice'), { timeout: 10_000, interval: 50 }).toContainEqual({ outcome: 'denied', code: 403, message });
    } finally {
      await client.close().catch(() => undefined);
    }
  });
});
