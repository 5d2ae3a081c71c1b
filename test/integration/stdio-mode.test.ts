/**
 * `switchyard stdio`: the era matrix over the hub's own stdin/stdout, driven by the official
 * clients spawning the real built binary (SDK v1 legacy, SDK v2 with auto negotiation → modern),
 * against the legacy and modern fixture upstreams; then the raw line protocol (bad lines,
 * oversized lines, cancellation, clean exit at EOF, nothing but protocol on stdout).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { waitForRows } from './ledger-helpers.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';
const MODERN = '2026-07-28';
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };

type Json = Record<string, any>;

interface Peer {
  listTools(): Promise<Json>;
  callTool(p: Json): Promise<Json>;
  listPrompts(): Promise<Json>;
  getPrompt(p: Json): Promise<Json>;
  listResources(): Promise<Json>;
  listResourceTemplates(): Promise<Json>;
  readResource(p: Json): Promise<Json>;
  complete(p: Json): Promise<Json>;
  close(): Promise<void>;
}

let dir: string;
let configFile: string;

function writeConfig(d: string, extra: Json = {}): string {
  const file = join(d, 'hub.config.json');
  writeFileSync(
    file,
    JSON.stringify({
      ledger: { path: join(d, 'ledger.db') },
      servers: { legacy: nodeServer(SDK1, [], { COUNTER_FILE: join(d, 'counter.json') }), modern: nodeServer(SDK2, [], { COUNTER_FILE: join(d, 'counter.json') }) },
      ...extra,
    }),
  );
  return file;
}

const serverParams = () => ({
  command: process.execPath,
  args: [BIN, 'stdio', '--config', configFile],
  env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } as Record<string, string>,
  cwd: ROOT,
  stderr: 'pipe' as const,
});

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-stdio-'));
  configFile = writeConfig(dir);
});

const CLIENTS = [
  {
    label: 'SDK v1 client over stdio (legacy)',
    era: 'legacy',
    async connect(): Promise<{ peer: Peer; era: string }> {
      const client = new ClientV1({ name: 'stdio-v1', version: '1.0.0' });
      const transport = new StdioV1(serverParams());
      await client.connect(transport);
      return { peer: client as unknown as Peer, era: client.getServerVersion()?.name === 'switchyard' ? 'legacy' : '?' };
    },
  },
  {
    label: 'SDK v2 client over stdio (auto negotiation → modern)',
    era: 'modern',
    async connect(): Promise<{ peer: Peer; era: string }> {
      const client = new ClientV2({ name: 'stdio-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      await client.connect(new StdioV2(serverParams()));
      return { peer: client as unknown as Peer, era: String(client.getProtocolEra()) };
    },
  },
];

for (const spec of CLIENTS) {
  describe(spec.label, () => {
    let peer: Peer;
    let era: string;
    beforeAll(async () => {
      ({ peer, era } = await spec.connect());
    }, 60_000);
    afterAll(async () => {
      await peer?.close();
    });

    it(`speaks the ${spec.era} era`, () => {
      expect(era).toBe(spec.era);
    });

    it('lists and calls the tools of a legacy and a modern upstream', async () => {
      const names = ((await peer.listTools()).tools as Json[]).map((t) => t.name).sort();
      expect(names).toEqual(['add', 'counter_bump', 'echo', 'fail', 'slow'].flatMap((n) => [`legacy__${n}`, `modern__${n}`]).sort());
      expect((await peer.callTool({ name: 'legacy__echo', arguments: { text: 'via stdio' } })).content).toEqual([{ type: 'text', text: 'echo:via stdio' }]);
      const sum = await peer.callTool({ name: 'modern__add', arguments: { a: 2, b: 40 } });
      expect(sum.structuredContent).toEqual({ sum: 42 });
      const failed = await peer.callTool({ name: 'modern__fail', arguments: {} });
      expect(failed.isError).toBe(true);
    });

    it('gets prompts and completes their arguments', async () => {
      const prompts = ((await peer.listPrompts()).prompts as Json[]).map((p) => p.name).sort();
      expect(prompts).toEqual(['legacy__greet', 'modern__greet']);
      for (const p of prompts) {
        const got = await peer.getPrompt({ name: p, arguments: { name: 'ada' } });
        expect(got.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Hello, ada!' } }]);
        const c = await peer.complete({ ref: { type: 'ref/prompt', name: p }, argument: { name: 'name', value: 'al' } });
        expect(c.completion.values).toEqual(['alice', 'albert']);
      }
    });

    it('lists and reads resources and templates', async () => {
      const uris = ((await peer.listResources()).resources as Json[]).map((r) => r.uri).sort();
      expect(uris).toEqual(['sdk1://static/hello', 'sdk2://static/hello']);
      const templates = ((await peer.listResourceTemplates()).resourceTemplates as Json[]).map((r) => r.uriTemplate).sort();
      expect(templates).toEqual(['sdk1://item/{id}', 'sdk2://item/{id}']);
      expect((await peer.readResource({ uri: 'sdk2://static/hello' })).contents[0].text).toBe('hello from sdk2-modern');
      expect((await peer.readResource({ uri: 'sdk1://item/7' })).contents[0].text).toBe('item 7');
    });
  });
}

describe('the raw line protocol of switchyard stdio', () => {
  let c: LineClient;
  let d: string;
  beforeAll(async () => {
    d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-raw-'));
    // A small line limit so the oversized case is cheap.
    const file = writeConfig(d, { listen: { maxBodyBytes: 4096 } });
    c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
    const discovered = await c.request({ jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } });
    expect(discovered.result.supportedVersions).toEqual([MODERN]);
  }, 30_000);
  afterAll(() => c?.kill());

  it('answers a line that is not JSON with -32700 and no id, and keeps serving', async () => {
    c.send('this is { not json');
    const err = await c.next((m) => m.error?.code === -32700);
    expect(err).toEqual({ jsonrpc: '2.0', error: { code: -32700, message: expect.any(String) } });
    const pong = await c.request({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: META } });
    expect(pong.result.tools.length).toBe(10);
  });

  it('reads a line that begins with a byte order mark, as the HTTP reader does', async () => {
    c.send(`\ufeff${JSON.stringify({ jsonrpc: '2.0', id: 'bom', method: 'tools/list', params: { _meta: META } })}`);
    const listed = await c.next((m) => m.id === 'bom');
    expect(listed.result.tools.length).toBe(10);
  });

  it('answers a JSON value that is not a message with -32600', async () => {
    c.send('[1,2,3]');
    const err = await c.next((m) => m.error?.code === -32600 && /batch/.test(m.error.message));
    expect(err.id).toBeUndefined();
  });

  it('skips an oversized line with an error, never buffering it whole, and keeps serving', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'x'.repeat(20_000) }, _meta: META } }));
    const err = await c.next((m) => /too large/.test(m.error?.message ?? ''));
    // Its id is read at its start (stdio-oversize-lines.test.ts): its client is answered.
    expect(err.id).toBe('big');
    const ok = await c.request({ jsonrpc: '2.0', id: 'after', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'small' }, _meta: META } });
    expect(ok.result.content[0].text).toBe('echo:small');
    // Refused like any message that reached the hub: it has its row.
    const rows = await waitForRows(join(d, 'ledger.db'), { method: 'tools/call' }, (r) => r.some((x) => /too large/.test(String(x.errorMessage))));
    expect(rows.find((x) => /too large/.test(String(x.errorMessage)))).toMatchObject({ outcome: 'rpc_error', errorCode: -32600 });
  });

  it('refuses a request whose id is one still in flight (its answer could not be told apart), and answers the first', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 800 }, _meta: META } }));
    await new Promise((r) => setTimeout(r, 200));
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'second' }, _meta: META } }));
    const refused = await c.next((m) => m.id === 'dup' && m.error !== undefined);
    expect(refused.error).toMatchObject({ code: -32600, message: expect.stringContaining('already in flight') });
    const first = await c.next((m) => m.id === 'dup' && m.result !== undefined);
    expect(first.result.content[0].text).toBe('slept 800');
    // Once answered, the id may be used again.
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'again' }, _meta: META } }));
    await c.next((m) => m.id === 'dup' && m.result?.content?.[0]?.text === 'echo:again');
    expect(c.received.filter((m) => m.id === 'dup')).toHaveLength(3);
  });

  it('cancels a modern call on notifications/cancelled and sends nothing for it', async () => {
    // A call cancelled 300 ms into its 1.5 s; not cancelled, its answer would come within the wait below.
    const sent = Date.now();
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow-1', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 1500 }, _meta: META } }));
    await new Promise((r) => setTimeout(r, 300));
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow-1', _meta: META } }));
    const after = await c.request({ jsonrpc: '2.0', id: 'after-cancel', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'z' }, _meta: META } });
    expect(after.result.content[0].text).toBe('echo:z');
    await new Promise((r) => setTimeout(r, Math.max(0, sent + 1500 + 1200 - Date.now())));
    expect(c.received.some((m) => m.id === 'slow-1')).toBe(false);
  });

  // A notification's _meta is optional in 2026-07-28 (NotificationParams), and the spec's own
  // cancellation example has none: without a version claim it is still the modern call's cancel.
  it('cancels a modern call on a notifications/cancelled without _meta (the 2026 example form)', async () => {
    const sent = Date.now();
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow-bare', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 1500 }, _meta: META } }));
    await new Promise((r) => setTimeout(r, 300));
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow-bare', reason: 'User requested cancellation' } }));
    const after = await c.request({ jsonrpc: '2.0', id: 'after-bare', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'y' }, _meta: META } });
    expect(after.result.content[0].text).toBe('echo:y');
    await new Promise((r) => setTimeout(r, Math.max(0, sent + 1500 + 1200 - Date.now())));
    expect(c.received.some((m) => m.id === 'slow-bare')).toBe(false);
  });

  it('a cancellation names an id with its type: the string "7" does not cancel the number 7', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 600 }, _meta: META } }));
    await new Promise((r) => setTimeout(r, 200));
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: '7', _meta: META } }));
    const answer = await c.next((m) => m.id === 7);
    expect(answer.result.content[0].text).toBe('slept 600');
  });

  it('an id just cancelled may name a new request at once (it is in flight no more): served, and the cancelled call still sends nothing', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'again-1', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 400 }, _meta: META } }));
    await new Promise((r) => setTimeout(r, 150));
    // One write: the cancellation and the new request with the same id.
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'again-1', _meta: META } };
    const next = { jsonrpc: '2.0', id: 'again-1', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'reused' }, _meta: META } };
    c.send(`${JSON.stringify(cancel)}\n${JSON.stringify(next)}`);
    const answer = await c.next((m) => m.id === 'again-1');
    expect(answer.result?.content?.[0]?.text, JSON.stringify(answer)).toBe('echo:reused');
    await new Promise((r) => setTimeout(r, 400));
    expect(c.received.filter((m) => m.id === 'again-1')).toHaveLength(1);
  });

  it('ids must be strings or integers a JSON number holds exactly', async () => {
    for (const id of [1.5, 2 ** 53 + 2]) {
      c.send(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"modern__echo","arguments":{"text":"x"},"_meta":${JSON.stringify(META)}}}`);
      const err = await c.next((m) => m.error !== undefined && m.id === undefined && /id must be/.test(m.error.message));
      expect(err.error.code).toBe(-32600);
    }
  });

  it('serves a modern listen stream on stdout, acknowledged first, ended by cancellation', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: META } }));
    const ack = await c.next((m) => m.method === 'notifications/subscriptions/acknowledged');
    expect(ack.params).toEqual({ notifications: { toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } });
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'listen-1', _meta: META } }));
  });

  it('refuses a request with the id of a listen stream still open (-32600), a second listen too; the id is free once the stream ends', async () => {
    const listen = (notifications: Json) => ({ jsonrpc: '2.0', id: 'dup-L', method: 'subscriptions/listen', params: { notifications, _meta: META } });
    const acks = () => c.received.filter((m) => m.method === 'notifications/subscriptions/acknowledged' && m.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === 'dup-L').length;
    c.send(JSON.stringify(listen({ toolsListChanged: true })));
    await c.next((m) => m.method === 'notifications/subscriptions/acknowledged' && m.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === 'dup-L');
    // Each answer with that id is a new message: earlier ones are already in c.received.
    const answer = (msg: Json): Promise<Json> => {
      const from = c.received.length;
      const p = c.next((m) => m.id === 'dup-L' && ('result' in m || 'error' in m) && c.received.indexOf(m) >= from);
      c.send(JSON.stringify(msg));
      return p;
    };
    const second = await answer(listen({ promptsListChanged: true }));
    expect(second.error?.code, JSON.stringify(second)).toBe(-32600);
    const call = await answer({ jsonrpc: '2.0', id: 'dup-L', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'x' }, _meta: META } });
    expect(call.error?.code, JSON.stringify(call)).toBe(-32600);
    expect(acks()).toBe(1);
    // Cancelled, the stream is gone and its id may name a new request.
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'dup-L', _meta: META } }));
    const again = await answer({ jsonrpc: '2.0', id: 'dup-L', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'y' }, _meta: META } });
    expect(again.result?.content?.[0]?.text, JSON.stringify(again)).toBe('echo:y');
  });

  it('serves a legacy session on the same pipe after initialize', async () => {
    const init = await c.request({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    expect(init.result.protocolVersion).toBe('2025-11-25');
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const r = await c.request({ jsonrpc: '2.0', id: 'l', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'old' } } });
    expect(r.result).toEqual({ content: [{ type: 'text', text: 'echo:old' }] });
  });

  it('answers a resources/read, subscribe or unsubscribe without a string uri with -32602 (invalid params), not as a resource not found', async () => {
    for (const [i, [method, params]] of ([
      ['resources/read', {}],
      ['resources/subscribe', {}],
      ['resources/unsubscribe', { uri: 7 }],
      ['resources/read', { uri: null, _meta: META }],
    ] as const).entries()) {
      const r = await c.request({ jsonrpc: '2.0', id: `nouri${i}`, method, params });
      expect(r.error, `${method} ${JSON.stringify(params)}`).toMatchObject({ code: -32602, message: expect.stringMatching(/uri/) });
      expect(r.error.data).toBeUndefined();
    }
    const rows = await waitForRows(join(d, 'ledger.db'), {}, (rs) => [0, 1, 2, 3].every((i) => rs.some((x) => x.requestId === `nouri${i}`)));
    expect(rows.filter((x) => String(x.requestId).startsWith('nouri')).map((x) => [x.outcome, x.errorCode])).toEqual(Array(4).fill(['rpc_error', -32602]));
  });

  it('answers what is in flight at EOF, then exits 0, with nothing but protocol on stdout; a last line without its newline is read', async () => {
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'last', method: 'tools/call', params: { name: 'modern__slow', arguments: { ms: 300 }, _meta: META } }));
    // Clients that write their last message with end(json) leave out the newline: EOF ends the line.
    c.proc.stdin!.end(JSON.stringify({ jsonrpc: '2.0', id: 'tail', method: 'ping' }));
    const code = await c.exited;
    expect(code).toBe(0);
    expect(c.received.find((m) => m.id === 'last')?.result.content[0].text).toBe('slept 300');
    expect(c.received.find((m) => m.id === 'tail')?.result).toEqual({});
    expect(c.nonProtocolLines).toEqual([]);
    expect(c.stderr).toMatch(/stdio hub stopping/);
  });
});

describe('switchyard stdio --group', () => {
  it("serves one tool group, as /mcp/<group> does: its tools only; an unknown group is a usage error", async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-group-'));
    // Three requests a principal may send at once: the fourth is refused at the edge, before routing.
    const file = writeConfig(d, { groups: { small: { servers: ['modern'], tools: ['modern__echo'] } }, policy: { rateLimit: { perPrincipal: { burst: 3, perSecond: 0.01 } } } });
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file, '--group', 'small'], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const list = await c.request({ jsonrpc: '2.0', id: 'l', method: 'tools/list', params: { _meta: META } });
    expect((list.result?.tools as Json[]).map((t) => t.name)).toEqual(['modern__echo']);
    const other = await c.request({ jsonrpc: '2.0', id: 'o', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'x' }, _meta: META } });
    expect(other.error?.message, JSON.stringify(other)).toBe('Unknown tool: legacy__echo');
    const echo = await c.request({ jsonrpc: '2.0', id: 'e', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'hi' }, _meta: META } });
    expect(echo.result?.content?.[0]?.text).toBe('echo:hi');
    const over = await c.request({ jsonrpc: '2.0', id: 'r', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'again' }, _meta: META } });
    expect(over.error?.message).toMatch(/^Too Many Requests/);
    c.endInput();
    expect(await c.exited).toBe(0);
    // Its rows name the group, the refusals' too (the hub closed the ledger at exit: all in SQLite).
    const db = new Database(join(d, 'ledger.db'), { readonly: true });
    const rows = db.prepare(`SELECT request_id, outcome, tool_group FROM audit WHERE request_id IN ('l', 'o', 'e', 'r') ORDER BY id`).all();
    db.close();
    expect(rows).toEqual([
      { request_id: 'l', outcome: 'ok', tool_group: 'small' },
      { request_id: 'o', outcome: 'rpc_error', tool_group: 'small' },
      { request_id: 'e', outcome: 'ok', tool_group: 'small' },
      { request_id: 'r', outcome: 'denied', tool_group: 'small' },
    ]);

    const bad = spawnSync(process.execPath, [BIN, 'stdio', '--config', file, '--group', 'big'], { cwd: ROOT, encoding: 'utf8', input: '' });
    expect([bad.status, bad.stdout]).toEqual([2, '']);
    expect(bad.stderr).toContain(`switchyard stdio: no tool group named "big" in ${file} (groups: small)`);
  }, 30_000);
});

describe('what a stdio hub loads', () => {
  // An IDE starts one per session: undici (HTTP upstreams) and ws (the status page's feed) are
  // loaded only when a config or a viewer needs them (~0.2 s of CPU at each start); jose (OAuth)
  // and prom-client (/metrics) only by a hub with a listener (~0.15 s more).
  it('loads neither undici, ws, jose nor prom-client for stdio upstreams only', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-imports-'));
    const c = new LineClient(
      spawn(process.execPath, ['--import', join(ROOT, 'test/fixtures/imports/register.mjs'), BIN, 'stdio', '--config', writeConfig(d)], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }),
    );
    const r = await c.request({ jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'hi' }, _meta: META } });
    expect(r.result?.content?.[0]?.text, JSON.stringify(r)).toBe('echo:hi');
    c.endInput();
    expect(await c.exited).toBe(0);
    const imported = new Set([...c.stderr.matchAll(/^IMPORTED (\S+)$/gm)].map((m) => m[1]));
    expect(imported).toContain('pino'); // the hook sees packages
    expect([...imported].filter((p) => ['undici', 'ws', 'jose', 'prom-client'].includes(p))).toEqual([]);
  }, 30_000);
});

/** The SDK 1 fixture, started only after `ms` (a server slow to start on its first run). */
function slowSdk1(ms: number): Record<string, unknown> {
  return { ...nodeServer(SDK1), args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(nodeServer(SDK1).args as string[])], env: { START_DELAY_MS: String(ms) } };
}

describe('a modern request cancelled while a fresh hub waits to learn what its upstreams offer', () => {
  it('is cancelled: nothing is sent for it', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-early-cancel-'));
    const file = join(d, 'hub.config.json');
    // A first run, and a server slow to start: whether anyone offers completions is not known
    // yet (a server never seen counts only with the list families), so the hub waits to learn it.
    // On a loaded machine the server may take longer than that wait (the start-up grace): the
    // request that comes next then waits for it (its prompt's server is on its first start).
    const slow = slowSdk1(800);
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { legacy: slow } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const complete = (id: string) => ({ jsonrpc: '2.0', id, method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'legacy__greet' }, argument: { name: 'name', value: 'al' }, _meta: META } });
    try {
      c.send(JSON.stringify(complete('early')));
      await new Promise((r) => setTimeout(r, 300));
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'early' } }));
      const after = await c.request(complete('after'));
      expect(after.result?.completion?.values).toEqual(['alice', 'albert']);
      await new Promise((r) => setTimeout(r, 300));
      expect(c.received.some((m) => m.id === 'early')).toBe(false);
      c.endInput();
      expect(await c.exited).toBe(0);
      // Not sent upstream at all: the ledger says cancelled, not answered.
      const db = new Database(join(d, 'ledger.db'), { readonly: true });
      try {
        expect(db.prepare("SELECT request_id AS id, outcome FROM audit WHERE method = 'completion/complete' ORDER BY request_id").all()).toEqual([
          { id: 'after', outcome: 'ok' },
          { id: 'early', outcome: 'cancelled' },
        ]);
      } finally {
        db.close();
      }
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('a completion of a prompt of a server still on its first start, past the start-up grace', () => {
  // No one is known to offer completions then (a server never seen counts only with the list
  // families): it was -32601 at once, where a call or a prompts/get by such a name waits for that
  // server (hub/first-start.ts); on a loaded machine a server can take longer than the 3 s grace.
  it('waits for that server, modern and legacy, and is answered', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-late-complete-'));
    const file = join(d, 'hub.config.json');
    const slow = slowSdk1(1200);
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { legacy: slow } }));
    const env = { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn', SWITCHYARD_STARTUP_GRACE_MS: '0' };
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env }));
    const complete = (id: string, meta?: Json) => ({ jsonrpc: '2.0', id, method: 'completion/complete', params: { ref: { type: 'ref/prompt', name: 'legacy__greet' }, argument: { name: 'name', value: 'al' }, ...(meta ? { _meta: meta } : {}) } });
    try {
      const modern = c.request(complete('modern', META), 20_000);
      const init = await c.request({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      expect(init.result?.capabilities?.completions, 'the server was ready already').toBeUndefined();
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const legacy = await c.request(complete('legacy'), 20_000);
      expect(legacy.result?.completion?.values, JSON.stringify(legacy)).toEqual(['alice', 'albert']);
      expect((await modern).result?.completion?.values, JSON.stringify(await modern)).toEqual(['alice', 'albert']);
    } finally {
      c.kill();
    }
  }, 30_000);
});

describe('a legacy client that does not wait for the initialize answer', () => {
  it('has the requests it pipelined behind initialize served in that session, in order', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-pipelined-'));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', writeConfig(d)], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      // One write: the hub reads all four lines before it has answered the first.
      c.send(
        [
          { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'eager', version: '1' } } },
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'list', method: 'tools/list' },
          { jsonrpc: '2.0', id: 'call', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'eager' } } },
        ]
          .map((m) => JSON.stringify(m))
          .join('\n'),
      );
      const call = await c.next((m) => m.id === 'call', 30_000);
      expect(call.result).toEqual({ content: [{ type: 'text', text: 'echo:eager' }] });
      // The list may come after the call: it waits in the start-up grace for the servers still
      // starting, while a call whose tool is a ready server's alone goes on (Hub.passesGrace).
      const list = await c.next((m) => m.id === 'list', 30_000);
      const names = (l: Json | undefined): string[] => (l?.result?.tools ?? []).map((t: Json) => t.name);
      expect(list?.result?.tools, JSON.stringify(list)).toBeInstanceOf(Array);
      expect(names(list).every((n) => /^(legacy|modern)__/.test(n)), JSON.stringify(list)).toBe(true);
      // A list waits for the servers up to the start-up grace (3 s) only: a server a loaded
      // machine started later is listed once it is ready (all ten tools).
      let again = 0;
      if (names(list).length < 10) await expect.poll(async () => names(await c.request({ jsonrpc: '2.0', id: `again-${++again}`, method: 'tools/list' })).length, { timeout: 20_000, interval: 200 }).toBe(10);
      const ids = c.received.filter((m) => m.id !== undefined).map((m) => m.id);
      expect(ids.slice(0, 1)).toEqual(['init']);
    } finally {
      c.kill();
    }
  }, 40_000);

  it('answers them before it exits when stdin ends right behind them', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-pipelined-eof-'));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', writeConfig(d)], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    c.send(
      [
        { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'eager', version: '1' } } },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 'call', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'last' } } },
      ]
        .map((m) => JSON.stringify(m))
        .join('\n'),
    );
    c.endInput();
    expect(await c.exited).toBe(0);
    expect(c.received.find((m) => m.id === 'call')?.result).toEqual({ content: [{ type: 'text', text: 'echo:last' }] });
  }, 40_000);
});

describe('a legacy client that does not wait for the initialize answer, of a hub that stops first', () => {
  // The initialize waits to learn what a server slow to start offers, past the drain: the lines
  // held behind it were dropped at the stop, neither answered nor recorded.
  it('has the requests held behind the initialize answered and recorded as refused (unavailable)', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-held-stop-'));
    const file = join(d, 'hub.config.json');
    // A server that never answers its handshake, as one still starting, and ends at once at the
    // end of its stdin: the hub's stop need not wait out the SIGTERM grace of a sleeping one.
    const slow = { command: process.execPath, args: ['-e', 'process.stdin.resume()'] };
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, listen: { drainTimeoutMs: 200 }, servers: { legacy: slow } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      c.send(
        [
          // A modern client's discover waits for the servers as the initialize does.
          { jsonrpc: '2.0', id: 'disc', method: 'server/discover', params: { _meta: META } },
          { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'eager', version: '1' } } },
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'list', method: 'tools/list' },
          // One its client cancels behind it: as if served, then cancelled (was answered, refused).
          { jsonrpc: '2.0', id: 'dropped', method: 'tools/list' },
          { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'dropped', reason: 'no longer needed' } },
          // A batch held too: its requests are answered together.
          // (A malformed member with its id, b3, answered with its error.)
          // b4, cancelled later in the same batch, is not answered either (it was: -32603, unavailable);
          // b5, whose cancellation came before it, is.
          [
            { jsonrpc: '2.0', id: 'b1', method: 'tools/list' },
            { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
            { jsonrpc: '2.0', id: 'b2', method: 'ping' },
            { jsonrpc: '2.0', id: 'b3', method: 'ping', params: [1] },
            { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'b5', reason: 'too early' } },
            { jsonrpc: '2.0', id: 'b4', method: 'tools/list' },
            { jsonrpc: '2.0', id: 'b5', method: 'tools/list' },
            { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'b4', reason: 'b4 not needed' } },
          ],
        ]
          .map((m) => JSON.stringify(m))
          .join('\n'),
      );
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(c.received.find((m) => m.id === 'list')?.error, JSON.stringify(c.received)).toMatchObject({ code: -32603, message: expect.stringContaining('shutting down') });
      // The batch's answer is the one line that is not a lone message: an array.
      expect(c.nonProtocolLines.map((l) => (JSON.parse(l) as Json[]).map((m) => [m.id, m.error?.code]).sort())).toEqual([[['b1', -32603], ['b2', -32603], ['b3', -32602], ['b5', -32603]]]);
      const db = new Database(join(d, 'ledger.db'), { readonly: true });
      try {
        expect(db.prepare("SELECT outcome FROM audit WHERE request_id = 'list'").all()).toEqual([{ outcome: 'unavailable' }]);
        expect(c.received.filter((m) => m.id === 'dropped')).toEqual([]);
        expect(db.prepare("SELECT outcome, error_message AS message FROM audit WHERE request_id = 'dropped'").all()).toEqual([{ outcome: 'cancelled', message: 'no longer needed' }]);
        expect(db.prepare("SELECT request_id AS id, outcome, error_message AS message FROM audit WHERE request_id IN ('b4', 'b5') ORDER BY request_id").all()).toEqual([
          { id: 'b4', outcome: 'cancelled', message: 'b4 not needed' },
          { id: 'b5', outcome: 'unavailable', message: expect.stringContaining('shutting down') },
        ]);
        // The initialize and the discover the stop cut short are not ok: their client, which may
        // still read stdout, is told the hub is shutting down, and their rows say so (unavailable).
        expect(c.received.filter((m) => m.id === 'init' || m.id === 'disc').map((m) => [m.id, m.error?.code, m.error?.message]).sort()).toEqual([
          ['disc', -32603, expect.stringContaining('the hub is shutting down')],
          ['init', -32603, expect.stringContaining('the hub is shutting down')],
        ]);
        expect(db.prepare("SELECT request_id AS id, outcome FROM audit WHERE request_id IN ('init', 'disc') ORDER BY request_id").all()).toEqual([
          { id: 'disc', outcome: 'unavailable' },
          { id: 'init', outcome: 'unavailable' },
        ]);
      } finally {
        db.close();
      }
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('a legacy client that does not wait for the initialize answer, and closes stdout first', () => {
  // Recorded unavailable 'the hub is shutting down': a refusal nobody was or could be told, the
  // client gone (calls running then are recorded cancelled since cdd6ff1).
  it('has the requests held behind the initialize recorded cancelled (the client went away), not refused', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-held-gone-'));
    const file = join(d, 'hub.config.json');
    const slow = { command: process.execPath, args: ['-e', 'process.stdin.resume()'] };
    // A line over maxBodyBytes is answered at once, held or not: the write that meets the closed stdout.
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, listen: { maxBodyBytes: 1000 }, servers: { legacy: slow } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
    c.proc.stdin!.on('error', () => undefined);
    try {
      c.send(
        [
          { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'eager', version: '1' } } },
          { jsonrpc: '2.0', method: 'notifications/initialized' },
          { jsonrpc: '2.0', id: 'list', method: 'tools/list' },
          [{ jsonrpc: '2.0', id: 'b1', method: 'tools/list' }],
        ]
          .map((m) => JSON.stringify(m))
          .join('\n'),
      );
      c.proc.stdout!.destroy();
      c.send('x'.repeat(2000));
      expect(await c.exited).toBe(0);
      const rows = await waitForRows(join(d, 'ledger.db'), {}, (r) => ['init', 'list', 'b1'].every((id) => r.some((x) => x.requestId === id)));
      const of = (id: string) => rows.filter((r) => r.requestId === id).map((r) => [r.outcome, r.errorMessage]);
      for (const id of ['init', 'list', 'b1']) expect(of(id), id).toEqual([['cancelled', expect.stringContaining('the client went away')]]);
      // Its log says why it stopped (it said 'stdin closed', stdin still open).
      expect(c.stderr).toMatch(/"reason":"stdout closed".*"msg":"stdio hub stopping"/);
    } finally {
      c.kill();
    }
  }, 40_000);
});

/** `switchyard stdio` over one legacy mutable server (mutable-server.mjs, `mut`, its doc mut://doc). */
function mutableStdio(prefix: string): LineClient {
  const d = mkdtempSync(join(tmpdir(), prefix));
  const file = join(d, 'hub.config.json');
  writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { mut: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', DOC_URI: 'mut://doc' }) } }));
  return new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
}

/** The legacy handshake on a raw line client. */
async function initialize(c: LineClient): Promise<void> {
  await c.request({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
}

// One hub over the mutable server for both blocks below: the second's storm comes after the first's changes.
describe('`switchyard stdio` over a server whose lists change', () => {
  let c: LineClient;
  beforeAll(() => {
    c = mutableStdio('switchyard-stdio-notify-');
  });
  afterAll(() => c?.kill());

  describe('a legacy client of `switchyard stdio`', () => {
    it('may ping before initialize; after it, gets list changes and the updates of what it subscribed to on stdout', async () => {
      expect(await c.request({ jsonrpc: '2.0', id: 'p', method: 'ping' })).toEqual({ jsonrpc: '2.0', id: 'p', result: {} });
      await initialize(c);
      const before = (await c.request({ jsonrpc: '2.0', id: 'l1', method: 'tools/list' })).result.tools.map((t: Json) => t.name);
      expect(await c.request({ jsonrpc: '2.0', id: 's', method: 'resources/subscribe', params: { uri: 'mut://doc' } })).toMatchObject({ result: {} });

      await c.request({ jsonrpc: '2.0', id: 'm', method: 'tools/call', params: { name: 'mut__mutate', arguments: { op: 'add', def: { name: 'added', description: 'Added at run time', inputSchema: { type: 'object' } } } } });
      await c.next((m) => m.method === 'notifications/tools/list_changed');
      const after = (await c.request({ jsonrpc: '2.0', id: 'l2', method: 'tools/list' })).result.tools.map((t: Json) => t.name);
      expect(after).toEqual([...before, 'mut__added']);

      await c.request({ jsonrpc: '2.0', id: 't', method: 'tools/call', params: { name: 'mut__touch', arguments: { uri: 'mut://doc' } } });
      expect((await c.next((m) => m.method === 'notifications/resources/updated')).params).toEqual({ uri: 'mut://doc' });
    }, 30_000);
  });

  describe('an upstream storm of list_changed', () => {
    it('reaches a client as a few notifications, the last after the storm', async () => {
      // On the session of the case above (initialized, its tools listed).
      await c.request({ jsonrpc: '2.0', id: 'l', method: 'tools/list' });
      const from = c.received.length;
      const r = await c.request({ jsonrpc: '2.0', id: 'storm', method: 'tools/call', params: { name: 'mut__mutate', arguments: { op: 'storm', n: 500 } } });
      expect(r.result.content[0].text).toBe('stormed');
      await new Promise((res) => setTimeout(res, 1_500));
      const heard = c.received.slice(from).filter((m) => m.method === 'notifications/tools/list_changed').length;
      expect(heard).toBeGreaterThanOrEqual(1);
      expect(heard).toBeLessThanOrEqual(8);
      // And the hub of both ends as ever at stdin EOF.
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(c.nonProtocolLines).toEqual([]);
    }, 30_000);
  });
});

describe("a plugin's console output in stdio mode", () => {
  it('goes to stderr: stdout stays the protocol channel', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-console-'));
    const plugin = join(d, 'chatty.mjs');
    writeFileSync(
      plugin,
      [
        "import nodeConsole from 'node:console';",
        "import { Console } from 'node:console';",
        "const own = new Console(process.stdout);",
        "console.log('chatty loaded');",
        "export default () => ({ name: 'chatty', onList(ctx) { console.info('chatty listed', ctx.items.length); }, beforeCall(ctx) {",
        "  console.log('chatty call', ctx.tool.hubName); console.dir({ chatty: true }); console.table([{ chatty: 1 }]);",
        // Around consoleToStderr: a console of its own on stdout, the one node:console exports, stdout itself.
        "  own.log('chatty own console'); nodeConsole.log('chatty node:console'); process.stdout.write('chatty raw write\\n');",
        '} });',
      ].join('\n'),
    );
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', writeConfig(d, { plugins: { paths: [plugin] } })], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      const r = await c.request({ jsonrpc: '2.0', id: 'c', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'quiet' }, _meta: META } });
      expect(r.result.content[0].text).toBe('echo:quiet');
      expect(c.stderr).toContain('chatty loaded');
      expect(c.stderr).toContain('chatty call modern__echo');
      for (const line of ['chatty own console', 'chatty node:console', 'chatty raw write']) expect(c.stderr).toContain(line);
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 30_000);
});

describe('a 2025-03-26 client sending a JSON-RPC batch over stdio', () => {
  const start = (d: string) => new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', writeConfig(d)], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
  /** The first batch answer among the lines past the first `from` that were no single message. */
  const batchLine = async (c: LineClient, timeoutMs = 15_000, from = 0): Promise<Json[]> => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const line = c.nonProtocolLines.slice(from).find((l) => l.startsWith('['));
      if (line) return JSON.parse(line) as Json[];
      if (Date.now() > until) throw new Error(`no batch answer; stderr: ${c.stderr.slice(-1000)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  // One hub and session at 2025-03-26 for the two cases below (the second checks the hub lives on).
  let c: LineClient;
  let d: string;
  let init: Json;
  beforeAll(async () => {
    d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-batch-'));
    c = start(d);
    init = await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'batcher', version: '1' } } }, 30_000);
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  }, 40_000);
  afterAll(() => c?.kill());

  it('gets the answers of its members together, as one line holding their array; a batch holding an initialize is refused whole', async () => {
    expect(init.result.protocolVersion).toBe('2025-03-26');
    const from = c.nonProtocolLines.length;
    c.send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'one' } } },
        { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'legacy__add', arguments: { a: 2, b: 3 } } },
        { jsonrpc: '2.0', id: 'b3', method: 'tools/list' },
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } },
      ]),
    );
    const answers = await batchLine(c, 30_000, from);
    const byId = new Map(answers.map((m) => [m.id, m]));
    expect([...byId.keys()].sort()).toEqual(['b1', 'b2', 'b3']);
    expect(byId.get('b1')!.result.content[0].text).toBe('echo:one');
    // 2025-03-26 has no structuredContent: the text the tool wrote it in is what it gets.
    expect(byId.get('b2')!.result).toEqual({ content: [{ type: 'text', text: '5' }] });
    expect(byId.get('b3')!.result.tools.length).toBe(10);
    c.send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'i1', method: 'ping' },
        { jsonrpc: '2.0', id: 'i2', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'again', version: '1' } } },
      ]),
    );
    const refused = await c.next((m) => m.error?.code === -32600 && /initialize/.test(m.error.message));
    expect(refused.id).toBeUndefined();
    expect(c.received.some((m) => m.id === 'i1')).toBe(false);
    // Each request of the batch refused whole has its row, under its own id.
    for (const [id, method] of [['i1', 'ping'], ['i2', 'initialize']]) {
      const rows = await waitForRows(join(d, 'ledger.db'), { 'request-id': id });
      expect(rows.map((r) => [r.method, r.outcome]), id).toEqual([[method, 'rpc_error']]);
    }
    // The session is the one it had: a plain request still works in it.
    const after = await c.request({ jsonrpc: '2.0', id: 'after', method: 'tools/list' });
    expect(after.result.tools.length).toBe(10);
  }, 40_000);

  it('a member nested deeper than JSON.stringify can go (outside params) is answered with the others; the hub lives on', async () => {
    const from = c.nonProtocolLines.length;
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    c.send(`[{"jsonrpc":"2.0","id":"d1","method":"ping","extra":${deep}},{"jsonrpc":"2.0","id":"d2","method":"ping"}]`);
    const answers = await batchLine(c, 30_000, from);
    expect(answers).toEqual([
      { jsonrpc: '2.0', id: 'd1', result: {} },
      { jsonrpc: '2.0', id: 'd2', result: {} },
    ]);
    const after = await c.request({ jsonrpc: '2.0', id: 'after-deep', method: 'tools/list' });
    expect(after.result.tools.length).toBe(10);
    expect(c.stderr).not.toContain('Maximum call stack');
    expect(c.proc.exitCode).toBeNull();
  }, 40_000);

  it('a client at 2025-11-25 still gets -32600 for a batch', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-nobatch-'));
    const c = start(d);
    try {
      await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'late', version: '1' } } }, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify([{ jsonrpc: '2.0', id: 'nb1', method: 'tools/list' }]));
      const err = await c.next((m) => m.error?.code === -32600 && /batch/.test(m.error.message));
      expect(err.id).toBeUndefined();
      const rows = await waitForRows(join(d, 'ledger.db'), { 'request-id': 'nb1' });
      expect(rows.map((r) => [r.method, r.outcome])).toEqual([['tools/list', 'rpc_error']]);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('policy.rateLimit over stdio', () => {
  it('holds the pipe to the rate limits as the HTTP edge holds its clients: over one, an error and a denied row, and the upstream is not called', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-ratelimit-'));
    const file = writeConfig(d, { policy: { rateLimit: { tools: { 'modern__counter_*': { burst: 2, perSecond: 0.001 } } } } });
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const bump = (id: string) => c.request({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'modern__counter_bump', arguments: { label: id }, _meta: META } }, 30_000);
    try {
      expect((await bump('b1')).result?.isError).toBeUndefined();
      expect((await bump('b2')).result?.isError).toBeUndefined();
      const over = await bump('b3');
      expect(over.error).toEqual({ code: -32600, message: expect.stringMatching(/^Too Many Requests: the rate limit of modern__counter_bump for local is exhausted; retry in \d+ s$/) });
      // Another tool has its own bucket.
      const echo = await c.request({ jsonrpc: '2.0', id: 'e1', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'x' }, _meta: META } });
      expect(echo.result.content[0].text).toBe('echo:x');
      // A request and its cancellation in one write: the request waits its turn at the limits,
      // the cancellation comes meanwhile and still holds: the upstream never runs it (either era).
      const sendCancelled = (id: string, params: Json) =>
        c.send(`${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params })}\n${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } })}`);
      sendCancelled('c1', { name: 'legacy__counter_bump', arguments: { label: 'c1' }, _meta: META });
      const init = await c.request({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      expect(init.result.protocolVersion).toBe('2025-11-25');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      sendCancelled('c2', { name: 'legacy__counter_bump', arguments: { label: 'c2' } });
      const last = await c.request({ jsonrpc: '2.0', id: 'e2', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'y' } } });
      expect(last.result.content[0].text).toBe('echo:y');
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(c.received.filter((m) => m.id === 'c1' || m.id === 'c2')).toEqual([]);
      const db = new Database(join(d, 'ledger.db'), { readonly: true });
      try {
        expect(db.prepare("SELECT request_id AS id, outcome, error_code AS code FROM audit WHERE method = 'tools/call' ORDER BY id").all()).toEqual([
          { id: 'b1', outcome: 'ok', code: null },
          { id: 'b2', outcome: 'ok', code: null },
          { id: 'b3', outcome: 'denied', code: 429 },
          { id: 'c1', outcome: 'cancelled', code: null },
          { id: 'c2', outcome: 'cancelled', code: null },
          { id: 'e1', outcome: 'ok', code: null },
          { id: 'e2', outcome: 'ok', code: null },
        ]);
        // Refused with no traceparent, it is in a trace the hub started, as over HTTP (security-ratelimit).
        expect(db.prepare("SELECT length(trace_id) AS t, length(span_id) AS s, parent_span_id AS p FROM audit WHERE request_id = 'b3'").get()).toEqual({ t: 32, s: 16, p: null });
      } finally {
        db.close();
      }
      // Two bumps ran, not three; the cancelled ones never.
      const counts = JSON.parse(readFileSync(join(d, 'counter.json'), 'utf8')) as Json;
      expect(counts).toMatchObject({ b1: 1, b2: 1 });
      expect([counts.b3, counts.c1, counts.c2]).toEqual([undefined, undefined, undefined]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('a client that goes on sending while `switchyard stdio` stops', () => {
  // The requests read after hub.stop() closed the ledger were answered (refused) but had no row
  // ('audit row not written' logged for each): stdin is read no further once the ledger closes.
  it('has a row for every request it was answered, up to the exit', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-stop-rows-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, listen: { drainTimeoutMs: 100 }, servers: {} }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    c.proc.stdin!.on('error', () => undefined);
    let n = 0;
    let gone = false;
    void c.exited.then(() => (gone = true));
    try {
      await c.request({ jsonrpc: '2.0', id: 'p0', method: 'ping' });
      // Ping-pong until the exit: each answer brings the next request.
      const next = (): void => {
        if (gone || !c.proc.stdin!.writable) return;
        c.send(JSON.stringify({ jsonrpc: '2.0', id: `p${++n}`, method: 'ping' }));
        void c.next((m) => m.id === `p${n}`, 20_000).then(next, () => undefined);
      };
      next();
      await c.next((m) => m.id === 'p3');
      c.proc.kill('SIGTERM');
      expect(await c.exited).toBe(0);
      const answered = c.received.filter((m) => /^p\d+$/.test(String(m.id))).map((m) => String(m.id));
      expect(answered.length).toBeGreaterThan(3);
      const db = new Database(join(d, 'ledger.db'), { readonly: true });
      try {
        const rows = new Set((db.prepare("SELECT request_id AS id FROM audit WHERE method = 'ping'").all() as Json[]).map((r) => String(r.id)));
        expect(answered.filter((id) => !rows.has(id))).toEqual([]);
      } finally {
        db.close();
      }
      expect(c.stderr).not.toContain('audit row not written');
    } finally {
      c.kill();
    }
  }, 20_000);
});

describe('a client that closes stdout while `switchyard stdio` stops, and then sends a request', () => {
  // The refusal was the first write to meet the closed stdout (EPIPE): the client never saw it,
  // yet its row said unavailable, as one the client was told.
  it('has it recorded cancelled (the client went away), not refused', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-unheard-'));
    const file = join(d, 'hub.config.json');
    // A server that takes 800 ms to go once its stdin ends: the stop is long enough to read
    // what the client sends meanwhile.
    const stubborn = { command: process.execPath, args: ['-e', "process.stdin.on('end', () => setTimeout(() => process.exit(0), 800)); process.stdin.resume()"] };
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, listen: { drainTimeoutMs: 100 }, servers: { stubborn } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    c.proc.stdin!.on('error', () => undefined);
    try {
      await c.request({ jsonrpc: '2.0', id: 'p0', method: 'ping' });
      c.proc.kill('SIGTERM');
      // Stopped: a request now is refused.
      for (let i = 1; ; i++) {
        const m = await c.request({ jsonrpc: '2.0', id: `p${i}`, method: 'ping' });
        if (m.error) break;
      }
      c.proc.stdout!.destroy();
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'late', method: 'ping' }));
      expect(await c.exited).toBe(0);
      const rows = await waitForRows(join(d, 'ledger.db'), {}, (r) => r.some((x) => x.requestId === 'late'));
      expect(rows.filter((r) => r.requestId === 'late').map((r) => [r.outcome, r.errorMessage])).toEqual([['cancelled', expect.stringContaining('the client went away')]]);
    } finally {
      c.kill();
    }
  }, 30_000);
});

describe('a legacy client that closes stdin while the hub waits for its answer to a question', () => {
  // Its stdin was the only way an answer could come, yet the question stayed open: the call
  // waited out the whole drain (listen.drainTimeoutMs) and was then ended as the hub stopping
  // (`unavailable`), however long the drain. Now the question is withdrawn at EOF and the call
  // ends at once, recorded cancelled (the client went away).
  it('has the question withdrawn and its call ended at once, not held for the drain', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-eof-ask-'));
    const file = join(d, 'hub.config.json');
    const servers = {
      everything: { command: join(ROOT, 'node_modules/.bin/mcp-server-everything'), args: ['stdio'] },
      modern: nodeServer('test/fixtures/translation/ask-all-modern.mjs'),
    };
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, listen: { drainTimeoutMs: 60_000 }, servers }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      const caps = { sampling: {}, elicitation: {} };
      await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: caps, clientInfo: { name: 'leaver', version: '1' } } }, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      // A legacy server's request relayed (sampling), and a modern server's input_required turned into one (elicitation).
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'legacy', method: 'tools/call', params: { name: 'everything__trigger-sampling-request', arguments: { prompt: 'hi' } } }));
      const sampling = await c.next((m) => m.method === 'sampling/createMessage', 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'modern', method: 'tools/call', params: { name: 'modern__write', arguments: { key: 'k' } } }));
      const elicit = await c.next((m) => m.method === 'elicitation/create', 30_000);
      const t0 = Date.now();
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(20_000);
      const withdrawn = c.received.filter((m) => m.method === 'notifications/cancelled').map((m) => m.params.requestId);
      expect(withdrawn.sort()).toEqual([sampling.id, elicit.id].sort());
      for (const id of ['legacy', 'modern']) expect(c.received.find((m) => m.id === id)?.error?.message, id).toMatch(/closed its input/);
      const rows = await waitForRows(join(d, 'ledger.db'), { method: 'tools/call' }, (r) => r.length === 2);
      expect(rows.map((r) => [r.requestId, r.outcome, r.errorMessage]).sort()).toEqual([
        ['legacy', 'cancelled', expect.stringMatching(/closed its input/)],
        ['modern', 'cancelled', expect.stringMatching(/closed its input/)],
      ]);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 90_000);

  it('still takes the answer the client wrote last, without its newline, right before EOF', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-eof-answer-'));
    const file = join(d, 'hub.config.json');
    const servers = { everything: { command: join(ROOT, 'node_modules/.bin/mcp-server-everything'), args: ['stdio'] } };
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { sampling: {} }, clientInfo: { name: 'last-word', version: '1' } } }, 30_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'ask', method: 'tools/call', params: { name: 'everything__trigger-sampling-request', arguments: { prompt: 'hi' } } }));
      const q = await c.next((m) => m.method === 'sampling/createMessage', 30_000);
      c.proc.stdin!.end(JSON.stringify({ jsonrpc: '2.0', id: q.id, result: { role: 'assistant', content: { type: 'text', text: 'parting words' }, model: 'm' } }));
      expect(await c.exited).toBe(0);
      expect(JSON.stringify(c.received.find((m) => m.id === 'ask')?.result)).toContain('parting words');
      expect(c.received.filter((m) => m.method === 'notifications/cancelled')).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});
