/**
 * Legacy (2025-11-25) HTTP sessions end without a DELETE: one left idle past
 * listen.sessionIdleTimeoutMs ends (its client then gets 404 and starts a new one), one with an
 * open GET stream does not, and at listen.maxSessions a new session takes the place of the one
 * idle longest, or is refused with 503 when every session is in use. Real built hub.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, legacySession, post, waitForReady } from '../helpers/wire.js';

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function openStream(url: string, sid: string): Promise<AbortController> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION }, signal: ac.signal });
  expect(res.status).toBe(200);
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

  it('end when idle past the timeout, unless a GET stream is open', async () => {
    const idle = await legacySession(hub.url);
    const watched = await legacySession(hub.url);
    const stream = await openStream(hub.url, watched.sessionId);
    try {
      expect((await list(idle.sessionId)).status).toBe(200);
      await sleep(2600); // past the timeout, and past a sweep (every second here)
      const gone = await list(idle.sessionId);
      expect(gone.status).toBe(404);
      expect(gone.body).toMatchObject({ error: { code: -32001 } });
      expect((await list(watched.sessionId)).status).toBe(200);
    } finally {
      stream.abort();
    }
  }, 20_000);

  it('at maxSessions, a new session takes the place of the idlest; with every session in use, 503', async () => {
    await sleep(2600); // the sessions of the test before are gone
    expect(await sessions()).toBe(0);
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
