/**
 * A legacy (2025-11-25) client's answer stream survives a cut connection (digest §6.2): the
 * hub's events carry ids, a priming event (an id, `retry:`, empty data) comes first, the call
 * goes on meanwhile, and a GET with Last-Event-ID gets the rest of that stream, the answer
 * included, within the replay bounds; another session's id gets nothing. Real built hub, the
 * SDK v1 fixture upstream, the official SDK v1 client through a TCP proxy that drops the
 * connection, and raw HTTP.
 */
import net from 'node:net';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, legacySession, modernBody, modernHeaders, parseMessages, waitForReady } from '../helpers/wire.js';
import { SDK1, waitForRows } from './ledger-helpers.js';
import { rawClient } from '../helpers/raw-http.js';

const COUNTER = join(mkdtempSync(join(tmpdir(), 'switchyard-resume-')), 'counter.json');
let hub: HubProcess;
let db: string;

beforeAll(async () => {
  // A call quiet for 300–600 ms becomes a stream (listen.quietCallStreamMs; 5 s by default).
  hub = await startHub({ listen: { quietCallStreamMs: 300 }, servers: { s: nodeServer(SDK1, [], { COUNTER_FILE: COUNTER, CHATTER_TOOL: '1' }), leg: nodeServer('test/fixtures/translation/legacy-server.mjs') } });
  db = join(hub.dir, 'ledger.db');
  await waitForReady(hub.url, ['s', 'leg']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

/**
 * A TCP proxy in front of the hub that drops a connection (both sides) once the hub has sent it
 * `cutAfter`: the network failing under a call's answer stream.
 */
async function cuttingProxy(target: number, cutAfter: string | RegExp): Promise<{ url: string; cuts: number; close(): void }> {
  const state = { cuts: 0 };
  const server = net.createServer((client) => {
    const up = net.connect(target, '127.0.0.1');
    let seen = '';
    client.on('data', (d) => up.write(d));
    up.on('data', (d: Buffer) => {
      client.write(d);
      seen = (seen + d.toString('latin1')).slice(-4096);
      if (typeof cutAfter === 'string' ? seen.includes(cutAfter) : cutAfter.test(seen)) {
        state.cuts++;
        client.destroy();
        up.destroy();
      }
    });
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    get cuts() {
      return state.cuts;
    },
    close: () => server.close(),
  };
}

const counted = (label: string): number => (JSON.parse(readFileSync(COUNTER, 'utf8')) as Record<string, number>)[label] ?? 0;

interface SseEvent {
  id?: string;
  retry?: string;
  data: string;
}

function events(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((e) => e.trim() && !e.startsWith(':'))
    .map((e) => {
      const ev: SseEvent = { data: '' };
      for (const line of e.split('\n')) {
        const i = line.indexOf(':');
        const [k, v] = i < 0 ? [line, ''] : [line.slice(0, i), line.slice(i + 1).replace(/^ /, '')];
        if (k === 'id') ev.id = v;
        else if (k === 'retry') ev.retry = v;
        else if (k === 'data') ev.data += v;
      }
      return ev;
    });
}

/** A raw legacy session's headers. */
async function rawSession(capabilities: Record<string, unknown> = {}): Promise<{ sid: string; h: Record<string, string> }> {
  const s = await legacySession(hub.url, { capabilities });
  return { sid: s.sessionId, h: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': s.sessionId, 'mcp-protocol-version': LEGACY_VERSION } };
}

/** POSTs a call, reads its answer stream until `until` holds of what came, then cuts the connection. */
async function callAndCut(h: Record<string, string>, body: object, until: (evs: SseEvent[]) => boolean): Promise<SseEvent[]> {
  const ac = new AbortController();
  const res = await fetch(hub.url, { method: 'POST', headers: h, body: JSON.stringify(body), signal: ac.signal });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  let text = '';
  const dec = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += dec.decode(chunk, { stream: true });
      if (until(events(text))) break;
    }
  } finally {
    ac.abort();
  }
  return events(text);
}

function resume(h: Record<string, string>, lastEventId: string): Promise<Response> {
  return fetch(hub.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': h['mcp-session-id']!, 'mcp-protocol-version': LEGACY_VERSION, 'last-event-id': lastEventId } });
}

describe('a quiet call (nothing streamed before its answer) becomes a stream after listen.quietCallStreamMs', () => {
  it('legacy: its stream is primed and resumable, so a cut while it is quiet loses nothing; the tool ran once', async () => {
    const { h } = await rawSession();
    const label = `quiet-${Date.now()}`;
    // No progress token: nothing would be sent before the answer, which used to be plain JSON.
    const got = await callAndCut(h, { jsonrpc: '2.0', id: 31, method: 'tools/call', params: { name: 's__slow', arguments: { ms: 1500, label } } }, (evs) => evs.length >= 1);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ data: '', retry: '1000' });
    const res = await resume(h, got[0]!.id!);
    expect(res.status).toBe(200);
    const rest = events(await res.text());
    expect(JSON.parse(rest.at(-1)!.data)).toMatchObject({ id: 31, result: { content: [{ type: 'text', text: 'slept 1500' }] } });
    expect(counted(label)).toBe(1);
  }, 20_000);

  it('legacy: the official SDK v1 client, its quiet call cut right after the priming event (a proxy idle timeout), reconnects and gets the result', async () => {
    // A POST's priming event (a GET stream's ids are marked `g`): nothing else came on it yet.
    const proxy = await cuttingProxy(hub.port, /id: [\w-]+\.\d+\.0\nretry: 1000\n/);
    const client = new Client({ name: 'quiet-sdk1', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(proxy.url), {
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 3 },
    });
    try {
      await client.connect(transport);
      const label = `quiet-sdk-${Date.now()}`;
      const result = await client.callTool({ name: 's__slow', arguments: { ms: 1500, label } }, undefined, { timeout: 15_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'slept 1500' }]);
      expect(proxy.cuts).toBeGreaterThanOrEqual(1);
      expect(counted(label)).toBe(1);
    } finally {
      await client.close().catch(() => undefined);
      proxy.close();
    }
  }, 30_000);

  it('modern: a long call is answered on a stream, a quick one as plain JSON', async () => {
    const post = (id: number, ms: number) =>
      fetch(hub.url, { method: 'POST', headers: modernHeaders('tools/call', 's__slow'), body: JSON.stringify(modernBody(id, 'tools/call', { name: 's__slow', arguments: { ms } })) });
    const quick = await post(41, 0);
    expect(quick.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(await quick.text())).toMatchObject({ id: 41, result: { content: [{ text: 'slept 0' }] } });
    const long = await post(42, 1500);
    expect(long.headers.get('content-type')).toContain('text/event-stream');
    const [answer] = parseMessages(long.headers.get('content-type'), await long.text());
    expect(answer).toMatchObject({ id: 42, result: { content: [{ text: 'slept 1500' }] } });
  }, 20_000);

  it("a client whose Accept does not name text/event-stream (curl's */*, or none) gets its long call as plain JSON", async () => {
    const post = (id: number, accept: string | undefined) => {
      const headers: Record<string, string> = modernHeaders('tools/call', 's__slow');
      if (accept === undefined) delete headers.accept;
      else headers.accept = accept;
      return fetch(hub.url, { method: 'POST', headers, body: JSON.stringify(modernBody(id, 'tools/call', { name: 's__slow', arguments: { ms: 1000 } })) });
    };
    const answers = await Promise.all([post(43, '*/*'), post(44, undefined), post(45, 'application/json, text/*')]);
    for (const [i, res] of answers.entries()) {
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(JSON.parse(await res.text())).toMatchObject({ id: 43 + i, result: { content: [{ text: 'slept 1000' }] } });
    }
  }, 20_000);
});

describe("a legacy call's answer stream cut mid-call", () => {
  it('the official SDK v1 client reconnects with Last-Event-ID and gets the result; the tool ran once, one ledger row', async () => {
    // Cut once the first progress report has gone through: the priming event came before it.
    const proxy = await cuttingProxy(hub.port, 'notifications/progress');
    const client = new Client({ name: 'resume-sdk1', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(proxy.url), {
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 3 },
    });
    const errors: string[] = [];
    transport.onerror = (e) => errors.push(String(e));
    try {
      await client.connect(transport);
      const label = `resume-${Date.now()}`;
      const progress: number[] = [];
      const result = await client.callTool({ name: 's__slow', arguments: { ms: 800, label } }, undefined, { onprogress: (p) => progress.push(p.progress), timeout: 15_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'slept 800' }]);
      expect(proxy.cuts).toBeGreaterThanOrEqual(1);
      expect(errors.join('\n')).toMatch(/disconnected/);
      // Every report reached the client once: the replay starts after the last event it had.
      expect(progress).toEqual([...new Set(progress)]);
      expect(progress.at(-1)).toBe(800);
      expect(counted(label)).toBe(1);
      const rows = await waitForRows(db, { tool: 's__slow' }, (r) => r.some((x) => x.clientName === 'resume-sdk1'));
      expect(rows.filter((r) => r.clientName === 'resume-sdk1')).toHaveLength(1);
      expect(rows.find((r) => r.clientName === 'resume-sdk1')!.outcome).toBe('ok');
    } finally {
      await client.close().catch(() => undefined);
      proxy.close();
    }
  }, 30_000);

  it('the official SDK v1 client asked a question on a stream that is then cut: it answers, reconnects, and gets the result', async () => {
    const proxy = await cuttingProxy(hub.port, 'elicitation/create');
    const client = new Client({ name: 'resume-ask-sdk1', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Grace' } }));
    const transport = new StreamableHTTPClientTransport(new URL(proxy.url), {
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 3 },
    });
    try {
      await client.connect(transport);
      const result = await client.callTool({ name: 'leg__elicit_form', arguments: { who: 'sdk-cut' } }, undefined, { timeout: 15_000 });
      expect(proxy.cuts).toBeGreaterThanOrEqual(1);
      expect(result.content).toEqual([{ type: 'text', text: 'action=accept content={"name":"Grace"}' }]);
    } finally {
      await client.close().catch(() => undefined);
      proxy.close();
    }
  }, 30_000);

  it('raw: the priming event, ids of one stream, and a replay of the rest that ends with the answer; acknowledged, it is let go', async () => {
    const { h } = await rawSession();
    const got = await callAndCut(h, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 's__slow', arguments: { ms: 600 }, _meta: { progressToken: 'p7' } } }, (evs) => evs.some((e) => e.data.includes('notifications/progress')));
    const [priming, first] = got;
    expect(priming).toMatchObject({ data: '', retry: '1000' });
    expect(priming!.id).toMatch(/^[\w-]+\.\d+\.0$/);
    const stream = priming!.id!.replace(/0$/, '');
    expect(first!.id).toBe(`${stream}1`);
    const res = await resume(h, first!.id!);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const rest = events(await res.text()); // the stream ends after the answer
    expect(rest.length).toBeGreaterThan(1);
    expect(rest.every((e) => e.id!.startsWith(stream))).toBe(true);
    expect(rest.map((e) => Number(e.id!.slice(stream.length)))).toEqual(rest.map((_, i) => i + 2));
    const answer = JSON.parse(rest.at(-1)!.data);
    expect(answer).toMatchObject({ id: 7, result: { content: [{ type: 'text', text: 'slept 600' }] } });
    // From its last event there is nothing more: 204, so a client does not come back for more.
    const over = await resume(h, rest.at(-1)!.id!);
    expect(over.status).toBe(204);
    const head = (method: string, extra: Record<string, string>) =>
      `${method} /mcp HTTP/1.1\r\nhost: 127.0.0.1:${hub.port}\r\n${Object.entries({ ...h, ...extra })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}`;
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' });
    // A request on another connection acknowledges nothing: the bytes may be lost with theirs.
    const elsewhere = rawClient(hub.port);
    elsewhere.send(`${head('POST', { 'content-length': String(Buffer.byteLength(ping)) })}\r\n${ping}`);
    expect((await elsewhere.waitFor(1))[0]!.status).toBe(200);
    elsewhere.socket.destroy();
    // Read in full on a connection, then a new request of the session on it: the stream is let go.
    const conn = rawClient(hub.port);
    conn.send(`${head('GET', { accept: 'text/event-stream', 'last-event-id': first!.id! }).replace(/content-type: [^\r]*\r\n/, '')}\r\n`);
    const [again] = await conn.waitFor(1);
    expect(again!.status).toBe(200);
    expect(again!.body).toContain('slept 600');
    conn.send(`${head('POST', { 'content-length': String(Buffer.byteLength(ping)) })}\r\n${ping}`);
    expect((await conn.waitFor(2))[1]!.status).toBe(200);
    conn.socket.destroy();
    const gone = await resume(h, first!.id!);
    expect(gone.status).toBe(400);
    expect(await gone.text()).toMatch(/no longer kept/);
  }, 20_000);

  it('raw: the replay keeps at most 256 events and 1 MiB of a stream, the answer always; another session, or a made-up id, gets 400 and nothing of it', async () => {
    const a = await rawSession();
    const b = await rawSession();
    const call = (id: number, count: number, pad: number) =>
      callAndCut(a.h, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 's__chatter', arguments: { count, pad, ms: 0 }, _meta: { progressToken: `c${id}` } } }, (evs) => evs.length >= 2);
    const [p1] = await call(21, 400, 10);
    const [p2] = await call(22, 40, 64 * 1024);
    await waitForRows(db, { tool: 's__chatter' }, (r) => r.filter((x) => x.outcome === 'ok').length >= 2);

    // By count: 400 reports and the answer (events 1..401): the last 256 are kept.
    const r1 = await resume(a.h, p1!.id!);
    expect(r1.status).toBe(200);
    const e1 = events(await r1.text());
    expect(e1).toHaveLength(256);
    expect(e1[0]!.id).toBe(p1!.id!.replace(/0$/, '146'));
    expect(JSON.parse(e1.at(-1)!.data)).toMatchObject({ id: 21, result: { content: [{ text: 'chattered 400' }] } });

    // By size: 40 reports of 64 KiB (2.6 MB): what is kept is under 1 MiB, and ends with the answer.
    const r2 = await resume(a.h, p2!.id!);
    const t2 = await r2.text();
    expect(Buffer.byteLength(t2)).toBeLessThanOrEqual(1024 * 1024);
    const e2 = events(t2);
    expect(e2.length).toBeGreaterThan(1);
    expect(e2.length).toBeLessThan(20);
    expect(JSON.parse(e2.at(-1)!.data)).toMatchObject({ id: 22, result: { content: [{ text: 'chattered 40' }] } });

    // Session b, with a's id: nothing of a's stream, and no hint it exists.
    const foreign = await resume(b.h, p1!.id!);
    expect(foreign.status).toBe(400);
    const body = await foreign.text();
    expect(body).toMatch(/does not name an event of this session/);
    expect(body).not.toMatch(/chatter|progress/);
    // Made up, or of a stream a never had.
    for (const made of ['1', 'nope', `${p1!.id!.split('.')[0]}.999.0`, p1!.id!.replace(/0$/, '9999')]) expect((await resume(a.h, made)).status).toBe(400);
    // An unknown session is 404, as for any request naming it.
    const unknown = await fetch(hub.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': 'no-such-session', 'mcp-protocol-version': LEGACY_VERSION, 'last-event-id': p1!.id! } });
    expect(unknown.status).toBe(404);
    // Ended, its streams go with it.
    await fetch(hub.url, { method: 'DELETE', headers: a.h });
    expect((await resume(a.h, p1!.id!)).status).toBe(404);
  }, 30_000);

  it('raw: a question open at the cut waits for the reconnection, which replays it; answered then, the call ends with that answer', async () => {
    const { h } = await rawSession({ elicitation: {} });
    const got = await callAndCut(h, { jsonrpc: '2.0', id: 32, method: 'tools/call', params: { name: 'leg__elicit_form', arguments: { who: 'cut' } } }, (evs) => evs.some((e) => e.data.includes('elicitation/create')));
    const question = got.find((e) => e.data.includes('elicitation/create'))!;
    const before = got[got.indexOf(question) - 1]!;
    // From the event before it: the replay brings the question again (a client may have missed it).
    const res = await resume(h, before.id!);
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!events(text).some((e) => e.data.includes('elicitation/create'))) text += new TextDecoder().decode((await reader.read()).value);
    expect(events(text).find((e) => e.data.includes('elicitation/create'))!.id).toBe(question.id);
    const qid = (JSON.parse(question.data) as { id: string }).id;
    const answered = await fetch(hub.url, { method: 'POST', headers: h, body: JSON.stringify({ jsonrpc: '2.0', id: qid, result: { action: 'accept', content: { name: 'Ada' } } }) });
    expect(answered.status).toBe(202);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const answer = JSON.parse(events(text).at(-1)!.data) as { id: number; result: { content: { text: string }[] } };
    expect(answer).toMatchObject({ id: 32, result: { content: [{ text: 'action=accept content={"name":"Ada"}' }] } });
    const rows = await waitForRows(db, { tool: 'leg__elicit_form' }, (r) => r.some((x) => x.requestId === 32));
    expect(rows.find((x) => x.requestId === 32)!.outcome).toBe('ok');
  }, 20_000);

  it('raw: the standalone GET stream is primed too, and a reconnection with its Last-Event-ID takes it over', async () => {
    const { h } = await rawSession();
    const ac = new AbortController();
    const res = await fetch(hub.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': h['mcp-session-id']!, 'mcp-protocol-version': LEGACY_VERSION }, signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const { value } = await reader.read();
    const [priming] = events(new TextDecoder().decode(value));
    expect(priming).toMatchObject({ data: '', retry: '1000' });
    ac.abort();
    expect(priming!.id).toMatch(/^[\w-]+\.g\d+\.0$/);
    const back = await resume(h, priming!.id!);
    expect(back.status).toBe(200);
    back.body?.cancel().catch(() => undefined);
    // A standalone stream's id this session cannot resume (an earlier hub process's, which took
    // the session back; another session's): a new stream, of this session, rather than none.
    const other = await rawSession();
    const ac2 = new AbortController();
    const fresh = await fetch(hub.url, { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': other.sid, 'mcp-protocol-version': LEGACY_VERSION, 'last-event-id': priming!.id! }, signal: ac2.signal });
    expect(fresh.status).toBe(200);
    const first = await (fresh.body as ReadableStream<Uint8Array>).getReader().read();
    const [newPriming] = events(new TextDecoder().decode(first.value));
    expect(newPriming!.id).toMatch(/^[\w-]+\.g\d+\.0$/);
    expect(newPriming!.id!.split('.')[0]).not.toBe(priming!.id!.split('.')[0]);
    ac2.abort();
  }, 20_000);
});

// parseMessages is the suite's reader of SSE answers: the hub's ids and priming events must not upset it.
it('an answer stream with ids and a priming event still parses as the suite reads SSE', () => {
  expect(parseMessages('text/event-stream', 'id: a.1.0\nretry: 1000\ndata: \n\nid: a.1.1\nevent: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
});
