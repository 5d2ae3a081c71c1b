/**
 * Acceptance: bad input at the hub's HTTP endpoint gets the right status and JSON-RPC error,
 * and never hurts the daemon: after every case a valid request still succeeds and nothing was
 * written to stdout. Raw fetch / node:http only, against the real built binary.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import {
  LEGACY_VERSION,
  META_CAPS,
  META_INFO,
  META_VERSION,
  MODERN_VERSION,
  modernBody,
  modernHeaders,
  modernMeta,
  modernPost,
  legacySession,
  post,
  rawHttp,
  recordingFetch,
  waitForReady,
  type RawReply,
  type RpcMessage,
} from '../helpers/wire.js';
import { join } from 'node:path';
import { waitForRows } from './ledger-helpers.js';
import { rawClient } from '../helpers/raw-http.js';
import { gzipSync } from 'node:zlib';

const MAX_BODY = 1024;
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe('bad input at the HTTP endpoint', () => {
  let hub: HubProcess;
  let url: string;
  let nextId = 1000;

  beforeAll(async () => {
    hub = await startHub({
      listen: { maxBodyBytes: MAX_BODY },
      servers: {
        legacy: nodeServer('test/fixtures/servers/sdk1-server.mjs'),
        modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs'),
      },
    });
    url = hub.url;
    await waitForReady(url, ['legacy', 'modern']);
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  // After every case: the daemon is alive, still serves a real call, and kept stdout clean.
  afterEach(async () => {
    expect(hub.proc.exitCode, 'hub exited').toBeNull();
    const id = nextId++;
    const r = await modernPost(url, id, 'tools/call', { name: 'legacy__echo', arguments: { text: `still here ${id}` } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: `echo:still here ${id}` }] } });
    expect(hub.stdout()).toBe('');
  });

  /** The reply's body, which it checked has an error. */
  function expectError(r: RawReply, status: number, code: number): RpcMessage & { error: NonNullable<RpcMessage['error']> } {
    expect(r.status, r.text).toBe(status);
    expect(r.body, r.text).toMatchObject({ jsonrpc: '2.0', error: { code, message: expect.any(String) } });
    return r.body as RpcMessage & { error: NonNullable<RpcMessage['error']> };
  }

  it('invalid JSON → 400 with -32700', async () => {
    const r = await post(url, '{"jsonrpc":"2.0","id":1,"method":', JSON_HEADERS);
    const body = expectError(r, 400, -32700);
    expect(body).not.toHaveProperty('id');
  });

  it('a body that starts with a UTF-8 byte order mark is read without it (RFC 8259 §8.1)', async () => {
    const r = await post(url, `\uFEFF${JSON.stringify(modernBody(11, 'tools/list'))}`, modernHeaders('tools/list'));
    expect(r.status, r.text).toBe(200);
    expect(r.body?.id).toBe(11);
  });

  it('a batch array → 400 with -32600', async () => {
    const r = await post(url, [modernBody(1, 'tools/list'), modernBody(2, 'prompts/list')], JSON_HEADERS);
    expectError(r, 400, -32600);
  });

  it('a message without "jsonrpc" → 400 with -32600 echoing the id', async () => {
    const r = await post(url, { id: 7, method: 'tools/list', params: { _meta: modernMeta() } }, modernHeaders('tools/list'));
    const body = expectError(r, 400, -32600);
    expect(body.id).toBe(7);
  });

  // JSON-RPC 2.0: params are an array (by position) or an object (by name); anything else is no
  // Request (-32600). An array is a Request whose params no MCP method takes: -32602, in both
  // eras (it was -32600, as if the message were no Request).
  it('params that are no object → 400 echoing the id, -32602 for an array in either era, -32600 for no structured value; its row names the method', async () => {
    const s = await legacySession(url);
    const legacyHeaders = { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION };
    const cases = [
      ['array-params', [1], modernHeaders('tools/call', 'modern__echo'), -32602, MODERN_VERSION],
      ['array-params-empty', [], modernHeaders('tools/list'), -32602, MODERN_VERSION],
      ['array-params-legacy', ['modern__echo'], legacyHeaders, -32602, LEGACY_VERSION],
      ['string-params', 'x', modernHeaders('tools/call', 'modern__echo'), -32600, MODERN_VERSION],
      ['null-params-legacy', null, legacyHeaders, -32600, LEGACY_VERSION],
    ] as const;
    for (const [id, params, headers, code, era] of cases) {
      const r = await post(url, { jsonrpc: '2.0', id, method: 'tools/call', params }, headers);
      const body = expectError(r, 400, code);
      expect(body.id).toBe(id);
      if (code === -32602) expect(body.error.message).toBe('Invalid params: params must be an object (MCP takes parameters by name, not by position)');
      const [row] = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': id });
      expect(row, id).toMatchObject({ method: 'tools/call', outcome: 'rpc_error', errorCode: code, clientEra: era });
    }
  });

  it('id: null → 400 with -32600', async () => {
    const r = await post(url, { jsonrpc: '2.0', id: null, method: 'tools/list', params: { _meta: modernMeta() } }, modernHeaders('tools/list'));
    const body = expectError(r, 400, -32600);
    expect(body.id ?? undefined).toBeUndefined();
  });

  it('a body over listen.maxBodyBytes → 413 (declared length and chunked)', async () => {
    const big = modernBody(3, 'tools/call', { name: 'legacy__echo', arguments: { text: 'x'.repeat(MAX_BODY * 2) } });
    const r = await post(url, big, modernHeaders('tools/call', 'legacy__echo'));
    expect(r.status).toBe(413);
    // No Content-Length: the limit is enforced while reading.
    const chunked = await rawHttp(url, { headers: { ...modernHeaders('tools/call', 'legacy__echo'), 'transfer-encoding': 'chunked' }, chunks: [JSON.stringify(big).slice(0, 700), JSON.stringify(big).slice(700)] });
    expect(chunked.status).toBe(413);
    // Just under the limit is served.
    const fits = modernBody(4, 'tools/call', { name: 'legacy__echo', arguments: { text: '' } });
    const pad = MAX_BODY - Buffer.byteLength(JSON.stringify(fits));
    (fits.params as { arguments: { text: string } }).arguments.text = 'y'.repeat(pad);
    expect(Buffer.byteLength(JSON.stringify(fits))).toBe(MAX_BODY);
    const ok = await post(url, fits, modernHeaders('tools/call', 'legacy__echo'));
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body?.result).toMatchObject({ content: [{ type: 'text', text: `echo:${'y'.repeat(pad)}` }] });
  });

  it('a wrong Content-Type → 415', async () => {
    const r = await post(url, JSON.stringify(modernBody(5, 'tools/list')), { ...modernHeaders('tools/list'), 'content-type': 'text/plain' });
    expect(r.status).toBe(415);
    // A longer type that starts the same is another type; parameters and case are fine.
    expect((await post(url, JSON.stringify(modernBody(6, 'tools/list')), { ...modernHeaders('tools/list'), 'content-type': 'application/jsonfoo' })).status).toBe(415);
    expect((await post(url, JSON.stringify(modernBody(7, 'tools/list')), { ...modernHeaders('tools/list'), 'content-type': 'Application/JSON; charset=utf-8' })).status).toBe(200);
  });

  // Only the client's MUST (both revisions: list both types); RFC 9110 §12.5.1 lets a server
  // answer 406 or disregard Accept. The hub serves any client that takes JSON (curl's */*, none,
  // application/json alone: a plain JSON answer), and refuses only what it cannot answer in a
  // type the client takes.
  it('an Accept that takes no application/json → 406 with -32600 and a row; one that takes JSON is served', async () => {
    for (const accept of ['text/event-stream', 'text/html', 'application/json;q=0, text/event-stream']) {
      const r = await post(url, modernBody('no-json', 'tools/list'), { ...modernHeaders('tools/list'), accept });
      expect(expectError(r, 406, -32600).error.message, accept).toContain('application/json');
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'denied' }, (x) => x.filter((y) => y.errorCode === 406).length >= 3);
    expect(rows.filter((y) => y.errorCode === 406).map((y) => y.method)).toEqual(['tools/list', 'tools/list', 'tools/list']);
    for (const accept of ['application/json', '*/*', 'application/*', 'Application/JSON', '']) {
      const r = await post(url, modernBody('json', 'tools/list'), { ...modernHeaders('tools/list'), accept });
      expect(r.status, accept).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/json');
    }
    const none = { ...modernHeaders('tools/list') } as Record<string, string>;
    delete none.accept;
    const body = JSON.stringify(modernBody('no-accept', 'tools/list'));
    expect((await rawHttp(url, { headers: { ...none, 'content-length': String(Buffer.byteLength(body)) }, chunks: [body] })).status).toBe(200);
  });

  it('a subscriptions/listen whose Accept takes no text/event-stream → 406 with -32600 and a row, no stream', async () => {
    const r = await post(url, modernBody('listen-json', 'subscriptions/listen', { notifications: { toolsListChanged: true } }), { ...modernHeaders('subscriptions/listen'), accept: 'application/json' });
    expect(expectError(r, 406, -32600)).toMatchObject({ id: 'listen-json', error: { message: expect.stringContaining('text/event-stream') } });
    const [row] = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'listen-json' });
    expect(row).toMatchObject({ method: 'subscriptions/listen', outcome: 'rpc_error', errorCode: -32600 });
  });

  it('a body with a Content-Encoding → 415 naming the one taken (RFC 9110 §15.5.16); identity is served', async () => {
    const body = JSON.stringify(modernBody(8, 'tools/list'));
    const gz = await fetch(url, { method: 'POST', headers: { ...modernHeaders('tools/list'), 'content-encoding': 'gzip' }, body: gzipSync(body) });
    expect(gz.status).toBe(415);
    expect(gz.headers.get('accept-encoding')).toBe('identity');
    expect(await gz.json()).toMatchObject({ error: { code: -32600, message: expect.stringContaining('uncompressed') } });
    // A plain body that claims a coding was served as if it had none.
    expect((await post(url, body, { ...modernHeaders('tools/list'), 'content-encoding': 'gzip' })).status).toBe(415);
    expect((await post(url, body, { ...modernHeaders('tools/list'), 'content-encoding': 'Identity' })).status).toBe(200);
  });

  it('a foreign Origin → 403', async () => {
    const r = await post(url, modernBody(6, 'tools/list'), { ...modernHeaders('tools/list'), origin: 'http://evil.example.com' });
    expect(r.status).toBe(403);
    // A loopback origin is fine.
    const local = await post(url, modernBody(7, 'tools/list'), { ...modernHeaders('tools/list'), origin: `http://127.0.0.1:${hub.port}` });
    expect(local.status).toBe(200);
  });

  it('a foreign Host → 403 (DNS rebinding)', async () => {
    const r = await rawHttp(url, { headers: { ...modernHeaders('tools/list'), host: 'evil.example.com' }, chunks: [JSON.stringify(modernBody(8, 'tools/list'))] });
    expect(r.status).toBe(403);
    const health = await rawHttp(new URL('/healthz', url).href, { method: 'GET', headers: { host: `evil.example.com:${hub.port}` } });
    expect(health.status).toBe(403);
    // Both refusals at the MCP endpoint (Origin above, Host here) left their rows.
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'denied' }, (r) => r.filter((x) => x.errorCode === 403).length >= 2);
    expect(rows.filter((x) => x.errorCode === 403).map((x) => [x.method, x.errorMessage])).toEqual([
      ['tools/list', 'Forbidden: Origin not allowed (listen.allowedOrigins lists the browser origins allowed besides loopback ones)'],
      ['tools/list', 'Forbidden: the Host header does not name this hub (off loopback, list the host clients use as an origin in listen.allowedOrigins)'],
    ]);
    // The client is told which header, and where it is allowed.
    expect(JSON.parse(r.text).error.message).toMatch(/Host header does not name this hub.*listen\.allowedOrigins/);
  });

  it('two Host lines → 400 whatever they say (node:http keeps the first; a proxy may read the last), and a row', async () => {
    const good = `127.0.0.1:${hub.port}`;
    const body = JSON.stringify(modernBody(9, 'tools/list'));
    const head = Object.entries({ ...modernHeaders('tools/list'), 'content-length': String(Buffer.byteLength(body)) }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    for (const [a, b] of [[good, 'evil.example.com'], ['evil.example.com', good], [good, good]]) {
      const c = rawClient(hub.port);
      c.send(`POST /mcp HTTP/1.1\r\nHost: ${a}\r\nHost: ${b}\r\n${head}\r\n${body}`);
      c.send(`GET /healthz HTTP/1.1\r\nHost: ${a}\r\nHost: ${b}\r\n\r\n`);
      const [r, health] = await c.waitFor(2);
      c.socket.destroy();
      expect(r!.status, `${a} + ${b}`).toBe(400);
      expect(JSON.parse(r!.body).error).toMatchObject({ code: -32600, message: 'Bad Request: more than one Host header line' });
      expect(health!.status, `${a} + ${b}`).toBe(400);
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'denied' }, (r) => r.filter((x) => x.errorCode === 400 && /Host header/.test(String(x.errorMessage))).length >= 3);
    expect(rows.filter((x) => x.errorCode === 400 && /Host header/.test(String(x.errorMessage)))).toHaveLength(3);
  });

  it('a tool group that is not configured → 404 with a JSON-RPC error, and a row', async () => {
    const r = await post(url.replace(/\/mcp$/, '/mcp/nope'), modernBody('g', 'tools/list'), modernHeaders('tools/list'));
    expect(r.status).toBe(404);
    expect(r.body?.error).toMatchObject({ code: -32600, message: 'Not Found: no tool group named "nope"' });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'denied' }, (x) => x.some((y) => y.errorCode === 404));
    expect(rows.find((y) => y.errorCode === 404)).toMatchObject({ method: 'tools/list', errorMessage: 'Not Found: no tool group named "nope"' });
    for (const group of ['__proto__', 'constructor', 'toString']) {
      const odd = await post(url.replace(/\/mcp$/, `/mcp/${group}`), modernBody('g', 'tools/list'), modernHeaders('tools/list'));
      expect(odd.status, group).toBe(404);
      expect(odd.body?.error, group).toMatchObject({ code: -32600, message: `Not Found: no tool group named "${group}"` });
    }
  });

  it('modern header ≠ body version → 400 with -32020', async () => {
    const r = await post(url, modernBody(9, 'tools/list'), modernHeaders('tools/list', undefined, LEGACY_VERSION));
    expectError(r, 400, -32020);
    // Mcp-Method and Mcp-Name must mirror the body too.
    expectError(await post(url, modernBody(10, 'tools/list'), modernHeaders('prompts/list')), 400, -32020);
    expectError(
      await post(url, modernBody(11, 'tools/call', { name: 'legacy__echo', arguments: { text: 'a' } }), modernHeaders('tools/call', 'legacy__add')),
      400,
      -32020,
    );
  });

  // Mcp-Name repeats a string param (name, uri): with none to repeat the params are at fault
  // (-32602, as the SDK v2 server answers and as a legacy client is answered), not the headers.
  it('a named request whose name or uri is no string, or absent → -32602 whether Mcp-Name is sent or not, with a row', async () => {
    const cases: [string, string, Record<string, unknown>, string | undefined][] = [
      ['read-uri-number', 'resources/read', { uri: 5 }, undefined],
      ['read-uri-null', 'resources/read', { uri: null }, undefined],
      ['read-uri-object', 'resources/read', { uri: { href: 'test://x' } }, '[object Object]'],
      ['read-uri-absent', 'resources/read', {}, 'test://static/hello'],
      ['call-name-number', 'tools/call', { name: 5, arguments: {} }, undefined],
      ['call-name-number-header', 'tools/call', { name: 5, arguments: {} }, '5'],
      ['prompt-name-array', 'prompts/get', { name: ['modern__greet'] }, undefined],
    ];
    // What is wrong is said (a name that is no string was "Unknown tool: (no name)"), in both eras.
    const said = (method: string) => `${method} needs params.${method === 'resources/read' ? 'uri' : 'name'}, a string`;
    const s = await legacySession(url);
    for (const [id, method, params, name] of cases) {
      const r = await post(url, modernBody(id, method, params), modernHeaders(method, name));
      expect(expectError(r, 200, -32602), id).toMatchObject({ id, error: { message: said(method) } });
      const l = await post(url, { jsonrpc: '2.0', id: `${id}-legacy`, method, params }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION });
      expect(expectError(l, 200, -32602), id).toMatchObject({ id: `${id}-legacy`, error: { message: said(method) } });
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => cases.every(([id]) => x.some((y) => y.requestId === id)));
    expect(rows.filter((y) => cases.some(([id]) => id === y.requestId)).map((y) => [y.requestId, y.errorCode, y.clientEra])).toEqual(cases.map(([id]) => [id, -32602, MODERN_VERSION]));
    // A string still has to match, and to be sent.
    expectError(await post(url, modernBody('read-uri-no-header', 'resources/read', { uri: 'test://static/hello' }), modernHeaders('resources/read')), 400, -32020);
  });

  it('a modern logLevel that is no level → -32602 in-band, whichever era serves the tool', async () => {
    for (const tool of ['legacy__echo', 'modern__echo']) {
      const r = await post(url, modernBody(12, 'tools/call', { name: tool, arguments: { text: 'a' } }, modernMeta({ 'io.modelcontextprotocol/logLevel': 'bogus' })), modernHeaders('tools/call', tool));
      expectError(r, 200, -32602);
    }
  });

  // It was told its _meta lacked the version and capabilities, as if it were a request.
  it('a response POSTed with a modern version header → 400 -32600 (a modern client answers no questions)', async () => {
    for (const body of [{ jsonrpc: '2.0', id: 5, result: {} }, { jsonrpc: '2.0', id: 6, error: { code: -1, message: 'no' } }]) {
      const r = await post(url, body, { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN_VERSION });
      expect(expectError(r, 400, -32600).error!.message).toMatch(/client sends no responses/);
    }
  });

  // {"toString": 1} has no primitive: String() of it, where the session looked up the question
  // it answers, threw (500 'internal error', 'request handler failed' logged).
  it('a legacy client response whose id is no string or integer → 202, dropped (JSON-RPC never answers a response)', async () => {
    const s = await legacySession(url);
    const headers = { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION };
    for (const id of [{ toString: 1 }, { valueOf: 1, toString: 1 }, [1], 1.5, true]) {
      const r = await post(url, { jsonrpc: '2.0', id, result: {} }, headers);
      expect([r.status, r.text], JSON.stringify(id)).toEqual([202, '']);
    }
    expect(hub.logs.filter((l) => l.includes('handler failed'))).toEqual([]);
  });

  // It was taken as it came and echoed in every notifications/progress of the call.
  it('a modern progressToken that is no string or integer → -32602 in-band; a string and an integer pass', async () => {
    for (const token of [{ a: 1 }, 1.5, true, null, ['t']]) {
      const r = await post(url, modernBody(13, 'tools/call', { name: 'modern__echo', arguments: { text: 'a' } }, modernMeta({ progressToken: token })), modernHeaders('tools/call', 'modern__echo'));
      expect(expectError(r, 200, -32602).error!.message, JSON.stringify(token)).toBe('invalid _meta progressToken: a string or an integer');
    }
    for (const token of ['t', 7]) {
      const r = await post(url, modernBody(14, 'tools/call', { name: 'modern__echo', arguments: { text: 'a' } }, modernMeta({ progressToken: token })), modernHeaders('tools/call', 'modern__echo'));
      expect(r.body?.error, JSON.stringify(token)).toBeUndefined();
    }
  });

  it('an unsupported modern version → 400 with -32022 and data.supported', async () => {
    const v = '2099-01-01';
    const r = await post(url, modernBody(12, 'tools/list', {}, modernMeta({ [META_VERSION]: v })), modernHeaders('tools/list', undefined, v));
    const body = expectError(r, 400, -32022);
    const data = body.error!.data as { supported: string[]; requested: string };
    expect(data.supported).toContain(MODERN_VERSION);
    expect(data.requested).toBe(v);
    // Its row says which version the client asked for: it spoke no era the hub serves.
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': '12', method: 'tools/list' }, (x) => x.some((y) => y.errorCode === -32022));
    expect(rows.find((y) => y.errorCode === -32022)).toMatchObject({ clientEra: v, outcome: 'rpc_error' });
    // A version no date, however long, is quoted cut to 64 characters, the cut marked, in the
    // message, data.requested and its row alike (it was echoed whole in the first two).
    const long = 'v'.repeat(700);
    const cut = `${'v'.repeat(63)}…`;
    const l = await post(url, modernBody('long-version', 'tools/list', {}, modernMeta({ [META_VERSION]: long })), modernHeaders('tools/list', undefined, long));
    expect(expectError(l, 400, -32022).error).toEqual({ code: -32022, message: `unsupported protocol version: ${cut}`, data: { supported: [MODERN_VERSION], requested: cut } });
    const [row] = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'long-version' });
    expect(row).toMatchObject({ clientEra: cut, errorMessage: `unsupported protocol version: ${cut}` });
    // So does a header that disagrees with the body, and a legacy request's header naming no version.
    const mismatch = await post(url, modernBody('long-header', 'tools/list', {}, modernMeta({ [META_VERSION]: long })), modernHeaders('tools/list', undefined, 'h'.repeat(5000)));
    expect(expectError(mismatch, 400, -32020).error.message).toBe(`MCP-Protocol-Version header ${'h'.repeat(63)}… does not match _meta ${cut}`);
    const s = await legacySession(url);
    const legacy = await post(url, { jsonrpc: '2.0', id: 'long-legacy-header', method: 'tools/list', params: {} }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': 'x'.repeat(5000) });
    expect(expectError(legacy, 400, -32600).error.message).toMatch(new RegExp(`^Bad Request: unsupported MCP-Protocol-Version "${'x'.repeat(63)}…" \\(supported: `));
    const quoted = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => ['long-header', 'long-legacy-header'].every((id) => x.some((y) => y.requestId === id)));
    expect(quoted.filter((y) => ['long-header', 'long-legacy-header'].includes(String(y.requestId))).every((y) => String(y.errorMessage).length < 300)).toBe(true);
  });

  // A version that is no string is no version: its `_meta` field is of the wrong type (-32602,
  // as the SDK v2 server answers), whatever the header says. It was -32020 'MCP-Protocol-Version
  // header 2026-07-28 does not match _meta 5', telling the client to fix a header it had right.
  it('a _meta protocol version that is no string → 400 with -32602, not a header mismatch', async () => {
    for (const [i, v] of ([5, null, true, ['2026-07-28'], { v: MODERN_VERSION }] as unknown[]).entries()) {
      const r = await post(url, modernBody(`nonstring-version-${i}`, 'tools/list', {}, modernMeta({ [META_VERSION]: v })), modernHeaders('tools/list'));
      expect(expectError(r, 400, -32602).error.message, JSON.stringify(v)).toBe(`invalid _meta ${META_VERSION}: a version string, not ${JSON.stringify(v)}`);
    }
    // Without the header too: the body is what is malformed.
    const { 'mcp-protocol-version': _, ...noVersion } = modernHeaders('tools/list');
    const bare = await post(url, modernBody('nonstring-version-bare', 'tools/list', {}, modernMeta({ [META_VERSION]: 5 })), noVersion);
    expectError(bare, 400, -32602);
    // A string that differs from the header is still the header's mismatch.
    const differs = await post(url, modernBody('string-version-differs', 'tools/list', {}, modernMeta({ [META_VERSION]: '2099-01-01' })), modernHeaders('tools/list'));
    expectError(differs, 400, -32020);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => x.filter((y) => String(y.requestId).startsWith('nonstring-version-')).length >= 6);
    expect(rows.filter((y) => String(y.requestId).startsWith('nonstring-version-')).every((y) => y.errorCode === -32602)).toBe(true);
  });

  it('missing _meta clientCapabilities → 400 with -32602', async () => {
    const meta = { [META_VERSION]: MODERN_VERSION, [META_INFO]: { name: 'raw', version: '1' } };
    const r = await post(url, modernBody(13, 'tools/list', {}, meta), modernHeaders('tools/list'));
    const body = expectError(r, 400, -32602);
    expect(body.id).toBe(13);
    expect(body.error!.message).toContain(META_CAPS);
  });

  it('a modern version header without a body claim → 400 with -32602', async () => {
    const r = await post(url, { jsonrpc: '2.0', id: 14, method: 'tools/list', params: {} }, modernHeaders('tools/list'));
    expectError(r, 400, -32602);
  });

  // What a version the hub does not know needs of a request it cannot know: the client is told
  // the versions it can use (digest §2.2: an unknown version gets -32022), not that it lacks
  // 2026-07-28's keys; its row named 2025-11-25, an era the hub did not answer it in.
  it('a later version header without a body claim → 400 with -32022 naming it; rows of that header say the era the hub answered in', async () => {
    const later = '2099-01-01';
    const r = await post(url, { jsonrpc: '2.0', id: 'later-no-claim', method: 'tools/list', params: {} }, modernHeaders('tools/list', undefined, later));
    expect(expectError(r, 400, -32022).error).toEqual({ code: -32022, message: `unsupported protocol version: ${later}`, data: { supported: [MODERN_VERSION], requested: later } });
    // So is a legacy session's request sent with it.
    const s = await legacySession(url);
    const l = await post(url, { jsonrpc: '2.0', id: 'later-legacy', method: 'tools/list', params: {} }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': later });
    expectError(l, 400, -32022);
    // Refused by the 2026-07-28 rules for something else: an initialize under it (-32020), a body that is no JSON-RPC.
    const init = { jsonrpc: '2.0', id: 'later-init', method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    expectError(await post(url, init, { ...JSON_HEADERS, 'mcp-protocol-version': later }), 400, -32020);
    expectError(await post(url, { jsonrpc: '1.0', id: 'later-junk', method: 'tools/list' }, modernHeaders('tools/list', undefined, later)), 400, -32600);
    const ids = ['later-no-claim', 'later-legacy', 'later-init', 'later-junk'];
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => ids.every((id) => x.some((y) => y.requestId === id)));
    expect(ids.map((id) => rows.find((y) => y.requestId === id)).map((y) => [y!.requestId, y!.errorCode, y!.clientEra])).toEqual([
      ['later-no-claim', -32022, later],
      ['later-legacy', -32022, later],
      ['later-init', -32020, MODERN_VERSION],
      ['later-junk', -32600, MODERN_VERSION],
    ]);
  });

  it('an unknown modern method → 404 with -32601', async () => {
    const r = await post(url, modernBody(15, 'tools/frobnicate'), modernHeaders('tools/frobnicate'));
    const body = expectError(r, 404, -32601);
    expect(body.id).toBe(15);
    // Methods named as properties of every object are unknown too, not a named method missing its Mcp-Name header.
    for (const method of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      const odd = await post(url, modernBody(15, method), modernHeaders(method));
      expect(expectError(odd, 404, -32601).error.message, method).toBe(`method not found: ${method}`);
    }
  });

  it('a subscriptions/listen without a SubscriptionFilter, or with one of the wrong shape → -32602, no stream', async () => {
    const listen = (id: string, params: Record<string, unknown>) => post(url, modernBody(id, 'subscriptions/listen', params), modernHeaders('subscriptions/listen'));
    const bad: Record<string, unknown>[] = [
      {},
      { notifications: 'all' },
      { notifications: null },
      { notifications: [] },
      { notifications: { toolsListChanged: 'yes' } },
      { notifications: { resourceSubscriptions: 'test://a' } },
      { notifications: { resourceSubscriptions: [1] } },
    ];
    for (const [i, params] of bad.entries()) {
      const r = await listen(`bad-${i}`, params);
      const body = expectError(r, 200, -32602);
      expect(body.id, JSON.stringify(params)).toBe(`bad-${i}`);
      expect(r.headers.get('content-type')).toBe('application/json');
    }
    // A well-formed one (an extension's member passes) is acknowledged on a stream.
    const ac = new AbortController();
    const ok = await fetch(url, {
      method: 'POST',
      headers: modernHeaders('subscriptions/listen'),
      body: JSON.stringify(modernBody('good', 'subscriptions/listen', { notifications: { toolsListChanged: true, taskIds: ['t'] } })),
      signal: ac.signal,
    });
    expect(ok.headers.get('content-type')).toBe('text/event-stream');
    ac.abort();
  });

  it('a legacy request without a session → 400; with an unknown session → 404', async () => {
    const req = { jsonrpc: '2.0', id: 16, method: 'tools/list', params: {} };
    const none = await post(url, req, JSON_HEADERS);
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ jsonrpc: '2.0', id: 16, error: { code: expect.any(Number) } });
    const unknown = await post(url, req, { ...JSON_HEADERS, 'mcp-session-id': 'no-such-session', 'mcp-protocol-version': LEGACY_VERSION });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ jsonrpc: '2.0', id: 16, error: { code: expect.any(Number) } });
    for (const sid of ['__proto__', 'constructor', 'toString']) {
      const odd = await post(url, req, { ...JSON_HEADERS, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION });
      expect(odd.status, sid).toBe(404);
    }
  });

  it('a legacy notification or response without a session → 400; with an unknown or ended session → 404', async () => {
    const note = { jsonrpc: '2.0', method: 'notifications/initialized' };
    expect((await post(url, note, JSON_HEADERS)).status).toBe(400);
    const unknown = await post(url, note, { ...JSON_HEADERS, 'mcp-session-id': 'no-such-session', 'mcp-protocol-version': LEGACY_VERSION });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32001 } });
    const answer = await post(url, { jsonrpc: '2.0', id: 1, result: {} }, { ...JSON_HEADERS, 'mcp-session-id': 'no-such-session' });
    expect(answer.status).toBe(404);
    const s = await legacySession(url);
    const h = { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION };
    expect((await post(url, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, h)).status).toBe(202);
    expect((await fetch(url, { method: 'DELETE', headers: h })).status).toBe(200);
    expect((await post(url, { jsonrpc: '2.0', method: 'notifications/roots/list_changed' }, h)).status).toBe(404);
  });

  it('a legacy request with an MCP-Protocol-Version the hub does not speak → 400 (POST, GET and DELETE); a modern one\'s DELETE → 405', async () => {
    const s = await legacySession(url);
    for (const version of ['1999-01-01', 'abc', '2025-13-99x']) {
      const h = { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': version };
      const r = await post(url, { jsonrpc: '2.0', id: 21, method: 'tools/list', params: {} }, h);
      expectError(r, 400, -32600);
      expect(r.body?.error?.message).toContain('unsupported MCP-Protocol-Version');
      const g = await fetch(url, { headers: { ...h, accept: 'text/event-stream' } });
      expect(g.status).toBe(400);
      await g.body?.cancel();
      // A DELETE is held to the header as GET is: the session is not ended by it.
      const d = await fetch(url, { method: 'DELETE', headers: h });
      expect(d.status, version).toBe(400);
      expect(await d.json()).toMatchObject({ error: { code: -32600, message: expect.stringContaining('unsupported MCP-Protocol-Version') } });
    }
    // A modern version header names a client of the era without sessions: 405, as for its GET;
    // the session it names goes on.
    const modernDelete = await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': s.sessionId, 'mcp-protocol-version': MODERN_VERSION } });
    expect(modernDelete.status).toBe(405);
    expect(modernDelete.headers.get('allow')).toBe('POST');
    // Every legacy version is fine, and so is no header (a client older than the header).
    for (const version of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'])
      expect((await post(url, { jsonrpc: '2.0', id: 22, method: 'tools/list', params: {} }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': version })).status).toBe(200);
    expect((await post(url, { jsonrpc: '2.0', id: 23, method: 'tools/list', params: {} }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId })).status).toBe(200);
  });

  // The 2026 revision defines no client notifications over HTTP, nor headers for a notification
  // POST: one is accepted (202, and nothing done: closing a stream is what cancels), but headers
  // it does carry must agree with its body.
  it('a modern notification over HTTP: headers that disagree with its body → 400, absent ones are no fault, else 202', async () => {
    const note = (meta = modernMeta()) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: meta } });
    const mismatch = await post(url, note(), { ...JSON_HEADERS, 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': 'tools/call' });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body).toMatchObject({ error: { code: -32020 } });
    const noMethod = await post(url, note(), { ...JSON_HEADERS, 'mcp-protocol-version': MODERN_VERSION });
    expect(noMethod.status).toBe(202);
    // Its body's claim alone says its era.
    expect((await post(url, note(), JSON_HEADERS)).status).toBe(202);
    // Or its header alone: a notification's _meta is optional in 2026-07-28 (the spec's own
    // cancellation example has none), unlike a request's (-32602 above).
    const bare = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: '123', reason: 'User requested cancellation' } };
    expect((await post(url, bare, { ...JSON_HEADERS, 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': 'notifications/cancelled' })).status).toBe(202);
    const bareUnsupported = await post(url, bare, { ...JSON_HEADERS, 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'notifications/cancelled' });
    expect(bareUnsupported.status).toBe(400);
    expect(bareUnsupported.body).toMatchObject({ error: { code: -32022 } });
    const otherVersion = await post(url, note(), { ...JSON_HEADERS, 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'notifications/cancelled' });
    expect(otherVersion.status).toBe(400);
    expect(otherVersion.body).toMatchObject({ error: { code: -32020 } });
    const unsupported = await post(url, note(modernMeta({ [META_VERSION]: '2099-01-01' })), { ...JSON_HEADERS, 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'notifications/cancelled' });
    expect(unsupported.status).toBe(400);
    expect(unsupported.body).toMatchObject({ error: { code: -32022 } });
    expect((await post(url, note(), { ...JSON_HEADERS, 'mcp-protocol-version': MODERN_VERSION, 'mcp-method': 'notifications/cancelled' })).status).toBe(202);
  });

  it("an SDK v2 client's listen teardown (notifications/cancelled, POSTed without Mcp-Method) is accepted: 202, no error at the client", async () => {
    const rec = recordingFetch();
    const client = new ClientV2({ name: 'listen-closer', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    const errors: unknown[] = [];
    client.onerror = (e) => errors.push(e);
    await client.connect(new TransportV2(new URL(url), { fetch: rec.fetch }));
    try {
      const sub = await client.listen({ toolsListChanged: true });
      // close() awaits the notification's POST, so its answer is in by now.
      await sub.close();
      const teardown = (await rec.settled()).filter((e) => e.request.method === 'notifications/cancelled');
      expect(teardown.map((e) => e.status)).toEqual([202]);
      expect(errors).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('malformed client capabilities or clientInfo → 400 with -32602, whichever era serves the tool', async () => {
    for (const tool of ['legacy__echo', 'modern__echo']) {
      const r = await post(url, modernBody(nextId++, 'tools/call', { name: tool, arguments: { text: 'x' } }, modernMeta({ [META_CAPS]: { elicitation: 'yes' } })), modernHeaders('tools/call', tool));
      expect(expectError(r, 400, -32602).error.message).toContain('elicitation must be an object');
      const s = await post(url, modernBody(nextId++, 'tools/call', { name: tool, arguments: { text: 'x' } }, modernMeta({ [META_CAPS]: { sampling: { tools: true } } })), modernHeaders('tools/call', tool));
      expect(expectError(s, 400, -32602).error.message).toContain('sampling.tools must be an object');
      const i = await post(url, modernBody(nextId++, 'tools/call', { name: tool, arguments: { text: 'x' } }, modernMeta({ [META_INFO]: 'evil' })), modernHeaders('tools/call', tool));
      expect(expectError(i, 400, -32602).error.message).toContain('clientInfo');
    }
    const init = (params: Record<string, unknown>, id: string) =>
      post(url, { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'x', version: '1' }, ...params } }, JSON_HEADERS);
    for (const [params, what] of [
      [{ capabilities: [1, 2] }, 'capabilities must be an object'],
      [{ capabilities: { elicitation: null } }, 'capabilities elicitation must be an object'],
      [{ clientInfo: 'evil' }, 'clientInfo must be an object'],
      [{ clientInfo: { name: 'x' } }, 'clientInfo version must be a string'],
    ] as const) {
      const r = await init(params, 'bad-init');
      expect(r.headers.get('mcp-session-id')).toBeNull();
      expect(expectError(r, 400, -32602)).toMatchObject({ id: 'bad-init', error: { message: expect.stringContaining(what) } });
    }
  });

  // The CallToolRequest schema (both eras) has `arguments?: {[key: string]: unknown}`: a request
  // that breaks it is a protocol error (-32602, in-band as the SDK v2 server answers it), not a
  // tool execution error, whichever era serves the tool. `null` is taken as none (clients that
  // write absent fields as null), as before.
  it('tools/call arguments that are no object → -32602 in both eras, never sent upstream, with a row', async () => {
    const s = await legacySession(url);
    for (const [i, args] of [[1], 'x', 5, true].entries()) {
      for (const tool of ['legacy__echo', 'modern__echo']) {
        const id = `bad-args-${i}-${tool}`;
        const m = await post(url, modernBody(id, 'tools/call', { name: tool, arguments: args }), modernHeaders('tools/call', tool));
        expect(expectError(m, 200, -32602)).toMatchObject({ id, error: { message: expect.stringContaining('arguments must be an object') } });
        const l = await post(url, { jsonrpc: '2.0', id: `${id}-l`, method: 'tools/call', params: { name: tool, arguments: args } }, { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION });
        expect(expectError(l, 200, -32602)).toMatchObject({ id: `${id}-l` });
      }
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { method: 'tools/call', outcome: 'rpc_error' }, (r) => r.filter((x) => String(x.requestId).startsWith('bad-args-')).length >= 16);
    const mine = rows.filter((x) => String(x.requestId).startsWith('bad-args-'));
    expect(mine.every((x) => x.errorCode === -32602 && /arguments must be an object/.test(String(x.errorMessage)))).toBe(true);
    expect(mine.filter((x) => x.clientEra === LEGACY_VERSION)).toHaveLength(8);
    // null is no arguments: a tool without required ones runs.
    const none = await post(url, modernBody('null-args', 'tools/call', { name: 'modern__fail', arguments: null }), modernHeaders('tools/call', 'modern__fail'));
    expect(none.body?.result).toMatchObject({ isError: true, content: [{ text: 'failure requested' }] });
  });

  // InputResponseRequestParams (2026-07-28): `inputResponses` is a map of answers and
  // `requestState` a string. Of another shape they are a malformed request, not answers to ask
  // again nor a retry to forward, whichever era serves it.
  it('a modern inputResponses that is no object, or a requestState that is no string → -32602 in-band, with a row', async () => {
    const cases: [string, string, Record<string, unknown>][] = [
      ['tools/call', 'modern__echo', { name: 'modern__echo', arguments: { text: 'x' }, inputResponses: [1] }],
      ['tools/call', 'legacy__echo', { name: 'legacy__echo', arguments: { text: 'x' }, inputResponses: 'yes' }],
      ['prompts/get', 'modern__greet', { name: 'modern__greet', arguments: { name: 'a' }, inputResponses: 5 }],
      ['tools/call', 'modern__echo', { name: 'modern__echo', arguments: { text: 'x' }, requestState: 5 }],
      ['prompts/get', 'legacy__greet', { name: 'legacy__greet', arguments: { name: 'a' }, requestState: { a: 1 } }],
    ];
    for (const [i, [method, name, params]] of cases.entries()) {
      const r = await post(url, modernBody(`mrtr-shape-${i}`, method, params), modernHeaders(method, name));
      expect(expectError(r, 200, -32602).error.message, JSON.stringify(params)).toMatch(/inputResponses must be an object|requestState must be a string/);
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => x.filter((y) => String(y.requestId).startsWith('mrtr-shape-')).length >= cases.length);
    expect(rows.filter((y) => String(y.requestId).startsWith('mrtr-shape-')).every((y) => y.errorCode === -32602 && y.tool !== null)).toBe(true);
    // null is none, as an absent field.
    const none = await post(url, modernBody('mrtr-null', 'tools/call', { name: 'modern__echo', arguments: { text: 'n' }, inputResponses: null }), modernHeaders('tools/call', 'modern__echo'));
    expect(none.body?.result).toMatchObject({ content: [{ text: 'echo:n' }] });
  });

  // String() of a JSON object with a "toString" key that is no function throws (no primitive to
  // convert to): an error message quoting such a value failed the request with a 500, no row.
  it('values a message quotes that have a "toString" of their own → their error, not 500, and a row', async () => {
    const odd = { toString: 1 };
    const version = await post(url, modernBody('odd-version', 'tools/list', {}, modernMeta({ [META_VERSION]: odd })), modernHeaders('tools/list'));
    expectError(version, 400, -32602);
    const unsupported = await post(url, modernBody('odd-version-stdio-like', 'tools/list', {}, modernMeta({ [META_VERSION]: { valueOf: 'x', toString: [] } })), { ...modernHeaders('tools/list'), 'mcp-protocol-version': '[object Object]' });
    expectError(unsupported, 400, -32602);
    const level = await post(url, modernBody('odd-level', 'tools/list', {}, modernMeta({ 'io.modelcontextprotocol/logLevel': odd })), modernHeaders('tools/list'));
    expectError(level, 200, -32602);
    const s = await legacySession(url);
    const setLevel = await s.request(77, 'logging/setLevel', { level: odd });
    expectError(setLevel, 200, -32602);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (x) => ['odd-version', 'odd-level', 'odd-version-stdio-like'].every((id) => x.some((y) => y.requestId === id)));
    expect(rows.filter((y) => String(y.requestId).startsWith('odd-')).map((y) => y.errorCode).sort((a, b) => Number(a) - Number(b))).toEqual([-32602, -32602, -32602]);
    expect(hub.logs.filter((l) => l.includes('request handler failed'))).toEqual([]);
  });

  it('a second initialize on a session → 400 with -32600, and its ledger row', async () => {
    const s = await legacySession(url);
    const again = await post(
      url,
      { jsonrpc: '2.0', id: 'second-init', method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
      { ...JSON_HEADERS, 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION },
    );
    expect(expectError(again, 400, -32600)).toMatchObject({ id: 'second-init' });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'second-init' });
    expect(rows[0]).toMatchObject({ method: 'initialize', outcome: 'rpc_error', errorCode: -32600 });
  });

  it('GET /healthz reports every upstream with its state, era and tool count', async () => {
    // The tool counts come from the catalog, so list once first.
    const listed = await modernPost(url, 17, 'tools/list');
    expect(listed.status).toBe(200);
    const res = await fetch(new URL('/healthz', url));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    // Supervision facts (issue 6): since/lastError/restarts, load, failMode.
    const healthy = { since: expect.any(String), lastError: null, listError: null, restarts: 0, inFlight: 0, queued: 0, failMode: 'open' };
    expect(await res.json()).toEqual({
      status: 'ok',
      servers: [
        { id: 'legacy', state: 'ready', era: LEGACY_VERSION, tools: 5, ...healthy },
        { id: 'modern', state: 'ready', era: MODERN_VERSION, tools: 5, ...healthy },
      ],
    });
    // Another method is a method it does not take (as /metrics says), not a path that is not there.
    const post = await fetch(new URL('/healthz', url), { method: 'POST' });
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET, HEAD']);
  });
});

describe('input nested past what the hub walks', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { legacy: nodeServer('test/fixtures/servers/sdk1-server.mjs'), modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } });
    await waitForReady(hub.url, ['legacy', 'modern']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const DEEP = '['.repeat(5000) + ']'.repeat(5000);
  /** The body's text with the deep value where `"__DEEP__"` stands (JSON.stringify cannot make it). */
  const withDeep = (body: object) => JSON.stringify(body).replace('"__DEEP__"', DEEP);
  const KEY = 'dev.switchyard/idempotency-key';

  it('a tools/call with a deep _meta value: 400 -32602 with its id, a row, and its idempotency key still free', async () => {
    const deep = modernBody('deep-1', 'tools/call', { name: 'legacy__echo', arguments: { text: 'a' } }, modernMeta({ 'com.example/x': '__DEEP__', [KEY]: 'deep-key' }));
    const r = await post(hub.url, withDeep(deep), modernHeaders('tools/call', 'legacy__echo'));
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ id: 'deep-1', error: { code: -32602, message: expect.stringContaining('nested more than 1000 levels deep') } });
    const retry = await post(hub.url, modernBody('deep-2', 'tools/call', { name: 'legacy__echo', arguments: { text: 'a' } }, modernMeta({ [KEY]: 'deep-key' })), modernHeaders('tools/call', 'legacy__echo'));
    expect(retry.body).toMatchObject({ id: 'deep-2', result: { content: [{ type: 'text', text: 'echo:a' }] } });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'deep-1' });
    expect(rows[0]).toMatchObject({ method: 'tools/call', outcome: 'rpc_error', errorCode: -32602 });
  });

  // An empty header was ignored: the write ran, and its retry with the same empty header ran again.
  it('an empty Idempotency-Key header is -32602, as an empty _meta key is; nothing runs', async () => {
    for (const value of ['', '   ']) {
      const r = await post(hub.url, modernBody('empty-key', 'tools/call', { name: 'legacy__echo', arguments: { text: 'a' } }), { ...modernHeaders('tools/call', 'legacy__echo'), 'idempotency-key': value });
      expect(r.body, JSON.stringify(value)).toMatchObject({ id: 'empty-key', error: { code: -32602, message: 'Invalid params: the Idempotency-Key header must not be empty' } });
    }
  });

  // A 3 MB key was held whole in the key table and quoted whole in the refusals naming it.
  it('an idempotency key over 256 characters is -32602, in _meta or the header; 256 pass', async () => {
    const call = (id: string, meta: Record<string, unknown>, headers: Record<string, string> = {}) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'legacy__echo', arguments: { text: 'a' } }, modernMeta(meta)), { ...modernHeaders('tools/call', 'legacy__echo'), ...headers });
    const long = 'k'.repeat(257);
    for (const r of [await call('long-1', { [KEY]: long }), await call('long-2', {}, { 'idempotency-key': long })])
      expect(r.body).toMatchObject({ error: { code: -32602, message: 'Invalid params: an idempotency key holds at most 256 characters (this one 257)' } });
    expect((await call('long-3', { [KEY]: 'k'.repeat(256) })).body).toMatchObject({ result: { content: [{ type: 'text', text: 'echo:a' }] } });
  });

  it('a legacy initialize with deep capabilities, and a prompts/get with deep arguments: -32602, no stack overflow told', async () => {
    const init = { jsonrpc: '2.0', id: 'deep-init', method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: { experimental: { x: '__DEEP__' } }, clientInfo: { name: 'deep', version: '1' } } };
    const r = await post(hub.url, withDeep(init), JSON_HEADERS);
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ id: 'deep-init', error: { code: -32602 } });
    const prompt = modernBody('deep-prompt', 'prompts/get', { name: 'modern__greet', arguments: { who: '__DEEP__' } });
    const p = await post(hub.url, withDeep(prompt), modernHeaders('prompts/get', 'modern__greet'));
    expect(p.body).toMatchObject({ id: 'deep-prompt', error: { code: -32602 } });
    expect(p.text).not.toMatch(/call stack/i);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'deep-init' });
    expect(rows[0]).toMatchObject({ method: 'initialize', outcome: 'rpc_error' });
  });
});
