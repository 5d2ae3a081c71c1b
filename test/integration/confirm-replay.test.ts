/**
 * The hub's own confirmation (policy.confirm) of a modern client's call is answered on a retry
 * carrying the hub's sealed requestState, which is single use. A restart of the hub (same ledger,
 * same state key) or another hub sharing the key must not take a state its user's answer was
 * already spent with: the confirmed call would run again without the user asked. Real built
 * hubs restarted over the same folder, real upstreams (SDK v2: a counter that counts each run,
 * and the translation fixture that asks its own question after the confirmation), the client on
 * the raw wire (a replay is a request sent again byte for byte).
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json, type RawReply } from '../helpers/wire.js';
import { MODERN_FIXTURE } from '../fixtures/translation/peers.js';

const CONFIRM_KEY = 'switchyard/confirm';
const ASKING = modernMeta({ [META_CAPS]: { elicitation: { form: {} } } });
const YES = { [CONFIRM_KEY]: { action: 'accept', content: {} } };

let nextId = 1;

async function call(url: string, name: string, args: Json, extra: Json = {}): Promise<RawReply> {
  const id = nextId++;
  const r = await post(url, modernBody(id, 'tools/call', { name, arguments: args, ...extra }, ASKING), modernHeaders('tools/call', name));
  return { ...r, body: r.messages.find((m) => m.id === id) };
}

/** The hub's confirmation question, asked: its input_required result. */
async function asked(url: string, name: string, args: Json): Promise<Json> {
  const r = await call(url, name, args);
  expect(r.body?.result, r.text).toMatchObject({ resultType: 'input_required', inputRequests: { [CONFIRM_KEY]: { method: 'elicitation/create' } } });
  return r.body!.result!;
}

function expectAskedAgain(r: RawReply, state: unknown): void {
  expect(r.body?.result, r.text).toMatchObject({ resultType: 'input_required', inputRequests: { [CONFIRM_KEY]: { method: 'elicitation/create' } } });
  expect(r.body!.result!.requestState).not.toBe(state);
}

function setup(extra: Json = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-confirm-replay-'));
  const counter = join(dir, 'counter.json');
  const count = (label: string): number => (existsSync(counter) ? (JSON.parse(readFileSync(counter, 'utf8'))[label] ?? 0) : 0);
  const config = {
    ...extra,
    policy: { confirm: ['*__counter_bump', 'ms__elicit_form'], ...(extra.policy as Json | undefined) },
    servers: {
      modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs', [], { COUNTER_FILE: counter }),
      ms: nodeServer(MODERN_FIXTURE, [], { SERVER_NAME: 'ms' }),
    },
  };
  const start = async (opts: { dir?: string } = { dir }): Promise<HubProcess> => {
    const hub = await startHub(config, opts);
    try {
      await waitForReady(hub.url, ['modern', 'ms']);
    } catch (err) {
      await hub.stop();
      throw err;
    }
    return hub;
  };
  return { dir, count, start };
}

describe("a confirmation's requestState across a restart of its hub", () => {
  it('spent before the restart (the hub killed): refused after it as before it, the tool not run again; the request sent anew is asked afresh', async () => {
    const { count, start } = setup();
    const args = { label: 'replayed' };
    let hub = await start();
    let state: unknown;
    try {
      state = (await asked(hub.url, 'modern__counter_bump', args)).requestState;
      const ran = await call(hub.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expect(ran.body?.result, ran.text).toMatchObject({ content: [{ type: 'text', text: '1' }] });
      const again = await call(hub.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expect(again.body?.error, again.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
    } finally {
      // Killed: what the hub knows of the spent state was on disk before the call was forwarded.
      await hub.stop('SIGKILL');
    }
    hub = await start();
    try {
      const replayed = await call(hub.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
      expect(count('replayed')).toBe(1);
      // The user is asked again, and their yes runs it.
      const fresh = (await asked(hub.url, 'modern__counter_bump', args)).requestState;
      const ran = await call(hub.url, 'modern__counter_bump', args, { requestState: fresh, inputResponses: YES });
      expect(ran.body?.result, ran.text).toMatchObject({ content: [{ type: 'text', text: '2' }] });
    } finally {
      await hub.stop();
    }
  }, 90_000);

  it('answered after the restart, never spent before it: taken for its own call only, the user not asked twice', async () => {
    const { count, start } = setup();
    const args = { label: 'across' };
    let hub = await start();
    let state: unknown;
    try {
      state = (await asked(hub.url, 'modern__counter_bump', args)).requestState;
    } finally {
      await hub.stop();
    }
    hub = await start();
    try {
      // Bound to its call: not another's arguments nor another tool (and refused, it is not spent).
      const other = await call(hub.url, 'modern__counter_bump', { label: 'other' }, { requestState: state, inputResponses: YES });
      expect(other.body?.error, other.text).toMatchObject({ code: -32602, message: 'requestState was issued for other arguments' });
      const tool = await call(hub.url, 'ms__elicit_form', { who: 'across' }, { requestState: state, inputResponses: YES });
      expect(tool.body?.error, tool.text).toMatchObject({ code: -32602, message: 'requestState was issued for another request' });
      const ran = await call(hub.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expect(ran.body?.result, ran.text).toMatchObject({ content: [{ type: 'text', text: '1' }] });
      expect([count('across'), count('other')]).toEqual([1, 0]);
    } finally {
      await hub.stop();
    }
  }, 90_000);

  it("a confirmed call's later round (its upstream's own question) replayed after the restart: refused, not run again", async () => {
    const { start } = setup();
    const args = { who: 'R' };
    let hub = await start();
    let round: Json;
    try {
      const confirm = await asked(hub.url, 'ms__elicit_form', args);
      const upstreamAsks = await call(hub.url, 'ms__elicit_form', args, { requestState: confirm.requestState, inputResponses: YES });
      round = { requestState: upstreamAsks.body?.result?.requestState, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } };
      expect(upstreamAsks.body?.result, upstreamAsks.text).toMatchObject({ resultType: 'input_required', inputRequests: { name: {} } });
      const done = await call(hub.url, 'ms__elicit_form', args, round);
      expect(done.body?.result, done.text).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
    } finally {
      await hub.stop();
    }
    hub = await start();
    try {
      const replayed = await call(hub.url, 'ms__elicit_form', args, round);
      expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
    } finally {
      await hub.stop();
    }
  }, 90_000);
});

describe('with the ledger off (nothing outlives the process)', () => {
  it('a spent confirmation replayed after a restart asks the user again, never runs; so does one answered after it', async () => {
    const { count, start, dir } = setup({ ledger: { enabled: false } });
    const args = { label: 'no-ledger' };
    let hub = await start({ dir });
    let spent: unknown;
    let unspent: unknown;
    try {
      spent = (await asked(hub.url, 'modern__counter_bump', args)).requestState;
      const ran = await call(hub.url, 'modern__counter_bump', args, { requestState: spent, inputResponses: YES });
      expect(ran.body?.result, ran.text).toMatchObject({ content: [{ type: 'text', text: '1' }] });
      unspent = (await asked(hub.url, 'modern__counter_bump', args)).requestState;
    } finally {
      await hub.stop();
    }
    hub = await start({ dir });
    try {
      expectAskedAgain(await call(hub.url, 'modern__counter_bump', args, { requestState: spent, inputResponses: YES }), spent);
      // The hub cannot tell a state it never saw used from one it did: asked again too.
      expectAskedAgain(await call(hub.url, 'modern__counter_bump', args, { requestState: unspent, inputResponses: YES }), unspent);
      expect(count('no-ledger')).toBe(1);
    } finally {
      await hub.stop();
    }
  }, 90_000);
});

describe('another hub sharing the state key (its own ledger)', () => {
  it('does not take a confirmation given at the first: it asks the user again, and runs nothing', async () => {
    const key = randomBytes(32).toString('hex');
    const { count, start } = setup({ policy: { requestStateKey: key } });
    const [a, b] = await Promise.all([start({}), start({})]);
    try {
      const args = { label: 'cross-hub' };
      const state = (await asked(a.url, 'modern__counter_bump', args)).requestState;
      const ran = await call(a.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expect(ran.body?.result, ran.text).toMatchObject({ content: [{ type: 'text', text: '1' }] });
      const replayed = await call(b.url, 'modern__counter_bump', args, { requestState: state, inputResponses: YES });
      expectAskedAgain(replayed, state);
      expect(count('cross-hub')).toBe(1);
      // Answered there, it runs there.
      const there = await call(b.url, 'modern__counter_bump', args, { requestState: replayed.body!.result!.requestState, inputResponses: YES });
      expect(there.body?.result, there.text).toMatchObject({ content: [{ type: 'text', text: '2' }] });
      // A confirmed call's later round (the upstream's question) taken to the other hub: the
      // confirmation is asked there again, and then the call anew (the upstream asks again).
      const who = { who: 'X' };
      const confirm = await asked(a.url, 'ms__elicit_form', who);
      const round = (await call(a.url, 'ms__elicit_form', who, { requestState: confirm.requestState, inputResponses: YES })).body!.result!;
      expect(round).toMatchObject({ resultType: 'input_required', inputRequests: { name: {} } });
      const moved = await call(b.url, 'ms__elicit_form', who, { requestState: round.requestState, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } });
      expectAskedAgain(moved, round.requestState);
      const anew = await call(b.url, 'ms__elicit_form', who, { requestState: moved.body!.result!.requestState, inputResponses: YES });
      expect(anew.body?.result, anew.text).toMatchObject({ resultType: 'input_required', inputRequests: { name: {} } });
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  }, 90_000);
});
