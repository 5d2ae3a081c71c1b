/**
 * Every finished row of a call a modern client answered `input_required` carries the size of
 * what its request was answered (responseBytes): the first request of a legacy upstream's parked
 * call, whether a retry takes the call on or it ends parked (its time up); each retry; a keyed
 * request sent again while its call is parked; the hub's own confirmation. Real built hub, the
 * translation fixtures (legacy SDK v1 over stdio, modern SDK v2), the raw modern wire.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';
import { META_KEY, waitForRows, type Row } from './ledger-helpers.js';

const INPUT_TIMEOUT_MS = 2000;
let th: TranslationHub;
let db: string;
let nextId = 7000;

beforeAll(async () => {
  th = await startTranslationHub({ policy: { inputTimeoutMs: INPUT_TIMEOUT_MS, confirm: ['ms__echo'] } });
  db = join(th.hub.dir, 'ledger.db');
}, 60_000);
afterAll(async () => void (await th?.stop()));

async function call(name: string, args: Json, extra: Json = {}, meta: Json = {}): Promise<{ id: number; result: Json; bytes: number }> {
  const id = nextId++;
  const r = await post(th.url, modernBody(id, 'tools/call', { name, arguments: args, ...extra }, modernMeta({ [META_CAPS]: USER_CAPABILITIES, ...meta })), modernHeaders('tools/call', name));
  const m = r.messages.find((x) => x.id === id);
  if (!m?.result) throw new Error(`${r.status} ${r.text}`);
  return { id, result: m.result, bytes: Buffer.byteLength(JSON.stringify(m.result)) };
}

/** The finished rows of `tool` for these request ids, once all are finished. */
async function rows(tool: string, ids: number[], timeoutMs = 10_000): Promise<Row[]> {
  const done = (r: Row[]) => ids.every((id) => r.some((x) => x.requestId === id && x.outcome !== 'in_flight'));
  const all = await waitForRows(db, { tool }, done, timeoutMs);
  return ids.map((id) => all.find((x) => x.requestId === id && x.outcome !== 'in_flight')!);
}

const answer = (r: Json, value: Json): Json => Object.fromEntries(Object.keys(r.inputRequests as Json).map((k) => [k, value]));

describe('rows of parked calls carry responseBytes', () => {
  it('the first request (a round) and the retry that completes the call', async () => {
    const first = await call('ls__elicit_form', { who: 'sized' });
    expect(first.result.resultType).toBe('input_required');
    const done = await call('ls__elicit_form', { who: 'sized' }, { requestState: first.result.requestState, inputResponses: answer(first.result, { action: 'accept', content: { name: 'Ada' } }) });
    expect(done.result.resultType).toBe('complete');
    const [a, b] = await rows('ls__elicit_form', [first.id, done.id]);
    expect([a!.outcome, b!.outcome]).toEqual(['input_required', 'ok']);
    expect(a!.responseBytes).toBeGreaterThan(0);
    expect(b!.responseBytes).toBeGreaterThan(0);
  });

  it('a call asking three times in turn: every round’s row', async () => {
    let r = await call('ls__three_rounds', {});
    const ids = [r.id];
    for (let i = 0; r.result.resultType === 'input_required' && i < 5; i++) {
      r = await call('ls__three_rounds', {}, { requestState: r.result.requestState, inputResponses: answer(r.result, { action: 'accept', content: { answer: `a${i}` } }) });
      ids.push(r.id);
    }
    expect(r.result).toMatchObject({ resultType: 'complete' });
    const got = await rows('ls__three_rounds', ids);
    expect(got.map((x) => x.responseBytes)).toEqual(got.map(() => expect.any(Number)));
  });

  it('a call that ends parked, its client never back: the first row (timeout) says what it was answered', async () => {
    const first = await call('ls__elicit_form', { who: 'never-back' });
    expect(first.result.resultType).toBe('input_required');
    const [row] = await rows('ls__elicit_form', [first.id], INPUT_TIMEOUT_MS + 10_000);
    expect(row!.outcome).toBe('timeout');
    expect(row!.responseBytes).toBeGreaterThan(0);
  }, 30_000);

  it('a keyed request sent again while its call is parked', async () => {
    const meta = { [META_KEY]: 'parked-rows-key' };
    const first = await call('ls__elicit_form', { who: 'keyed' }, {}, meta);
    const again = await call('ls__elicit_form', { who: 'keyed' }, {}, meta);
    expect(again.result.resultType).toBe('input_required');
    const done = await call('ls__elicit_form', { who: 'keyed' }, { requestState: again.result.requestState, inputResponses: answer(again.result, { action: 'accept', content: { name: 'K' } }) }, meta);
    expect(done.result.resultType).toBe('complete');
    const got = await rows('ls__elicit_form', [first.id, again.id, done.id]);
    expect(got.map((x) => x.responseBytes)).toEqual([expect.any(Number), expect.any(Number), expect.any(Number)]);
  });

  it('the hub’s confirmation: the question and the refusal', async () => {
    const first = await call('ms__echo', { text: 'hi' });
    expect(first.result.resultType).toBe('input_required');
    const no = await call('ms__echo', { text: 'hi' }, { requestState: first.result.requestState, inputResponses: answer(first.result, { action: 'decline' }) });
    expect(no.result.isError).toBe(true);
    const [a, b] = await rows('ms__echo', [first.id, no.id]);
    expect([a!.outcome, b!.outcome]).toEqual(['input_required', 'denied']);
    expect(a!.responseBytes).toBeGreaterThan(0);
    expect(b!.responseBytes).toBeGreaterThan(0);
  });
});
