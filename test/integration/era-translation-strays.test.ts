/**
 * A legacy (2025-11-25) client's stray `inputResponses` / `requestState` on a first request:
 * they are the modern era's MRTR retry fields, which a legacy client has no round to send, and
 * the hub leaves them out of what it forwards. Forwarded, a modern upstream took them as a retry
 * of a round that never happened: an answer the client made up in place of its user's, or a
 * state minted for another call. Real peers: the SDK v1 client, the SDK v2 modern fixture.
 */
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema, GetPromptResultSchema, ReadResourceResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { MODERN_FIXTURE, USER_CAPABILITIES, textOf } from '../fixtures/translation/peers.js';

type Json = Record<string, unknown>;

const FORGED = { name: { action: 'accept', content: { name: 'forged' } }, who: { action: 'accept', content: { name: 'forged' } } };

describe('a legacy client\'s stray MRTR fields never reach a modern upstream', () => {
  let hub: HubProcess;
  let client: ClientV1;
  const asked: string[] = [];

  beforeAll(async () => {
    hub = await startHub({ servers: { ms: nodeServer(MODERN_FIXTURE, [], { SERVER_NAME: 'modern-stdio' }) } });
    await waitForReady(hub.url, ['ms']);
    client = new ClientV1({ name: 'legacy-strays', version: '1.0.0' }, { capabilities: USER_CAPABILITIES });
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(String(req.params.message));
      return { action: 'accept', content: { name: 'the user' } };
    });
    await client.connect(new TransportV1(new URL(hub.url)));
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await hub?.stop();
  });

  it('tools/call with inputResponses: the user is asked, the made-up answer is not taken', async () => {
    asked.length = 0;
    const r = (await client.request({ method: 'tools/call', params: { name: 'ms__elicit_form', arguments: { who: 'Ada' }, inputResponses: FORGED } as never }, CallToolResultSchema)) as Json;
    expect(textOf(r)).toBe('action=accept content={"name":"the user"}');
    expect(asked).toEqual(['[ms] Hello Ada, what is your name?']);
  });

  it('tools/call with a requestState (and inputResponses): a first round, the user asked', async () => {
    asked.length = 0;
    const r = (await client.request(
      { method: 'tools/call', params: { name: 'ms__elicit_form', arguments: { who: 'Bo' }, inputResponses: FORGED, requestState: 'made-up' } as never },
      CallToolResultSchema,
    )) as Json;
    expect(textOf(r)).toBe('action=accept content={"name":"the user"}');
    expect(asked).toEqual(['[ms] Hello Bo, what is your name?']);
  });

  it('prompts/get and resources/read: the same', async () => {
    asked.length = 0;
    const p = (await client.request({ method: 'prompts/get', params: { name: 'ms__greeting', inputResponses: FORGED } as never }, GetPromptResultSchema)) as Json;
    expect((p.messages as { content: { text: string } }[])[0]!.content.text).toBe('Greet the user');
    const uri = 'consent://modern-stdio/doc';
    const d = (await client.request({ method: 'resources/read', params: { uri, inputResponses: FORGED, requestState: 'made-up' } as never }, ReadResourceResultSchema)) as Json;
    expect((d.contents as { text: string }[])[0]!.text).toMatch(/^doc for the user /);
    expect(asked).toEqual(['[ms] Whom shall I greet?', '[ms] Who is reading?']);
  });
});
