/**
 * JSON-RPC batches on sessions negotiated at 2025-03-26, the one revision that has them (its
 * receivers must take them). Against the built hub and a real SDK v1 upstream, over raw HTTP
 * (no SDK client sends batches): the answers come back together, as one JSON array or as
 * events of one SSE stream; every member has its own ledger row; a session at any other
 * version still refuses a batch.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { post, waitForReady, type Json } from '../helpers/wire.js';
import { queryRows, SDK1 } from './ledger-helpers.js';

describe('JSON-RPC batches (2025-03-26 sessions)', () => {
  let hub: HubProcess;

  beforeAll(async () => {
    // A tools/call quiet for 500 ms to 1 s becomes a stream (listen.quietCallStreamMs; 5 s by default).
    hub = await startHub({ listen: { quietCallStreamMs: 500 }, servers: { a: nodeServer(SDK1) }, groups: { g: { servers: ['a'] } } });
    await waitForReady(hub.url, ['a']);
  });
  afterAll(async () => {
    await hub?.stop();
  });

  async function session(version: string, accept = 'application/json, text/event-stream', url = hub.url): Promise<Record<string, string>> {
    const base = { 'content-type': 'application/json', accept };
    const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'batcher', version: '1' } } }, base);
    expect((init.body?.result as Json | undefined)?.protocolVersion).toBe(version);
    const headers = { ...base, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': version };
    await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
    return headers;
  }

  const byId = (messages: Json[]) => new Map(messages.filter((m) => 'id' in m).map((m) => [m.id, m]));

  it('answers every member of a batch in one JSON array, each with its own ledger row', async () => {
    const headers = await session('2025-03-26', 'application/json');
    const r = await post(
      hub.url,
      [
        { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'a__echo', arguments: { text: 'one' } } },
        { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'a__add', arguments: { a: 2, b: 3 } } },
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } },
        { jsonrpc: '2.0', id: 'b3', method: 'no/such/method' },
        { jsonrpc: '2.0', id: 'b4', method: 'tools/list' },
      ],
      headers,
    );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
    const answers = JSON.parse(r.text) as Json[];
    expect(Array.isArray(answers)).toBe(true);
    expect(answers).toHaveLength(4); // the notification gets none
    const got = byId(answers);
    expect((got.get('b1')?.result as { content: { text: string }[] }).content[0]!.text).toBe('echo:one');
    // 2025-03-26 has no structuredContent: the text the tool wrote it in is what it gets.
    expect(got.get('b2')?.result).toEqual({ content: [{ type: 'text', text: '5' }] });
    expect((got.get('b3')?.error as Json).code).toBe(-32601);
    // A list member's answer is a message in the array like the others.
    expect(((got.get('b4')?.result as Json).tools as Json[]).map((t) => t.name)).toContain('a__echo');
    await expect
      .poll(async () => (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => ['b1', 'b2', 'b3'].includes(String(row.requestId))).length, { timeout: 5000 })
      .toBe(3);
  });

  it('streams the answers as events when a member streams (progress), and ends the stream after the last', async () => {
    const headers = await session('2025-03-26');
    const r = await post(
      hub.url,
      [
        { jsonrpc: '2.0', id: 's1', method: 'tools/call', params: { name: 'a__slow', arguments: { ms: 300 }, _meta: { progressToken: 'p1' } } },
        { jsonrpc: '2.0', id: 's2', method: 'tools/call', params: { name: 'a__echo', arguments: { text: 'two' } } },
      ],
      headers,
    );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const got = byId(r.messages as unknown as Json[]);
    expect((got.get('s1')?.result as { content: { text: string }[] }).content[0]!.text).toBe('slept 300');
    expect((got.get('s2')?.result as { content: { text: string }[] }).content[0]!.text).toBe('echo:two');
    expect(r.messages.some((m) => m.method === 'notifications/progress')).toBe(true);
  });

  it('streams the answers once a member call is still quiet after listen.quietCallStreamMs, as a lone call is streamed', async () => {
    const headers = await session('2025-03-26');
    const r = await post(
      hub.url,
      [
        { jsonrpc: '2.0', id: 'q1', method: 'tools/call', params: { name: 'a__slow', arguments: { ms: 1200 } } },
        { jsonrpc: '2.0', id: 'q2', method: 'tools/call', params: { name: 'a__echo', arguments: { text: 'quick' } } },
      ],
      headers,
    );
    expect(r.status).toBe(200);
    // Keep-alive comments can reach the client while the slow member runs: a proxy does not cut it.
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const got = byId(r.messages as unknown as Json[]);
    expect((got.get('q1')?.result as { content: { text: string }[] }).content[0]!.text).toBe('slept 1200');
    expect((got.get('q2')?.result as { content: { text: string }[] }).content[0]!.text).toBe('echo:quick');
  });

  it('answers a batch one member of which nests deeper than JSON.stringify can go (outside params), as it answers that member alone', async () => {
    const headers = await session('2025-03-26', 'application/json');
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    // Raw text: nothing here could stringify such a member either.
    const text = `[{"jsonrpc":"2.0","id":"d1","method":"ping","extra":${deep}},{"jsonrpc":"2.0","id":"d2","method":"tools/call","params":{"name":"a__echo","arguments":{"text":"two"}}}]`;
    const r = await post(hub.url, text, headers);
    expect(r.status, r.text).toBe(200);
    const got = byId(JSON.parse(r.text) as Json[]);
    expect(got.get('d1')?.result).toEqual({});
    expect((got.get('d2')?.result as { content: { text: string }[] }).content[0]!.text).toBe('echo:two');
    const alone = await post(hub.url, `{"jsonrpc":"2.0","id":"d3","method":"ping","extra":${deep}}`, headers);
    expect(alone.body?.result).toEqual({});
    expect(hub.logs.some((l) => l.includes('Maximum call stack'))).toBe(false);
  });

  it('takes a batch of notifications only with 202', async () => {
    const headers = await session('2025-03-26');
    const r = await post(hub.url, [{ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } }], headers);
    expect(r.status).toBe(202);
    expect(r.text).toBe('');
  });

  it('refuses whole a batch over the in-flight limit (one ledger row), one holding an initialize or a modern message (a row per request), and an empty one (one row)', async () => {
    const headers = await session('2025-03-26', 'application/json');
    const ping = (id: string) => ({ jsonrpc: '2.0', id, method: 'ping' });
    const modern = { jsonrpc: '2.0', id: 'm', method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } };
    const init = { jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const cases: [unknown[], RegExp][] = [
      [Array.from({ length: 65 }, (_, i) => ping(`cap-${i}`)), /at most 64/],
      [[ping('with-init'), init], /initialize/],
      [[ping('with-modern'), modern], /2026-07-28/],
      [[], /empty/],
    ];
    for (const [batch, why] of cases) {
      const r = await post(hub.url, batch, headers);
      expect(r.status, r.text).toBe(400);
      expect((r.body?.error as Json).code).toBe(-32600);
      expect(String((r.body?.error as Json).message)).toMatch(why);
    }
    const rows = async () => (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => /at most 64|initialize cannot|2026-07-28 era|empty batch/.test(String(row.errorMessage)));
    // 1 for the batch over the cap, 2 + 2 for the requests of the next two, 1 for the empty one.
    await expect.poll(async () => (await rows()).length, { timeout: 5000 }).toBe(6);
    // None of their members ran: the over-cap batch's have no row, the others' say refused.
    const members = (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => /^(cap-|with-|i$|m$)/.test(String(row.requestId)));
    expect(members.map((row) => [row.requestId, row.method, row.outcome]).sort()).toEqual([
      ['i', 'initialize', 'rpc_error'],
      ['m', 'tools/list', 'rpc_error'],
      ['with-init', 'ping', 'rpc_error'],
      ['with-modern', 'ping', 'rpc_error'],
    ]);
  });

  // A member's row was written from its id and method alone, with the whole body's size: its
  // `_meta` version claim and traceparent went unread, and n members counted the body n times.
  it("records each request of a batch refused whole as its own: its era by its _meta claim, its trace, its own size", async () => {
    const headers = await session('2025-03-26', 'application/json');
    const traceparent = '00-5af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const ping = { jsonrpc: '2.0', id: 'rw-ping', method: 'ping', params: { _meta: { traceparent } } };
    const modern = { jsonrpc: '2.0', id: 'rw-modern', method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } };
    const r = await post(hub.url, [ping, modern], headers);
    expect(r.status, r.text).toBe(400);
    const rows = async () => (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => String(row.requestId).startsWith('rw-'));
    await expect.poll(async () => (await rows()).length, { timeout: 5000 }).toBe(2);
    expect((await rows()).map((row) => [row.requestId, row.clientEra, row.traceId ?? null, row.requestBytes]).sort()).toEqual([
      ['rw-modern', '2026-07-28', expect.stringMatching(/^[0-9a-f]{32}$/), Buffer.byteLength(JSON.stringify(modern))],
      ['rw-ping', '2025-11-25', '5af7651916cd43dd8448eb211c80319c', Buffer.byteLength(JSON.stringify(ping))],
    ]);
  });

  // The header key was every member's: a second call with it was refused as "other arguments",
  // and the same write twice was answered from the first and never ran.
  it('refuses whole a batch of several tools/call under one Idempotency-Key header; one call with it runs', async () => {
    const headers = await session('2025-03-26', 'application/json');
    const echo = (id: string, text: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'a__echo', arguments: { text } } });
    const two = await post(hub.url, [echo('k1', 'same'), echo('k2', 'same')], { ...headers, 'idempotency-key': 'batch-key' });
    expect(two.status, two.text).toBe(400);
    expect(two.body?.error).toMatchObject({ code: -32600, message: expect.stringMatching(/Idempotency-Key header names one call/) });
    // Each call refused has its own row, found by its id and tool (there was one `(invalid)` row for both).
    const refused = async () => (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => row.requestId === 'k1' || row.requestId === 'k2');
    await expect.poll(async () => (await refused()).map((row) => [row.requestId, row.method, row.tool, row.outcome, row.errorCode]).sort(), { timeout: 5000 }).toEqual([
      ['k1', 'tools/call', 'a__echo', 'rpc_error', -32600],
      ['k2', 'tools/call', 'a__echo', 'rpc_error', -32600],
    ]);
    const one = await post(hub.url, [echo('k3', 'once'), { jsonrpc: '2.0', id: 'k4', method: 'tools/list' }], { ...headers, 'idempotency-key': 'batch-key' });
    expect(one.status, one.text).toBe(200);
    expect(((byId(JSON.parse(one.text) as Json[]).get('k3')?.result as { content: { text: string }[] }).content[0]!.text)).toBe('echo:once');
  });

  it('refuses a request whose id is already in flight on the session, in a batch or not', async () => {
    const headers = await session('2025-03-26', 'application/json');
    const slow = { jsonrpc: '2.0', id: 'twice', method: 'tools/call', params: { name: 'a__slow', arguments: { ms: 300 } } };
    const r = await post(hub.url, [slow, slow], headers);
    const answers = JSON.parse(r.text) as Json[];
    expect(answers).toHaveLength(2);
    expect(answers.filter((a) => 'result' in a)).toHaveLength(1);
    expect(answers.find((a) => 'error' in a)?.error).toMatchObject({ code: -32600, message: expect.stringMatching(/already in flight/) });
  });

  it("quotes a long id already in flight as a name is, to 128 characters, the cut marked", async () => {
    const headers = await session('2025-03-26', 'application/json');
    const id = 'i'.repeat(100_000);
    const slow = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'a__slow', arguments: { ms: 300 } } };
    const r = await post(hub.url, [slow, slow], headers);
    const answers = JSON.parse(r.text) as Json[];
    expect(answers.filter((a) => 'result' in a)).toHaveLength(1);
    const err = answers.find((a) => 'error' in a)?.error as { code: number; message: string };
    expect(err.code).toBe(-32600);
    expect(err.message).toBe(`request id "${'i'.repeat(127)}…" is already in flight on this session`);
  });

  it('refuses a batch on a session at a version without batches, and one with no session', async () => {
    const headers = await session('2025-11-25');
    const batch = [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }];
    const r = await post(hub.url, batch, headers);
    expect(r.status).toBe(400);
    expect((r.body?.error as Json).code).toBe(-32600);
    const none = await post(hub.url, batch, { 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    expect(none.status).toBe(400);
    expect((none.body?.error as Json).code).toBe(-32600);
  });

  it('answers a batch on a session that ended with 404 Session not found, as a lone message, so its client starts anew', async () => {
    const headers = await session('2025-03-26');
    const batch = [{ jsonrpc: '2.0', id: 'gone-1', method: 'tools/list' }];
    expect((await post(hub.url, batch, headers)).status).toBe(200);
    const del = await fetch(hub.url, { method: 'DELETE', headers });
    expect(del.status).toBe(200);
    const lone = await post(hub.url, batch[0], headers);
    expect(lone.status).toBe(404);
    const r = await post(hub.url, batch, headers);
    expect(r.status, r.text).toBe(404);
    expect((r.body?.error as Json).code).toBe(-32001);
    // An id this hub never issued is not found either.
    const unknown = await post(hub.url, batch, { ...headers, 'mcp-session-id': 'no-such-session' });
    expect(unknown.status, unknown.text).toBe(404);
    // Each of its requests has a row, as a lone one has and as a batch refused whole gives them
    // (it was one `(invalid)` row for the batch); its notifications have none, as alone.
    const notice = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } };
    const two = await post(hub.url, [{ jsonrpc: '2.0', id: 'gone-2', method: 'tools/call', params: { name: 'a__echo', arguments: { text: 'x' } } }, notice, { jsonrpc: '2.0', id: 'gone-3', method: 'ping' }], headers);
    expect(two.status, two.text).toBe(404);
    // One of notifications alone still has the batch's row: it reached the hub.
    expect((await post(hub.url, [notice], headers)).status).toBe(404);
    const rows = async () => (await queryRows(join(hub.dir, 'ledger.db'))).filter((row) => row.errorCode === -32001 && (String(row.requestId).startsWith('gone-') || row.method === '(invalid)'));
    await expect.poll(async () => (await rows()).length, { timeout: 5000 }).toBe(6);
    expect((await rows()).map((row) => [row.requestId ?? '', row.method, row.tool ?? null, row.outcome]).sort()).toEqual([
      ['', '(invalid)', null, 'rpc_error'],
      ['gone-1', 'tools/list', null, 'rpc_error'],
      ['gone-1', 'tools/list', null, 'rpc_error'],
      ['gone-1', 'tools/list', null, 'rpc_error'],
      ['gone-2', 'tools/call', 'a__echo', 'rpc_error'],
      ['gone-3', 'ping', null, 'rpc_error'],
    ]);
  });

  it("on a tool group's endpoint every member's row names the group, members of a batch refused whole too", async () => {
    const url = new URL('/mcp/g', hub.url).href;
    const headers = await session('2025-03-26', 'application/json', url);
    const ok = await post(url, [{ jsonrpc: '2.0', id: 'g1', method: 'tools/call', params: { name: 'a__echo', arguments: { text: 'g' } } }, { jsonrpc: '2.0', id: 'g2', method: 'tools/list' }], headers);
    expect(ok.status, ok.text).toBe(200);
    const init = { jsonrpc: '2.0', id: 'g-init', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    expect((await post(url, [{ jsonrpc: '2.0', id: 'g-ping', method: 'ping' }, init], headers)).status).toBe(400);
    const rows = async () => (await queryRows(join(hub.dir, 'ledger.db'), { group: 'g' })).filter((row) => String(row.requestId).startsWith('g'));
    await expect.poll(async () => (await rows()).length, { timeout: 5000 }).toBe(4);
    expect((await rows()).map((row) => [row.requestId, row.outcome, row.group]).sort()).toEqual([
      ['g-init', 'rpc_error', 'g'],
      ['g-ping', 'rpc_error', 'g'],
      ['g1', 'ok', 'g'],
      ['g2', 'ok', 'g'],
    ]);
  });
});
