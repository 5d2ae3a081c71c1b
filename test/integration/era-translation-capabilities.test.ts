/**
 * Era translation at its edges, over the wire of a modern (2026-07-28) client:
 * - a parked call's progress goes to the request that waits for it now (the retry), not the
 *   first request, which was answered already (digest §8.2);
 * - an upstream's `input_required` asking for a capability the client did not declare is
 *   refused with -32021, never passed on (digest §5.1; README "Era translation");
 * - a -32021 is no outcome to replay for an idempotency key: the retry that declares the
 *   capability runs;
 * - the hub's own -32021 for a parked call is what its ledger row says;
 * - a legacy client of a modern server that asks in rounds hears progress that only increases,
 *   though each round is a new upstream request counting from the start (digest §4).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { metricValue, scrape } from '../helpers/prometheus.js';
import { legacySession, META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json, type RpcMessage } from '../helpers/wire.js';

const LEGACY = 'test/fixtures/translation/legacy-server.mjs';
const MODERN = 'test/fixtures/translation/modern-server.mjs';
const QUIRK_MODERN = 'test/fixtures/quirks/modern.mjs';
const QUIRK_LEGACY = 'test/fixtures/quirks/legacy-32601.mjs';
const RELAY = 'test/fixtures/translation/legacy-relay.mjs';
const KEY = 'dev.switchyard/idempotency-key';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    servers: {
      ls: nodeServer(LEGACY, [], { SERVER_NAME: 'legacy-stdio' }),
      ms: nodeServer(MODERN, [], { SERVER_NAME: 'modern-stdio' }),
      nq: nodeServer(QUIRK_MODERN, [], { QUIRK_NEEDCAP: '1' }),
      lq: nodeServer(QUIRK_LEGACY, [], { QUIRK_ASKTWO: '1' }),
      rl: nodeServer(RELAY),
    },
  });
  await waitForReady(hub.url, ['ls', 'ms', 'nq', 'lq', 'rl']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

function call(id: string, name: string, caps: Json, meta: Json = {}, extra: Json = {}) {
  return post(hub.url, modernBody(id, 'tools/call', { name, arguments: {}, ...extra }, modernMeta({ [META_CAPS]: caps, ...meta })), modernHeaders('tools/call', name));
}

function row(requestId: string): Json | undefined {
  const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare('SELECT outcome, error_code, error_message, response_bytes, trace_id, span_id, parent_span_id FROM audit WHERE request_id = ?').get(requestId) as Json | undefined;
  } finally {
    db.close();
  }
}

const progressOf = (messages: RpcMessage[]) => messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params!.progressToken);

describe('a call of several input_required rounds', () => {
  // An operator's call count and error rate count calls, not rounds: a round's row says
  // input_required, the call's outcome is on the row of the request that got its answer, and
  // the rounds' rows are one trace (`ledger query --trace-id`).
  for (const [tool, parked] of [['ms__elicit_form', false], ['ls__elicit_form', true]] as const) {
    it(`counts once in /metrics and its rounds are linked (${parked ? 'a parked legacy call' : 'a modern upstream'})`, async () => {
      const caps = { elicitation: { form: {} } };
      const id = `rounds-${tool}`;
      const first = await call(`${id}-1`, tool, caps);
      expect(first.body?.result?.resultType).toBe('input_required');
      const [key] = Object.keys(first.body!.result!.inputRequests as Json);
      const retry = await call(`${id}-2`, tool, caps, {}, {
        requestState: first.body!.result!.requestState,
        inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } },
      });
      expect((retry.body?.result?.content as Json[])[0]!.text).toBe('action=accept content={"name":"Ada"}');
      await expect.poll(() => row(`${id}-1`)?.outcome).toBe('input_required');
      await expect.poll(() => row(`${id}-2`)?.outcome).toBe('ok');
      expect(row(`${id}-2`)).toMatchObject({ trace_id: row(`${id}-1`)!.trace_id, parent_span_id: row(`${id}-1`)!.span_id });
      const text = await scrape(hub.url);
      expect(metricValue(text, 'switchyard_calls_total', { method: 'tools/call', tool })).toBe(1);
      expect(metricValue(text, 'switchyard_calls_total', { tool, outcome: 'ok' })).toBe(1);
      expect(metricValue(text, 'switchyard_input_rounds_total', { method: 'tools/call', tool })).toBe(1);
    });
  }
});

describe('a parked legacy call that ends before its client retries', () => {
  // rl__self_cancel withdraws its question after 1 s and answers "gave up" a second later: the
  // call ends while parked. The client's retry then takes that answer, so its row carries the
  // call's end and the first request's row is the round it was: one call, counted once.
  it('has its end on the row of the retry that took its answer, and counts once in /metrics', async () => {
    const tool = 'rl__self_cancel';
    const caps = { elicitation: { form: {} } };
    const first = await call('ended-1', tool, caps);
    expect(first.body?.result?.resultType).toBe('input_required');
    // Another call of a client that can be asked runs alone on that stdio server (README): it is
    // let in only once the parked call's upstream request has ended.
    const after = await call('ended-probe', 'rl__asks_other', caps);
    expect((after.body?.result?.content as Json[])[0]!.text).toBe('refused -32601');
    const retry = await call('ended-2', tool, caps, {}, { requestState: first.body!.result!.requestState, inputResponses: {} });
    expect((retry.body?.result?.content as Json[])[0]!.text).toBe('gave up');
    await expect.poll(() => row('ended-2')?.outcome).toBe('ok');
    await expect.poll(() => row('ended-1')?.outcome).toBe('input_required');
    const text = await scrape(hub.url);
    expect(metricValue(text, 'switchyard_calls_total', { method: 'tools/call', tool })).toBe(1);
    expect(metricValue(text, 'switchyard_input_rounds_total', { method: 'tools/call', tool })).toBe(1);
  });

  // Its key holds the call's answer once it ended: the retry still takes the parked call (the
  // same answer), rather than a replay of the key, which left the first row open until the
  // call's time to answer ran out, and counted the call twice (ok, then replayed).
  it('with an idempotency key: the same, the retry not answered as a replay of its key', async () => {
    const tool = 'rl__self_cancel';
    const caps = { elicitation: { form: {} } };
    const meta = { [KEY]: 'k-ended-while-parked' };
    const first = await call('keyed-ended-1', tool, caps, meta);
    expect(first.body?.result?.resultType).toBe('input_required');
    const after = await call('keyed-ended-probe', 'rl__asks_other', caps);
    expect((after.body?.result?.content as Json[])[0]!.text).toBe('refused -32601');
    const retry = await call('keyed-ended-2', tool, caps, meta, { requestState: first.body!.result!.requestState, inputResponses: {} });
    expect((retry.body?.result?.content as Json[])[0]!.text).toBe('gave up');
    await expect.poll(() => row('keyed-ended-2')?.outcome).toBe('ok');
    await expect.poll(() => row('keyed-ended-1')?.outcome).toBe('input_required');
    // The key still answers a later send of the same request.
    const again = await call('keyed-ended-3', tool, caps, meta);
    expect((again.body?.result?.content as Json[])[0]!.text).toBe('gave up');
    await expect.poll(() => row('keyed-ended-3')?.outcome).toBe('replayed');
  });
});

describe('a keyed first request sent again while its call is parked', () => {
  // Its first answer (input_required) lost, the client sends the request again with its key. It
  // waited for the call's end, which only a retry with the lost requestState could bring: held
  // for policy.inputTimeoutMs, then refused as of an unknown outcome. It gets the first's answer,
  // the same question of the same call, instead.
  it('is answered the same question of the same call, and the call runs once', async () => {
    const tool = 'ls__elicit_form';
    const caps = { elicitation: { form: {} } };
    const meta = { [KEY]: 'k-parked-twice' };
    const args = { arguments: { who: 'twice' } };
    const first = await call('twice-1', tool, caps, meta, args);
    expect(first.body?.result?.resultType).toBe('input_required');
    const again = await call('twice-2', tool, caps, meta, args);
    expect(again.body?.result).toMatchObject({ resultType: 'input_required', inputRequests: first.body!.result!.inputRequests });
    const [key] = Object.keys(again.body!.result!.inputRequests as Json);
    const answer = { [key!]: { action: 'accept', content: { name: 'Ada' } } };
    const done = await call('twice-3', tool, caps, meta, { ...args, requestState: again.body!.result!.requestState, inputResponses: answer });
    expect((done.body?.result?.content as Json[])[0]!.text).toBe('action=accept content={"name":"Ada"}');
    // The first's state now: the call ended, its key answers.
    const late = await call('twice-4', tool, caps, meta, { ...args, requestState: first.body!.result!.requestState, inputResponses: answer });
    expect((late.body?.result?.content as Json[])[0]!.text).toBe('action=accept content={"name":"Ada"}');
    await expect.poll(() => ['twice-1', 'twice-2', 'twice-3', 'twice-4'].map((id) => row(id)?.outcome)).toEqual(['input_required', 'input_required', 'ok', 'replayed']);
  });
});

describe('a modern client of a parked legacy call', () => {
  it("gets the call's progress on the retry that resumed it, under the retry's token", async () => {
    const caps = { elicitation: { form: {} } };
    const first = await call('p-1', 'ls__elicit_then_progress', caps, { progressToken: 'p-first' });
    expect(first.body?.result?.resultType).toBe('input_required');
    const [key] = Object.keys(first.body!.result!.inputRequests as Json);
    const retry = await call('p-2', 'ls__elicit_then_progress', caps, { progressToken: 'p-retry' }, {
      requestState: first.body!.result!.requestState,
      inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } },
    });
    expect((retry.body?.result?.content as Json[])[0]!.text).toBe('after progress: action=accept content={"name":"Ada"}');
    expect(progressOf(retry.messages)).toEqual(['p-retry', 'p-retry']);
    // The retry carried the call's answer to the client: its row has the call's outcome and that
    // answer's size; the first request's row (finished when the call ended) is the round it was,
    // with the size of the input_required it was answered.
    await expect.poll(() => row('p-2')).toMatchObject({ outcome: 'ok', response_bytes: expect.any(Number) });
    expect(row('p-2')!.response_bytes as number).toBeGreaterThan(50);
    expect(row('p-1')).toMatchObject({ outcome: 'input_required', response_bytes: expect.any(Number) });
    expect(row('p-1')!.response_bytes as number).toBeGreaterThan(50);
    // One call in one trace: the retry's row names the first request's span as its parent.
    expect(row('p-2')).toMatchObject({ trace_id: row('p-1')!.trace_id, parent_span_id: row('p-1')!.span_id });
  });

  it('that asks for a capability the client lacks is refused with -32021, and its row says so', async () => {
    const r = await call('cap-1', 'ls__elicit_then_progress', {});
    expect(r.status).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { form: {} } } } });
    await expect.poll(() => row('cap-1')).toMatchObject({ outcome: 'rpc_error', error_code: -32021 });
  });

  it('that asks, together, what the client declared and what it did not is refused with -32021 at once: the other question is not put to it', async () => {
    // A form elicitation (declared) and a sampling (not), read together: the elicitation was
    // parked as an input_required, the -32021 kept for the retry, and the question waited for
    // the client's answer (or its time limit) though the call could only end refused.
    const r = await call('cap-2', 'lq__asktwo', { elicitation: { form: {} } });
    expect(r.status, r.text).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: {} } } });
    await expect.poll(() => row('cap-2')).toMatchObject({ outcome: 'rpc_error', error_code: -32021 });
  });
});

describe('a retry of a parked legacy call that no longer declares what the call needs', () => {
  const FORM = { elicitation: { form: {} } };
  const first = async (id: string, name: string, caps: Json, extra: Json = {}) => {
    const r = await call(id, name, caps, {}, extra);
    expect(r.body?.result?.resultType, r.text).toBe('input_required');
    const [key] = Object.keys(r.body!.result!.inputRequests as Json);
    return { state: r.body!.result!.requestState, key: key! };
  };

  it("answers its question, and the upstream's next one is refused with -32021 (this request declared no elicitation)", async () => {
    const q1 = await first('rc-1', 'ls__three_rounds', FORM);
    const r = await call('rc-2', 'ls__three_rounds', {}, {}, { requestState: q1.state, inputResponses: { [q1.key]: { action: 'accept', content: { answer: 'one' } } } });
    expect(r.status, r.text).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { form: {} } } } });
    // The call's end is the retry's (the request that got it); the first request was a round.
    await expect.poll(() => row('rc-2')).toMatchObject({ outcome: 'rpc_error', error_code: -32021 });
    await expect.poll(() => row('rc-1')).toMatchObject({ outcome: 'input_required' });
  });

  it('leaves its question unanswered: it is not asked again but refused with -32021', async () => {
    const q = await first('rc-3', 'ls__elicit_form', FORM);
    const r = await call('rc-4', 'ls__elicit_form', {}, {}, { requestState: q.state, inputResponses: {} });
    expect(r.status, r.text).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { form: {} } } } });
  });

  it('accepts a URL step, and the next step (the upstream still says -32042) is refused with -32021', async () => {
    const args = { arguments: { ticket: 'always-rc' } };
    const q = await first('rc-5', 'ls__elicit_url_required', { elicitation: { url: {} } }, args);
    const r = await call('rc-6', 'ls__elicit_url_required', {}, {}, { ...args, requestState: q.state, inputResponses: { [q.key]: { action: 'accept' } } });
    expect(r.status, r.text).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { url: {} } } } });
  });

  it('leaves a URL step unanswered and no longer declares URL elicitation: refused with -32021, and the call ends with it', async () => {
    const args = { arguments: { ticket: 'always-rc-un' } };
    const q = await first('rc-7', 'ls__elicit_url_required', { elicitation: { url: {} } }, args);
    const r = await call('rc-8', 'ls__elicit_url_required', {}, {}, { ...args, requestState: q.state, inputResponses: {} });
    expect(r.status, r.text).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { url: {} } } } });
    await expect.poll(() => row('rc-8'), { timeout: 5_000 }).toMatchObject({ outcome: 'rpc_error', error_code: -32021 });
    // Its first request was a round. The step left unanswered (the hub's own question, no
    // request of the server's) waited for good, and with it the call's run and that row, in_flight.
    await expect.poll(() => row('rc-7'), { timeout: 5_000 }).toMatchObject({ outcome: 'input_required' });
  });
});

describe("a modern upstream's input_required for a capability the client did not declare", () => {
  it('is refused with -32021 naming it, not passed on', async () => {
    // (The SDK's own server checks this itself; the raw one asks whatever was declared.)
    const r = await call('s-1', 'nq__asksampling', {});
    expect(r.status).toBe(400);
    expect(r.body?.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: {} } } });
    // Declared, it is passed on.
    const ok = await call('s-2', 'nq__asksampling', { sampling: {} });
    expect(ok.body?.result?.resultType).toBe('input_required');
    expect((ok.body?.result?.inputRequests as Json).llm).toMatchObject({ method: 'sampling/createMessage' });
  });

  it('names every mode it needs when one round asks for two (form and URL elicitation)', async () => {
    const none = await call('s-3', 'nq__asktwo', {});
    expect(none.body?.error, none.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { form: {}, url: {} } } } });
    const formOnly = await call('s-4', 'nq__asktwo', { elicitation: { form: {} } });
    expect(formOnly.body?.error, formOnly.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { url: {} } } } });
    expect((formOnly.body?.error?.data as Json).requiredCapabilities).toEqual({ elicitation: { url: {} } });
  });

  it('is, for a legacy client, a tool error naming it (the client is not asked)', async () => {
    const s = await legacySession(hub.url, { capabilities: {} });
    const r = await s.request(1, 'tools/call', { name: 'nq__asksampling', arguments: {} });
    expect(r.messages.filter((m) => m.method === 'sampling/createMessage')).toEqual([]);
    expect(r.body?.result).toMatchObject({ isError: true, content: [{ text: 'the upstream needs a client capability this client did not declare: sampling' }] });
  });

  it('names the member a legacy client lacks, not the family it declared (form-only, asked for a URL too)', async () => {
    const s = await legacySession(hub.url, { capabilities: { elicitation: { form: {} } } });
    const r = await s.request(1, 'tools/call', { name: 'nq__asktwo', arguments: {} });
    expect(r.messages.filter((m) => m.method === 'elicitation/create')).toEqual([]);
    expect(r.body?.result, r.text).toMatchObject({ isError: true, content: [{ text: 'the upstream needs a client capability this client did not declare: elicitation.url' }] });
  });
});

describe('an idempotency key whose first call was refused with -32021', () => {
  it('runs the retry that declares the capability (the refusal is not replayed)', async () => {
    const refused = await call('k-1', 'nq__needcap', {}, { [KEY]: 'needcap-1' });
    expect(refused.body?.error).toMatchObject({ code: -32021 });
    const ran = await call('k-2', 'nq__needcap', { sampling: {} }, { [KEY]: 'needcap-1' });
    expect(ran.body?.error).toBeUndefined();
    expect((ran.body?.result?.content as Json[])[0]!.text).toBe('ran with sampling');
    // And that answer is the key's from now on.
    const again = await call('k-3', 'nq__needcap', { sampling: {} }, { [KEY]: 'needcap-1' });
    expect((again.body?.result?.content as Json[])[0]!.text).toBe('ran with sampling');
    await expect.poll(() => row('k-3')).toMatchObject({ outcome: 'replayed' });
  });
});

describe('a legacy client of a modern server that asks in rounds', () => {
  it('hears progress that only increases: each round counts from the start upstream, the client sees no step back', async () => {
    const client = new ClientV1({ name: 'legacy-progress', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
    await client.connect(new TransportV1(new URL(hub.url)));
    try {
      const seen: number[] = [];
      const r = await client.callTool({ name: 'nq__askprogress', arguments: {} }, undefined, { onprogress: (p) => void seen.push(p.progress) });
      expect((r.content as Json[])[0]!.text).toBe('asked and done');
      // Upstream: 1, 2 (the first request), then 1, 2, 3 (the hub's retry with the answer).
      expect(seen).toEqual([1, 2, 3]);
    } finally {
      await client.close();
    }
  });
});
