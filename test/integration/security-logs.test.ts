/**
 * A legacy upstream's log lines are session-wide: one no answer stream carried is about
 * whatever the server was doing, perhaps another user's call that has already been answered.
 * It may go to a lone call only while the upstream has served one principal. The real built
 * hub, an SDK v1 upstream that logs after answering, raw legacy sessions of two principals.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, modernBody, modernHeaders, modernMeta, post } from '../helpers/wire.js';

const ALICE_KEY = 'sy_alice-logs-key-000000000000000000000000000000';
const BOB_KEY = 'sy_bob-logs-key-1111111111111111111111111111111111';
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] },
    servers: {
      late: nodeServer('test/fixtures/servers/legacy-late-log.mjs'),
      q: nodeServer('test/fixtures/quirks/modern.mjs'),
      // One SDK v2 server spoken to in each era: its log lines follow each era's rules.
      cl: { ...nodeServer('test/fixtures/conformance/server.mjs'), era: '2025-11-25' },
      cm: { ...nodeServer('test/fixtures/conformance/server.mjs'), era: '2026-07-28' },
      // A legacy server that says so in a line when it is subscribed to a resource.
      sub: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', SUBSCRIBE_SAYS: '1', TOOLS: JSON.stringify([{ name: 'held', inputSchema: { type: 'object' } }]) }),
    },
  });
  await waitForReadyWith(hub.url, ['late', 'q', 'cl', 'cm', 'sub'], ALICE_KEY);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

async function session(key: string, level?: string): Promise<(id: number, name: string, args: Record<string, unknown>) => Promise<string[]>> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'logs', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  if (level !== undefined) expect((await post(hub.url, { jsonrpc: '2.0', id: 'level', method: 'logging/setLevel', params: { level } }, h)).body).toMatchObject({ result: {} });
  // The log lines that came on the call's answer stream.
  return async (id, name, args) =>
    (await post(hub.url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }, h)).messages
      .filter((m) => m.method === 'notifications/message')
      .map((m) => String((m.params as { data?: unknown }).data));
}

describe('session-wide log lines of a legacy upstream', () => {
  it("reach a lone call of the one principal it served, never another principal's call", async () => {
    const alice = await session(ALICE_KEY);
    // One principal so far: a line while her call runs alone is hers (the hub cannot tell more).
    expect(await alice(1, 'late__log_later', { text: 'alice-1', delay: 600 })).toEqual([]);
    expect(await alice(2, 'late__wait', { ms: 1200 })).toEqual(['after:alice-1']);

    // Bob's call is alone in flight when the line about Alice's work comes: not his.
    const bob = await session(BOB_KEY);
    expect(await alice(3, 'late__log_later', { text: 'alice-secret', delay: 600 })).toEqual([]);
    expect(await bob(1, 'late__wait', { ms: 1200 })).toEqual([]);
    // And from now on nobody's lone call gets an unattributed line (two principals were served).
    expect(await bob(2, 'late__log_later', { text: 'bob-2', delay: 600 })).toEqual([]);
    expect(await alice(4, 'late__wait', { ms: 1200 })).toEqual([]);
    // The hub's log says a line went to no client, and why (its text is the server's: not there).
    expect(hub.logs.some((l) => l.includes('relayed to no client') && !l.includes('after:'))).toBe(true);
  }, 30_000);
});

describe("a legacy upstream's line while another principal's listen stream subscribes there", () => {
  it("does not reach the call in flight of the principal whose calls alone the connection carried", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-logs-sub-'));
    const [started, gate] = [join(dir, 'started'), join(dir, 'gate')];
    const alice = await session(ALICE_KEY);
    // Her call is in flight at the server, the only call its connection has carried.
    const call = alice(1, 'sub__held', { started, gate });
    await expect.poll(() => existsSync(started), { timeout: 10_000, interval: 20 }).toBe(true);
    // Bob's modern listen stream subscribes to the server's resource: the hub subscribes there
    // for him, and the server's line about it comes while that request and her call are in flight.
    const ac = new AbortController();
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${BOB_KEY}` },
      body: JSON.stringify(modernBody('bob-listen', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['mut://doc'] } })),
      signal: ac.signal,
    });
    const heard = heardSoFar(res);
    try {
      await expect.poll(() => heard().includes('acknowledged'), { timeout: 10_000, interval: 20 }).toBe(true);
      expect(heard()).toContain('mut://doc');
      writeFileSync(gate, '');
      expect(await call).toEqual([]);
    } finally {
      writeFileSync(gate, '');
      ac.abort();
    }
  }, 30_000);
});

describe('log lines of a legacy session that never sent logging/setLevel', () => {
  const LINES = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];

  it("are the same from a server of either era: every level, as a legacy server sends before it (a modern one is asked for them)", async () => {
    const alice = await session(ALICE_KEY);
    expect(await alice(1, 'cl__test_tool_with_logging', {})).toEqual(LINES);
    expect(await alice(2, 'cm__test_tool_with_logging', {})).toEqual(LINES);
    // Its level, once set, holds for both.
    const quiet = await session(ALICE_KEY, 'warning');
    expect(await quiet(1, 'cl__test_tool_with_logging', {})).toEqual([]);
    expect(await quiet(2, 'cm__test_tool_with_logging', {})).toEqual([]);
    const loud = await session(ALICE_KEY, 'info');
    expect(await loud(1, 'cl__test_tool_with_logging', {})).toEqual(LINES);
    expect(await loud(2, 'cm__test_tool_with_logging', {})).toEqual(LINES);
    // A modern request that names no logLevel gets none, from either.
    const headers = (name: string) => ({ ...modernHeaders('tools/call', name), authorization: `Bearer ${ALICE_KEY}` });
    for (const name of ['cl__test_tool_with_logging', 'cm__test_tool_with_logging']) {
      const r = await post(hub.url, modernBody(`m-${name}`, 'tools/call', { name, arguments: {} }, modernMeta()), headers(name));
      expect(r.messages.filter((m) => m.method === 'notifications/message')).toEqual([]);
    }
  }, 30_000);
});

describe('log lines of no level the spec knows', () => {
  it('are not relayed, whatever level the client chose (a client that checks them reports an error)', async () => {
    const headers = { ...modernHeaders('tools/call', 'q__log'), authorization: `Bearer ${ALICE_KEY}` };
    const said = async (id: string, level: string, chosen: string) =>
      (await post(hub.url, modernBody(id, 'tools/call', { name: 'q__log', arguments: { level, text: level } }, modernMeta({ 'io.modelcontextprotocol/logLevel': chosen })), headers)).messages
        .filter((m) => m.method === 'notifications/message')
        .map((m) => String((m.params as { data?: unknown }).data));
    expect(await said('l1', 'error', 'debug')).toEqual(['error']);
    expect(await said('l2', 'verbose', 'debug')).toEqual([]);
    expect(await said('l3', 'verbose', 'error')).toEqual([]);
  });
});
