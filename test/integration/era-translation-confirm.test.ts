/**
 * The hub's own confirmation (policy.confirm) in front of tools that then ask the user
 * themselves: a modern client confirms once, then answers the upstream's own questions until
 * the call completes, whichever era the upstream speaks. Real fixture upstreams (stdio, both
 * eras) behind the real built hub, on the raw wire.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';

const CONFIRM_KEY = 'switchyard/confirm';
const ASKING = modernMeta({ [META_CAPS]: USER_CAPABILITIES });

let th: TranslationHub;
let nextId = 1;

beforeAll(async () => {
  th = await startTranslationHub({ policy: { confirm: ['*__elicit_form'] } });
}, 60_000);
afterAll(async () => void (await th?.stop()));

async function call(name: string, args: Json, extra: Json = {}): Promise<Json> {
  const id = nextId++;
  const r = await post(th.url, modernBody(id, 'tools/call', { name, arguments: args, ...extra }, ASKING), modernHeaders('tools/call', name));
  const m = r.messages.find((x) => x.id === id);
  if (!m?.result) throw new Error(`${r.status} ${r.text}`);
  return m.result;
}

describe.each(['ms', 'ls'])('a confirmed call to %s__elicit_form', (server) => {
  it('asks for the confirmation once, then the upstream\'s own question, then completes', async () => {
    const tool = `${server}__elicit_form`;
    const asked: string[][] = [];
    let r = await call(tool, { who: 'C' });
    for (let round = 0; r.resultType === 'input_required' && round < 6; round++) {
      const keys = Object.keys(r.inputRequests as Json);
      asked.push(keys);
      const inputResponses = Object.fromEntries(keys.map((k) => [k, k === CONFIRM_KEY ? { action: 'accept', content: {} } : { action: 'accept', content: { name: 'Ada' } }]));
      r = await call(tool, { who: 'C' }, { requestState: r.requestState, inputResponses });
    }
    expect(r).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
    expect(asked[0]).toEqual([CONFIRM_KEY]);
    expect(asked.flat().filter((k) => k === CONFIRM_KEY)).toHaveLength(1);
    expect(asked).toHaveLength(2);
  });
});

describe('a confirmation retried without a usable answer', () => {
  it('is asked again (input_required), not taken for the user declining; decline and cancel are a no', async () => {
    const tool = 'ms__elicit_form';
    const first = await call(tool, { who: 'D' });
    expect(Object.keys(first.inputRequests as Json)).toEqual([CONFIRM_KEY]);
    // Missing, or an action that is none of the three: asked again, with a new state to answer.
    let state = first.requestState;
    for (const inputResponses of [{}, { [CONFIRM_KEY]: { action: 'acept' } }, { [CONFIRM_KEY]: 'accept' }, { other: { action: 'accept' } }]) {
      const again = await call(tool, { who: 'D' }, { requestState: state, inputResponses });
      expect(again, JSON.stringify(inputResponses)).toMatchObject({ resultType: 'input_required', inputRequests: { [CONFIRM_KEY]: { method: 'elicitation/create' } } });
      expect(again.requestState).not.toBe(state);
      state = again.requestState;
    }
    // The user's no, either way: declined, not run.
    for (const action of ['decline', 'cancel']) {
      const asked = await call(tool, { who: 'D' });
      const no = await call(tool, { who: 'D' }, { requestState: asked.requestState, inputResponses: { [CONFIRM_KEY]: { action } } });
      expect(no, action).toMatchObject({ isError: true, content: [{ type: 'text', text: `Tool ${tool} was declined by the user.` }] });
    }
  });
});
