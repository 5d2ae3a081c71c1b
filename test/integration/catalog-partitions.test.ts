/**
 * Private list partitions end to end: two principals (API keys) whose upstream credentials
 * differ (`servers.<id>.credentials`) each get the private list the upstream gave their own
 * credential, fetched once each and cached apart; neither ever sees the other's.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { execFile } from 'node:child_process';
import { perUserHub, stopPerUserHub } from './per-user-hub.js';
import { BIN, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, heardSoFar, modernBody, modernHeaders, post, type Json } from '../helpers/wire.js';

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A hub over the per-user fixture: alice and bob (and `more`) by API key, alice and bob with upstream credentials. */
async function hubOver(up: HttpFixture, more: { principal: string; sha256: string; scopes?: string[] }[] = [], extra: Record<string, unknown> = {}): Promise<HubProcess> {
  const hub = await startHub({
    ...extra,
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'bob', sha256: sha256Hex(BOB_KEY) }, ...more] },
    servers: {
      u: {
        url: up.url,
        credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } }, bob: { headers: { authorization: 'Bearer bob-upstream' } } },
      },
    },
  });
  await waitForReadyWith(hub.url, ['u'], ALICE_KEY);
  return hub;
}

const ALICE_KEY = 'sy_alice-partition-key-0000000000000000000000000';
const BOB_KEY = 'sy_bob-partition-key-1111111111111111111111111111111';

describe('private list partitions by upstream authorization context', () => {
  let up: HttpFixture;
  let hub: HubProcess;
  beforeAll(async () => {
    up = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs');
    hub = await hubOver(up);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  const list = async (key: string): Promise<Json> => {
    const r = await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
    if (!r.body?.result) throw new Error(`${r.status} ${r.text}`);
    return r.body.result;
  };
  const names = (r: Json) => (r.tools as Json[]).map((t) => String(t.name));

  it('each principal sees only the list of its own upstream credential, and it stays private', async () => {
    for (let i = 0; i < 3; i++) {
      const a = await list(ALICE_KEY);
      const b = await list(BOB_KEY);
      expect(names(a)).toEqual(['u__alice_only']);
      expect(names(b)).toEqual(['u__bob_only']);
      expect(a.cacheScope).toBe('private');
      expect(b.cacheScope).toBe('private');
    }
    const stats = (await (await fetch(new URL('/stats', up.url))).json()) as Record<string, number>;
    expect(stats.alice).toBe(1); // cached per partition for the upstream's ttlMs
    expect(stats.bob).toBe(1);
    // A tool of another principal's list cannot be called either.
    const call = await post(hub.url, modernBody(2, 'tools/call', { name: 'u__bob_only', arguments: {} }), {
      ...modernHeaders('tools/call', 'u__bob_only'),
      authorization: `Bearer ${ALICE_KEY}`,
    });
    expect(call.body?.error?.message).toMatch(/Unknown tool/);
  });

  it("a principal's own connection listens too: a change said on it reaches that principal's list before the list's ttl", async () => {
    const stats = async () => (await (await fetch(new URL('/stats', up.url))).json()) as { listening?: Record<string, number> };
    expect(names(await list(ALICE_KEY))).toEqual(['u__alice_only']);
    await until("alice's listen stream", async () => ((await stats()).listening?.alice ?? 0) >= 1);
    // Both principals' clients listen to the hub for tool list changes.
    const heard = { alice: () => '', bob: () => '' };
    const streams = await Promise.all(
      (['alice', 'bob'] as const).map(async (who) => {
        const ac = new AbortController();
        const res = await fetch(hub.url, {
          method: 'POST',
          headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${who === 'alice' ? ALICE_KEY : BOB_KEY}` },
          body: JSON.stringify(modernBody(`listen-${who}`, 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
          signal: ac.signal,
        });
        heard[who] = heardSoFar(res);
        return ac;
      }),
    );
    await until('both acknowledged', async () => heard.alice().includes('acknowledged') && heard.bob().includes('acknowledged'));
    // And a legacy session of bob's, on its GET stream.
    const init = await post(
      hub.url,
      { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bob-legacy', version: '1' } } },
      { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${BOB_KEY}` },
    );
    const sid = init.headers.get('mcp-session-id')!;
    const legacyHeaders = { authorization: `Bearer ${BOB_KEY}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...legacyHeaders, 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    const getAc = new AbortController();
    const get = await fetch(hub.url, { headers: { ...legacyHeaders, accept: 'text/event-stream' }, signal: getAc.signal });
    expect(get.status).toBe(200);
    const bobLegacy = heardSoFar(get);
    streams.push(getAc);
    await fetch(new URL('/grow?user=alice', up.url), { method: 'POST' });
    // The list is private with a 60 s ttl: only the notification can bring the change this soon.
    await until("alice's grown tool", async () => names(await list(ALICE_KEY)).includes('u__alice_grown_1'));
    expect(names(await list(BOB_KEY))).toEqual(['u__bob_only']);
    // Only alice's clients are told: bob's list did not change, and is not another's business.
    await until('alice told', async () => heard.alice().includes('notifications/tools/list_changed'));
    await new Promise((r) => setTimeout(r, 300));
    expect(heard.bob()).not.toContain('notifications/tools/list_changed');
    expect(bobLegacy()).not.toContain('notifications/tools/list_changed');
    for (const ac of streams) ac.abort();
    // The server is reconfigured (a credential changed): the principals' connections close,
    // and their streams with them.
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { servers: { u: { credentials: Record<string, { headers: Record<string, string> }> } } };
    config.servers.u.credentials.bob!.headers['x-rotated'] = '1';
    writeFileSync(hub.configFile, JSON.stringify(config));
    await until("alice's stream to end", async () => ((await stats()).listening?.alice ?? 0) === 0);
  });
});

describe('pins of lists that differ by credential', () => {
  const CAROL_KEY = 'sy_carol-partition-key-222222222222222222222222222';
  /** `tools approve` tells the running hub with it (its admin socket, from the config), which then takes the approval at once. */
  const OPS_KEY = 'sy_ops-partition-key-3333333333333333333333333333333';
  let up: HttpFixture;
  let hub: HubProcess;
  beforeAll(async () => {
    up = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs', { REPORT: '1' });
    // Carol has no credentials of her own: the server's shared connection, and its version of the tool.
    hub = await hubOver(
      up,
      [
        { principal: 'carol', sha256: sha256Hex(CAROL_KEY) },
        { principal: 'ops', sha256: sha256Hex(OPS_KEY), scopes: ['switchyard:admin'] },
      ],
      { listen: { admin: { path: 'admin.sock' } } },
    );
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  const tools = async (key: string): Promise<Json[]> => {
    const r = await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
    if (!r.body?.result) throw new Error(`${r.status} ${r.text}`);
    return r.body.result.tools as Json[];
  };
  const report = async (key: string) => (await tools(key)).find((t) => t.name === 'u__report')?.description;
  const approve = () =>
    new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [BIN, 'tools', 'approve', '--server', 'u', '--config', hub.configFile], { cwd: ROOT, env: { ...process.env, SWITCHYARD_API_KEY: OPS_KEY } }, (err, stdout) =>
        err ? reject(err) : resolve(stdout),
      ),
    );

  it("another user's version is held back until approved; then both are shown, neither swapping the other out", async () => {
    expect(await report(ALICE_KEY)).toBe('The weekly report of alice'); // first seen: pinned
    expect(await report(BOB_KEY)).toBeUndefined(); // a definition nobody approved
    // Alice's list fetched again (it grew): her version, listed once more, does not end his quarantine.
    await fetch(new URL('/grow?user=alice', up.url), { method: 'POST' });
    await until("alice's list to be fetched again", async () => (await tools(ALICE_KEY)).some((t) => t.name === 'u__alice_grown_1'));
    expect(await report(ALICE_KEY)).toBe('The weekly report of alice');
    expect(await approve()).toMatch(/approved u\/report \(changed\)/);
    // Told by the CLI (with an admin key: authentication is on), the hub took it before the CLI ended.
    expect(await report(BOB_KEY)).toBe('The weekly report of bob');
    expect(await report(ALICE_KEY)).toBe('The weekly report of alice');
    expect(await report(BOB_KEY)).toBe('The weekly report of bob');
  });

  it('a version no one approved is held back, for a user who has never listed too', async () => {
    // Carol's first list: the shared connection's version was never approved.
    expect(await report(CAROL_KEY)).toBeUndefined();
    // A change of Alice's version holds hers back; Bob's approved one stays.
    await fetch(new URL('/redescribe?user=alice', up.url), { method: 'POST' });
    await until("alice's report to be held back", async () => (await report(ALICE_KEY)) === undefined);
    expect(await report(BOB_KEY)).toBe('The weekly report of bob');
  });
});

describe("a principal's connection answered from the shared public list", () => {
  const CAROL_KEY = 'sy_carol-partition-key-222222222222222222222222222';
  let up: HttpFixture;
  let hub: HubProcess;
  beforeAll(async () => {
    ({ up, hub } = await perUserHub({ apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'carol', sha256: sha256Hex(CAROL_KEY) }] }, ALICE_KEY, { env: { PUBLIC: '1' } }));
  }, 60_000);
  afterAll(() => stopPerUserHub(hub, up));

  const as = (key: string, id: number, method: string, params: Json = {}, name?: string, more: Record<string, string> = {}) =>
    post(hub.url, modernBody(id, method, params), { ...modernHeaders(method, name), authorization: `Bearer ${key}`, ...more });

  it('mirrors the x-mcp-header arguments of a list its own connection never fetched', async () => {
    // carol has no credential of her own: the server's main connection lists, publicly.
    expect(((await as(CAROL_KEY, 1, 'tools/list')).body?.result?.tools as Json[]).map((t) => t.name)).toEqual(['u__regional']);
    // alice is served that public list; her calls go over her own connection.
    expect(((await as(ALICE_KEY, 2, 'tools/list')).body?.result?.tools as Json[]).map((t) => t.name)).toEqual(['u__regional']);
    const stats = (await (await fetch(new URL('/stats', up.url))).json()) as Record<string, number>;
    expect(stats.alice).toBeUndefined(); // her connection never listed
    // (The hub checks the client's own mirror too, as the server would.)
    const r = await as(ALICE_KEY, 3, 'tools/call', { name: 'u__regional', arguments: { region: 'eu-west' } }, 'u__regional', { 'mcp-param-region': 'eu-west' });
    expect(r.body?.error).toBeUndefined();
    expect(firstText(r.body?.result)).toBe('regional for alice');
  });
});

describe("renames are judged within one partition: a tool of another principal's private list is not gone from this one", () => {
  const CAROL_KEY = 'sy_carol-partition-key-222222222222222222222222222';
  // alice's list has alice_only, the server's own (carol's) shared_only: the same body, other names.
  let up: HttpFixture;
  const hubs: HubProcess[] = [];
  beforeAll(async () => {
    up = await startHttpFixture('test/fixtures/catalog/per-user-http.mjs', { SAME_BODY: '1' });
  }, 60_000);
  afterAll(async () => {
    for (const h of hubs) await h.stop();
    await up?.stop();
  });

  const config = () => ({
    auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }, { principal: 'carol', sha256: sha256Hex(CAROL_KEY) }] },
    servers: { u: { url: up.url, credentials: { alice: { headers: { authorization: 'Bearer alice-upstream' } } } } },
  });
  const start = async (dir?: string) => {
    const hub = await startHub(config(), dir === undefined ? {} : { dir });
    hubs.push(hub);
    await waitForReadyWith(hub.url, ['u'], ALICE_KEY);
    return hub;
  };
  const names = async (hub: HubProcess, key: string): Promise<string[]> => {
    const r = await post(hub.url, modernBody(1, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${key}` });
    if (!r.body?.result) throw new Error(`${r.status} ${r.text}`);
    return (r.body.result.tools as Json[]).map((t) => String(t.name));
  };
  const quarantines = (hub: HubProcess) => hub.logs.filter((l) => l.includes('tool quarantined'));

  it("carol's first list after alice's shows the server's own tool, not a rename of alice's", async () => {
    const hub = await start();
    expect(await names(hub, ALICE_KEY)).toEqual(['u__alice_only']);
    expect(await names(hub, CAROL_KEY)).toEqual(['u__shared_only']);
    expect(await names(hub, ALICE_KEY)).toEqual(['u__alice_only']);
    expect(quarantines(hub)).toEqual([]);
  });

  it("after a restart on the same ledger, carol listing first: alice's pin is no rename source either", async () => {
    const first = await start();
    expect(await names(first, ALICE_KEY)).toEqual(['u__alice_only']); // pinned; carol never listed
    await first.stop();
    const again = await start(first.dir);
    expect(await names(again, CAROL_KEY)).toEqual(['u__shared_only']);
    expect(await names(again, ALICE_KEY)).toEqual(['u__alice_only']);
    expect(quarantines(again)).toEqual([]);
  });
});
