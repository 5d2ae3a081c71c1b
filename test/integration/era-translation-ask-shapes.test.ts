/**
 * A legacy (2025-11-25) upstream's elicitation/create of the wrong shape (a form with no
 * `requestedSchema`, no message, a mode of neither kind) is the server's mistake: the hub answers
 * it -32602 saying what is missing and asks nobody, for a legacy client (a relayed request) and a
 * modern one (an `input_required` round) alike; a well-formed URL-mode one is still put to both.
 * Real peers: the raw legacy quirk server over stdio behind the built hub, an SDK v1 client and
 * raw modern POSTs.
 */
import { join } from 'node:path';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';
import { waitForRows } from './ledger-helpers.js';

const TOOL = 'lq__elicit';
const FORM_ONLY = { mode: 'form', message: 'name?' };
const URL_ASK = { mode: 'url', message: 'sign in', url: 'https://auth.example.test/sign-in', elicitationId: 'el-1' };
const NO_SCHEMA = 'Invalid params: a form-mode elicitation/create needs requestedSchema, an object schema ({"type": "object", "properties": {...}})';

const NO_TOKENS = 'Invalid params: a sampling/createMessage needs messages, an array, and maxTokens, a number';
const HI = [{ role: 'user', content: { type: 'text', text: 'hi' } }];

/** Malformed questions (params, and the method when not elicitation/create), and the -32602 message the upstream is answered with. */
const MALFORMED: [string, Json, string, string?][] = [
  ['no requestedSchema', FORM_ONLY, NO_SCHEMA],
  ['no mode, no requestedSchema', { message: 'name?' }, NO_SCHEMA],
  ['requestedSchema no object schema', { ...FORM_ONLY, requestedSchema: { type: 'string' } }, NO_SCHEMA],
  ['no message', { mode: 'form', requestedSchema: { type: 'object', properties: {} } }, 'Invalid params: an elicitation/create needs message, a string'],
  ['URL mode without url', { mode: 'url', message: 'go', elicitationId: 'el-2' }, 'Invalid params: a URL-mode elicitation/create needs url, a string'],
  ['URL mode without elicitationId', { mode: 'url', message: 'go', url: 'https://auth.example.test/x' }, 'Invalid params: a URL-mode elicitation/create of 2025-11-25 needs elicitationId, a string'],
  ['another mode', { mode: 'voice', message: 'say it', requestedSchema: { type: 'object', properties: {} } }, 'Invalid params: an elicitation/create mode is "form" or "url"'],
  ['sampling without maxTokens', { messages: HI }, NO_TOKENS, 'sampling/createMessage'],
  ['sampling without messages', { maxTokens: 5 }, NO_TOKENS, 'sampling/createMessage'],
];

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { lq: nodeServer('test/fixtures/quirks/legacy-32601.mjs') } });
  await waitForReady(hub.url, ['lq']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

/** What the quirk tool reports its question got: the client's result, or the error it was answered with. */
const answerOf = (result: Json | undefined): Json => JSON.parse(String((result?.content as Json[] | undefined)?.[0]?.text)) as Json;

describe('a legacy upstream elicitation of the wrong shape', () => {
  it('a legacy client is not asked; the upstream gets -32602 naming what is missing; URL mode still reaches it', async () => {
    const asked: Json[] = [];
    const client = new ClientV1({ name: 'shapes-v1', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} }, sampling: {} } });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params as Json);
      return { action: 'accept' };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push(req.params as Json);
      return { role: 'assistant', content: { type: 'text', text: 'hello' }, model: 'm' };
    });
    await client.connect(new TransportV1(new URL(hub.url)));
    try {
      for (const [what, params, message, method] of MALFORMED) {
        const r = (await client.callTool({ name: TOOL, arguments: { params, method } })) as Json;
        expect(answerOf(r), what).toEqual({ code: -32602, message });
      }
      expect(asked).toEqual([]);
      const url = (await client.callTool({ name: TOOL, arguments: { params: URL_ASK } })) as Json;
      expect(answerOf(url)).toEqual({ action: 'accept' });
      expect(asked).toEqual([expect.objectContaining({ mode: 'url', url: URL_ASK.url, elicitationId: 'el-1' })]);
      // A well-formed sampling request too.
      const llm = (await client.callTool({ name: TOOL, arguments: { method: 'sampling/createMessage', params: { messages: HI, maxTokens: 5 } } })) as Json;
      expect(answerOf(llm)).toMatchObject({ role: 'assistant', model: 'm' });
    } finally {
      await client.close();
    }
  });

  it('a modern client gets no input_required round for it, and each call has its row', async () => {
    const call = (id: string, params: Json, method?: string) =>
      post(hub.url, modernBody(id, 'tools/call', { name: TOOL, arguments: { params, method } }, modernMeta({ [META_CAPS]: { elicitation: { form: {}, url: {} }, sampling: {} } })), modernHeaders('tools/call', TOOL));
    for (const [i, [what, params, message, method]] of MALFORMED.entries()) {
      const r = await call(`shape-${i}`, params, method);
      expect(r.body?.result?.resultType, what).toBe('complete');
      expect(answerOf(r.body?.result), what).toEqual({ code: -32602, message });
    }
    // A URL-mode one is a round the client answers.
    const url = await call('shape-url', URL_ASK);
    expect(url.body?.result?.resultType).toBe('input_required');
    const requests = Object.values(url.body!.result!.inputRequests as Json) as Json[];
    expect(requests).toEqual([{ method: 'elicitation/create', params: expect.objectContaining({ mode: 'url', url: URL_ASK.url }) }]);
    const [key] = Object.keys(url.body!.result!.inputRequests as Json);
    const retry = await post(
      hub.url,
      modernBody('shape-url-retry', 'tools/call', { name: TOOL, arguments: { params: URL_ASK }, requestState: url.body!.result!.requestState, inputResponses: { [key!]: { action: 'accept' } } }, modernMeta({ [META_CAPS]: { elicitation: { form: {}, url: {} } } })),
      modernHeaders('tools/call', TOOL),
    );
    expect(answerOf(retry.body?.result)).toEqual({ action: 'accept' });
    const ids = [...MALFORMED.map((_, i) => `shape-${i}`), 'shape-url', 'shape-url-retry'];
    const outcomes = (x: { requestId: unknown; outcome: unknown }[]) => ids.map((id) => x.find((y) => y.requestId === id)?.outcome);
    const want = [...MALFORMED.map(() => 'ok'), 'input_required', 'ok'];
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { method: 'tools/call' }, (x) => JSON.stringify(outcomes(x)) === JSON.stringify(want));
    expect(outcomes(rows)).toEqual(want);
  });
});
