/**
 * Legacy (2025-11-25) HTTP sessions end without a DELETE: one left idle past
 * listen.sessionIdleTimeoutMs ends (its client then gets 404 and starts a new one), one with an
 * open GET stream does not, and at listen.maxSessions a new session takes the place of the one
 * idle longest, or is refused with 503 when every session is in use. Real built hub.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Hub } from '../../src/hub.js';
import { silentLogger } from '../../src/log.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { keepOpen, LEGACY_VERSION, legacySession, modernBody, modernHeaders, post, waitForReady } from '../helpers/wire.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function openStream(url: string, sid: string): Promise<AbortController> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION }, signal: ac.signal });
  expect(res.status).toBe(200);
  keepOpen(res);
  return ac;
}

describe('legacy sessions that are not ended by their client', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ listen: { sessionIdleTimeoutMs: 1000, maxSessions: 3 }, servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') } });
    await waitForReady(hub.url, ['s']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const list = (sid: string) => post(hub.url, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { ...JSON_HEADERS, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION });
  const sessions = async () => {
    const text = await (await fetch(new URL('/metrics', hub.url))).text();
    return Number(/^switchyard_open_sessions (\d+)/m.exec(text)?.[1]);
  };
  /** Until the hub holds `n` sessions (polled: a list would keep an idle session alive). */
  const sessionsReach = async (n: number): Promise<void> => {
    for (const until = Date.now() + 10_000; (await sessions()) !== n; await sleep(100)) if (Date.now() > until) throw new Error(`open sessions: ${await sessions()}, not ${n}`);
  };

  // With the ledger on (a hub with it off: below), so `switchyard connect` may send a keyed
  // tools/call again after a lost kept-alive connection: the hub runs it once. First, while no
  // session of the tests below can be in the way at maxSessions; its own idles out in a second.
  it("answers its handshakes saying it honours idempotency keys (switchyard-idempotency-keys: kept)", async () => {
    await keysSaid(hub.url, 'kept');
  });

  it('end when idle past the timeout, unless a GET stream is open', async () => {
    const idle = await legacySession(hub.url);
    const watched = await legacySession(hub.url);
    const stream = await openStream(hub.url, watched.sessionId);
    try {
      expect((await list(idle.sessionId)).status).toBe(200);
      await sessionsReach(1); // past the timeout, and past a sweep (every second here)
      const gone = await list(idle.sessionId);
      expect(gone.status).toBe(404);
      expect(gone.body).toMatchObject({ error: { code: -32001 } });
      expect((await list(watched.sessionId)).status).toBe(200);
    } finally {
      stream.abort();
    }
  }, 20_000);

  it('at maxSessions, a new session takes the place of the idlest; with every session in use, 503', async () => {
    await sessionsReach(0); // the sessions of the test before are gone
    const a = await legacySession(hub.url);
    await sleep(20);
    const b = await legacySession(hub.url);
    const c = await legacySession(hub.url);
    expect((await list(b.sessionId)).status).toBe(200); // b and c were seen after a
    const d = await legacySession(hub.url);
    expect(await sessions()).toBe(3);
    expect((await list(a.sessionId)).status).toBe(404);
    for (const s of [b, c, d]) expect((await list(s.sessionId)).status).toBe(200);

    const streams = await Promise.all([b, c, d].map((s) => openStream(hub.url, s.sessionId)));
    try {
      const refused = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'late', version: '1' } } }, JSON_HEADERS);
      expect(refused.status).toBe(503);
      expect(refused.body?.error?.message).toMatch(/too many open sessions/);
    } finally {
      for (const s of streams) s.abort();
    }
  }, 20_000);

});

/** The initialize's and the server/discover's answers say `said` of idempotency keys. */
async function keysSaid(url: string, said: string | null): Promise<void> {
  const s = await legacySession(url);
  const discover = await post(url, modernBody('d', 'server/discover', {}), modernHeaders('server/discover'));
  expect(discover.status).toBe(200);
  expect(s.init.headers.get('switchyard-idempotency-keys')).toBe(said);
  expect(discover.headers.get('switchyard-idempotency-keys')).toBe(said);
}

/** A hub of two principals (API keys), at most 4 sessions (and 4 listen streams), 3 of each per principal. */
async function hubAtCaps(alice: string, bob: string): Promise<HubProcess> {
  const hub = await startHub({
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(alice) }, { principal: 'bob', sha256: sha256Hex(bob) }] },
    listen: { maxSessions: 4, maxSessionsPerPrincipal: 3 },
    servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') },
  });
  await waitForReadyWith(hub.url, ['s'], alice);
  return hub;
}

describe('legacy sessions of several principals at the caps', () => {
  const ALICE = 'sy_alice-sessions-key-0000000000000000000000000000';
  const BOB = 'sy_bob-sessions-key-111111111111111111111111111111';
  let hub: HubProcess;
  beforeAll(async () => void (hub = await hubAtCaps(ALICE, BOB)), 60_000);
  afterAll(async () => void (await hub?.stop()));

  const headers = (key: string) => ({ ...JSON_HEADERS, authorization: `Bearer ${key}` });
  async function open(key: string): Promise<{ status: number; sid: string }> {
    const r = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'caps', version: '1' } } }, headers(key));
    await sleep(5); // sessions told apart by when they were last seen
    return { status: r.status, sid: r.headers.get('mcp-session-id') ?? '' };
  }
  const list = async (key: string, sid: string) =>
    (await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { ...headers(key), 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION })).status;

  it("one principal's sessions give way to its own new ones, never to another principal's", async () => {
    const b1 = await open(BOB); // left idle: the idlest session of all from here on
    const [a1, a2, a3] = [await open(ALICE), await open(ALICE), await open(ALICE)];
    // Alice at her own cap: her idlest session ends, not Bob's older one.
    const a4 = await open(ALICE);
    expect(a4.status).toBe(200);
    expect(await list(ALICE, a1.sid)).toBe(404);
    // The hub at its cap: Bob's new session takes the place of one of the largest holder's.
    const b2 = await open(BOB);
    expect(b2.status).toBe(200);
    expect(await list(ALICE, a2.sid)).toBe(404);
    // Alice holding streams on all hers: her next session is refused, Bob's are not taken.
    const streams = await Promise.all([a3, a4].map(async (a) => {
      const ac = new AbortController();
      const res = await fetch(hub.url, { headers: { accept: 'text/event-stream', authorization: `Bearer ${ALICE}`, 'mcp-session-id': a.sid, 'mcp-protocol-version': LEGACY_VERSION }, signal: ac.signal });
      expect(res.status).toBe(200);
      keepOpen(res);
      return ac;
    }));
    try {
      expect((await open(ALICE)).status).toBe(503);
    } finally {
      for (const s of streams) s.abort();
    }
    expect(await list(BOB, b1.sid)).toBe(200);
    expect(await list(BOB, b2.sid)).toBe(200);
  }, 20_000);
});

describe('modern listen streams at the caps (listen.maxSessions*)', () => {
  const ALICE = 'sy_alice-listen-key-00000000000000000000000000000000';
  const BOB = 'sy_bob-listen-key-1111111111111111111111111111111111';
  let hub: HubProcess;
  beforeAll(async () => void (hub = await hubAtCaps(ALICE, BOB)), 60_000);
  afterAll(async () => void (await hub?.stop()));

  /** Opens a listen stream; resolves with its status once the answer starts (the stream stays open). */
  async function listen(key: string): Promise<{ status: number; ac: AbortController; text?: string }> {
    const ac = new AbortController();
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${key}` },
      body: JSON.stringify(modernBody(1, 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      signal: ac.signal,
    });
    if (res.status === 200) keepOpen(res);
    return { status: res.status, ac, text: res.status === 200 ? undefined : await res.text() };
  }

  it('one principal past its cap is refused (503, Retry-After), other principals are not; a closed stream makes room', async () => {
    const mine = [await listen(ALICE), await listen(ALICE), await listen(ALICE)];
    expect(mine.map((s) => s.status)).toEqual([200, 200, 200]);
    const fourth = await listen(ALICE);
    expect(fourth.status).toBe(503);
    expect(fourth.text).toContain('too many open listen streams');
    const bob = await listen(BOB);
    expect(bob.status).toBe(200);
    // The hub's cap (4) is reached: Bob's second is refused too, and nobody's stream is ended for it.
    expect((await listen(BOB)).status).toBe(503);
    mine[0]!.ac.abort();
    await sleep(200);
    const again = await listen(ALICE);
    expect(again.status).toBe(200);
    for (const s of [...mine, bob, again]) s.ac.abort();
    await sleep(300);
    // Requests that come together are counted as they come, not once each is open.
    const burst = await Promise.all(Array.from({ length: 10 }, () => listen(ALICE)));
    expect(burst.filter((s) => s.status === 200)).toHaveLength(3);
    expect(burst.filter((s) => s.status === 503)).toHaveLength(7);
    for (const s of burst) s.ac.abort();
  }, 20_000);
});

describe('a GET stream its client dropped', () => {
  it('no longer holds its connection, and the session lives on idle (the stream held its response, request and socket for the session\'s life)', async () => {
    // In process: what a session holds is not visible from outside the hub.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-'));
    const hub = Hub.create(parseConfig({ ledger: { enabled: false }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      const url = `http://127.0.0.1:${addr.port}/mcp`;
      const s = await legacySession(url);
      const stream = await openStream(url, s.sessionId);
      const session = hub.endpoint.sessions.get(s.sessionId)!;
      expect(session.stream).toBeDefined();
      stream.abort();
      // Kept, without its connection, for its client's reconnection with Last-Event-ID (resumable.ts).
      const held = () => (session.stream as { conn?: unknown } | undefined)?.conn;
      const deadline = Date.now() + 5000;
      while (held() !== undefined && Date.now() < deadline) await sleep(10);
      expect(held()).toBeUndefined();
      expect(session.stream?.connected).toBe(false);
      // The session goes on, and takes a new stream.
      expect((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION })).status).toBe(200);
      (await openStream(url, s.sessionId)).abort();
    } finally {
      await hub.stop(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// `switchyard connect` sends a keyed tools/call again after a lost kept-alive connection only for
// a hub whose handshake says it honours keys: one with its ledger off would run the call twice.
describe("the handshake's answer over HTTP, with the ledger off", () => {
  it('does not say the hub honours idempotency keys (no switchyard-idempotency-keys)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-'));
    const hub = Hub.create(parseConfig({ ledger: { enabled: false }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      const url = `http://127.0.0.1:${addr.port}/mcp`;
      await keysSaid(url, null);
    } finally {
      await hub.stop(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the wall clock stepped (NTP, a laptop resumed)', () => {
  it('an hour ahead ends no session idle for less than its timeout, nor drops a cut stream kept for its client', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-'));
    const idle = 600_000;
    const hub = Hub.create(parseConfig({ ledger: { enabled: false }, listen: { sessionIdleTimeoutMs: idle }, servers: {} }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      const addr = await hub.listen('127.0.0.1', 0);
      const url = `http://127.0.0.1:${addr.port}/mcp`;
      const s = await legacySession(url);
      const session = hub.endpoint.sessions.get(s.sessionId)!;
      (await openStream(url, s.sessionId)).abort();
      const deadline = Date.now() + 5000;
      while (session.stream?.connected !== false && Date.now() < deadline) await sleep(10);
      expect(session.stream?.connected).toBe(false);
      // Only Date: the monotonic clock (performance.now) and the timers go on as they were.
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(Date.now() + 3_600_000);
      // The sweep the hub runs every minute (called here rather than waited for).
      (hub.endpoint as unknown as { table: { endIdleSessions(ms: number): void } }).table.endIdleSessions(idle);
      // Before, the session (seen by the wall clock an hour before) ended, its stream let go with it.
      expect(hub.endpoint.sessions.get(s.sessionId)).toBe(session);
      expect(session.stream?.closed).toBe(false);
      vi.useRealTimers();
      expect((await post(url, { jsonrpc: '2.0', id: 2, method: 'ping' }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION })).status).toBe(200);
    } finally {
      vi.useRealTimers();
      await hub.stop(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
