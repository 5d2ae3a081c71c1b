/**
 * Bounds on the questions the hub puts to a client for an upstream (elicitation, sampling,
 * roots), through the real built hub and the translation fixtures: a legacy client that stops
 * answering, or vanishes while asked, cannot hold a call (and a legacy stdio upstream's call
 * gate, which such a call holds alone) beyond `policy.inputTimeoutMs`.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEGACY_VERSION, META_CAPS, modernBody, modernHeaders, modernMeta, modernPost, post, waitForReady, type Json, type RpcMessage } from '../helpers/wire.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';
import { META_KEY, queryRows, sleep, waitForRows, type Row } from './ledger-helpers.js';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const INPUT_TIMEOUT_MS = 4000;
const RELAY_FIXTURE = 'test/fixtures/translation/legacy-relay.mjs';
const dir = mkdtempSync(join(tmpdir(), 'sy-limits-'));
const EVENTS = join(dir, 'events.log');
let th: TranslationHub;
let db: string;

/**
 * lh holds each notifications/cancelled POST this long before it takes it: the hub's answer to
 * the withdrawn question (an error), sent on another connection, would overtake it, and the
 * server, its question answered, end the call before the cancellation came. The hub sends that
 * answer only once the cancellation was taken, so lh hears it all the same (it failed now and
 * then on a loaded machine, when the answer overtook it by chance).
 */
const CANCEL_HOLD_MS = 300;
/**
 * lh holds a tools/call POST whose `who` starts with `held` this long (longer than a
 * cancellation): the client's cancellation of a call just sent reaches the hub while the server
 * has yet to take the request.
 */
const CALL_HOLD_MS = 600;

beforeAll(async () => {
  writeFileSync(EVENTS, '');
  // lhOnly: an endpoint whose clients' roots changes reach lh alone.
  th = await startTranslationHub({ policy: { inputTimeoutMs: INPUT_TIMEOUT_MS }, groups: { lhOnly: { servers: ['lh'] } } }, { EVENTS_FILE: EVENTS, CANCEL_HOLD_MS: String(CANCEL_HOLD_MS), CALL_HOLD_MS: String(CALL_HOLD_MS) });
  db = join(th.hub.dir, 'ledger.db');
}, 60_000);

afterAll(async () => {
  await th?.stop();
});

const events = (): string[] => readFileSync(EVENTS, 'utf8').split('\n').filter(Boolean);

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** A raw legacy HTTP client: a session, and requests whose SSE answers are read message by message. */
async function legacyClient(url: string) {
  const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await post(url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: USER_CAPABILITIES, clientInfo: { name: 'limits-legacy', version: '1' } } }, base);
  const sid = init.headers.get('mcp-session-id')!;
  const headers = { ...base, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return {
    /** Every message of the answer goes to `onMsg`; resolves with the final response (undefined: the stream ended without one). */
    async call(id: number, method: string, params: Json, onMsg: (m: RpcMessage) => void, signal?: AbortSignal): Promise<RpcMessage | undefined> {
      const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method, params }), signal });
      if (!(res.headers.get('content-type') ?? '').includes('event-stream')) return JSON.parse(await res.text()) as RpcMessage;
      const dec = new TextDecoder();
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += dec.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const data = buf
            .slice(0, i)
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5))
            .join('');
          buf = buf.slice(i + 2);
          if (!data) continue;
          const m = JSON.parse(data) as RpcMessage;
          if (m.id === id && m.method === undefined) return m;
          onMsg(m);
        }
      }
      return undefined;
    },
    send: (msg: Json) => post(url, { jsonrpc: '2.0', ...msg }, headers),
  };
}

const rowOf = (tool: string, requestId: number) => (rows: Row[]) => rows.find((r) => r.tool === tool && r.requestId === requestId && r.outcome !== 'in_flight');

// ls: legacy over stdio (its call gate: a call that may ask runs alone); lh: legacy over HTTP;
// ms: modern, whose input_required the hub turns into a question on the legacy client's stream.
// A wait for an event (polled), not a bound: the upstreams' suites run at once, and a loaded
// machine took more than 2 s to carry the cancellation to lh.
const HEARD_WITHIN_MS = 10_000;

// Each upstream's tests wait out a limit: the upstreams' suites run at once (concurrent), the
// tests of one in turn (sequential: ls's gate would hold the second behind the first).
describe('legacy clients asked', () => {
  describe.concurrent.each(['ls', 'lh', 'ms'])('a legacy client asked for %s', (up) => {
    it.sequential('vanishes while asked (its POST stream cut, no notifications/cancelled, no reconnection): the call ends once the reconnection grace is over, the upstream is told, the row is cancelled', async () => {
      const client = await legacyClient(th.url);
      const who = `vanished-${up}`;
      const id = 4100 + up.charCodeAt(1);
      const ac = new AbortController();
      let asked!: () => void;
      const questionArrived = new Promise<void>((r) => (asked = r));
      const sent = Date.now();
      const call = client.call(id, 'tools/call', { name: `${up}__elicit_form`, arguments: { who } }, (m) => m.method === 'elicitation/create' && asked(), ac.signal).catch(() => undefined);
      await questionArrived;
      const askedAfter = Date.now() - sent;
      ac.abort(); // the client is gone: its socket closes, and it says nothing
      await call;
      const row = (await waitForRows(db, { tool: `${up}__elicit_form` }, (rows) => rowOf(`${up}__elicit_form`, id)(rows) !== undefined).then(rowOf(`${up}__elicit_form`, id)))!;
      // Ended before inputTimeoutMs once asked: a question on a resumable stream waits for a
      // reconnection only for its grace (half of inputTimeoutMs here, 5 s at most). Judged from
      // the question on, not from the call's start: a loaded machine may take a second or two
      // to get as far as asking.
      expect(row.latencyMs! - askedAfter, `latency ${row.latencyMs} ms, asked after ${askedAfter} ms`).toBeLessThan(INPUT_TIMEOUT_MS);
      expect(row.outcome).toBe('cancelled');
      // Within its grace, or, on a loaded machine whose client took the question late (or whose
      // hub saw the cut late), before its time to answer ran out: cancelled either way.
      expect(row.errorMessage).toMatch(up === 'ms' ? /stream closed|did not reconnect/ : new RegExp(`stream closed .*did not reconnect (within ${INPUT_TIMEOUT_MS / 2} ms|before its time to answer \\(${INPUT_TIMEOUT_MS} ms\\) ran out)`));
      if (up !== 'ms') await until('the upstream hears the cancellation', () => events().includes(`cancelled elicit_form ${who}`), HEARD_WITHIN_MS);
      // Another user's plain call to that upstream is not held behind it.
      const t0 = Date.now();
      const other = await modernPost(th.url, id + 1, 'tools/call', { name: `${up}__echo`, arguments: { text: 'next' } });
      expect(other.body?.result).toMatchObject({ content: [{ type: 'text', text: 'echo:next' }] });
      expect(Date.now() - t0).toBeLessThan(3000);
    }, 30_000);

    it.sequential('vanishes late while asked (after more than its reconnection grace, so its time runs out within the grace): the row is cancelled, not timeout', async () => {
      const client = await legacyClient(th.url);
      const who = `vanished-late-${up}`;
      const id = 4300 + up.charCodeAt(1);
      const ac = new AbortController();
      let asked!: () => void;
      const questionArrived = new Promise<void>((r) => (asked = r));
      const call = client.call(id, 'tools/call', { name: `${up}__elicit_form`, arguments: { who } }, (m) => m.method === 'elicitation/create' && asked(), ac.signal).catch(() => undefined);
      await questionArrived;
      // The scenario, not a wait for an event: the client stays past half its time (the grace,
      // INPUT_TIMEOUT_MS / 2), then vanishes. Its grace would end after its time to answer.
      await sleep(INPUT_TIMEOUT_MS / 2 + 300);
      ac.abort();
      await call;
      const row = (await waitForRows(db, { tool: `${up}__elicit_form` }, (rows) => rowOf(`${up}__elicit_form`, id)(rows) !== undefined).then(rowOf(`${up}__elicit_form`, id)))!;
      expect(row.outcome).toBe('cancelled');
      expect(row.errorMessage).toMatch(/stream closed .*did not reconnect/);
      if (up !== 'ms') await until('the upstream hears the cancellation', () => events().includes(`cancelled elicit_form ${who}`), HEARD_WITHIN_MS);
    }, 30_000);

    it.sequential('stays but never answers: after inputTimeoutMs the question is withdrawn, the upstream told, the client gets an error, the row is timeout', async () => {
      const client = await legacyClient(th.url);
      const who = `silent-${up}`;
      const id = 4200 + up.charCodeAt(1);
      const seen: RpcMessage[] = [];
      const t0 = Date.now();
      const final = await client.call(id, 'tools/call', { name: `${up}__elicit_form`, arguments: { who } }, (m) => seen.push(m));
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(INPUT_TIMEOUT_MS - 200);
      expect(took).toBeLessThan(INPUT_TIMEOUT_MS + 5000);
      const question = seen.find((m) => m.method === 'elicitation/create');
      expect(question).toBeDefined();
      // Withdrawn on the same stream, for the id the hub gave it (digest §4).
      expect(seen).toContainEqual(expect.objectContaining({ method: 'notifications/cancelled', params: expect.objectContaining({ requestId: question!.id }) }));
      expect(final?.result).toMatchObject({ isError: true });
      expect(JSON.stringify(final?.result)).toContain(`did not answer elicitation/create within ${INPUT_TIMEOUT_MS} ms`);
      const row = rowOf(`${up}__elicit_form`, id)(await queryRows(db, { tool: `${up}__elicit_form` }))!;
      expect(row.outcome).toBe('timeout');
      if (up !== 'ms') await until('the upstream hears the cancellation', () => events().includes(`cancelled elicit_form ${who}`), HEARD_WITHIN_MS);
      // A late answer finds nothing waiting: accepted and dropped.
      expect((await client.send({ id: question!.id, result: { action: 'accept', content: { name: 'late' } } })).status).toBe(202);
    }, 30_000);
  });
});

describe('a call to lh cancelled while its request is on its way (its POST held by the server)', () => {
  it('is cancelled upstream all the same: the cancellation goes once the server took the request, and a question the call asked meanwhile is answered after it', async () => {
    const client = await legacyClient(th.url);
    const who = 'held-cancel';
    const id = 4300;
    const ac = new AbortController();
    const call = client.call(id, 'tools/call', { name: 'lh__elicit_form', arguments: { who } }, () => undefined, ac.signal).catch(() => undefined);
    // The hub sent it: the server has it, held.
    await until('the server holds the request', () => events().includes(`held ${who}`), HEARD_WITHIN_MS);
    // Sent at once, the cancellation found no such request (the server dropped it) and the call
    // ran on. Sent once the server's answer began, it is held: the question the call asked at
    // once (on that answer's stream) has the hub's error answer (the call is over for the hub),
    // which would overtake it and end the call before it came, unless it waits for it.
    expect((await client.send({ method: 'notifications/cancelled', params: { requestId: id, reason: 'changed my mind' } })).status).toBe(202);
    await until('the upstream hears the cancellation', () => events().includes(`cancelled elicit_form ${who}`), HEARD_WITHIN_MS);
    ac.abort();
    await call;
  }, 30_000);
});

describe("a legacy client's roots changing again while lh's roots/list of the first change is still at the client", () => {
  it("lh's roots/list after the second change asks the client again: it does not get the answer the client began before it", async () => {
    let roots = 'file:///before';
    let asked = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const client = new ClientV1({ name: 'roots-twice', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    // Each answer is the roots as they were when asked; those asked before the change wait for the gate.
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      const now = roots;
      if (now === 'file:///before') await gate;
      return { roots: [{ uri: now }] };
    });
    await client.connect(new TransportV1(new URL('/mcp/lhOnly', th.url)));
    try {
      // A call first, as a client makes one (a change before any call is passed on too: roots-before-any-call.test.ts).
      expect(JSON.stringify(await client.callTool({ name: 'lh__echo', arguments: { text: 'roots' } }))).toContain('echo:roots');
      // The client's GET stream, on which it is asked outside any call, is open once it is asked there.
      await until('lh asks for the roots', async () => {
        if (asked === 0) await client.sendRootsListChanged();
        return asked > 0 || undefined;
      }, HEARD_WITHIN_MS);
      roots = 'file:///after';
      await client.sendRootsListChanged();
      // Shared with the question still open at the client, its answer would be the roots before.
      await until('lh is told the roots after the change', () => events().some((e) => e === 'roots legacy-http file:///after'), HEARD_WITHIN_MS);
      expect(asked).toBeGreaterThanOrEqual(2);
    } finally {
      release();
      await client.close();
    }
  }, 30_000);
});

describe('a call whose legacy HTTP session the hub replaced (its circuit opened) while its question was at the client', () => {
  let up: HttpFixture;
  let hub: HubProcess;
  let stderr = '';
  beforeAll(async () => {
    // A held call outlasts timeoutMs: one failure opens the circuit, and the hub connects again (a new session).
    up = await startHttpFixture('test/fixtures/translation/legacy-server.mjs', { SERVER_NAME: 'legacy-trip', CALL_HOLD_MS: '2500' });
    up.proc.stderr!.on('data', (d: Buffer) => void (stderr += d.toString()));
    hub = await startHub({ servers: { lt: { url: up.url, timeoutMs: 1500, circuitBreaker: { failures: 1, cooldownMs: 0 } } } });
    await waitForReady(hub.url, ['lt']);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  it("has the client's answer reach the session that asked, not the one that replaced it", async () => {
    const sessions = (): number => stderr.split(' opened').length - 1;
    const client = await legacyClient(hub.url);
    let question: RpcMessage | undefined;
    const final = client.call(4400, 'tools/call', { name: 'lt__elicit_form', arguments: { who: 'replaced' } }, (m) => {
      if (m.method === 'elicitation/create') question = m;
    });
    await until('the question', () => question, HEARD_WITHIN_MS);
    const before = sessions();
    const other = await modernPost(hub.url, 4401, 'tools/call', { name: 'lt__elicit_form', arguments: { who: 'held-trip' } });
    expect(JSON.stringify(other.body)).toMatch(/did not answer within 1500 ms/);
    await until('a new session', () => sessions() > before || undefined, HEARD_WITHIN_MS);
    await waitForReady(hub.url, ['lt']);
    // Posted with the new session's id, the answer was dropped there; the call waited out its timeout.
    expect((await client.send({ id: question!.id, result: { action: 'accept', content: { name: 'Ann' } } })).status).toBe(202);
    const answer = await final;
    expect(JSON.stringify(answer?.result)).toContain('action=accept content={\\"name\\":\\"Ann\\"}');
  }, 30_000);
});

/** A modern tools/call declaring everything a user can be asked, raw (the retry's fields as given). */
function modernCall(id: number, name: string, params: Json = {}) {
  return post(th.url, modernBody(id, 'tools/call', { name, ...params }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
}

// As above: the upstreams' suites at once.
describe('modern clients parked', () => {
  describe.concurrent.each(['ls', 'lh'])('a modern client parked on %s', (up) => {
    it.sequential('retrying without answers does not keep the call parked past inputTimeoutMs from the first ask', async () => {
      const who = `stalling-${up}`;
      const args = { arguments: { who } };
      const t0 = Date.now();
      let id = 4300 + up.charCodeAt(1) * 10;
      let r = await modernCall(id, `${up}__elicit_form`, args);
      expect(r.body?.result).toMatchObject({ resultType: 'input_required' });
      // An empty retry every second: each is asked again, until the question's time is up.
      let parkedFor = 0;
      while (r.body?.result?.resultType === 'input_required' && Date.now() - t0 < INPUT_TIMEOUT_MS * 3) {
        await sleep(1000);
        parkedFor = Date.now() - t0;
        r = await modernCall(++id, `${up}__elicit_form`, { ...args, inputResponses: {}, requestState: r.body.result.requestState });
      }
      expect(parkedFor).toBeLessThan(INPUT_TIMEOUT_MS + 1500);
      expect(r.body?.error).toMatchObject({ code: -32602 });
      await until('the upstream hears the cancellation', () => events().includes(`cancelled elicit_form ${who}`), HEARD_WITHIN_MS);
    }, 30_000);
  });
});

/** The key of the first input request of an input_required result. */
const firstKey = (result: Json | undefined): string => Object.keys((result?.inputRequests ?? {}) as Json)[0]!;

describe.each(['ls', 'lh'])('answers of the wrong shape (modern client, legacy upstream %s)', (up) => {
  it('are treated as missing: asked again, never sent upstream as the result; a good answer then completes the call', async () => {
    const args = { arguments: { who: `shapes-${up}` } };
    let id = 4500 + up.charCodeAt(1) * 10;
    let r = await modernCall(id, `${up}__elicit_form`, args);
    const key = firstKey(r.body?.result);
    expect(r.body?.result).toMatchObject({ resultType: 'input_required' });
    for (const bad of [[1, 2], 'accept', { action: 'maybe' }, { content: { name: 'x' } }, { action: 'accept', content: [1] }, { role: 'assistant', model: 'm', content: { type: 'text', text: 'hi' } }]) {
      r = await modernCall(++id, `${up}__elicit_form`, { ...args, inputResponses: { [key]: bad }, requestState: r.body?.result?.requestState });
      expect(r.body?.result, JSON.stringify(bad)).toMatchObject({ resultType: 'input_required', inputRequests: { [key]: { method: 'elicitation/create' } } });
    }
    r = await modernCall(++id, `${up}__elicit_form`, { ...args, inputResponses: { [key]: { action: 'accept', content: { name: 'Ada' } } }, requestState: r.body?.result?.requestState });
    expect(r.body?.result).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
  }, 30_000);
});

describe.each(['ls', 'lh'])('a sampling answer of the wrong shape (modern client, legacy upstream %s)', (up) => {
  it('an error object, an ElicitResult, a message without a model: asked again, never sent upstream; a CreateMessageResult then completes the call', async () => {
    const args = { arguments: { prompt: `sampling-shapes-${up}` } };
    let id = 4650 + up.charCodeAt(1) * 10;
    let r = await modernCall(id, `${up}__sample`, args);
    const key = firstKey(r.body?.result);
    expect(r.body?.result, r.text).toMatchObject({ resultType: 'input_required', inputRequests: { [key]: { method: 'sampling/createMessage' } } });
    for (const bad of [{ code: -1, message: 'User rejected sampling' }, { action: 'decline' }, { role: 'assistant', content: { type: 'text', text: 'hi' } }]) {
      r = await modernCall(++id, `${up}__sample`, { ...args, inputResponses: { [key]: bad }, requestState: r.body?.result?.requestState });
      expect(r.body?.result, JSON.stringify(bad)).toMatchObject({ resultType: 'input_required', inputRequests: { [key]: { method: 'sampling/createMessage' } } });
    }
    r = await modernCall(++id, `${up}__sample`, { ...args, inputResponses: { [key]: { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm' } }, requestState: r.body?.result?.requestState });
    expect(r.body?.result, r.text).toMatchObject({ content: [{ type: 'text', text: 'sampled text=hi model=m' }] });
  }, 30_000);
});

describe.each(['ls', 'lh'])('answers under keys the round did not ask (modern client, legacy upstream %s)', (up) => {
  it('are ignored (digest 5.1): the asked key\'s answer completes the call, and an answer under another key alone is a missing answer, asked again', async () => {
    const args = { arguments: { who: `keys-${up}` } };
    let id = 4600 + up.charCodeAt(1) * 10;
    let r = await modernCall(id, `${up}__elicit_form`, args);
    const key = firstKey(r.body?.result);
    expect(r.body?.result).toMatchObject({ resultType: 'input_required' });
    const answer = { action: 'accept', content: { name: 'Ada' } };
    r = await modernCall(++id, `${up}__elicit_form`, { ...args, inputResponses: { [`${key}x`]: answer }, requestState: r.body?.result?.requestState });
    expect(r.body?.result, r.text).toMatchObject({ resultType: 'input_required', inputRequests: { [key]: { method: 'elicitation/create' } } });
    r = await modernCall(++id, `${up}__elicit_form`, { ...args, inputResponses: { zz: { action: 'decline' }, [key]: answer, __proto__x: 1 }, requestState: r.body?.result?.requestState });
    expect(r.body?.result, r.text).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
  }, 30_000);
});

describe.each(['ls', 'lh'])('a decline or cancel with "content": null (as loose serialisers write it) is a decline or cancel (legacy upstream %s)', (up) => {
  it('from a modern client', async () => {
    const args = { arguments: { who: `null-content-${up}` } };
    const id = 4700 + up.charCodeAt(1) * 10;
    const r = await modernCall(id, `${up}__elicit_form`, args);
    const key = firstKey(r.body?.result);
    const done = await modernCall(id + 1, `${up}__elicit_form`, { ...args, inputResponses: { [key]: { action: 'decline', content: null } }, requestState: r.body?.result?.requestState });
    expect(done.body?.result, done.text).toMatchObject({ content: [{ type: 'text', text: expect.stringMatching(/^action=decline/) }] });
  }, 30_000);

  it('from a legacy client', async () => {
    const client = await legacyClient(th.url);
    const final = await client.call(4790 + up.charCodeAt(1), 'tools/call', { name: `${up}__elicit_form`, arguments: { who: `null-legacy-${up}` } }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, result: { action: 'cancel', content: null } });
    });
    expect(final?.result, JSON.stringify(final)).toMatchObject({ content: [{ type: 'text', text: expect.stringMatching(/^action=cancel/) }] });
  }, 30_000);
});

describe('a legacy client answering with the wrong shape (legacy upstream ls)', () => {
  it('its answer reaches the upstream as an error saying so, not as an ElicitResult', async () => {
    const client = await legacyClient(th.url);
    const id = 4600;
    const final = await client.call(id, 'tools/call', { name: 'ls__elicit_form', arguments: { who: 'bad-shape' } }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, result: { action: 'maybe' } });
    });
    expect(final?.result).toMatchObject({ isError: true });
    expect(JSON.stringify(final?.result)).toContain('the client answered elicitation/create with an invalid result');
  }, 30_000);
});

describe('a legacy client answering with a response that is not well formed (legacy upstream ls)', () => {
  // JSON-RPC never answers a response: the POST carrying it gets 202 and no body, and the
  // question it answers fails at once with its problem (not at inputTimeoutMs).
  it.each([
    ['a null result', 'null', null],
    ['a string result', '"str"', null],
    ['an array result', '[1]', null],
    ['a string error', null, '"no"'],
  ])('%s reaches the upstream as an error saying so, at once', async (_label, result, error) => {
    const client = await legacyClient(th.url);
    const id = 4650;
    const sent: Promise<{ status: number; text: string }>[] = [];
    const t0 = Date.now();
    const final = await client.call(id, 'tools/call', { name: 'ls__elicit_form', arguments: { who: 'malformed' } }, (m) => {
      if (m.method === 'elicitation/create') sent.push(client.send(JSON.parse(`{"id":${JSON.stringify(m.id)},${result !== null ? `"result":${result}` : `"error":${error}`}}`)));
    });
    expect(Date.now() - t0).toBeLessThan(INPUT_TIMEOUT_MS - 1000);
    expect(final?.result, JSON.stringify(final)).toMatchObject({ isError: true });
    expect(JSON.stringify(final?.result)).toContain('the client answered elicitation/create with an invalid response');
    expect(sent).toHaveLength(1);
    expect(await sent[0]).toMatchObject({ status: 202, text: '' });
  }, 30_000);

  // No message at all, so refused as one (400, -32600), yet its id names the question: only an
  // answer could. The question waited out inputTimeoutMs; now it fails at once.
  it('a message of the question\'s id alone is refused -32600, and the question fails at once', async () => {
    const client = await legacyClient(th.url);
    const sent: Promise<{ status: number; text: string }>[] = [];
    const t0 = Date.now();
    const final = await client.call(4660, 'tools/call', { name: 'ls__elicit_form', arguments: { who: 'id-only' } }, (m) => {
      if (m.method === 'elicitation/create') sent.push(client.send({ id: m.id }));
    });
    expect(Date.now() - t0).toBeLessThan(INPUT_TIMEOUT_MS - 1000);
    expect(JSON.stringify(final?.result), JSON.stringify(final)).toContain('the client answered elicitation/create with an invalid response: it has neither a result nor an error');
    expect(sent).toHaveLength(1);
    const refused = await sent[0]!;
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text).error.code).toBe(-32600);
  }, 30_000);

  it('one that answers no open question is dropped: 202, no body', async () => {
    const client = await legacyClient(th.url);
    for (const body of [{ id: 'sy-999', result: null }, { result: 'x' }, { id: 'sy-998', error: 'no' }]) expect(await client.send(body), JSON.stringify(body)).toMatchObject({ status: 202, text: '' });
  });
});

// JSON-RPC's error code is an integer. A client's 1.5 (or 1e300) was relayed as it came: the SDK v1
// server could not read the answer, its request stayed open, and the call waited out the server's
// timeout (60 s), counted as a call the server left unanswered; a modern upstream's round ended
// with the hub answering its client with that code. It is the client's error all the same: -32603
// with its message, as a code that is no number already was.
describe("a legacy client's error answer whose code is no integer", () => {
  it.each([['1.5', 1.5], ['1e300', 1e300]])('(%s) reaches a legacy upstream (ls) as -32603 with its message, at once', async (_label, code) => {
    const client = await legacyClient(th.url);
    const t0 = Date.now();
    const final = await client.call(4680, 'tools/call', { name: 'ls__elicit_form', arguments: { who: 'odd-code' } }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, error: { code, message: 'not an integer' } });
    });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(final?.result, JSON.stringify(final)).toMatchObject({ isError: true, content: [{ type: 'text', text: 'MCP error -32603: not an integer' }] });
  }, 30_000);

  it.each([['1.5', 1.5], ['1e300', 1e300]])('(%s) ends a modern upstream’s round (ms) with -32603, never that code', async (_label, code) => {
    const client = await legacyClient(th.url);
    const final = await client.call(4690, 'tools/call', { name: 'ms__elicit_form', arguments: { who: 'odd-code' } }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, error: { code, message: 'not an integer' } });
    });
    expect(final?.error, JSON.stringify(final)).toMatchObject({ code: -32603, message: expect.stringContaining('not an integer') });
  }, 30_000);
});

describe('an upstream input_required the protocol does not allow', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    // Requests of 128 KiB at most: big_state's requestState could not come back sealed.
    hub = await startHub({ listen: { maxBodyBytes: 131_072 }, servers: { odd: nodeServer('test/fixtures/translation/odd-input-required.mjs') } });
    await waitForReady(hub.url, ['odd']);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  const MALFORMED = ['ping_method', 'unknown_method', 'null_request', 'array_requests', 'no_fields', 'empty_map', 'form_no_schema', 'url_no_url', 'sampling_no_tokens'];

  it.each(MALFORMED)('%s: a modern client gets -32603 naming the upstream, not -32021 for a capability it lacks', async (tool) => {
    const name = `odd__${tool}`;
    const r = await post(hub.url, modernBody(4700, 'tools/call', { name }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
    expect(r.body?.error, r.text).toMatchObject({ code: -32603, message: expect.stringContaining('server "odd" answered with a malformed input_required') });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: name }, (rows) => rows.some((x) => x.outcome !== 'in_flight'));
    expect(rows.at(-1)).toMatchObject({ outcome: 'rpc_error', errorCode: -32603 });
  });

  it.each(MALFORMED)('%s: a legacy client gets an error naming the upstream, and is never asked', async (tool) => {
    const name = `odd__${tool}`;
    const client = await legacyClient(hub.url);
    const seen: RpcMessage[] = [];
    const final = await client.call(4800, 'tools/call', { name }, (m) => seen.push(m));
    expect(final?.error, JSON.stringify(final)).toMatchObject({ code: -32603, message: expect.stringContaining('server "odd" answered with a malformed input_required') });
    expect(seen.filter((m) => m.method !== undefined && m.id !== undefined)).toEqual([]);
  });

  it('a requestState too large to come back once sealed is the upstream\'s error for a modern client (a legacy one never carries it)', async () => {
    const r = await post(hub.url, modernBody(4950, 'tools/call', { name: 'odd__big_state' }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', 'odd__big_state'));
    expect(r.body?.error, r.text.slice(0, 300)).toMatchObject({ code: -32603, message: expect.stringContaining('server "odd" answered with a requestState of 100000 characters') });
    const legacy = await legacyClient(hub.url);
    const final = await legacy.call(4951, 'tools/call', { name: 'odd__big_state' }, () => undefined);
    expect(final?.result).toMatchObject({ content: [{ type: 'text', text: expect.stringContaining('got {} state="sss') }] });
  });

  it('a well-formed requestState-only round still goes through (both eras)', async () => {
    const legacy = await legacyClient(hub.url);
    const final = await legacy.call(4900, 'tools/call', { name: 'odd__state_only' }, () => undefined);
    expect(final?.result).toMatchObject({ content: [{ type: 'text', text: 'got {} state="go"' }] });
    const r = await post(hub.url, modernBody(4901, 'tools/call', { name: 'odd__state_only' }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', 'odd__state_only'));
    expect(r.body?.result).toMatchObject({ resultType: 'input_required', requestState: expect.any(String) });
  });
});

describe('a legacy client of a modern upstream (hand-written, odd-input-required)', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    // Long enough that no question's own timer explains what these tests see.
    hub = await startHub({
      listen: { maxBodyBytes: 65_536 },
      policy: { inputTimeoutMs: 30_000 },
      servers: {
        odd: nodeServer('test/fixtures/translation/odd-input-required.mjs'),
        // Holds a retry of held_state 0.8 s; one request at a time, none waiting for a slot, and a
        // call refused busy not tried again (it would be: it surely never ran).
        held: { ...nodeServer('test/fixtures/translation/odd-input-required.mjs', [], { HOLD_MS: '800' }), maxConcurrent: 1, maxQueue: 0, retry: { maxAttempts: 1, budgetMs: 0 } },
      },
    });
    await waitForReady(hub.url, ['odd', 'held']);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  it('is asked a question the upstream keyed "__proto__", and its answer reaches the upstream under that key', async () => {
    const client = await legacyClient(hub.url);
    const asked: RpcMessage[] = [];
    const final = await client.call(5300, 'tools/call', { name: 'odd__proto_key' }, (m) => {
      if (m.method !== 'elicitation/create') return;
      asked.push(m);
      void client.send({ id: m.id, result: { action: 'accept', content: { n: 7 } } });
    });
    expect(asked).toHaveLength(1);
    expect(final?.result, JSON.stringify(final)).toMatchObject({ content: [{ type: 'text', text: 'got {"__proto__":{"action":"accept","content":{"n":7}}} state=null' }] });
  });

  // Refused with 413, the answer left its question open: the call waited out policy.inputTimeoutMs
  // and ended "the client did not answer". The id is read from either end of the body (the SDK v1
  // client writes it last); with none there, the one question open on the session is the one.
  it('whose answer is larger than listen.maxBodyBytes (413) has its question fail at once, naming the limit', async () => {
    const client = await legacyClient(hub.url);
    const content = { n: 'x'.repeat(70_000) };
    const shapes: ((id: unknown) => Json)[] = [
      (id) => ({ result: { action: 'accept', content }, id }),
      (id) => ({ id, result: { action: 'accept', content } }),
      (id) => ({ result: { action: 'accept', content }, id, note: 'id not at either end' }),
    ];
    for (const [i, shape] of shapes.entries()) {
      const t0 = Date.now();
      let sent: Promise<number> | undefined;
      const final = await client.call(5600 + i, 'tools/call', { name: 'odd__proto_key' }, (m) => {
        if (m.method === 'elicitation/create') sent = client.send(shape(m.id)).then((r) => r.status);
      });
      expect(final?.error, JSON.stringify(final)).toMatchObject({ code: -32603, message: expect.stringContaining('larger than the hub takes (listen.maxBodyBytes, 65536 bytes)') });
      expect(Date.now() - t0, `shape ${i}`).toBeLessThan(15_000);
      expect(await sent).toBe(413);
    }
  });

  it('has a question still open withdrawn (notifications/cancelled) when its sibling in the same round is refused and the call ends', async () => {
    const client = await legacyClient(hub.url);
    const seen: RpcMessage[] = [];
    const t0 = Date.now();
    const final = await client.call(5400, 'tools/call', { name: 'odd__two_mixed' }, (m) => {
      seen.push(m);
      // The elicitation is left open; the sampling is refused at once.
      if (m.method === 'sampling/createMessage') void client.send({ id: m.id, error: { code: -1, message: 'user rejected sampling' } });
    });
    expect(final, 'the call ends with the refusal').toBeDefined();
    expect(Date.now() - t0).toBeLessThan(10_000);
    const elicit = seen.find((m) => m.method === 'elicitation/create');
    expect(elicit).toBeDefined();
    // Told on the call's own stream, before its answer: nobody will use the answer now.
    expect(seen, JSON.stringify(seen)).toContainEqual({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: elicit!.id, reason: expect.stringContaining('the call that asked ended') } });
    // Answering it now finds nothing waiting (the hub forgot it): the client gets no error for it either way, and the session still works.
    await client.send({ id: elicit!.id, result: { action: 'cancel' } });
    const after = await client.call(5401, 'tools/call', { name: 'odd__state_only' }, () => undefined);
    expect(after?.result).toMatchObject({ content: [{ type: 'text', text: 'got {} state="go"' }] });
  });

  // The last `cancel` retry of a failed round is for an upstream holding the call by its
  // requestState (47f6ffc): an empty one names nothing, and the retry only ran the tool again.
  // A null one is no string: the round is malformed, and nobody is asked.
  it.each([
    ['empty_state', 'the user said no'],
    ['null_state', 'malformed input_required: requestState must be a string'],
  ])('%s: the round the client refused gets no last cancel retry upstream', async (tool, why) => {
    const client = await legacyClient(hub.url);
    const name = `odd__${tool}`;
    const final = await client.call(5700, 'tools/call', { name }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, error: { code: -1, message: 'the user said no' } });
    });
    expect(final?.error?.message, JSON.stringify(final)).toContain(why);
    // The same upstream answers a call made after it, in order: a last retry would have come before it.
    const after = await client.call(5701, 'tools/call', { name: 'odd__state_only' }, () => undefined);
    expect(after?.result).toMatchObject({ content: [{ type: 'text', text: 'got {} state="go"' }] });
    const retried = (t: string) => hub.logs.some((l) => l.includes(`odd: ${t} retried`));
    for (const until = Date.now() + 2_000; !retried('state_only') && Date.now() < until; ) await sleep(50);
    expect(retried('state_only')).toBe(true);
    expect(retried(tool)).toBe(false);
  });

  // That last retry is made for nobody: the hub's own request (hubOwn), which takes a slot but
  // leaves room for a client's call (maxQueue), and is no call left unanswered.
  it("refused, has the round's last cancel retry sent as the hub's own request: a call made while the server holds it waits for the slot, not refused busy", async () => {
    const client = await legacyClient(hub.url);
    const final = await client.call(5800, 'tools/call', { name: 'held__held_state' }, (m) => {
      if (m.method === 'elicitation/create') void client.send({ id: m.id, error: { code: -1, message: 'the user said no' } });
    });
    expect(final?.error?.message, JSON.stringify(final)).toContain('the user said no');
    const retried = () => hub.logs.some((l) => l.includes('odd: held_state retried with {\\"k\\":{\\"action\\":\\"cancel\\"}}'));
    for (const until = Date.now() + 5_000; !retried() && Date.now() < until; ) await sleep(20);
    expect(retried()).toBe(true);
    // The server holds that retry (and its one slot) 0.8 s.
    const after = await client.call(5801, 'tools/call', { name: 'held__state_only' }, () => undefined);
    expect(after?.result, JSON.stringify(after)).toMatchObject({ content: [{ type: 'text', text: 'got {} state="go"' }] });
  });

  it('is asked nothing when one round asks more questions than a client may have open at once (40 > 32): an error naming the upstream', async () => {
    const client = await legacyClient(hub.url);
    const seen: RpcMessage[] = [];
    const final = await client.call(5350, 'tools/call', { name: 'odd__many_asks' }, (m) => seen.push(m));
    expect(final?.error, JSON.stringify(final)).toMatchObject({ code: -32603, message: expect.stringContaining('server "odd" asked 40 questions in one input_required round') });
    expect(seen.filter((m) => m.method === 'elicitation/create')).toEqual([]);
    // A modern client gets the round as the upstream gave it: it chooses what to put before its user.
    const r = await post(hub.url, modernBody(5351, 'tools/call', { name: 'odd__many_asks' }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', 'odd__many_asks'));
    expect(Object.keys((r.body?.result as Json | undefined)?.inputRequests ?? {}), r.text.slice(0, 300)).toHaveLength(40);
  });

  it('a call that ends on an input_required turn the hub cannot take further leaves its idempotency key free: never replayed', async () => {
    const client = await legacyClient(hub.url);
    const params = { name: 'odd__null_request', _meta: { [META_KEY]: 'odd-unfinished' } };
    for (const id of [5500, 5501]) {
      const r = await client.call(id, 'tools/call', params, () => undefined);
      expect(r?.error, JSON.stringify(r)).toMatchObject({ code: -32603, message: expect.stringContaining('malformed input_required') });
    }
    // Both ran (the upstream was asked twice); the second is no replay of the first.
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: 'odd__null_request' }, (r) => r.length === 2);
    expect(rows.map((r) => [r.outcome, r.errorCode])).toEqual([
      ['rpc_error', -32603],
      ['rpc_error', -32603],
    ]);
  });
});

describe('a legacy upstream’s own signals about its questions reach the legacy client (relay)', () => {
  let hub: HubProcess;
  let fixture: HttpFixture;
  beforeAll(async () => {
    fixture = await startHttpFixture(RELAY_FIXTURE);
    hub = await startHub({ servers: { rs: nodeServer(RELAY_FIXTURE), rh: { url: fixture.url } } });
    await waitForReady(hub.url, ['rs', 'rh']);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
    await fixture?.stop();
  });

  it.each(['rs', 'rh'])('%s: a server → client request of a method no client may be asked is refused to the upstream (-32601), not turned into -32021 for the modern client', async (up) => {
    const name = `${up}__asks_other`;
    const r = await post(hub.url, modernBody(4950, 'tools/call', { name }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
    expect(r.body?.result, r.text).toMatchObject({ content: [{ type: 'text', text: 'refused -32601' }] });
  });

  it.each(['rh'])('%s: a question the upstream withdraws as it asks it (both in one answer) does not park a modern client\'s call with nothing to answer', async (up) => {
    const name = `${up}__ask_withdraw`;
    const r = await post(hub.url, modernBody(4960, 'tools/call', { name }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
    expect(r.body?.result, r.text).toMatchObject({ content: [{ type: 'text', text: 'went on' }] });
  });

  it.each(['rs', 'rh'])('%s: notifications/elicitation/complete for the URL elicitation it relayed', async (up) => {
    const client = await legacyClient(hub.url);
    const seen: RpcMessage[] = [];
    const final = await client.call(5000, 'tools/call', { name: `${up}__url_complete` }, (m) => {
      seen.push(m);
      if (m.method === 'elicitation/create') void client.send({ id: m.id, result: { action: 'accept' } });
    });
    const asked = seen.find((m) => m.method === 'elicitation/create');
    const eid = asked?.params?.elicitationId;
    expect(eid).toMatch(/^E-/);
    expect(seen).toContainEqual({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId: eid } });
    expect(final?.result).toMatchObject({ content: [{ type: 'text', text: `url accept ${eid}` }] });
  });

  it.each(['rs', 'rh'])('%s: the upstream withdrawing its question (notifications/cancelled) withdraws it at the client, while the call goes on', async (up) => {
    const client = await legacyClient(hub.url);
    const seen: { m: RpcMessage; at: number }[] = [];
    const final = await client.call(5100, 'tools/call', { name: `${up}__self_cancel` }, (m) => seen.push({ m, at: Date.now() }));
    const finalAt = Date.now();
    const asked = seen.find((s) => s.m.method === 'elicitation/create');
    const withdrawn = seen.find((s) => s.m.method === 'notifications/cancelled' && s.m.params?.requestId === asked?.m.id);
    expect(withdrawn, JSON.stringify(seen.map((s) => s.m))).toBeDefined();
    // Told when the upstream gave up, not only when the call ended a second later.
    expect(finalAt - withdrawn!.at).toBeGreaterThan(500);
    expect(final?.result).toMatchObject({ content: [{ type: 'text', text: 'gave up' }] });
    // A late answer finds nothing waiting.
    expect((await client.send({ id: asked!.m.id, result: { action: 'accept', content: { name: 'late' } } })).status).toBe(202);
  });
});

describe('a modern client parked when the hub stops', () => {
  it("the call's row says the hub stopped, not that the client was slow", async () => {
    const own = await startTranslationHub({ policy: { inputTimeoutMs: 60_000 } }, { EVENTS_FILE: EVENTS });
    const name = 'ls__elicit_form';
    const r = await post(own.url, modernBody(9901, 'tools/call', { name, arguments: { who: 'parked-at-stop' } }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
    expect(r.body?.result).toMatchObject({ resultType: 'input_required' });
    await own.stop();
    const row = rowOf(name, 9901)(await queryRows(join(own.hub.dir, 'ledger.db'), { tool: name }));
    expect(row?.errorMessage).toMatch(/the hub stopped while the call waited for its client to answer/);
  }, 60_000);
});
