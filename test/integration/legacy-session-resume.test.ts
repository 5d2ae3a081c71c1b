/**
 * A legacy (2025-11-25) HTTP session outlives the hub process: its id carries the handshake,
 * sealed with a key derived from the hub's state key, so the restarted hub takes it back and a
 * client that never re-initializes (the SDK v1 client here) goes on calling. Only the principal
 * that opened it, on the endpoint (tool group) it was opened on, can take it back; a tampered
 * id, and an id a hub of the same ledger ended, are "Session not found" as before. What the session
 * gathered at the hub (resource subscriptions, a log level) comes back with it.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUDIENCE, ISSUER, signingKey, token, writeJwks } from '../helpers/auth.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { nodeServer, startHub, startHubOnFreePort, type HubProcess } from '../helpers/hub-process.js';
import { fixture, SDK1, sleep, textOf, type Json } from './ledger-helpers.js';
import { waitUntil } from './faults-helpers.js';
import { keepOpen } from '../helpers/wire.js';

const ALICE = 'sy_alice-resume-key-0123456789abcdefghijklmnopqrstu';
const BOB = 'sy_bob-resume-key-0123456789abcdefghijklmnopqrstuvwx';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

let hub: HubProcess | undefined;
const clients: Client[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await hub?.stop();
});

/** One raw legacy request; `sid` undefined: an initialize. */
async function legacy(url: string, key: string, body: Json | Json[], sid?: string, version = '2025-11-25'): Promise<{ status: number; sid: string | null; body: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
  if (sid !== undefined) Object.assign(headers, { 'mcp-session-id': sid, 'mcp-protocol-version': version });
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, sid: res.headers.get('mcp-session-id'), body: await res.text() };
}

async function openRaw(url: string, key: string, version = '2025-11-25'): Promise<string> {
  const init = await legacy(url, key, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  expect(init.status).toBe(200);
  await legacy(url, key, { jsonrpc: '2.0', method: 'notifications/initialized' }, init.sid!, version);
  return init.sid!;
}

/** /healthz names the servers only to a caller it knows. */
async function waitForReady(url: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    const h = (await (await fetch(new URL('/healthz', url), { headers: { authorization: `Bearer ${ALICE}` } })).json()) as { servers?: { state: string }[] };
    if (h.servers?.every((s) => s.state === 'ready')) return;
    await sleep(100);
  }
  throw new Error('the server did not get ready');
}

const ping = (url: string, key: string, sid: string) => legacy(url, key, { jsonrpc: '2.0', id: 'p', method: 'ping' }, sid);

describe('legacy sessions across a restart of the hub', () => {
  it('the restarted hub takes back the sessions of the one before, for their own principal and endpoint only', async () => {
    let port: number;
    const config = {
      servers: { a: fixture(SDK1, '') },
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256(ALICE) }, { principal: 'bob', sha256: sha256(BOB) }] },
      groups: { g: {} },
    };
    ({ hub, port } = await startHubOnFreePort(config));
    const dir = hub.dir;
    await waitForReady(hub.url);
    const url = hub.url;
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${ALICE}` } } });
    const client = new Client({ name: 'resume-client', version: '1.0.0' });
    clients.push(client);
    await client.connect(transport);
    expect(textOf((await client.callTool({ name: 'a__echo', arguments: { text: 'before' } })) as Json)).toBe('echo:before');
    const sid = transport.sessionId!;
    expect(sid).toMatch(/^s1\./);
    const grouped = await openRaw(`${url}/g`, ALICE);
    const batching = await openRaw(url, ALICE, '2025-03-26');
    // Ended here: not taken back by the process that ended it.
    const ended = await openRaw(url, ALICE);
    expect((await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': ended, authorization: `Bearer ${ALICE}` } })).status).toBe(200);
    expect((await ping(url, ALICE, ended)).status).toBe(404);
    expect(await hub.stop()).toBe(0);

    hub = await startHub(config, { dir, port });
    await waitForReady(hub.url);
    // Another principal, a tampered id, another endpoint: not found.
    expect((await ping(url, BOB, sid)).status).toBe(404);
    // The next-to-last character changed (it was left as it was, about one run in 64, when it
    // already was the letter put in: the same id, taken back, 200).
    const tampered = sid.slice(0, -2) + (sid.at(-2) === 'A' ? 'B' : 'A') + sid.slice(-1);
    expect(tampered).not.toBe(sid);
    expect((await ping(url, ALICE, tampered)).status).toBe(404);
    expect((await ping(url, ALICE, grouped)).status).toBe(404);
    expect((await ping(`${url}/g`, ALICE, grouped)).status).toBe(200);
    // Ended by the hub before: not taken back by a hub of the same ledger either.
    expect((await ping(url, ALICE, ended)).status).toBe(404);
    // A 2025-03-26 session's first message after the restart may be a batch.
    const batch = await legacy(url, ALICE, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'ping' }], batching, '2025-03-26');
    expect([batch.status, (JSON.parse(batch.body) as Json[]).map((m) => m.id)]).toEqual([200, [1, 2]]);
    // The SDK client goes on with its session: no second initialize.
    expect(textOf((await client.callTool({ name: 'a__echo', arguments: { text: 'after' } })) as Json)).toBe('echo:after');
    expect(transport.sessionId).toBe(sid);
    expect(hub.logs.filter((l) => l.includes('legacy session taken back'))).toHaveLength(3);
    expect(hub.logs.some((l) => l.includes('"method":"initialize"'))).toBe(false);
  }, 60_000);
});

/** The JSON-RPC messages of a response body: plain JSON, or the data lines of an SSE stream. */
function messagesOf(body: string): Json[] {
  if (body.trimStart().startsWith('{') || body.trimStart().startsWith('[')) return [JSON.parse(body) as Json].flat();
  return body
    .split('\n')
    .filter((l) => l.startsWith('data:') && l.slice(5).trim() !== '') // not a priming event's empty data
    .map((l) => JSON.parse(l.slice(5)) as Json);
}

/** A session's GET stream, its messages collected as they come. */
function getStream(url: string, key: string, sid: string): { messages: Json[]; close(): void } {
  const ac = new AbortController();
  const messages: Json[] = [];
  const headers = { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25', authorization: `Bearer ${key}` };
  void fetch(url, { method: 'GET', headers, signal: ac.signal })
    .then(async (res) => {
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          messages.push(...messagesOf(buf.slice(0, i)));
          buf = buf.slice(i + 2);
        }
      }
    })
    .catch(() => undefined);
  return { messages, close: () => ac.abort() };
}

describe('what a legacy session gathered, across a restart of the hub', () => {
  it('its resource subscriptions and log level come back with it; a session that ended leaves nothing behind', async () => {
    await hub?.stop();
    let port: number;
    const TOOLS = JSON.stringify([{ name: 'touch', inputSchema: { type: 'object' } }, { name: 'say', inputSchema: { type: 'object' } }]);
    const config = {
      servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', DOC_URI: 'm://doc', TOOLS }) },
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256(ALICE) }] },
    };
    ({ hub, port } = await startHubOnFreePort(config));
    const { dir, url } = hub;
    await waitForReady(url);
    const sid = await openRaw(url, ALICE);
    const rpc = async (id: number, method: string, params: Json = {}) => messagesOf((await legacy(url, ALICE, { jsonrpc: '2.0', id, method, params }, sid)).body);
    const said = async (id: number, level: string) =>
      (await rpc(id, 'tools/call', { name: 'm__say', arguments: { level, text: level } })).filter((m) => m.method === 'notifications/message').map((m) => (m.params as Json).data);
    const updates = (stream: { messages: Json[] }) => stream.messages.filter((m) => m.method === 'notifications/resources/updated').length;
    /** Touches the document until the stream tells of it (`seen`: the updates it told before). */
    const updated = (stream: { messages: Json[] }, from: number, seen = 0) =>
      waitUntil('a resources/updated on the GET stream', async () => {
        await rpc(from++, 'tools/call', { name: 'm__touch', arguments: { uri: 'm://doc' } });
        await sleep(100);
        return updates(stream) > seen || undefined;
      }, 5_000);

    expect((await rpc(1, 'resources/list')).at(-1)?.result).toMatchObject({ resources: [{ uri: 'm://doc' }] });
    expect((await rpc(2, 'resources/subscribe', { uri: 'm://doc' })).at(-1)?.result).toEqual({});
    expect((await rpc(3, 'logging/setLevel', { level: 'warning' })).at(-1)?.result).toEqual({});
    expect(await said(4, 'info')).toEqual([]);
    expect(await said(5, 'error')).toEqual(['error']);
    const before = getStream(url, ALICE, sid);
    await updated(before, 100);
    before.close();
    expect(await hub.stop()).toBe(0);

    hub = await startHub(config, { dir, port });
    await waitForReady(url);
    const after = getStream(url, ALICE, sid); // takes the session back
    // Nothing watched the document while the hub was down: said updated once, untouched
    // (takeback-subscription-gap.test.ts); the server's own updates come after it.
    await expect.poll(() => updates(after), { timeout: 5_000, interval: 20 }).toBe(1);
    await updated(after, 200, 1);
    expect(await said(6, 'info')).toEqual([]);
    expect(await said(7, 'error')).toEqual(['error']);
    after.close();
    expect(hub.logs.some((l) => l.includes('legacy session taken back') && l.includes('"subscriptions":1'))).toBe(true);

    expect((await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': sid, authorization: `Bearer ${ALICE}` } })).status).toBe(200);
    expect(await hub.stop()).toBe(0);
    const db = new Database(join(dir, 'ledger.db'), { readonly: true });
    expect(db.prepare('SELECT COUNT(*) AS n FROM session_memory').get()).toEqual({ n: 0 });
    db.close();
  }, 60_000);
});

/** A session's GET stream, open once this resolves (its status is checked): the session is busy while it is. */
async function holdStream(url: string, key: string, sid: string): Promise<() => void> {
  const ac = new AbortController();
  const headers = { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25', authorization: `Bearer ${key}` };
  const res = await fetch(url, { method: 'GET', headers, signal: ac.signal });
  expect(res.status).toBe(200);
  keepOpen(res);
  return () => ac.abort();
}

describe('a session to take back when the hub has no room (listen.maxSessions, every session busy)', () => {
  it('is told to try again (503, Retry-After), not that it is gone; taken back once there is room; a DELETE ends it all the same', async () => {
    await hub?.stop();
    let port: number;
    const config = {
      servers: { a: fixture(SDK1, '') },
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256(ALICE) }] },
      listen: { maxSessions: 1 },
    };
    ({ hub, port } = await startHubOnFreePort(config));
    const { dir, url } = hub;
    await waitForReady(url);
    const kept = await openRaw(url, ALICE, '2025-03-26'); // the revision with batches
    expect(await hub.stop()).toBe(0);

    hub = await startHub(config, { dir, port });
    await waitForReady(url);
    const other = await openRaw(url, ALICE);
    let release = await holdStream(url, ALICE, other);
    const refused = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${ALICE}`, 'mcp-session-id': kept, 'mcp-protocol-version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'p', method: 'ping' }),
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await refused.json()).toMatchObject({ id: 'p', error: { code: -32603, message: expect.stringMatching(/too many open sessions/) } });
    const stream = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': kept, 'mcp-protocol-version': '2025-11-25', authorization: `Bearer ${ALICE}` } });
    expect([stream.status, stream.headers.get('retry-after')]).toEqual([503, '5']);
    // A batch has one status for all its members: each is told so in its own answer.
    const batch = await legacy(url, ALICE, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'ping' }], kept, '2025-03-26');
    expect(JSON.parse(batch.body)).toEqual([1, 2].map((id) => ({ jsonrpc: '2.0', id, error: { code: -32603, message: expect.stringMatching(/too many open sessions/) } })));
    // Room again (the other session's stream closed, it is the idlest): the session comes back.
    release();
    await waitUntil('room for the session', async () => ((await ping(url, ALICE, kept)).status === 200) || undefined, 5_000);
    expect((await ping(url, ALICE, other)).status).toBe(404);
    expect(await hub.stop()).toBe(0);

    // A DELETE needs no room: the session ends, and a hub with room later refuses it.
    hub = await startHub(config, { dir, port });
    await waitForReady(url);
    const third = await openRaw(url, ALICE);
    release = await holdStream(url, ALICE, third);
    expect((await ping(url, ALICE, kept)).status).toBe(503);
    expect((await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': kept, authorization: `Bearer ${ALICE}` } })).status).toBe(200);
    release();
    await sleep(100);
    expect((await ping(url, ALICE, kept)).status).toBe(404);
    expect((await ping(url, ALICE, third)).status).toBe(200);
  }, 60_000);
});

describe('a session opened with an API key, across a restart of the hub', () => {
  it('comes back only with the key that opened it: not with another key of its principal, not once that key is removed or its principal re-keyed; token sessions as before', async () => {
    await hub?.stop();
    let port: number;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-resume-keys-'));
    const signer = await signingKey('k1');
    writeJwks(join(dir, 'jwks.json'), [signer]);
    const [K1, K2, K3] = ['1', '2', '3'].map((n) => `sy_alice-resume-key${n}-0123456789abcdefghijklmnopqrstu`);
    const CAROL = 'sy_carol-resume-key-0123456789abcdefghijklmnopqrstu';
    const CAROL2 = 'sy_carol-resume-key2-0123456789abcdefghijklmnopqrst';
    const key = (principal: string, k: string) => ({ principal, sha256: sha256(k) });
    const auth = (...apiKeys: object[]) => ({ apiKeys, oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json' } });
    const config = { servers: {}, auth: auth(key('alice', K1), key('alice', K2), key('alice', K3), key('carol', CAROL)) };
    ({ hub, port } = await startHubOnFreePort(config, { dir }));
    const url = hub.url;
    const byK1 = await openRaw(url, K1);
    const byK2 = await openRaw(url, K2);
    const byK3 = await openRaw(url, K3);
    const byCarol = await openRaw(url, CAROL);
    const byToken = await openRaw(url, await token(signer, { sub: 'alice', extra: { n: 1 } }));
    // The running hub: one principal's session takes any of its keys.
    expect((await ping(url, K2, byK3)).status).toBe(200);
    expect(await hub.stop()).toBe(0);

    hub = await startHub(config, { dir, port });
    // Another key of the principal that opened it, both configured: not found (and not taken by it).
    expect((await ping(url, K2, byK3)).status).toBe(404);
    expect((await ping(url, K3, byK3)).status).toBe(200);
    // Opened with a token: any credential of its principal takes it back, as before.
    expect((await ping(url, await token(signer, { sub: 'alice', extra: { n: 2 } }), byToken)).status).toBe(200);

    // K1 removed while nothing held its session: another key of alice does not take it back.
    setSection(hub, 'auth', auth(key('alice', K2), key('alice', K3), key('carol', CAROL)));
    await loggedTimes(hub, 'API keys replaced', 1);
    expect((await ping(url, K2, byK1)).status).toBe(404);
    expect((await ping(url, K1, byK1)).status).toBe(401);
    // Every key of carol removed, then a new one under her name: her old session stays gone.
    setSection(hub, 'auth', auth(key('alice', K2), key('alice', K3)));
    await loggedTimes(hub, 'API keys replaced', 2);
    setSection(hub, 'auth', auth(key('alice', K2), key('alice', K3), key('carol', CAROL2)));
    await loggedTimes(hub, 'API keys replaced', 3);
    expect((await ping(url, CAROL2, byCarol)).status).toBe(404);
    expect((await ping(url, K2, byK2)).status).toBe(200);
    expect(await hub.stop()).toBe(0);

    // The revoked keys' rows went with the reloads: K2's, K3's and the token's sessions are left.
    const db = new Database(join(dir, 'ledger.db'), { readonly: true });
    const rows = db.prepare('SELECT session, opener FROM session_memory').all() as { session: string; opener: string | null }[];
    db.close();
    expect(rows.map((r) => r.session).sort()).toEqual([byK2, byK3, byToken].map(sha256).sort());
    expect(rows.filter((r) => r.opener === '')).toHaveLength(1);
    // The ledger keeps no key, nor a configured hash of one.
    for (const r of rows) expect(r.opener).toMatch(/^([0-9a-f]{32})?$/);
    const openers = rows.map((r) => r.opener);
    for (const k of [K1, K2, K3]) expect(openers.filter((o) => o === k || o === sha256(k) || sha256(k).startsWith(o!) && o !== '')).toEqual([]);
    hub = undefined;
  }, 60_000);
});
