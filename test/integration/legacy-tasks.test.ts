/**
 * A 2025-11-25 server's tool that runs only as a task (`execution.taskSupport: "required"`):
 * the hub offers its clients no tasks, so it shows the tool without taskSupport, drives the
 * task itself (`task: {}`, then `tasks/result`), and gives the client a plain result; a call
 * cancelled meanwhile cancels the task (`tasks/cancel`). Real hub, raw legacy fixture over stdio.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { legacySession, modernCall, waitForRows } from './ledger-helpers.js';
import { serverHealth } from './faults-helpers.js';

let hub: HubProcess;
let log: string;
let silentLog: string;
const received = (file = log): { method?: string; params?: Record<string, unknown> }[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).in)
    .filter(Boolean);

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-legacy-tasks-'));
  log = join(dir, 'quirk.log');
  // A short timeoutMs: only the task's progress keeps its tasks/result waiting longer.
  silentLog = join(dir, 'silent.log');
  const fixture = join(ROOT, 'test/fixtures/quirks/legacy-task.mjs');
  hub = await startHub(
    {
      servers: {
        t: { command: process.execPath, args: [fixture], env: { QUIRK_LOG: log }, timeoutMs: 600 },
        // Never answers a tasks/cancel. No health check: only calls may take it down here.
        silent: { command: process.execPath, args: [fixture], env: { QUIRK_LOG: silentLog, CANCEL_SILENT: '1' }, timeoutMs: 300, healthCheckMs: 0 },
      },
    },
    { dir },
  );
  await waitForReady(hub.url, ['t', 'silent']);
}, 30_000);
afterAll(async () => void (await hub?.stop()));

describe('a tool its legacy server runs only as a task', () => {
  it('is listed without taskSupport, and called as a task whose result the client gets', async () => {
    const list = await modernCall(hub.url, 'l', 'tools/list');
    const tool = (list.body?.result?.tools as Record<string, unknown>[]).find((t) => t.name === 't__job');
    expect(tool).toMatchObject({ name: 't__job', description: 'runs as a task' });
    expect(tool).not.toHaveProperty('execution');
    const call = await modernCall(hub.url, 'c1', 'tools/call', { name: 't__job', arguments: { ms: 20 } });
    expect(call.body?.result?.content).toEqual([{ type: 'text', text: 'done task-1' }]);
    const sent = received().filter((m) => m.method === 'tools/call' || m.method === 'tasks/result');
    expect(sent.map((m) => m.method)).toEqual(['tools/call', 'tasks/result']);
    expect(sent[0]!.params).toMatchObject({ name: 'job', task: {} });
    expect(sent[1]!.params).toMatchObject({ taskId: 'task-1' });
  });

  it("runs a tool that may be a task as a plain call, a client's own task augmentation ignored (the hub offers no tasks)", async () => {
    const tool = ((await modernCall(hub.url, 'l2', 'tools/list')).body?.result?.tools as Record<string, unknown>[]).find((t) => t.name === 't__maybe');
    expect(tool).not.toHaveProperty('execution');
    const s = await legacySession(hub.url);
    const call = await s.call(1, 'tools/call', { name: 't__maybe', arguments: {}, task: { ttl: 1000 } });
    expect(call.body?.result).toEqual({ content: [{ type: 'text', text: 'plain maybe' }] });
    expect(received().find((m) => m.method === 'tools/call' && m.params?.name === 'maybe')?.params).not.toHaveProperty('task');
  });

  it('cancels the task when its client goes away', async () => {
    const ac = new AbortController();
    const call = modernCall(hub.url, 'c2', 'tools/call', { name: 't__job', arguments: { ms: 60_000, progress: 600 } }, { signal: ac.signal }).catch(() => undefined);
    await expect.poll(() => received().some((m) => m.method === 'tasks/result' && m.params?.taskId === 'task-2'), { timeout: 10_000 }).toBe(true);
    ac.abort();
    await call;
    await expect.poll(() => received().find((m) => m.method === 'tasks/cancel')?.params, { timeout: 10_000 }).toEqual({ taskId: 'task-2' });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: 't__job', outcome: 'cancelled' });
    expect(rows).toHaveLength(1);
  });

  it("relays the task's progress, which keeps the wait for its result alive past timeoutMs; without progress the wait times out and the task is cancelled", async () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, progressToken: 'p-3' };
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 't__job' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'c3', method: 'tools/call', params: { name: 't__job', arguments: { ms: 1_800, progress: 12 }, _meta: meta } }),
    });
    const text = await res.text();
    expect(text).toContain('done task-3');
    const progress = text.split('\n').filter((l) => l.startsWith('data:') && l.includes('notifications/progress'));
    expect(progress.length).toBeGreaterThanOrEqual(6);
    expect(progress[0]).toContain('"progressToken":"p-3"');

    const quiet = await modernCall(hub.url, 'c4', 'tools/call', { name: 't__job', arguments: { ms: 60_000 } });
    expect(JSON.stringify(quiet.body)).toMatch(/did not answer within 600 ms/);
    await expect.poll(() => received().find((m) => m.method === 'tasks/cancel' && m.params?.taskId === 'task-4')?.params, { timeout: 10_000 }).toEqual({ taskId: 'task-4' });
  });

  // Over stdio a legacy server's request says nothing of its call, so a call whose client may be
  // asked ran alone; a task's requests name their task, so the calls waiting for tasks run side
  // by side, and each question reaches the client whose task asked it. Each client answers only
  // once the other has been asked: both tasks must be waiting at once.
  it("runs two clients' tasks side by side, each task's question put to its own client", async () => {
    let askedBoth: () => void;
    const both = new Promise<void>((r) => (askedBoth = r));
    let asked = 0;
    const client = async (who: string) => {
      const c = new Client({ name: `tasks-${who}`, version: '1.0.0' }, { capabilities: { elicitation: {} } });
      c.setRequestHandler(ElicitRequestSchema, async () => {
        if (++asked === 2) askedBoth();
        await both;
        return { action: 'accept', content: { who } };
      });
      await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
      return c;
    };
    const [a, b] = await Promise.all([client('A'), client('B')]);
    try {
      const [ra, rb] = await Promise.all([a, b].map((c) => c.callTool({ name: 't__ask', arguments: {} }, undefined, { timeout: 15_000 })));
      expect((ra!.content as { text: string }[])[0]!.text).toMatch(/^task-\d+ got \{"who":"A"\}$/);
      expect((rb!.content as { text: string }[])[0]!.text).toMatch(/^task-\d+ got \{"who":"B"\}$/);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  // The task a question names is the hub's own (the hub offers its clients no tasks): a client
  // never saw it and could not ask about it, so the question reaches it without related-task,
  // the server's other `_meta` kept. For a legacy client (a question on its call's stream) and a
  // modern one (an input_required entry).
  it('puts a task\'s question to the client without the related-task naming the task the hub runs', async () => {
    const RELATED = 'io.modelcontextprotocol/related-task';
    let legacyMeta: Record<string, unknown> | undefined;
    const c = new Client({ name: 'tasks-related', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      legacyMeta = req.params._meta as Record<string, unknown> | undefined;
      return { action: 'accept', content: { who: 'L' } };
    });
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      const r = await c.callTool({ name: 't__ask', arguments: {} }, undefined, { timeout: 15_000 });
      expect((r.content as { text: string }[])[0]!.text).toMatch(/^task-\d+ got \{"who":"L"\}$/);
    } finally {
      await c.close();
    }
    // The server did name its task (so the hub could route the question by it).
    expect(received().some((m) => m.method === 'tasks/result')).toBe(true);
    // Its own key kept, and the hub's naming the (untrusted) server that asks, as to any legacy client.
    expect(legacyMeta).toEqual({ 'com.example/asked-by': 'legacy-task', 'dev.switchyard/server': 't' });
    expect(legacyMeta).not.toHaveProperty([RELATED]);

    const caps = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };
    const first = await modernCall(hub.url, 'rt1', 'tools/call', { name: 't__ask', arguments: {} }, { meta: caps });
    const res = first.body?.result as { resultType?: string; inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>; requestState?: string };
    expect(res.resultType).toBe('input_required');
    const entries = Object.entries(res.inputRequests ?? {});
    expect(entries).toHaveLength(1);
    const [key, asked] = entries[0]!;
    expect(asked.method).toBe('elicitation/create');
    expect(asked.params._meta).toEqual({ 'com.example/asked-by': 'legacy-task' });
    const done = await modernCall(hub.url, 'rt2', 'tools/call', { name: 't__ask', arguments: {}, requestState: res.requestState, inputResponses: { [key]: { action: 'accept', content: { who: 'M' } } } }, { meta: caps });
    expect((done.body?.result?.content as { text: string }[])[0]!.text).toMatch(/^task-\d+ got \{"who":"M"\}$/);
  });

  // The same for what a task's server sends meanwhile: its log lines and progress name the task
  // too, and reach the client without it, the server's other `_meta` kept.
  it("relays a task's log line and progress without the related-task naming the task the hub runs", async () => {
    const RELATED = 'io.modelcontextprotocol/related-task';
    const logs: Record<string, unknown>[] = [];
    const progress: Record<string, unknown>[] = [];
    const c = new Client({ name: 'tasks-related-log', version: '1.0.0' }, { capabilities: {} });
    c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      const r = await c.callTool({ name: 't__job', arguments: { ms: 300, progress: 2, log: true } }, undefined, { timeout: 15_000, onprogress: (p) => void progress.push(p) });
      expect((r.content as { text: string }[])[0]!.text).toMatch(/^done task-\d+$/);
    } finally {
      await c.close();
    }
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ level: 'info', data: expect.stringMatching(/^working on task-\d+$/) });
    expect(logs[0]!._meta).toEqual({ 'com.example/asked-by': 'legacy-task' });
    expect(progress.length).toBeGreaterThanOrEqual(1);
    for (const p of progress) expect(p._meta).toEqual({ 'com.example/step': p.progress });

    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/logLevel': 'debug', progressToken: 'p-rt' };
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 't__job' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'rt-log', method: 'tools/call', params: { name: 't__job', arguments: { ms: 300, progress: 2, log: true }, _meta: meta } }),
    });
    const sent = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)) as { method?: string; params?: Record<string, unknown>; result?: Record<string, unknown> });
    expect(JSON.stringify(sent.at(-1)?.result)).toMatch(/done task-\d+/);
    const modernLogs = sent.filter((m) => m.method === 'notifications/message');
    const modernProgress = sent.filter((m) => m.method === 'notifications/progress');
    expect(modernLogs).toHaveLength(1);
    expect(modernLogs[0]!.params!._meta).toEqual({ 'com.example/asked-by': 'legacy-task' });
    expect(modernProgress.length).toBeGreaterThanOrEqual(1);
    for (const m of modernProgress) {
      expect(m.params!._meta).toEqual({ 'com.example/step': m.params!.progress });
      expect(m.params!._meta).not.toHaveProperty([RELATED]);
    }
  });

  // The hub's cancel of a task is its own request, not a client's call: left unanswered, it is no
  // call left unanswered (two calls timing out after it took the server down as hung, a third in
  // a row), and it is given the server's own timeoutMs, not a fixed 10 s in which it held a slot.
  it("a tasks/cancel the server leaves unanswered ends at the server's timeoutMs, and is no call left unanswered", async () => {
    const before = (await serverHealth(hub.url, 'silent')).restarts;
    const ac = new AbortController();
    const call = modernCall(hub.url, 'sc1', 'tools/call', { name: 'silent__job', arguments: { ms: 60_000, progress: 600 } }, { signal: ac.signal }).catch(() => undefined);
    await expect.poll(() => received(silentLog).some((m) => m.method === 'tasks/result'), { timeout: 10_000 }).toBe(true);
    ac.abort();
    await call;
    await expect.poll(() => received(silentLog).some((m) => m.method === 'tasks/cancel'), { timeout: 10_000 }).toBe(true);
    // Its slot is given back once it times out (300 ms).
    await expect.poll(async () => (await serverHealth(hub.url, 'silent')).inFlight, { timeout: 5_000, interval: 50 }).toBe(0);
    for (const id of ['sc2', 'sc3']) {
      const hung = await modernCall(hub.url, id, 'tools/call', { name: 'silent__maybe', arguments: { hang: true } });
      expect(JSON.stringify(hung.body)).toMatch(/did not answer within 300 ms/);
    }
    // Counted, the cancel made those two timeouts three in a row: the server was taken down as hung.
    const s = await serverHealth(hub.url, 'silent');
    expect(s.lastError ?? '').not.toMatch(/in a row/);
    expect(s.state).toBe('ready');
    expect(s.restarts).toBe(before);
  });
});
