// Smoke tests for the real MCP servers the hub ships with and is tested against
// (examples/*, test/fixtures/servers/*, test/fixtures/conformance/server.mjs): each is
// spawned as a real process and driven by an official SDK client, so a broken fixture
// fails here rather than deep inside a hub test.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as V1Stdio } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as V1Http } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from '@modelcontextprotocol/client';
import { StdioClientTransport as V2Stdio } from '@modelcontextprotocol/client/stdio';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SDK1 = path.join(ROOT, 'test/fixtures/servers/sdk1-server.mjs');
const SDK2 = path.join(ROOT, 'test/fixtures/servers/sdk2-modern-server.mjs');
const CONFORMANCE = path.join(ROOT, 'test/fixtures/conformance/server.mjs');
const NOTES = path.join(ROOT, 'examples/legacy-notes.mjs');
const CLOCK = path.join(ROOT, 'examples/modern-clock.mjs');

type AnyClient = V1Client | V2Client;
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});
/** Those of processes two cases of a describe share (a server's start is most of a case's time). */
const sharedCleanups: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  while (sharedCleanups.length > 0) await sharedCleanups.pop()?.();
});

function tempFile(name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fixtures-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, name);
}

function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return { ...env, ...extra };
}

async function v1Stdio(script: string, env: Record<string, string> = {}, capabilities = {}): Promise<V1Client> {
  const client = new V1Client({ name: 'fixture-test', version: '1.0.0' }, { capabilities });
  await client.connect(new V1Stdio({ command: process.execPath, args: [script], env: childEnv(env), stderr: 'ignore' }));
  cleanups.push(() => client.close());
  return client;
}

async function v2Stdio(script: string, env: Record<string, string> = {}, capabilities = {}, owned = cleanups): Promise<V2Client> {
  const client = new V2Client({ name: 'fixture-test', version: '1.0.0' }, { capabilities, versionNegotiation: { mode: 'auto' } });
  await client.connect(new V2Stdio({ command: process.execPath, args: [script], env: childEnv(env), stderr: 'ignore' }));
  owned.push(() => client.close());
  return client;
}

/** Spawn `script --http 0` and wait for its `LISTENING <port>` line. */
async function spawnHttp(script: string, env: Record<string, string> = {}, owned = cleanups): Promise<URL> {
  const child: ChildProcess = spawn(process.execPath, [script, '--http', '0'], { env: childEnv(env), stdio: ['ignore', 'pipe', 'ignore'] });
  owned.push(() => {
    if (child.exitCode === null) child.kill('SIGTERM');
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const m = /^LISTENING (\d+)$/m.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`${path.basename(script)} exited early (${code})`)));
  });
  return new URL(`http://127.0.0.1:${port}/mcp`);
}

function texts(result: unknown): string[] {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.filter((b) => b.type === 'text').map((b) => b.text ?? '');
}

/** The deterministic surface shared by sdk1-server and sdk2-modern-server. */
async function checkSharedSurface(client: AnyClient, scheme: string, serverName: string, counterFile: string): Promise<void> {
  const names = (await client.listTools()).tools.map((t) => t.name).sort();
  expect(names).toEqual(['add', 'counter_bump', 'echo', 'fail', 'slow']);

  expect(texts(await client.callTool({ name: 'echo', arguments: { text: 'hi' } }))).toEqual(['echo:hi']);
  const sum = await client.callTool({ name: 'add', arguments: { a: 2, b: 3.5 } });
  expect(texts(sum)).toEqual(['5.5']);
  expect(sum.structuredContent).toEqual({ sum: 5.5 });

  expect(texts(await client.callTool({ name: 'counter_bump', arguments: { label: 'k' } }))).toEqual(['1']);
  expect(texts(await client.callTool({ name: 'counter_bump', arguments: { label: 'k' } }))).toEqual(['2']);
  expect(JSON.parse(fs.readFileSync(counterFile, 'utf8'))).toEqual({ k: 2 });

  const failed = await client.callTool({ name: 'fail', arguments: {} });
  expect(failed.isError).toBe(true);

  const progress: number[] = [];
  const onprogress = (p: { progress: number }) => progress.push(p.progress);
  // A report read in the same chunk as the answer reaches the SDK client after it: the client
  // has let go of the call's progress handler by then (its notifications are dispatched a
  // microtask later, answers at once) and reports it to onerror as for an unknown token. On a
  // busy machine the last one or two of the three come so. Counted too: the fixture sent them.
  let late = 0;
  const onerror = client.onerror;
  client.onerror = (e: Error) => void (/progress notification for an unknown token/.test(e.message) ? late++ : onerror?.(e));
  const params = { name: 'slow', arguments: { ms: 250 } };
  // v1 takes (params, resultSchema, options); v2 takes (params, options).
  const slow = client instanceof V1Client ? await client.callTool(params, undefined, { onprogress }) : await client.callTool(params, { onprogress });
  expect(texts(slow)).toEqual(['slept 250']);
  // One report per 100 ms step: 100, 200, 250.
  await expect.poll(() => progress.length + late, { timeout: 2_000, interval: 10 }).toBe(3);
  client.onerror = onerror;
  expect(progress.length).toBeGreaterThanOrEqual(1);
  expect([...progress].sort((a, b) => a - b)).toEqual(progress);

  const completion = await client.complete({ ref: { type: 'ref/prompt', name: 'greet' }, argument: { name: 'name', value: 'al' } });
  expect(completion.completion.values).toEqual(['alice', 'albert']);
  const prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'bob' } });
  expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: 'Hello, bob!' } }]);

  const hello = await client.readResource({ uri: `${scheme}://static/hello` });
  expect(hello.contents[0]).toMatchObject({ uri: `${scheme}://static/hello`, text: `hello from ${serverName}` });
  const item = await client.readResource({ uri: `${scheme}://item/7` });
  expect(item.contents[0]).toMatchObject({ text: 'item 7' });
}

describe('sdk1-server (SDK v1, legacy)', () => {
  it('serves the shared surface over stdio', async () => {
    const counter = tempFile('counter.json');
    const client = await v1Stdio(SDK1, { COUNTER_FILE: counter, SERVER_NAME: 'alpha' });
    expect(client.getServerVersion()?.name).toBe('alpha');
    await checkSharedSurface(client, 'sdk1', 'alpha', counter);
  });

  it('serves sessionful Streamable HTTP with --http 0', async () => {
    const counter = tempFile('counter.json');
    const url = await spawnHttp(SDK1, { COUNTER_FILE: counter });
    const client = new V1Client({ name: 'fixture-test', version: '1.0.0' });
    const transport = new V1Http(url);
    await client.connect(transport);
    cleanups.push(() => client.close());
    expect(transport.sessionId).toBeTruthy();
    await checkSharedSurface(client, 'sdk1', 'sdk1-legacy', counter);
  });

  it('a v2 auto-negotiating client falls back to legacy', async () => {
    const client = await v2Stdio(SDK1, { COUNTER_FILE: tempFile('c.json') });
    expect(client.getNegotiatedProtocolVersion()).toBe('2025-11-25');
  });
});

describe('sdk2-modern-server (SDK v2, modern only)', () => {
  it('serves the shared surface over stdio at 2026-07-28', async () => {
    const counter = tempFile('counter.json');
    const client = await v2Stdio(SDK2, { COUNTER_FILE: counter, SERVER_NAME: 'beta' });
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    await checkSharedSurface(client, 'sdk2', 'beta', counter);
  });

  it('serves stateless HTTP with --http 0 and honours LIST_TTL_MS/CACHE_SCOPE', async () => {
    const counter = tempFile('counter.json');
    const url = await spawnHttp(SDK2, { COUNTER_FILE: counter, LIST_TTL_MS: '5000', CACHE_SCOPE: 'public' });
    const client = new V2Client({ name: 'fixture-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(new V2Http(url));
    cleanups.push(() => client.close());
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    const listed = (await client.listTools()) as { ttlMs?: number; cacheScope?: string };
    expect(listed).toMatchObject({ ttlMs: 5000, cacheScope: 'public' });
    await checkSharedSurface(client, 'sdk2', 'sdk2-modern', counter);
  });

  it('refuses a legacy-only client', async () => {
    await expect(v1Stdio(SDK2, { COUNTER_FILE: tempFile('c.json') })).rejects.toThrow(/-32022/);
  });
});

describe('examples', () => {
  it('legacy-notes stores, lists and searches notes', async () => {
    const client = await v1Stdio(NOTES);
    const tools = (await client.listTools()).tools;
    expect(tools.map((t) => t.name).sort()).toEqual(['add_note', 'list_notes', 'search_notes']);
    expect(tools.find((t) => t.name === 'search_notes')?.annotations?.readOnlyHint).toBe(true);
    const added = await client.callTool({ name: 'add_note', arguments: { title: 'Milk', body: 'buy oat milk' } });
    expect(added.structuredContent).toEqual({ id: 1, title: 'Milk' });
    expect(texts(await client.callTool({ name: 'search_notes', arguments: { query: 'OAT' } }))[0]).toContain('#1 Milk');
    const styles = await client.complete({ ref: { type: 'ref/prompt', name: 'summarize_notes' }, argument: { name: 'style', value: 'b' } });
    expect(styles.completion.values).toEqual(['brief', 'bullet']);
    expect((await client.readResource({ uri: 'notes://note/1' })).contents[0]).toMatchObject({ text: '#1 Milk\nbuy oat milk' });
  });

  it('modern-clock does date arithmetic and carries cache hints', async () => {
    const client = await v2Stdio(CLOCK);
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    const listed = (await client.listTools()) as { tools: Array<{ name: string }>; ttlMs?: number; cacheScope?: string };
    expect(listed.tools.map((t) => t.name).sort()).toEqual(['add_days', 'now']);
    expect(listed).toMatchObject({ ttlMs: 300000, cacheScope: 'public' });
    const later = await client.callTool({ name: 'add_days', arguments: { date: '2026-02-27', days: 3 } });
    expect(later.structuredContent).toEqual({ date: '2026-03-02' });
    expect((await client.callTool({ name: 'now', arguments: { timezone: 'Mars/Base' } })).isError).toBe(true);
    const cities = await client.complete({ ref: { type: 'ref/prompt', name: 'plan_day' }, argument: { name: 'city', value: 'to' } });
    expect(cities.completion.values).toEqual(['Tokyo']);
  });

  it('modern-clock refuses a legacy-only client', async () => {
    await expect(v1Stdio(CLOCK)).rejects.toThrow(/-32022/);
  });
});

describe('conformance server (SDK v2, both eras)', () => {
  const sample = async () => ({
    role: 'assistant' as const,
    content: { type: 'text' as const, text: 'sampled!' },
    model: 'test-model',
    stopReason: 'endTurn',
  });

  it('serves a legacy stdio client, with real server->client sampling', async () => {
    const client = await v1Stdio(CONFORMANCE, {}, { sampling: {} });
    client.setRequestHandler(CreateMessageRequestSchema, sample);
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['test_simple_text', 'test_sampling', 'test_elicitation', 'json_schema_2020_12_tool']));
    expect(texts(await client.callTool({ name: 'test_simple_text', arguments: {} }))).toEqual(['This is a simple text response for testing.']);
    expect(texts(await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hi' } }))).toEqual(['LLM response: sampled!']);
    expect(client.getServerCapabilities()?.resources?.subscribe).toBe(true);
    await client.subscribeResource({ uri: 'test://watched-resource' });
  });

  // One modern stdio client (and server process) for the two modern stdio cases, one HTTP
  // server for the two HTTP ones: none of them changes what the other looks at.
  let modernClient: Promise<V2Client> | undefined;
  const modernStdio = (): Promise<V2Client> =>
    (modernClient ??= v2Stdio(CONFORMANCE, {}, { sampling: {} }, sharedCleanups).then((client) => {
      client.setRequestHandler('sampling/createMessage', sample);
      return client;
    }));
  let httpUrl: Promise<URL> | undefined;
  const conformanceHttp = (): Promise<URL> => (httpUrl ??= spawnHttp(CONFORMANCE, {}, sharedCleanups));

  it('serves a modern stdio client, fulfilling input_required rounds', async () => {
    const client = await modernStdio();
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect(texts(await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hi' } }))).toEqual(['LLM response: sampled!']);
    expect(texts(await client.callTool({ name: 'test_input_required_result_sampling', arguments: {} }))).toEqual(['Sampling answer: sampled!']);
  });

  it('legacy stdio: change triggers reach the client (list_changed, resources/updated after subscribe)', async () => {
    const client = await v1Stdio(CONFORMANCE);
    const seen: string[] = [];
    client.fallbackNotificationHandler = async (n) => {
      seen.push(n.method === 'notifications/resources/updated' ? `${n.method} ${String(n.params?.uri)}` : n.method);
    };
    await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
    await client.subscribeResource({ uri: 'test://watched-resource' });
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
    await expect.poll(() => seen.length).toBeGreaterThanOrEqual(2);
    // The update sent before subscribing must not arrive.
    expect(seen).toEqual(['notifications/tools/list_changed', 'notifications/resources/updated test://watched-resource']);
    const read = await client.readResource({ uri: 'test://watched-resource' });
    expect((read.contents[0] as { text: string }).text).toContain('version 2');
  });

  it('modern stdio: change triggers arrive on a subscriptions/listen stream, filtered', async () => {
    const client = await modernStdio();
    const seen: string[] = [];
    client.setNotificationHandler('notifications/tools/list_changed', async () => void seen.push('tools'));
    client.setNotificationHandler('notifications/prompts/list_changed', async () => void seen.push('prompts'));
    const sub = await client.listen({ toolsListChanged: true });
    await client.callTool({ name: 'test_trigger_prompt_change', arguments: {} });
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    await expect.poll(() => seen).toEqual(['tools']);
    await sub.close();
  });

  it('serves both eras over HTTP on one endpoint', async () => {
    const url = await conformanceHttp();
    const legacy = new V1Client({ name: 'fixture-test', version: '1.0.0' });
    const legacyTransport = new V1Http(url);
    await legacy.connect(legacyTransport);
    cleanups.push(() => legacy.close());
    expect(legacyTransport.sessionId).toBeTruthy();
    expect(texts(await legacy.callTool({ name: 'test_simple_text', arguments: {} }))).toEqual(['This is a simple text response for testing.']);

    const modern = new V2Client({ name: 'fixture-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new V2Http(url));
    cleanups.push(() => modern.close());
    expect(modern.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    const read = await modern.readResource({ uri: 'test://template/42/data' });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toEqual({ id: '42', templateTest: true, data: 'Data for ID: 42' });
  });

  it('rejects a non-loopback Host (DNS rebinding)', async () => {
    const url = await conformanceHttp();
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: Number(url.port), path: '/mcp', method: 'POST', headers: { host: 'evil.example.com', 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    });
    expect(status).toBe(403);
  });
});
