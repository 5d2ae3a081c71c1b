/**
 * A tool only one principal's own connection lists (its credentials) is that principal's alone:
 * while its server's main connection is down, another principal calling it by name is answered
 * as for any name it was never shown ("Unknown tool"), not told the tool is "unavailable", which
 * says it exists. (The names the hub remembers for "unavailable" were kept per group, whoever
 * was shown them, and the names and pins it stores are every principal's.) Real built hub with
 * API keys, a raw modern HTTP upstream that refuses the shared account and lists each user's own
 * tool, clients of both eras over loopback HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../helpers/auth.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, modernBody, modernHeaders, post, type Json, type RpcMessage } from '../helpers/wire.js';
import { queryRows } from './ledger-helpers.js';

const ALICE_KEY = 'sy_private-names-alice-000000000000000000000';
const BOB_KEY = 'sy_private-names-bob-00000000000000000000000';

let up: HttpFixture;
let hub: HubProcess;

beforeAll(async () => {
  // No shared account: the server's main connection never comes up; alice has one of her own.
  up = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs', { SHARED_REFUSED: '1' });
  hub = await startHub(
    {
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }] },
      servers: { u: { url: up.url, credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } } } } },
    },
    { env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } },
  );
}, 60_000);
afterAll(async () => {
  await hub?.stop();
  await up?.stop();
});

const as = async (key: string, method: string, params: Json = {}, name?: string): Promise<RpcMessage> => {
  const r = await post(hub.url, modernBody(1, method, params), { ...modernHeaders(method, name), authorization: `Bearer ${key}` });
  if (!r.body) throw new Error(`${r.status} ${r.text}`);
  return r.body;
};

async function legacyCall(key: string, name: string): Promise<RpcMessage> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'names', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  const r = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } }, h);
  await fetch(hub.url, { method: 'DELETE', headers: h });
  return r.body!;
}

describe("a tool of one principal's own list, its server's main connection down", () => {
  it('is "unknown" to another principal, as a name nobody was shown, in both eras; its owner still calls it', async () => {
    const lastError = async () => ((await (await fetch(new URL('/healthz', hub.url), { headers: { authorization: `Bearer ${ALICE_KEY}` } })).json()) as { servers: { lastError?: string }[] }).servers[0]?.lastError;
    await expect.poll(lastError, { timeout: 10_000 }).toMatch(/403/);
    const listed = (await as(ALICE_KEY, 'tools/list')).result as Json;
    expect((listed.tools as Json[]).map((t) => t.name)).toEqual(['u__alice_only']);
    expect(listed.cacheScope).toBe('private');
    expect(((await as(BOB_KEY, 'tools/list')).result as Json).tools).toEqual([]);

    // A name nobody was shown, and alice's: bob hears the same of both.
    const never = await as(BOB_KEY, 'tools/call', { name: 'u__carol_only', arguments: {} }, 'u__carol_only');
    expect(never.error, JSON.stringify(never)).toMatchObject({ code: -32602, message: 'Unknown tool: u__carol_only' });
    const hers = await as(BOB_KEY, 'tools/call', { name: 'u__alice_only', arguments: {} }, 'u__alice_only');
    expect(hers.result, JSON.stringify(hers)).toBeUndefined();
    expect(hers.error).toMatchObject({ code: -32602, message: 'Unknown tool: u__alice_only' });
    const legacy = await legacyCall(BOB_KEY, 'u__alice_only');
    expect(legacy.error, JSON.stringify(legacy)).toMatchObject({ code: -32602, message: 'Unknown tool: u__alice_only' });
    // Nor does his row name her tool's server.
    const rows = await queryRows(`${hub.dir}/ledger.db`, { principal: 'bob', method: 'tools/call' });
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const r of rows) expect({ server: r.server, upstreamName: r.upstreamName }).toEqual({ server: null, upstreamName: null });

    // Her own call goes over her own connection, as before.
    const mine = await as(ALICE_KEY, 'tools/call', { name: 'u__alice_only', arguments: {} }, 'u__alice_only');
    expect(mine.result, JSON.stringify(mine)).toMatchObject({ content: [{ type: 'text', text: 'alice_only for alice' }] });
  }, 60_000);
});
