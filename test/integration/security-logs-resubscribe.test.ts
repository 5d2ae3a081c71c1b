/**
 * A legacy stdio server's log line says nothing of the request it is about; while its connection
 * has carried one principal's calls alone, the hub gives such a line to that principal's calls in
 * flight. The hub's own resources/subscribe on a fresh connection (a subscription asked for again
 * once `servers restart` made a new one, or one made on the connection it replaced and carried to
 * the new one) is made for the principals holding it: a line the server writes about it must not
 * reach a lone call of another principal. The real built hub, mutable-server processes that say
 * `subscribed <uri>` as they answer a subscribe (held until a gate file exists), raw legacy sessions.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, post } from '../helpers/wire.js';

const ALICE_KEY = 'sy_alice-resub-key-00000000000000000000000000000';
const BOB_KEY = 'sy_bob-resub-key-111111111111111111111111111111111';
const OPS_KEY = 'sy_ops-resub-key-2222222222222222222222222222222222';
const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const HELD = JSON.stringify([{ name: 'held', inputSchema: { type: 'object' } }]);
const dir = mkdtempSync(join(tmpdir(), 'sy-logs-resub-'));
/** Each server's processes answer resources/subscribe only while its gate exists. */
const gates = { rs: join(dir, 'rs-gate'), rc: join(dir, 'rc-gate'), rm: join(dir, 'rm-gate') };
const rcStats = join(dir, 'rc-stats.json');
let hub: HubProcess;

beforeAll(async () => {
  for (const g of Object.values(gates)) writeFileSync(g, '');
  const server = (gate: string, extra: Record<string, string> = {}) =>
    nodeServer(MUTABLE, [], { ERA: 'legacy', SUBSCRIBE_SAYS: '1', TOOLS: HELD, LIST_GATE: gate, LIST_GATE_KINDS: 'resources/subscribe', ...extra });
  hub = await startHub(
    {
      auth: {
        apiKeys: [
          { principal: 'alice', sha256: sha256Hex(ALICE_KEY) },
          { principal: 'bob', sha256: sha256Hex(BOB_KEY) },
          { principal: 'ops', sha256: sha256Hex(OPS_KEY), scopes: ['switchyard:admin'] },
        ],
      },
      // The replaced process answers what it holds as it drains.
      listen: { drainTimeoutMs: 20_000 },
      // A resource each: `<server>://doc`.
      servers: {
        rs: server(gates.rs, { DOC_URI: 'rs://doc' }),
        rc: server(gates.rc, { DOC_URI: 'rc://doc', STATS_FILE: rcStats }),
        rm: server(gates.rm, { DOC_URI: 'rm://doc' }),
      },
    },
    { dir },
  );
  await waitForReadyWith(hub.url, ['rs', 'rc', 'rm'], ALICE_KEY);
}, 60_000);
afterAll(async () => {
  for (const g of Object.values(gates)) writeFileSync(g, '');
  await hub?.stop();
});

/** A legacy session's headers. */
async function opened(key: string): Promise<Record<string, string>> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${key}` };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'resub', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return h;
}

/** Alice's `held` call to `server`, in flight at the new process once `started` exists: the log lines on its answer stream. */
async function aliceHeld(server: string, started: string): Promise<string[]> {
  const h = await opened(ALICE_KEY);
  const args = { started, gate: gates[server as keyof typeof gates], subscribed: `${server}://doc` };
  const reply = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: `${server}__held`, arguments: args } }, h);
  expect(reply.body).toMatchObject({ result: { content: [{ text: 'let go' }] } });
  return reply.messages.filter((m) => m.method === 'notifications/message').map((m) => String((m.params as { data?: unknown }).data));
}

async function restart(server: string): Promise<void> {
  expect((await fetch(new URL(`/admin/servers/${server}/restart`, hub.url), { method: 'POST', headers: { authorization: `Bearer ${OPS_KEY}` } })).status).toBe(200);
  await waitForReadyWith(hub.url, [server], ALICE_KEY);
}

const subscribe = (server: string, h: Record<string, string>) => post(hub.url, { jsonrpc: '2.0', id: 'sub', method: 'resources/subscribe', params: { uri: `${server}://doc` } }, h);

describe("a legacy upstream's line about a subscription the hub makes on a new connection for another principal", () => {
  it('asked for again after `servers restart`: it does not reach the lone call in flight of a principal who does not hold it', async () => {
    const started = join(dir, 'rs-started');
    const bob = await opened(BOB_KEY);
    expect((await subscribe('rs', bob)).body).toMatchObject({ result: {} });
    rmSync(gates.rs);
    try {
      // The new process is asked for Bob's subscription as it is ready; it answers once the gate is back.
      await restart('rs');
      // Alice's call is the only call the new connection has carried, in flight as the server
      // says `subscribed rs://doc` (it answers only after that line).
      const call = aliceHeld('rs', started);
      await expect.poll(() => existsSync(started), { timeout: 10_000, interval: 20 }).toBe(true);
      writeFileSync(gates.rs, '');
      expect(await call).toEqual([]);
    } finally {
      writeFileSync(gates.rs, '');
    }
  }, 60_000);

  it('made on the connection `servers restart` replaced and carried to the new one: it does not reach the lone call in flight of a principal who does not hold it', async () => {
    const started = join(dir, 'rc-started');
    const bob = await opened(BOB_KEY);
    rmSync(gates.rc);
    try {
      // Bob's subscribe is at the old process, held there while the server is replaced.
      const subscribing = subscribe('rc', bob);
      const got = () => (existsSync(rcStats) ? ((JSON.parse(readFileSync(rcStats, 'utf8')) as Record<string, number>)['resources/subscribe'] ?? 0) : 0);
      await expect.poll(got, { timeout: 10_000, interval: 20 }).toBeGreaterThan(0);
      await restart('rc');
      const call = aliceHeld('rc', started);
      await expect.poll(() => existsSync(started), { timeout: 10_000, interval: 20 }).toBe(true);
      // The old process answers Bob's subscribe; the hub makes it again on the new connection,
      // whose line about it comes while Alice's call is in flight there.
      writeFileSync(gates.rc, '');
      expect((await subscribing).body).toMatchObject({ result: {} });
      expect(await call).toEqual([]);
    } finally {
      writeFileSync(gates.rc, '');
    }
  }, 60_000);

  it("held by two principals and asked for again after `servers restart`: the new connection counts as shared, and no line reaches either's lone call by guess", async () => {
    const started = join(dir, 'rm-started');
    // Alice's first: the one principal of the first holder is not whom it is made for.
    expect((await subscribe('rm', await opened(ALICE_KEY))).body).toMatchObject({ result: {} });
    expect((await subscribe('rm', await opened(BOB_KEY))).body).toMatchObject({ result: {} });
    rmSync(gates.rm);
    try {
      await restart('rm');
      const call = aliceHeld('rm', started);
      await expect.poll(() => existsSync(started), { timeout: 10_000, interval: 20 }).toBe(true);
      writeFileSync(gates.rm, '');
      expect(await call).toEqual([]);
    } finally {
      writeFileSync(gates.rm, '');
    }
  }, 60_000);
});
