/**
 * Must-show 2 and 4 of "Era translation", through the real built hub on the raw wire:
 * the hub's sealed requestState is refused (-32602, with a message saying why) when tampered
 * with, expired, replayed, presented by another principal or with other arguments, and any hub
 * sharing the key accepts a forwarded (modern ↔ modern) state; a modern client that never
 * retries gets its parked legacy-upstream call cancelled after policy.inputTimeoutMs, the
 * upstream told and the ledger row `timeout`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ROOT, nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { metricValue, scrape } from '../helpers/prometheus.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json, type RawReply, type RpcMessage } from '../helpers/wire.js';
import { queryRows } from './ledger-helpers.js';
import { LEGACY_FIXTURE, USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';

const KEY = randomBytes(32).toString('hex');
const TTL_MS = 3_000;
const INPUT_TIMEOUT_MS = 1_500;
const ASKING = modernMeta({ [META_CAPS]: USER_CAPABILITIES });

let th: TranslationHub;
let events: string;
let nextId = 1;

/** A modern tools/call whose client declared elicitation, sampling and roots. */
async function call(url: string, name: string, args: Json, extra: Json = {}): Promise<RawReply> {
  const id = nextId++;
  const r = await post(url, modernBody(id, 'tools/call', { name, arguments: args, ...extra }, ASKING), modernHeaders('tools/call', name));
  return { ...r, body: r.messages.find((m) => m.id === id) };
}

/** First round of a tool: an input_required answer; returns its result. */
async function firstRound(url: string, name: string, args: Json): Promise<Json> {
  const r = await call(url, name, args);
  expect(r.body?.result, r.text).toMatchObject({ resultType: 'input_required', requestState: expect.stringMatching(/^sy1\./) });
  return r.body!.result!;
}

function answerFor(result: Json, answer: Json): Json {
  return Object.fromEntries(Object.keys(result.inputRequests as Json).map((k) => [k, answer]));
}

function expectRefused(r: RawReply, why: RegExp): void {
  expect(r.body?.error, r.text).toMatchObject({ code: -32602, message: expect.stringMatching(why) });
}

/** Flip one character in the middle of the sealed part (still valid base64url). */
function tamper(state: string): string {
  const i = Math.floor(state.length / 2);
  return state.slice(0, i) + (state[i] === 'A' ? 'B' : 'A') + state.slice(i + 1);
}

/** `ledger query --json --tool <tool>` (its command in this process: ledger-helpers.ts). */
async function ledgerRows(dir: string, tool: string): Promise<Json[]> {
  return (await queryRows(join(dir, 'ledger.db'), { tool })) as unknown as Json[];
}

async function waitFor<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-translation-'));
  events = join(dir, 'events.log');
  writeFileSync(events, '');
  th = await startTranslationHub(
    { policy: { requestStateKey: KEY, requestStateTtlMs: TTL_MS, inputTimeoutMs: INPUT_TIMEOUT_MS } },
    { EVENTS_FILE: events },
    { dir },
  );
}, 60_000);

afterAll(async () => {
  await th?.stop();
});

describe.each(['ms', 'ls'])('a requestState of the hub for %s__elicit_form', (server) => {
  const tool = `${server}__elicit_form`;
  const accept = { action: 'accept', content: { name: 'Ada' } };

  it('tampered with → -32602, and the genuine one still works once', async () => {
    const first = await firstRound(th.url, tool, { who: 'T' });
    const state = first.requestState as string;
    expectRefused(await call(th.url, tool, { who: 'T' }, { requestState: tamper(state), inputResponses: answerFor(first, accept) }), /tampered/);
    expectRefused(await call(th.url, tool, { who: 'T' }, { requestState: 'made-up', inputResponses: answerFor(first, accept) }), /not issued by this hub/);
    const ok = await call(th.url, tool, { who: 'T' }, { requestState: state, inputResponses: answerFor(first, accept) });
    expect(ok.body?.result, ok.text).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
    // Single use: the same state again is refused.
    expectRefused(await call(th.url, tool, { who: 'T' }, { requestState: state, inputResponses: answerFor(first, accept) }), /already used/);
  });

  it('with other arguments or for another tool → -32602', async () => {
    const first = await firstRound(th.url, tool, { who: 'A' });
    const state = first.requestState as string;
    expectRefused(await call(th.url, tool, { who: 'B' }, { requestState: state, inputResponses: answerFor(first, accept) }), /other arguments/);
    expectRefused(await call(th.url, `${server}__sample`, {}, { requestState: state }), /another request/);
    const ok = await call(th.url, tool, { who: 'A' }, { requestState: state, inputResponses: answerFor(first, accept) });
    expect(ok.body?.result?.content).toEqual([{ type: 'text', text: 'action=accept content={"name":"Ada"}' }]);
  });

  it(`expired (policy.requestStateTtlMs ${TTL_MS}) → -32602`, async () => {
    const first = await firstRound(th.url, tool, { who: 'E' });
    await new Promise((r) => setTimeout(r, TTL_MS + 200));
    expectRefused(await call(th.url, tool, { who: 'E' }, { requestState: first.requestState, inputResponses: answerFor(first, accept) }), /expired/);
  });
});

/** `switchyard stdio` with a config: modern requests as lines on stdin, answers from stdout. */
function stdioHub(config: Json): { request(msg: Json): Promise<RpcMessage>; stop(): Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-stdio-'));
  const file = join(dir, 'hub.config.json');
  writeFileSync(file, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, ...config }));
  const proc: ChildProcess = spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map<unknown, (m: RpcMessage) => void>();
  createInterface({ input: proc.stdout! }).on('line', (line) => {
    const m = JSON.parse(line) as RpcMessage;
    waiting.get(m.id)?.(m);
  });
  return {
    request: (msg) => new Promise((resolve) => {
      waiting.set(msg.id, resolve);
      proc.stdin!.write(JSON.stringify(msg) + '\n');
    }),
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.stdin!.end();
    }),
  };
}

describe('other hub instances sharing the key', () => {
  let other: HubProcess;

  beforeAll(async () => {
    // Its ledger is off: it works out an argument digest only when it seals or opens a state.
    other = await startHub({ ledger: { enabled: false }, policy: { requestStateKey: KEY }, servers: { mh: { url: th.upstreamUrls.mh }, ls: nodeServer(LEGACY_FIXTURE) } });
    await waitForReady(other.url, ['mh', 'ls']);
  }, 60_000);
  afterAll(async () => {
    await other?.stop();
  });

  it('accept a forwarded (modern ↔ modern) state: every round may land on another hub', async () => {
    const hubs = [th.url, other.url, th.url, other.url];
    let r = await firstRound(hubs[0], 'mh__three_rounds', {});
    for (let i = 1; i <= 3; i++) {
      const retry = await call(hubs[i], 'mh__three_rounds', {}, { requestState: r.requestState, inputResponses: answerFor(r, { action: 'accept', content: { answer: `x${i}` } }) });
      r = retry.body!.result!;
      expect(r, retry.text).toBeDefined();
    }
    expect(r).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'answers=x1,x2,x3' }] });
  });

  it('bind a state to its arguments with the ledger off too', async () => {
    for (const tool of ['ls__elicit_form', 'mh__elicit_form']) {
      const first = await firstRound(other.url, tool, { who: 'L' });
      const answers = answerFor(first, { action: 'accept', content: { name: 'Lin' } });
      expectRefused(await call(other.url, tool, { who: 'M' }, { requestState: first.requestState, inputResponses: answers }), /other arguments/);
      const ok = await call(other.url, tool, { who: 'L' }, { requestState: first.requestState, inputResponses: answers });
      expect(ok.body?.result?.content, ok.text).toEqual([{ type: 'text', text: 'action=accept content={"name":"Lin"}' }]);
    }
    // A state sealed where the ledger is on opens here, and the other way round.
    const there = await firstRound(th.url, 'mh__elicit_form', { who: 'X' });
    const here = await call(other.url, 'mh__elicit_form', { who: 'X' }, { requestState: there.requestState, inputResponses: answerFor(there, { action: 'accept', content: { name: 'X' } }) });
    expect(here.body?.result, here.text).toMatchObject({ resultType: 'complete' });
    const back = await firstRound(other.url, 'mh__elicit_form', { who: 'Y' });
    const again = await call(th.url, 'mh__elicit_form', { who: 'Y' }, { requestState: back.requestState, inputResponses: answerFor(back, { action: 'accept', content: { name: 'Y' } }) });
    expect(again.body?.result, again.text).toMatchObject({ resultType: 'complete' });
  });

  it('refuse a state that points to a call parked at another hub (-32602)', async () => {
    const first = await firstRound(th.url, 'ls__elicit_form', { who: 'P' });
    const r = await call(other.url, 'ls__elicit_form', { who: 'P' }, { requestState: first.requestState, inputResponses: answerFor(first, { action: 'cancel' }) });
    expectRefused(r, /no longer waiting/);
    // The parked call itself is untouched: its own hub still resumes it.
    const ok = await call(th.url, 'ls__elicit_form', { who: 'P' }, { requestState: first.requestState, inputResponses: answerFor(first, { action: 'cancel' }) });
    expect(ok.body?.result?.content, ok.text).toEqual([{ type: 'text', text: 'action=cancel content=null' }]);
  });

  it('refuse a state presented by another principal (-32602)', async () => {
    // Over HTTP without auth the principal is "anonymous"; `switchyard stdio` serves "local".
    const local = stdioHub({ policy: { requestStateKey: KEY }, servers: { mh: { url: th.upstreamUrls.mh } } });
    try {
      // Ready first (it waits for its upstream), so the state is fresh when it arrives.
      const listed = await local.request(modernBody(nextId++, 'tools/list', {}, ASKING));
      expect((listed.result?.tools as Json[]).map((t) => t.name)).toContain('mh__elicit_form');
      const first = await firstRound(th.url, 'mh__elicit_form', { who: 'X' });
      const params = { name: 'mh__elicit_form', arguments: { who: 'X' }, requestState: first.requestState, inputResponses: answerFor(first, { action: 'accept', content: { name: 'Eve' } }) };
      const refused = await local.request(modernBody(nextId++, 'tools/call', params, ASKING));
      expect(refused.error).toMatchObject({ code: -32602, message: expect.stringMatching(/another principal/) });
      // The same state from the principal it was issued to still opens (at a hub sharing the key).
      const ok = await call(other.url, 'mh__elicit_form', { who: 'X' }, { requestState: first.requestState, inputResponses: params.inputResponses });
      expect(ok.body?.result?.content, ok.text).toEqual([{ type: 'text', text: 'action=accept content={"name":"Eve"}' }]);
    } finally {
      await local.stop();
    }
  });
});

describe.each(['ls', 'lh'])(`a modern client that never retries (%s, policy.inputTimeoutMs ${INPUT_TIMEOUT_MS})`, (server) => {
  it('gets the parked upstream call cancelled at the timeout, and the ledger says timeout (the hub\'s limit, as for a legacy client that does not answer)', async () => {
    const who = `ghost-${server}`;
    const tool = `${server}__elicit_form`;
    const counts = async () => {
      const text = await scrape(th.url);
      return { rounds: metricValue(text, 'switchyard_input_rounds_total', { tool }), timeouts: metricValue(text, 'switchyard_calls_total', { tool, outcome: 'timeout' }) };
    };
    const before = await counts();
    const t0 = Date.now();
    const requestId = nextId;
    const first = await firstRound(th.url, `${server}__elicit_form`, { who });
    const line = `cancelled elicit_form ${who}`;
    await waitFor('the upstream to see the cancellation', () => (readFileSync(events, 'utf8').includes(line) ? true : undefined), INPUT_TIMEOUT_MS + 5_000);
    const elapsed = Date.now() - t0;
    // A late retry (its state has not expired yet) finds nothing waiting.
    const late = await call(th.url, `${server}__elicit_form`, { who }, { requestState: first.requestState, inputResponses: answerFor(first, { action: 'accept', content: { name: 'late' } }) });
    expectRefused(late, /no longer waiting/);
    expect(elapsed).toBeGreaterThanOrEqual(INPUT_TIMEOUT_MS - 100);
    expect(elapsed).toBeLessThan(INPUT_TIMEOUT_MS + 5_000);
    let seen: Json[] = [];
    const rows = await waitFor(
      'the ledger row',
      async () => {
        seen = await ledgerRows(th.hub.dir, `${server}__elicit_form`);
        const row = seen.find((r) => r.requestId === requestId);
        return row?.outcome ? row : undefined;
      },
      5_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(seen.slice(-3))}`);
    });
    expect(rows).toMatchObject({ method: 'tools/call', server, clientEra: '2026-07-28', upstreamEra: '2025-11-25', outcome: 'timeout', errorMessage: expect.stringMatching(/did not answer.*1500 ms/) });
    expect(rows.latencyMs).toBeGreaterThanOrEqual(INPUT_TIMEOUT_MS - 100);
    // Its request was answered input_required, a round, and its row carries the call's end: both counted.
    expect(await counts()).toEqual({ rounds: before.rounds + 1, timeouts: before.timeouts + 1 });
  }, 20_000);
});
