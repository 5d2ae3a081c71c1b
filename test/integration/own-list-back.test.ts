/**
 * A principal's own list that failed with none to serve instead (its own process's first list
 * answered an error) left that server's tools out of the principal's list; when it is listed
 * again, that principal's clients are told (tools list_changed), as they are for a server's own
 * list: a legacy client keeps its list until told, and lacked the server's tools for good.
 * Another principal is not told. Real built hub with API keys and a processPerPrincipal stdio
 * fixture; a legacy client's GET stream and a modern client's listen stream over loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';

const ALICE_KEY = 'sy_own-list-back-alice-0000000000000000000000';
const BOB_KEY = 'sy_own-list-back-bob-000000000000000000000000';
const PAGING = `${process.cwd()}/test/fixtures/catalog/paging-server.mjs`;

let hub: HubProcess;
const ac = new AbortController();

beforeAll(async () => {
  hub = await startHub({
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] },
    // Each principal's process answers its first tools/list with an error, and the next ones with its two tools.
    servers: { p: { command: process.execPath, args: [PAGING], env: { ERA: 'legacy', FAIL_PAGE: '1', FAIL_WALKS: '1', N: '2', PAGE: '5' }, processPerPrincipal: true } },
  });
}, 60_000);
afterAll(async () => {
  ac.abort();
  await hub?.stop();
});

/** A legacy session of `key` with its GET stream open: its requests, and what the stream heard. */
async function legacyClient(key: string): Promise<{ request(id: number, method: string): Promise<Json | undefined>; heard: () => string }> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'own-list', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const stream = await fetch(hub.url, { headers: { ...h, accept: 'text/event-stream' }, signal: ac.signal });
  expect(stream.status).toBe(200);
  return { request: async (id, method) => (await post(hub.url, { jsonrpc: '2.0', id, method, params: {} }, h)).body?.result, heard: heardSoFar(stream) };
}

const toolNames = (result: Json | undefined) => ((result?.tools as Json[]) ?? []).map((t) => t.name);

describe("a principal's own list that failed, listed again", () => {
  it("is told to that principal's clients of both eras, and to nobody else", async () => {
    await waitForReadyWith(hub.url, ['p'], ALICE_KEY);
    // bob's own process lists its tools (its first list failed, before his session below began).
    const bobList = async () => toolNames((await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${BOB_KEY}` })).body?.result);
    await expect.poll(bobList, { timeout: 15_000, interval: 250 }).toEqual(['p__i0', 'p__i1']);
    const bob = await legacyClient(BOB_KEY);
    expect(toolNames(await bob.request(1, 'tools/list'))).toEqual(['p__i0', 'p__i1']);
    const alice = await legacyClient(ALICE_KEY);
    const modernStream = await fetch(hub.url, {
      method: 'POST',
      headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${ALICE_KEY}` },
      body: JSON.stringify(modernBody('l-own', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      signal: ac.signal,
    });
    const modernHeard = heardSoFar(modernStream);
    await expect.poll(() => modernHeard().includes('acknowledged'), { timeout: 5_000 }).toBe(true);

    // alice's first list: her process's list failed, none to serve instead.
    expect(toolNames(await alice.request(1, 'tools/list'))).toEqual([]);
    // A modern client of hers lists again (its list lacked a server: ttlMs 5 s at most) until they are back.
    const modernList = async () => toolNames((await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${ALICE_KEY}` })).body?.result);
    await expect.poll(modernList, { timeout: 15_000, interval: 250 }).toEqual(['p__i0', 'p__i1']);

    // Her legacy client, which keeps its list until told, and her listen stream are told.
    await expect.poll(() => alice.heard().includes('notifications/tools/list_changed'), { timeout: 5_000 }).toBe(true);
    await expect.poll(() => modernHeard().includes('notifications/tools/list_changed'), { timeout: 5_000 }).toBe(true);
    expect(toolNames(await alice.request(2, 'tools/list'))).toEqual(['p__i0', 'p__i1']);
    // bob's list was never short of them: a round trip on his session later, his stream heard nothing.
    await bob.request(2, 'ping');
    expect(bob.heard()).not.toContain('list_changed');
  }, 60_000);
});
