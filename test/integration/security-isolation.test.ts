/**
 * Attack table, isolation rows, against the real built hub: a spy upstream (a hand-written
 * legacy HTTP server recording every header it receives) proves the downstream token never
 * travels upstream and that principals get their own credentials and upstream sessions; a
 * principal cannot be spoofed through arguments or `_meta`; another user's idempotency key,
 * legacy session or MRTR requestState is of no use.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json, type RawReply } from '../helpers/wire.js';

const ALICE_KEY = 'sy_alice-isolation-key-000000000000000000000000000';
const BOB_KEY = 'sy_bob-isolation-key-11111111111111111111111111111111';
const SHARED_UPSTREAM_TOKEN = 'shared-upstream-token';
const ALICE_UPSTREAM_TOKEN = 'alice-upstream-token';

interface Seen {
  method: string | null;
  tool: string | null;
  headers: Record<string, string>;
}

describe('per-user isolation', () => {
  let spy: HttpFixture;
  let hub: HubProcess;
  let counterFile: string;

  beforeAll(async () => {
    spy = await startHttpFixture('test/fixtures/servers/spy-http-server.mjs');
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-iso-'));
    counterFile = join(dir, 'counter.json');
    hub = await startHub(
      {
        auth: {
          apiKeys: [
            { principal: 'alice', sha256: sha256Hex(ALICE_KEY) },
            { principal: 'bob', sha256: sha256Hex(BOB_KEY) },
          ],
        },
        policy: { confirm: ['modern__echo'] },
        servers: {
          spy: {
            url: spy.url,
            headers: { 'x-user-token': SHARED_UPSTREAM_TOKEN },
            credentials: { alice: { headers: { 'x-user-token': ALICE_UPSTREAM_TOKEN } } },
          },
          modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { COUNTER_FILE: counterFile }),
        },
      },
      { dir },
    );
    await waitForReadyWith(hub.url, ['spy', 'modern'], ALICE_KEY);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
    await spy?.stop();
  });

  let n = 0;
  function call(key: string, method: string, params: Json = {}, meta: Json = modernMeta(), id: string | number = `r${++n}`): Promise<RawReply> {
    const name = typeof params.name === 'string' ? params.name : undefined;
    return post(hub.url, modernBody(id, method, params, meta), { ...modernHeaders(method, name), authorization: `Bearer ${key}` });
  }

  async function seen(): Promise<Seen[]> {
    const res = await fetch(new URL('/seen', spy.url));
    return ((await res.json()) as { seen: Seen[] }).seen;
  }

  function ledgerRow(requestId: string): { principal: string; outcome: string; hub_name: string | null } {
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      return db.prepare('SELECT principal, outcome, hub_name FROM audit WHERE request_id = ? ORDER BY id DESC LIMIT 1').get(requestId) as never;
    } finally {
      db.close();
    }
  }

  function whoami(r: RawReply): { session: string; userToken: string | null; authorization: string | null; args: Json } {
    expect(r.status, r.text).toBe(200);
    return r.body!.result!.structuredContent as never;
  }

  it('the spy upstream never sees the downstream credential', async () => {
    whoami(await call(ALICE_KEY, 'tools/call', { name: 'spy__whoami', arguments: {} }));
    const viaHeader = await post(hub.url, modernBody('xk', 'tools/call', { name: 'spy__whoami', arguments: {} }), {
      ...modernHeaders('tools/call', 'spy__whoami'),
      'x-api-key': BOB_KEY,
    });
    whoami(viaHeader);
    const all = await seen();
    expect(all.length).toBeGreaterThan(3);
    for (const s of all) {
      expect(s.headers.authorization, JSON.stringify(s)).toBeUndefined();
      expect(s.headers['x-api-key'], JSON.stringify(s)).toBeUndefined();
      const values = Object.values(s.headers).join(' ');
      expect(values).not.toContain(ALICE_KEY);
      expect(values).not.toContain(BOB_KEY);
    }
  });

  it('each principal uses its own upstream credentials and its own upstream session', async () => {
    const a = whoami(await call(ALICE_KEY, 'tools/call', { name: 'spy__whoami', arguments: {} }));
    const b = whoami(await call(BOB_KEY, 'tools/call', { name: 'spy__whoami', arguments: {} }));
    expect(a.userToken).toBe(ALICE_UPSTREAM_TOKEN);
    expect(b.userToken).toBe(SHARED_UPSTREAM_TOKEN);
    expect(a.authorization).toBeNull();
    expect(b.authorization).toBeNull();
    expect(a.session).toBeTruthy();
    expect(b.session).toBeTruthy();
    expect(a.session).not.toBe(b.session);
    // The hub's own connection (the first session, opened at start) carries no principal's call,
    // and no session ever mixes two credentials.
    const all = await seen();
    const mainSession = all.find((x) => x.headers['mcp-session-id'])!.headers['mcp-session-id'];
    const callSessions = new Set(all.filter((x) => x.method === 'tools/call').map((x) => x.headers['mcp-session-id']));
    expect(callSessions.has(mainSession)).toBe(false);
    const tokenOf = new Map<string, Set<string | undefined>>();
    for (const x of all) {
      const sid = x.headers['mcp-session-id'];
      if (sid) tokenOf.set(sid, (tokenOf.get(sid) ?? new Set()).add(x.headers['x-user-token']));
    }
    for (const [sid, tokens] of tokenOf) expect(tokens.size, sid).toBe(1);
    expect(callSessions).toEqual(new Set([a.session, b.session]));
    // And the same principal keeps its session.
    const a2 = whoami(await call(ALICE_KEY, 'tools/call', { name: 'spy__whoami', arguments: {} }));
    expect(a2.session).toBe(a.session);
  });

  it("a list change on a principal's own upstream connection reaches that principal's list", async () => {
    const names = async (key: string) => ((await call(key, 'tools/list')).body!.result!.tools as { name: string }[]).map((t) => t.name);
    expect(await names(ALICE_KEY)).not.toContain('spy__alice_extra');
    // grow answers with tools/list_changed first, on alice's own connection (her credentials).
    expect((await call(ALICE_KEY, 'tools/call', { name: 'spy__grow', arguments: { name: 'alice_extra' } })).status).toBe(200);
    await expect.poll(() => names(ALICE_KEY), { timeout: 3000, interval: 100 }).toContain('spy__alice_extra');
    expect(await names(BOB_KEY)).not.toContain('spy__alice_extra');
  });

  it('a principal spoofed in arguments or _meta changes nothing', async () => {
    const spoof = { principal: 'alice', user: 'alice', 'dev.switchyard/principal': 'alice' };
    const meta = modernMeta({ 'dev.switchyard/principal': 'alice', principal: 'alice', 'io.modelcontextprotocol/principal': 'alice' });
    const r = await call(BOB_KEY, 'tools/call', { name: 'spy__whoami', arguments: spoof }, meta, 'spoof-1');
    const who = whoami(r);
    // Bob's connection and credentials, whatever the body says; the arguments reach the tool as data.
    expect(who.userToken).toBe(SHARED_UPSTREAM_TOKEN);
    expect(who.args).toEqual(spoof);
    await expect.poll(() => ledgerRow('spoof-1')).toMatchObject({ principal: 'bob', outcome: 'ok', hub_name: 'spy__whoami' });
  });

  it("another user's idempotency key neither replays their answer nor blocks the call", async () => {
    const bump = (key: string, id: string) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'modern__counter_bump', arguments: { label: 'idem' } }), {
        ...modernHeaders('tools/call', 'modern__counter_bump'),
        authorization: `Bearer ${key}`,
        'idempotency-key': 'shared-key-1',
      });
    const first = await bump(ALICE_KEY, 'idem-a1');
    expect(first.body?.result).toMatchObject({ structuredContent: { count: 1 } });
    const other = await bump(BOB_KEY, 'idem-b1');
    expect(other.body?.result, other.text).toMatchObject({ structuredContent: { count: 2 } });
    const again = await bump(ALICE_KEY, 'idem-a2');
    expect(again.body?.result).toMatchObject({ structuredContent: { count: 1 } });
    expect(JSON.parse(readFileSync(counterFile, 'utf8'))).toEqual({ idem: 2 });
    await expect.poll(() => ledgerRow('idem-b1')).toMatchObject({ principal: 'bob', outcome: 'ok' });
    await expect.poll(() => ledgerRow('idem-a2')).toMatchObject({ principal: 'alice', outcome: 'replayed' });
  });

  it("another user's legacy session id is \"not found\" for every method", async () => {
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await post(
      hub.url,
      { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'bob', version: '1' } } },
      { ...base, authorization: `Bearer ${BOB_KEY}` },
    );
    const sid = init.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    const as = (key: string) => ({ ...base, authorization: `Bearer ${key}`, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION });
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, as(BOB_KEY));
    const stolen = await post(hub.url, { jsonrpc: '2.0', id: 'stolen-session-1', method: 'tools/list' }, as(ALICE_KEY));
    expect(stolen.status).toBe(404);
    // The attempt is audited, under the principal who made it.
    await expect.poll(() => ledgerRow('stolen-session-1')).toMatchObject({ principal: 'alice', outcome: 'rpc_error' });
    const stream = await fetch(hub.url, { headers: { ...as(ALICE_KEY), accept: 'text/event-stream' } });
    expect(stream.status).toBe(404);
    await stream.body?.cancel();
    const del = await fetch(hub.url, { method: 'DELETE', headers: as(ALICE_KEY) });
    expect(del.status).toBe(404);
    // initialize with it tells Alice nothing either: as with an id nobody holds, she gets a session of her own.
    const probe = await post(hub.url, { jsonrpc: '2.0', id: 'probe', method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'alice', version: '1' } } }, as(ALICE_KEY));
    expect(probe.status, probe.text).toBe(200);
    expect(probe.headers.get('mcp-session-id')).not.toBe(sid);
    // Bob's session is untouched.
    const mine = await post(hub.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, as(BOB_KEY));
    expect(mine.status, mine.text).toBe(200);
    expect((mine.body?.result?.tools as unknown[]).length).toBeGreaterThan(0);
  });

  it("another user's requestState is refused; its owner's retry goes through", async () => {
    const meta = modernMeta({ [META_CAPS]: { elicitation: {} } });
    const params = { name: 'modern__echo', arguments: { text: 'confirm me' } };
    const first = await call(ALICE_KEY, 'tools/call', params, meta);
    expect(first.status, first.text).toBe(200);
    const asked = first.body!.result!;
    expect(asked.resultType).toBe('input_required');
    const requestState = asked.requestState as string;
    expect(typeof requestState).toBe('string');
    const retry = { ...params, requestState, inputResponses: { 'switchyard/confirm': { action: 'accept', content: {} } } };
    const stolen = await call(BOB_KEY, 'tools/call', retry, meta, 'rs-bob');
    expect(stolen.body?.error, stolen.text).toMatchObject({ code: -32602, message: expect.stringMatching(/another principal/) });
    await expect.poll(() => ledgerRow('rs-bob')).toMatchObject({ principal: 'bob', outcome: 'rpc_error' });
    const own = await call(ALICE_KEY, 'tools/call', retry, meta);
    expect(own.body?.result, own.text).toMatchObject({ content: [{ type: 'text', text: 'echo:confirm me' }] });
  });
});
