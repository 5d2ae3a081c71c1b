/**
 * Attack table, abuse row: a burst over the rate limits gets HTTP 429 with Retry-After and is
 * audited as denied; buckets are per principal and per principal and tool.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, modernMeta, post, type RawReply } from '../helpers/wire.js';

const KEYS = { alice: 'sy_alice-rate-key-0000000000000000000000000000000', bob: 'sy_bob-rate-key-00000000000000000000000000000000000', carol: 'sy_carol-rate-key-000000000000000000000000000000000', dave: 'sy_dave-rate-key-0000000000000000000000000000000000', erin: 'sy_erin-rate-key-0000000000000000000000000000000000', frank: 'sy_frank-rate-key-000000000000000000000000000000000', grace: 'sy_grace-rate-key-000000000000000000000000000000000', heidi: 'sy_heidi-rate-key-000000000000000000000000000000000', ivan: 'sy_ivan-rate-key-0000000000000000000000000000000000' };

describe('rate limits', () => {
  let hub: HubProcess;
  let n = 0;

  beforeAll(async () => {
    hub = await startHub({
      auth: { apiKeys: Object.entries(KEYS).map(([principal, key]) => ({ principal, sha256: sha256Hex(key) })) },
      policy: { rateLimit: { perPrincipal: { burst: 5, perSecond: 0.2 }, tools: { 'modern__add': { burst: 2, perSecond: 0.1 } } } },
      servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') },
      groups: { mod: { servers: ['modern'] } },
    });
    await waitForReadyWith(hub.url, ['modern'], KEYS.alice);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  function call(who: keyof typeof KEYS, method = 'tools/list', params: Record<string, unknown> = {}, id = `rl${++n}`, path = '/mcp', meta?: Record<string, unknown>, headers: Record<string, string> = {}): Promise<RawReply> {
    const name = typeof params.name === 'string' ? params.name : undefined;
    return post(new URL(path, hub.url).href, modernBody(id, method, params, { ...modernMeta(), ...meta }), { ...modernHeaders(method, name), authorization: `Bearer ${KEYS[who]}`, ...headers });
  }

  function row(requestId: string): Record<string, unknown> {
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      return db.prepare('SELECT principal, outcome, error_kind, error_code, method, hub_name, server, tool_group, trace_id, parent_span_id, client_era FROM audit WHERE request_id = ?').get(requestId) as never;
    } finally {
      db.close();
    }
  }

  it('a burst over the per-principal limit → 429 with Retry-After, audited as denied; others are unaffected', async () => {
    for (let i = 0; i < 5; i++) expect((await call('alice')).status).toBe(200);
    const over = await call('alice', 'tools/list', {}, 'alice-over');
    expect(over.status).toBe(429);
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(5);
    expect(over.body).toMatchObject({ id: 'alice-over', error: { message: expect.stringMatching(/^Too Many Requests/) } });
    await expect.poll(() => row('alice-over')).toMatchObject({ principal: 'alice', outcome: 'denied', error_kind: 'policy', error_code: 429, method: 'tools/list' });
    expect((await call('bob')).status).toBe(200);
  });

  it('concurrent requests: exactly the burst gets through', async () => {
    const replies = await Promise.all(Array.from({ length: 12 }, () => call('carol')));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
  });

  it('a per-tool limit refuses that tool only', async () => {
    const add = (id?: string) => call('bob', 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 1 } }, id);
    expect((await add()).status).toBe(200);
    expect((await add()).status).toBe(200);
    // A traced call refused here is found under its trace id.
    const over = await call('bob', 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 1 } }, 'bob-add-over', '/mcp', { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(over.body?.error?.message).toMatch(/modern__add/);
    // The row names the tool's server (as /metrics labels it): found under it, its refusals among its tool's calls.
    await expect.poll(() => row('bob-add-over')).toMatchObject({ principal: 'bob', outcome: 'denied', hub_name: 'modern__add', server: 'modern', error_code: 429, tool_group: null, trace_id: '4bf92f3577b34da6a3ce929d0e0e4736', parent_span_id: '00f067aa0ba902b7' });
    // Bob's other requests still pass (his principal bucket has tokens left).
    expect((await call('bob', 'tools/call', { name: 'modern__echo', arguments: { text: 'x' } })).status).toBe(200);
    // So is one whose trace came in a traceparent header (OpenTelemetry's HTTP instrumentation).
    const headed = await call('bob', 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 1 } }, 'bob-add-header', '/mcp', undefined, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
    expect(headed.status).toBe(429);
    await expect.poll(() => row('bob-add-header')).toMatchObject({ outcome: 'denied', trace_id: '0af7651916cd43dd8448eb211c80319c', parent_span_id: 'b7ad6b7169203331' });
  });

  it('a request refused before its body is read is in its traceparent header\'s trace, or one the hub starts, as one refused after', async () => {
    const unread = (id: string, headers: Record<string, string> = {}) =>
      post(hub.url, modernBody(id, 'tools/list', {}, modernMeta()), { ...modernHeaders('tools/list'), authorization: 'Bearer sy_not-a-key-0000000000000000000000000000000', ...headers });
    expect((await unread('unread-traced', { traceparent: '00-5bf92f3577b34da6a3ce929d0e0e4737-10f067aa0ba902b8-01' })).status).toBe(401);
    expect((await unread('unread-untraced')).status).toBe(401);
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      const rows = () => db.prepare(`SELECT trace_id, span_id, parent_span_id FROM audit WHERE principal = '(unauthenticated)' ORDER BY id`).all() as Record<string, string | null>[];
      await expect.poll(() => rows().length).toBe(2);
      const [traced, untraced] = rows();
      expect(traced).toMatchObject({ trace_id: '5bf92f3577b34da6a3ce929d0e0e4737', parent_span_id: '10f067aa0ba902b8', span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
      // As a request the gate refuses without a trace: the hub's span starts one.
      expect(untraced).toMatchObject({ trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), parent_span_id: null, span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
    } finally {
      db.close();
    }
    const refused = await call('alice', 'tools/list', {}, 'alice-untraced');
    expect(refused.status).toBe(429);
    await expect.poll(() => row('alice-untraced')).toMatchObject({ outcome: 'denied', trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), parent_span_id: null });
  });

  // The endpoint tells the eras by the version header and the _meta claim together (an
  // initialize is modern only with a modern claim): a refused row said modern for any claim and
  // legacy for any request without one, whatever its header.
  it('a refused row names the era the endpoint would have served the request in', async () => {
    for (let i = 0; i < 5; i++) expect((await call('heidi')).status).toBe(200);
    const auth = { authorization: `Bearer ${KEYS.heidi}` };
    // A modern header without a claim: served by the 2026-07-28 rules (its -32602 is that era's).
    const noClaim = await post(hub.url, { jsonrpc: '2.0', id: 'heidi-no-claim', method: 'tools/list', params: {} }, { ...modernHeaders('tools/list'), ...auth });
    expect(noClaim.status).toBe(429);
    // A legacy initialize whose _meta names a legacy version: a legacy handshake all the same.
    const init = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } };
    const legacyInit = await post(hub.url, { jsonrpc: '2.0', id: 'heidi-init', method: 'initialize', params: init }, { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...auth });
    expect(legacyInit.status).toBe(429);
    // A later modern version in the header: modern too.
    const later = await post(hub.url, { jsonrpc: '2.0', id: 'heidi-later', method: 'tools/list', params: {} }, { ...modernHeaders('tools/list', undefined, '2099-01-01'), ...auth });
    expect(later.status).toBe(429);
    await expect.poll(() => [row('heidi-no-claim'), row('heidi-init'), row('heidi-later')].map((r) => r && [r.outcome, r.error_code, r.client_era])).toEqual([
      ['denied', 429, '2026-07-28'],
      ['denied', 429, '2025-11-25'],
      ['denied', 429, '2026-07-28'],
    ]);
    // Refused before its body is read, its header alone says its era, a later version's too.
    const unread = await post(hub.url, modernBody('unread-later', 'tools/list'), { ...modernHeaders('tools/list', undefined, '2099-01-01'), authorization: 'Bearer sy_not-a-key-0000000000000000000000000000000' });
    expect(unread.status).toBe(401);
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      await expect.poll(() => db.prepare(`SELECT client_era FROM audit WHERE principal = '(unauthenticated)' ORDER BY id DESC LIMIT 1`).get()).toEqual({ client_era: '2026-07-28' });
    } finally {
      db.close();
    }
  });

  // Over stdio the gate read a malformed message's method and _meta for its row; over HTTP it
  // had only the header, so a modern claim sent without one was recorded 2025-11-25.
  it('a malformed message refused at the limit is recorded in the era its method and _meta claim say, as its row would be if let in', async () => {
    for (let i = 0; i < 5; i++) expect((await call('ivan')).status).toBe(200);
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEYS.ivan}` };
    const sent = [
      { jsonrpc: '1.0', id: 'ivan-bad-modern', method: 'tools/list', params: { _meta: modernMeta() } },
      { jsonrpc: '1.0', id: 'ivan-bad-legacy', method: 'tools/list', params: {} },
      // An initialize is modern only with a modern claim.
      { jsonrpc: '1.0', id: 'ivan-bad-init', method: 'initialize', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' } } },
    ];
    // Its id and method, when it has them, are its row's and its answer's, as when it is let in
    // (they were '' and '(invalid)', and the 429's answer had no id for its client to match).
    sent.push({ jsonrpc: '2.0', id: 'ivan-by-position', method: 'tools/list', params: [1] } as never);
    for (const m of sent) {
      const r = await post(hub.url, m, headers);
      expect([r.status, r.body?.id]).toEqual([429, m.id]);
    }
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      await expect
        .poll(() => db.prepare(`SELECT request_id, outcome, error_code, method, client_era FROM audit WHERE principal = 'ivan' AND outcome = 'denied' ORDER BY id`).all())
        .toEqual([
          { request_id: 'ivan-bad-modern', outcome: 'denied', error_code: 429, method: '(invalid)', client_era: '2026-07-28' },
          { request_id: 'ivan-bad-legacy', outcome: 'denied', error_code: 429, method: '(invalid)', client_era: '2025-11-25' },
          { request_id: 'ivan-bad-init', outcome: 'denied', error_code: 429, method: '(invalid)', client_era: '2025-11-25' },
          { request_id: 'ivan-by-position', outcome: 'denied', error_code: 429, method: 'tools/list', client_era: '2025-11-25' },
        ]);
    } finally {
      db.close();
    }
  });

  it("a refusal on a tool group's endpoint names the group in its row", async () => {
    const add = (id?: string) => call('frank', 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 1 } }, id, '/mcp/mod');
    expect((await add()).status).toBe(200);
    expect((await add()).status).toBe(200);
    expect((await add('frank-add-over')).status).toBe(429);
    await expect.poll(() => row('frank-add-over')).toMatchObject({ principal: 'frank', outcome: 'denied', hub_name: 'modern__add', server: 'modern', error_code: 429, tool_group: 'mod' });
  });

  it("a legacy client's call with a stray requestState takes its tool's token as any call does", async () => {
    // Only a modern retry goes on the call already counted; a legacy client has no round to retry.
    const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEYS.grace}` };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 'g0', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'stray', version: '1' } } }, base);
    expect(init.status).toBe(200);
    const headers = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    const add = (id: string) => post(hub.url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'modern__add', arguments: { a: 1, b: 1 }, requestState: 'not-a-retry' } }, headers);
    expect((await add('g1')).status).toBe(200);
    expect((await add('g2')).status).toBe(200);
    const over = await add('grace-add-over');
    expect(over.status).toBe(429);
    await expect.poll(() => row('grace-add-over')).toMatchObject({ principal: 'grace', outcome: 'denied', hub_name: 'modern__add', error_code: 429 });
  });

  it('messages that are not JSON-RPC count against the limit too: a flood of them is refused with 429, not one row each', async () => {
    const junk = () => post(hub.url, 'this is { not json', { ...modernHeaders('tools/list'), authorization: `Bearer ${KEYS.dave}` });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await junk()).status);
    expect(statuses.slice(0, 5)).toEqual([400, 400, 400, 400, 400]);
    expect(statuses.slice(5)).toEqual([429, 429, 429]);
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true, fileMustExist: true });
    try {
      await expect
        .poll(() => db.prepare(`SELECT outcome, error_code FROM audit WHERE principal = 'dave' ORDER BY id`).all())
        .toEqual([...Array(5).fill({ outcome: 'rpc_error', error_code: -32700 }), ...Array(3).fill({ outcome: 'denied', error_code: 429 })]);
    } finally {
      db.close();
    }
  });

  it('a 2025-03-26 batch: members over the limit are refused inside a 200 answer; a batch refused whole gets 429 with Retry-After', async () => {
    const base = { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${KEYS.erin}` };
    // initialize spends one of erin's five tokens; the notification none.
    const init = await post(hub.url, { jsonrpc: '2.0', id: 'e0', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'batcher', version: '1' } } }, base);
    expect(init.status).toBe(200);
    const headers = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-03-26' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    const batch = (ids: string[]) => post(hub.url, ids.map((id) => ({ jsonrpc: '2.0', id, method: 'tools/list' })), headers);

    const mixed = await batch(['e1', 'e2', 'e3', 'e4', 'e5', 'e6']);
    expect(mixed.status).toBe(200);
    expect(mixed.headers.get('retry-after')).toBeNull();
    const answers = JSON.parse(mixed.text) as { id: string; result?: unknown; error?: { message: string } }[];
    expect(answers.filter((a) => a.result !== undefined)).toHaveLength(4);
    expect(answers.filter((a) => a.error?.message.startsWith('Too Many Requests'))).toHaveLength(2);

    const refused = await batch(['e7', 'e8']);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(5);
    // Still one answer per member, as a batch's answer is.
    expect((JSON.parse(refused.text) as { id: string; error: { message: string } }[]).map((a) => [a.id, a.error.message.slice(0, 17)])).toEqual([
      ['e7', 'Too Many Requests'],
      ['e8', 'Too Many Requests'],
    ]);
    await expect.poll(() => [row('e7'), row('e8')]).toEqual([expect.objectContaining({ outcome: 'denied', error_code: 429 }), expect.objectContaining({ outcome: 'denied', error_code: 429 })]);
  });
});
