/**
 * `switchyard connect`: the official clients spawn the real built binary as a stdio server,
 * and it bridges them to a running daemon over HTTP. A legacy client (SDK v1) gets a session,
 * server notifications on the GET stream, and the session is deleted at EOF; a modern client
 * (SDK v2, auto negotiation) gets the mirrored headers right, so the daemon accepts its calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';
import { spawn } from 'node:child_process';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { sha256Hex } from '../helpers/auth.js';
import { setSection } from '../helpers/config-edit.js';
import { metricValue, scrape } from '../helpers/prometheus.js';
import { freePortInRange } from '../helpers/port-range.js';
import { join } from 'node:path';
import { waitForRows } from './ledger-helpers.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';

let hub: HubProcess;

const bridgeParams = (extra: string[] = []) => ({
  command: process.execPath,
  args: [BIN, 'connect', '--url', hub.url, ...extra],
  env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } as Record<string, string>,
  cwd: ROOT,
  stderr: 'pipe' as const,
});

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  hub = await startHub({
    servers: {
      legacy: nodeServer(SDK1),
      modern: nodeServer(SDK2),
      crashy: { ...nodeServer('test/fixtures/quirks/crash-mid-call.mjs'), era: '2025-11-25' },
      // Its tools ask the client (elicitation) during the call.
      tl: nodeServer('test/fixtures/translation/legacy-server.mjs'),
      // A tool asking clients to mirror its argument in Mcp-Param-Text.
      hdr: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], {
        ERA: 'modern',
        TOOLS: JSON.stringify([{ name: 'echo', description: 'Echo', inputSchema: { type: 'object', properties: { text: { type: 'string', 'x-mcp-header': 'Text' } } } }]),
      }),
    },
  });
  await waitFor(async () => {
    const h = (await (await fetch(hub.url.replace('/mcp', '/healthz'))).json()) as { servers: { state: string }[] };
    return h.servers.every((s) => s.state === 'ready');
  }, 20_000);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

describe('connect bridges a legacy client (SDK v1)', () => {
  it('lists and calls, receives notifications on the GET stream, and ends its session at EOF', async () => {
    const client = new ClientV1({ name: 'bridge-v1', version: '1.0.0' });
    const changed: string[] = [];
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void changed.push(n.method));
    await client.connect(new StdioV1(bridgeParams()));
    expect(client.getServerVersion()?.name).toBe('switchyard');

    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['legacy__echo', 'modern__echo', 'crashy__crash']));
    expect((await client.callTool({ name: 'modern__echo', arguments: { text: 'bridged' } })).content).toEqual([{ type: 'text', text: 'echo:bridged' }]);
    const progress: number[] = [];
    const slow = await client.callTool({ name: 'legacy__slow', arguments: { ms: 350 } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
    expect(slow.content).toEqual([{ type: 'text', text: 'slept 350' }]);
    expect(progress.length).toBeGreaterThan(0);

    // The hub now holds one legacy session for this bridge.
    expect(metricValue(await scrape(hub.url), 'switchyard_open_sessions')).toBe(1);

    // An upstream crash is a list change: it reaches the client on its session's GET stream.
    const crashed = await client.callTool({ name: 'crashy__crash', arguments: {} });
    expect(crashed.isError).toBe(true);
    await waitFor(async () => changed.length > 0);
    expect(changed[0]).toBe('notifications/tools/list_changed');

    await client.close();
    // EOF on the bridge's stdin → DELETE: the daemon forgets the session.
    await waitFor(async () => metricValue(await scrape(hub.url), 'switchyard_open_sessions') === 0);
  });

  it('passes a 2025-03-26 batch to the hub and its answers back as one line holding their array, as `stdio` does; at 2025-11-25 the hub refuses it', async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const init = (id: string, v: string) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: v, capabilities: {}, clientInfo: { name: 'batcher', version: '1' } } });
    /** The first line past the first `from` that was no single message, as the array it holds. */
    const arrayLine = async (from: number): Promise<Record<string, any>[]> => {
      await waitFor(async () => c.nonProtocolLines.slice(from).some((l) => l.startsWith('[')));
      return JSON.parse(c.nonProtocolLines.slice(from).find((l) => l.startsWith('['))!);
    };
    try {
      expect((await c.request(init('i', '2025-03-26'))).result.protocolVersion).toBe('2025-03-26');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(
        JSON.stringify([
          { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'one' } } },
          { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 250 }, _meta: { progressToken: 'p2' } } },
          { jsonrpc: '2.0', id: 'b3', method: 'ping' },
          { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } },
        ]),
      );
      const answers = await arrayLine(0);
      const byId = new Map(answers.map((m) => [m.id, m]));
      expect([...byId.keys()].sort()).toEqual(['b1', 'b2', 'b3']);
      expect(byId.get('b1')!.result.content[0].text).toBe('echo:one');
      expect(byId.get('b2')!.result.content[0].text).toBe('slept 250');
      expect(byId.get('b3')!.result).toEqual({});
      // What a member streams comes on lines of its own, before the answers.
      expect(c.received.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'p2').length).toBeGreaterThan(0);
      expect(c.received.filter((m) => typeof m.id === 'string' && m.id.startsWith('b'))).toEqual([]);
      // A batch of notifications only is taken with no answer; the session goes on.
      c.send(JSON.stringify([{ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'y', progress: 1 } }]));
      expect((await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' })).result).toEqual({});
      // Once the client starts over at 2025-11-25, the hub (not the bridge) refuses a batch, as over HTTP.
      expect((await c.request(init('j', '2025-11-25'))).result.protocolVersion).toBe('2025-11-25');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify([{ jsonrpc: '2.0', id: 'late', method: 'ping' }]));
      const refused = await c.next((m) => m.error?.code === -32600);
      expect(refused.id).toBeUndefined();
      expect(c.nonProtocolLines.filter((l) => l.startsWith('['))).toHaveLength(1);
      // EOF: the bridge ends its session (DELETE), so the daemon holds none of it for later tests.
      c.endInput();
      expect(await c.exited).toBe(0);
    } finally {
      c.kill();
    }
  });
});

describe('connect bridges a modern client (SDK v2, auto negotiation)', () => {
  it('negotiates the modern era through the bridge and calls tools of both upstream eras', async () => {
    const client = new ClientV2({ name: 'bridge-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(new StdioV2(bridgeParams()));
    try {
      expect(client.getProtocolEra()).toBe('modern');
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining(['legacy__add', 'modern__add']));
      for (const name of ['legacy__add', 'modern__add']) {
        const r = await client.callTool({ name, arguments: { a: 20, b: 22 } });
        expect(r.structuredContent).toEqual({ sum: 42 });
      }
      const prompt = await client.getPrompt({ name: 'modern__greet', arguments: { name: 'zoe' } });
      expect(prompt.messages[0].content).toEqual({ type: 'text', text: 'Hello, zoe!' });
      const res = await client.readResource({ uri: 'sdk1://item/9' });
      expect(res.contents[0]).toMatchObject({ text: 'item 9' });
      // Modern requests are stateless: the bridge opened no session.
      expect(metricValue(await scrape(hub.url), 'switchyard_open_sessions')).toBe(0);
    } finally {
      await client.close();
    }
  });

  it('sends nothing for a request the legacy client cancelled, and tells a string id from a number', async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      await c.request({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'cancel', version: '1' } } });
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 1500 } } }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: '5', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 300 } } }));
      await new Promise((r) => setTimeout(r, 300));
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5, reason: 'user' } }));
      // The string id's call is not the one cancelled: it is answered.
      expect((await c.next((m) => m.id === '5')).result.content[0].text).toBe('slept 300');
      await new Promise((r) => setTimeout(r, 2_000));
      expect(c.received.filter((m) => m.id === 5)).toEqual([]);
    } finally {
      c.kill();
    }
  });

  it("closes a modern request's stream on a cancel that carries no _meta: nothing is sent for it", async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    try {
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 1500 }, _meta: meta } }));
      await new Promise((r) => setTimeout(r, 300));
      // A cancel needs no _meta (the hub's own stdio client sends none).
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'slow' } }));
      const after = await c.request({ jsonrpc: '2.0', id: 'after', method: 'tools/call', params: { name: 'modern__echo', arguments: { text: 'z' }, _meta: meta } });
      expect(after.result.content[0].text).toBe('echo:z');
      await new Promise((r) => setTimeout(r, 1_800));
      expect(c.received.filter((m) => m.id === 'slow')).toEqual([]);
      expect(c.stderr).not.toMatch(/refused a notification/);
    } finally {
      c.kill();
    }
  });

  it("mirrors a tool's x-mcp-header argument it had not seen listed: refused once for the header, it learns the tools and sends the call again", async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    try {
      const r = await c.request({ jsonrpc: '2.0', id: 'hdr', method: 'tools/call', params: { name: 'hdr__echo', arguments: { text: 'mirrored' }, _meta: meta } });
      expect(r.error).toBeUndefined();
      expect(r.result.content[0].text).toMatch(/^echo:mirrored/);
    } finally {
      c.kill();
    }
  });

  it('opens a new session for a second initialize (the client starting over), not one the hub refuses', async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const init = (id: number) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'again', version: '1' } } });
    try {
      expect((await c.request(init(1))).result.protocolVersion).toBe('2025-11-25');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const again = await c.request(init(2));
      expect(again.error).toBeUndefined();
      expect(again.result.protocolVersion).toBe('2025-11-25');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const r = await c.request({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'again' } } });
      expect(r.result.content[0].text).toBe('echo:again');
    } finally {
      c.kill();
    }
  });

  it('answers a ping before initialize, as `stdio` does (the daemon has no session to put it in)', async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      expect(await c.request({ jsonrpc: '2.0', id: 'early', method: 'ping' })).toEqual({ jsonrpc: '2.0', id: 'early', result: {} });
      await c.request({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'pinger', version: '1' } } });
      // In the session, the daemon answers it.
      expect((await c.request({ jsonrpc: '2.0', id: 'later', method: 'ping' })).result).toEqual({});
    } finally {
      c.kill();
    }
  });

  it('reads a first line behind a byte order mark, as `stdio` does (a Windows tool writes one)', async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      const answer = c.next((m) => m.id === 'bom');
      c.proc.stdin!.write(`\ufeff${JSON.stringify({ jsonrpc: '2.0', id: 'bom', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bom', version: '1' } } })}\r\n`);
      expect((await answer).result?.protocolVersion).toBe('2025-11-25');
      expect(c.received.filter((m) => m.error)).toEqual([]);
    } finally {
      c.kill();
    }
  });

  it("answers what the old session still owes before a second initialize's answer, as `stdio` does; nothing more for it after", async () => {
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const init = (id: string) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'owed', version: '1' } } });
    try {
      await c.request(init('i1'));
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 20_000 }, _meta: { progressToken: 'p' } } }));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'p', 20_000);
      const again = await c.request(init('i2'));
      const owed = c.received.findIndex((m) => m.id === 1 && m.method === undefined);
      expect(owed, 'the old call answered').toBeGreaterThanOrEqual(0);
      expect(owed).toBeLessThan(c.received.indexOf(again));
      expect(c.received[owed]!.error?.message).toContain('the client sent initialize again');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      // The old session's end (its DELETE) answers the old call at the daemon: not passed on.
      const answered = c.next((m) => m.id === 1 && m.result !== undefined, 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'new' } } }));
      expect((await answered).result.content[0].text).toBe('echo:new');
      await c.request({ jsonrpc: '2.0', id: 'settle', method: 'ping' });
      expect(c.received.filter((m) => m.id === 1 && m.method === undefined)).toHaveLength(2);
    } finally {
      c.kill();
    }
  }, 60_000);

  it("takes the daemon's address alone for its /mcp endpoint, and says what to fix on a 404 of another path", async () => {
    const origin = new URL(hub.url).origin;
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'base', version: '1' } } };
    const base = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', origin], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      expect((await base.request(init)).result.protocolVersion).toBe('2025-11-25');
    } finally {
      base.kill();
    }
    const wrong = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', `${origin}/api`], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    try {
      const r = await wrong.request(init);
      expect(r.error.message).toContain(`(is --url the hub's MCP endpoint? it ends in /mcp, or /mcp/<group>: ${origin}/mcp)`);
    } finally {
      wrong.kill();
    }
  });

  it('answers a request with an error when the daemon is not there', async () => {
    const client = new ClientV1({ name: 'bridge-nowhere', version: '1.0.0' });
    const params = bridgeParams();
    params.args = [BIN, 'connect', '--url', 'http://127.0.0.1:1/mcp'];
    await expect(client.connect(new StdioV1(params))).rejects.toThrow(/not reachable/);
    await client.close();
  });

  // It exited 0 however the session went: an IDE's log showed a server that ended normally.
  // Then 1, where every other command that finds no daemon exits 3 (README, exit codes).
  it('exits 3, saying why and what to do, when the daemon was never reachable; 0 once it answered', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'exit', version: '1' } } };
    const run = async (url: string) => {
      const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
      try {
        const r = await c.request(init);
        c.proc.stdin!.end();
        return { r, code: await c.exited, stderr: c.stderr };
      } finally {
        c.kill();
      }
    };
    const nowhere = await run('http://127.0.0.1:1/mcp');
    expect(nowhere.r.error.message).toMatch(/not reachable/);
    expect(nowhere.code).toBe(3);
    expect(nowhere.stderr).toMatch(/switchyard connect: no switchyard daemon answered at http:\/\/127\.0\.0\.1:1\/mcp \(.*ECONNREFUSED.*\): start one \(switchyard start\), or give its endpoint with --url or SWITCHYARD_URL\n/);
    const there = await run(hub.url);
    expect(there.r.result.protocolVersion).toBe('2025-11-25');
    expect(there.code).toBe(0);
    expect(there.stderr).not.toContain('no switchyard daemon');
  });

  // The address was echoed whole in every error to the client, a password or token in it too.
  it('never shows a password or token of --url in its errors or logs', async () => {
    // The first has no path: the bridge logs the endpoint it uses instead.
    for (const url of ['http://user:s3cretPW@127.0.0.1:1', 'http://127.0.0.1:1/mcp?token=QSECRETTOKEN']) {
      const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'info' } }));
      try {
        const r = await c.request({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
        expect(r.error.message, url).toMatch(/^the hub at http:\/\/\S*\[redacted[^\]]*\]\S* is not reachable/);
        expect(JSON.stringify(r), url).not.toMatch(/s3cretPW|QSECRETTOKEN/);
      } finally {
        c.kill();
      }
      if (url.includes('s3cret')) expect(c.stderr).toContain('using the hub endpoint /mcp');
      expect(c.stderr, url).not.toMatch(/s3cretPW|QSECRETTOKEN/);
    }
  });
});

describe("connect and the hub's questions to a legacy client", () => {
  const connect = () => new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
  async function asked(c: LineClient, who: string): Promise<Record<string, any>> {
    await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: {} }, clientInfo: { name: who, version: '1' } } });
    c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    c.send(JSON.stringify({ jsonrpc: '2.0', id: 'call', method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who } } }));
    return c.next((m) => m.method === 'elicitation/create' && String(m.params?.message).includes(who), 20_000);
  }

  // As `switchyard stdio` does: the answer could only come on stdin. The call waited out the
  // bridge's 5 s drain, unanswered, and was then ended by the session's DELETE.
  it('at stdin EOF ends the call waiting for its answer at once: answered with the reason, recorded cancelled', async () => {
    const c = connect();
    try {
      await asked(c, 'eof-asked');
      const t0 = Date.now();
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(4_500);
      expect(c.received.find((m) => m.id === 'call')?.error?.message).toBe('the client closed its input (stdin) while it was asked elicitation/create, so no answer can come');
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: 'tl__elicit_form' }, (r) => r.some((x) => x.requestId === 'call' && x.outcome !== 'in_flight'));
      expect(rows.filter((r) => r.requestId === 'call').map((r) => [r.outcome, r.errorMessage])).toEqual([['cancelled', expect.stringContaining('closed its input')]]);
    } finally {
      c.kill();
    }
  }, 30_000);

  // As `switchyard stdio` writes it: dropped with the rest of what came for the cancelled call,
  // the client was left with the question open.
  it('passes on the withdrawal of a question whose call the client cancelled, and nothing else for that call', async () => {
    const c = connect();
    try {
      const q = await asked(c, 'cancelled-call');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'call', reason: 'user' } }));
      const withdrawn = await c.next((m) => m.method === 'notifications/cancelled' && m.params?.requestId === q.id, 20_000);
      expect(withdrawn.params.reason).toBe('the call that asked ended');
      const pong = await c.request({ jsonrpc: '2.0', id: 'ping', method: 'ping' });
      expect(pong.result).toEqual({});
      expect(c.received.filter((m) => m.id === 'call')).toEqual([]);
    } finally {
      c.kill();
    }
  }, 30_000);

  it("passes on a line of only the question's id, the client's malformed answer: refused -32600, the question fails at once", async () => {
    const c = connect();
    try {
      const q = await asked(c, 'id-only');
      c.send(JSON.stringify({ jsonrpc: '2.0', id: q.id }));
      const final = await c.next((m) => m.id === 'call' && m.method === undefined, 20_000);
      expect(JSON.stringify(final.result), JSON.stringify(final)).toContain('the client answered elicitation/create with an invalid response: it has neither a result nor an error');
      expect(c.received.filter((m) => m.id === q.id && m.method === undefined).map((m) => m.error?.code)).toEqual([-32600]);
      expect(c.stderr).not.toContain('refused');
    } finally {
      c.kill();
    }
  }, 30_000);
});

describe('connect and a client that stopped reading', () => {
  it('exits on SIGTERM a few seconds later though its stdout is full, and at once on a second signal', async () => {
    const run = async (signals: number) => {
      const name = `noread-${signals}`;
      // The unsent answers are given up after SWITCHYARD_STDOUT_FLUSH_MS (3 s by default): 500 ms
      // for one signal; 20 s for two, so the second finds it still waiting however loaded the
      // machine (500 ms could run out before it came), and only that signal ends it within 10 s.
      const flushMs = signals === 1 ? '500' : '20000';
      const p = spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn', SWITCHYARD_STDOUT_FLUSH_MS: flushMs }, stdio: ['pipe', 'pipe', 'pipe'] });
      p.stdout!.pause(); // never read: the pipe fills up
      p.stdin!.on('error', () => undefined); // requests still unread when it exits (EPIPE)
      let stderr = '';
      p.stderr!.on('data', (d) => (stderr += d));
      const exited = new Promise<{ code: number | null; ms: number }>((r) => p.once('exit', (code) => r({ code, ms: Date.now() - killedAt })));
      let killedAt = 0;
      const send = (m: object) => p.stdin!.write(JSON.stringify(m) + '\n');
      send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '1' } } });
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      const big = 'x'.repeat(512 * 1024);
      for (let i = 0; i < 8; i++) send({ jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: big } } });
      // An answer (bigger than the pipe's buffer) has left the hub for the bridge, which cannot pass it on.
      await waitFor(async () => {
        const r = (await (await fetch(hub.url.replace('/mcp', `/admin/ledger?client=${name}&method=tools/call&limit=100`))).json()) as { rows: unknown[] };
        return r.rows.length > 0;
      });
      // The bridge has written as much as the pipe and this end's paused stream take: what it
      // still holds it cannot write (a fixed wait here lost the race on a loaded machine).
      await waitFor(async () => p.stdout!.readableLength >= p.stdout!.readableHighWaterMark);
      await new Promise((r) => setTimeout(r, 300));
      killedAt = Date.now();
      p.kill('SIGTERM');
      if (signals === 2) {
        await new Promise((r) => setTimeout(r, 300));
        p.kill('SIGTERM');
      }
      const timer = setTimeout(() => p.kill('SIGKILL'), 15_000);
      const { code, ms } = await exited;
      clearTimeout(timer);
      return { code, ms, stderr };
    };
    const once = await run(1);
    expect(once.code).toBe(0);
    expect(once.ms).toBeLessThan(8_000);
    expect(once.stderr).toContain('stdout not read by the client');
    const twice = await run(2);
    expect(twice.code).toBe(1);
    // At once, where the flush would take 20 s; a fixed 2 s could run out on a starved machine.
    expect(twice.ms).toBeLessThan(10_000);
  }, 60_000);
  it('reads no more requests while its stdout is full, and answers every one once the client reads again', async () => {
    const name = 'slow-reader';
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const rows = async () =>
      ((await (await fetch(hub.url.replace('/mcp', `/admin/ledger?client=${name}&method=tools/call&limit=100`))).json()) as { rows: unknown[] }).rows.length;
    try {
      expect((await c.request({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '1' } } })).result).toBeDefined();
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.proc.stdout!.pause(); // the client stops reading
      c.proc.stdin!.on('error', () => undefined);
      const big = 'x'.repeat(256 * 1024);
      for (let i = 0; i < 40; i++) c.send(JSON.stringify({ jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: big } } }));
      await waitFor(async () => (await rows()) > 0);
      await new Promise((r) => setTimeout(r, 3_000));
      // A few answers fill the pipe and the bridge's buffer; the rest wait unread in stdin.
      expect(await rows()).toBeLessThan(40);
      c.proc.stdout!.resume();
      for (let i = 0; i < 40; i++) expect((await c.next((m) => m.id === 10 + i, 30_000)).result.content[0].text).toBe(`echo:${big}`);
      expect(await rows()).toBe(40);
      expect(c.nonProtocolLines).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});

describe('connect input handling', () => {
  it('rejects a URL that is not http(s)', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.execPath, [BIN, 'connect', '--url', 'ftp://x/mcp'], { cwd: ROOT, input: '', encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/must be an http\(s\) URL/);
    expect(r.stdout).toBe('');
  });

  it('names SWITCHYARD_URL, not --url, when the address that is no URL came from it', async () => {
    const { spawnSync } = await import('node:child_process');
    const env = (url: string) => ({ ...process.env, SWITCHYARD_URL: url, SWITCHYARD_LOG_LEVEL: 'warn' });
    for (const url of ['127.0.0.1:7410/mcp', '']) {
      const r = spawnSync(process.execPath, [BIN, 'connect'], { cwd: ROOT, input: '', encoding: 'utf8', env: env(url) });
      expect([r.status, r.stdout, r.stderr]).toEqual([2, '', `switchyard connect: SWITCHYARD_URL must be an http(s) URL, got ${JSON.stringify(url)}\n`]);
    }
    // Given on the command line, the option is named, whatever the environment holds.
    const r = spawnSync(process.execPath, [BIN, 'connect', '--url=ftp://x/mcp'], { cwd: ROOT, input: '', encoding: 'utf8', env: env('http://127.0.0.1:1/mcp') });
    expect([r.status, r.stderr]).toEqual([2, 'switchyard connect: --url must be an http(s) URL, got "ftp://x/mcp"\n']);
  });
});

// Each with a daemon of its own, and mostly waiting (for a daemon to start, to be away, for
// a retry): run at once. The tests above count the shared daemon's sessions, so they do not.
describe.concurrent('connect against a daemon of its own', () => {
  it('opens a new session by itself when the daemon restarted, so the client goes on', async () => {
    // Restarted on its port: one outside the ephemeral range (TEST_PORTS), which no listen(0) or
    // outgoing connection elsewhere (the bridge's own, trying again) takes while it is down.
    const first = await startHub({ servers: { legacy: nodeServer(SDK1) } }, { port: await freePortInRange() });
    const port = first.port;
    const client = new ClientV1({ name: 'bridge-renew', version: '1.0.0' });
    await client.connect(new StdioV1({ ...bridgeParams(), args: [BIN, 'connect', '--url', first.url] }));
    let second: HubProcess | undefined;
    try {
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'legacy__echo'), 20_000);
      expect((await client.callTool({ name: 'legacy__echo', arguments: { text: 'before' } })).content).toEqual([{ type: 'text', text: 'echo:before' }]);
      await first.stop();
      second = await startHub({ servers: { legacy: nodeServer(SDK1) } }, { port });
      await waitFor(async () => {
        const h = (await (await fetch(second!.url.replace('/mcp', '/healthz'))).json()) as { servers: { state: string }[] };
        return h.servers.every((s) => s.state === 'ready');
      }, 20_000);
      // The old session is unknown to the new daemon: the bridge renews it and sends the call again.
      expect((await client.callTool({ name: 'legacy__echo', arguments: { text: 'after' } })).content).toEqual([{ type: 'text', text: 'echo:after' }]);
      expect((await client.callTool({ name: 'legacy__echo', arguments: { text: 'again' } })).content).toEqual([{ type: 'text', text: 'echo:again' }]);
    } finally {
      await client.close();
      await second?.stop();
    }
  }, 60_000);

  it('holds its notification stream through a daemon that was away for longer than a few seconds', async () => {
    const first = await startHub({ servers: { legacy: nodeServer(SDK1) } }, { port: await freePortInRange() }); // as above
    const client = new ClientV1({ name: 'bridge-away', version: '1.0.0' });
    const changed: string[] = [];
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void changed.push(n.method));
    // Its stream tried again every 200 ms at most while the daemon is away (SWITCHYARD_STREAM_RETRY_MS; 3 s by default).
    const params = bridgeParams();
    await client.connect(new StdioV1({ ...params, env: { ...params.env, SWITCHYARD_STREAM_RETRY_MS: '200' }, args: [BIN, 'connect', '--url', first.url] }));
    let second: HubProcess | undefined;
    try {
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'legacy__echo'), 20_000);
      await first.stop();
      // Away for 2 s, ten of its attempts (the bridge used to give its stream up after four), then back on the same port and files.
      await new Promise((r) => setTimeout(r, 2_000));
      second = await startHub({ servers: { legacy: nodeServer(SDK1) } }, { port: first.port, dir: first.dir });
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'legacy__echo'), 20_000);
      // The renewed session's stream is opened at once, or tried again within 200 ms; a change
      // made before it is open is not heard. So a server is added to the running daemon and
      // taken out again until the bridge hears of a change with no request of its own: its
      // stream is back (a bridge that gave it up hears none, and this times out). Each change is
      // waited for at the daemon (the server listed, or gone), then given a second to be heard:
      // flipped a second apart, on a loaded machine the added server was taken out again before
      // it had started, and no change was ever made. Nothing is asked through the bridge
      // meanwhile, so whatever is heard came on its stream, late or not.
      changed.length = 0;
      const hasExtra = async () => {
        const h = (await (await fetch(new URL('/healthz', second!.url))).json()) as { servers: { id: string; state: string; tools: number }[] };
        return h.servers.some((s) => s.id === 'extra' && s.state === 'ready' && s.tools > 0);
      };
      let added = false;
      await waitFor(async () => {
        added = !added;
        setSection(second!, 'servers', added ? { legacy: nodeServer(SDK1), extra: nodeServer(SDK1) } : { legacy: nodeServer(SDK1) });
        await waitFor(async () => changed.length > 0 || (await hasExtra()) === added, 20_000);
        for (const end = Date.now() + 1_000; changed.length === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
        return changed.length > 0;
      }, 40_000);
      if (!added) setSection(second, 'servers', { legacy: nodeServer(SDK1), extra: nodeServer(SDK1) });
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === 'extra__echo'), 20_000);
    } finally {
      await client.close();
      await second?.stop();
    }
  }, 90_000);

  it('ends the session a second initialize replaces, so the daemon holds one per bridge', async () => {
    const own = await startHub({ servers: { legacy: nodeServer(SDK1) } });
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', own.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
    const init = (id: number) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'again', version: '1' } } });
    try {
      for (const id of [1, 2, 3]) {
        expect((await c.request(init(id))).result.protocolVersion).toBe('2025-11-25');
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      }
      await waitFor(async () => metricValue(await scrape(own.url), 'switchyard_open_sessions') === 1);
      // and it stays at one (nothing else ends or opens one)
      await new Promise((r) => setTimeout(r, 500));
      expect(metricValue(await scrape(own.url), 'switchyard_open_sessions')).toBe(1);
      const r = await c.request({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'legacy__echo', arguments: { text: 'third' } } });
      expect(r.result.content[0].text).toBe('echo:third');
    } finally {
      c.kill();
      await own.stop();
    }
  }, 60_000);

  // Since the stream is held for as long as the daemon is away, a key revoked meanwhile had it
  // asked for every 3 s for the bridge's life, said only at debug level.
  it('whose key is revoked gives the notification stream up at its 401, saying so once', async () => {
    const KEY = 'sy_bridge-revoked-key-0123456789abcdefghijklmnop';
    const OTHER = 'sy_bridge-other-key-0123456789abcdefghijklmnopqr';
    const hub = await startHub({ auth: { apiKeys: [{ principal: 'bridge', sha256: sha256Hex(KEY) }] }, servers: { a: nodeServer(SDK1) } });
    const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', hub.url], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn', SWITCHYARD_API_KEY: KEY, SWITCHYARD_STREAM_RETRY_MS: '200' } }));
    try {
      const init = await c.request({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
      expect(init.result.protocolVersion).toBe('2025-11-25');
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      // The key goes: its session and stream end, and the stream's next GET is refused.
      setSection(hub, 'auth', { apiKeys: [{ principal: 'other', sha256: sha256Hex(OTHER) }] });
      const said = () => c.stderr.split('\n').filter((l) => l.includes("refused this bridge's credential for its notification stream")).length;
      await waitFor(async () => said() === 1, 15_000);
      await new Promise((r) => setTimeout(r, 1_000)); // past five retries' waits (200 ms at most here)
      expect(said()).toBe(1);
    } finally {
      c.kill();
      await hub.stop();
    }
  }, 40_000);
});
