/**
 * Whose question the user is shown. Behind the hub every elicitation seems to come from the
 * hub, one server to the client, so an untrusted upstream could ask in the hub's name or
 * another server's ("Switchyard needs your GitHub token again"), and the user, who is to judge
 * a question by who asks it, could not tell. The hub says which server asks, `[<id>] …`, in
 * every message it relays from an untrusted server, whatever the eras, the URL steps of a
 * -32042 passed on to a legacy client among them; a trusted server's (a
 * hub behind this one, which says so itself) pass as they are. Real peers: the translation
 * fixtures (SDK v1 legacy, SDK v2 modern) and a raw modern one (quirks/modern.mjs) over stdio,
 * SDK clients of both eras.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';
import { LEGACY_FIXTURE, MODERN_FIXTURE, legacyUser, modernUser, textOf, type User } from '../fixtures/translation/peers.js';

const SERVERS = [
  { id: 'ls', fixture: LEGACY_FIXTURE, trusted: false },
  { id: 'ms', fixture: MODERN_FIXTURE, trusted: false },
  { id: 'lt', fixture: LEGACY_FIXTURE, trusted: true },
  { id: 'mt', fixture: MODERN_FIXTURE, trusted: true },
] as const;

/**
 * The single sampling request of a modern tools/call's first answer (input_required), as the hub
 * sent it; answered, so that a call parked for it at the hub ends (its stdio server runs one such call at a time).
 */
async function rawInputRequest(url: string, name: string, args: Json): Promise<{ method?: string; params?: Json }> {
  const meta = modernMeta({ [META_CAPS]: { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} } });
  const send = (extra: Json = {}) => post(url, modernBody(`raw-${Math.random()}`, 'tools/call', { name, arguments: args, ...extra }, meta), modernHeaders('tools/call', name));
  const r = await send();
  expect(r.body?.result?.resultType, r.text).toBe('input_required');
  const [[key, request]] = Object.entries(r.body!.result!.inputRequests as Record<string, { method?: string; params?: Json }>);
  const answer = { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'm', stopReason: 'endTurn' };
  const done = await send({ requestState: r.body!.result!.requestState, inputResponses: { [key!]: answer } });
  expect(done.body?.result?.resultType, done.text).toBe('complete');
  return request!;
}

describe('the server that asks the user is named in its question', () => {
  let hub: HubProcess;

  beforeAll(async () => {
    hub = await startHub({
      servers: Object.fromEntries(SERVERS.map((s) => [s.id, { ...nodeServer(s.fixture, [], { SERVER_NAME: s.id }), ...(s.trusted ? { trust: 'trusted' } : {}) }])),
    });
    await waitForReady(hub.url, SERVERS.map((s) => s.id));
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  for (const era of ['legacy', 'modern'] as const) {
    describe(`${era} client`, () => {
      let user: User;
      beforeAll(async () => {
        user = await (era === 'legacy' ? legacyUser : modernUser)(hub.url, `asker-${era}`);
      });
      afterAll(async () => {
        await user?.close();
      });

      for (const s of SERVERS) {
        const said = (message: string) => (s.trusted ? message : `[${s.id}] ${message}`);

        it(`${s.trusted ? 'a trusted' : 'an untrusted'} ${s.fixture === LEGACY_FIXTURE ? 'legacy' : 'modern'} server (${s.id}): a form ${s.trusted ? 'passes as it asked it' : 'names it'}, and its answer reaches it`, async () => {
          user.asks.length = 0;
          user.script.elicit = () => ({ action: 'accept', content: { name: 'Ada' } });
          const r = await user.callTool(`${s.id}__elicit_form`, { who: 'Grace' });
          expect(textOf(r)).toBe('action=accept content={"name":"Ada"}');
          expect(user.asks).toHaveLength(1);
          expect(user.asks[0]!.params.message).toBe(said('Hello Grace, what is your name?'));
          // And in _meta, to a legacy client (whose params have one; sampling's below has no message).
          if (era === 'legacy') expect((user.asks[0]!.params._meta as Json | undefined)?.['dev.switchyard/server']).toBe(s.trusted ? undefined : s.id);
        });

        it(`${s.trusted ? 'a trusted' : 'an untrusted'} ${s.fixture === LEGACY_FIXTURE ? 'legacy' : 'modern'} server (${s.id}): so does a URL-mode question`, async () => {
          user.asks.length = 0;
          user.script.elicit = () => ({ action: 'accept' });
          const r = await user.callTool(`${s.id}__elicit_url`);
          expect(textOf(r)).toMatch(/^url action=accept/);
          expect(user.asks).toHaveLength(1);
          expect(user.asks[0]!.params).toMatchObject({ mode: 'url', message: said('Please sign in') });
        });

        it(`${s.trusted ? 'a trusted' : 'an untrusted'} ${s.fixture === LEGACY_FIXTURE ? 'legacy' : 'modern'} server (${s.id}): a sampling request, which has no message to name it in, ${s.trusted ? 'passes as it asked it' : era === 'legacy' ? 'says it in _meta["dev.switchyard/server"], whatever the server put there' : 'passes without the server\'s own _meta["dev.switchyard/server"]'}`, async () => {
          for (const claim of [undefined, 'github']) {
            user.asks.length = 0;
            const args = claim === undefined ? { prompt: 'Say hi' } : { prompt: 'Say hi', claim };
            const r = await user.callTool(`${s.id}__sample`, args);
            expect(textOf(r)).toMatch(/^sampled text=hi from /);
            expect(user.asks).toHaveLength(1);
            const { _meta: meta, ...params } = user.asks[0]!.params;
            // The request itself as the server asked it: what the model is given is not the hub's to change.
            expect(params).toEqual({ messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }], maxTokens: 50 });
            const own = claim === undefined ? undefined : { 'dev.switchyard/server': claim, 'com.example/kept': 'yes' };
            if (era === 'legacy') expect(meta, String(claim)).toEqual(s.trusted ? own : { ...own, 'dev.switchyard/server': s.id });
            else {
              // SDK v2 hands its handler no _meta of an embedded sampling request (the 2026
              // params have none): what the hub sent is read on the wire.
              const sent = await rawInputRequest(hub.url, `${s.id}__sample`, args);
              const kept = s.trusted ? own : claim === undefined ? undefined : { 'com.example/kept': 'yes' };
              expect(sent.params?._meta, String(claim)).toEqual(kept);
            }
          }
        });
      }

      if (era === 'legacy')
        for (const s of SERVERS.filter((x) => x.fixture === LEGACY_FIXTURE)) {
          it(`${s.trusted ? 'a trusted' : 'an untrusted'} legacy server's steps at a URL (-32042), passed on to a legacy client as an error, ${s.trusted ? 'pass as it asked them' : 'name it'} (${s.id})`, async () => {
            user.asks.length = 0;
            const ticket = `legacy-${s.id}`;
            const err = await user.callTool(`${s.id}__elicit_url_required`, { ticket }).then(
              () => undefined,
              (e: { code?: number; data?: unknown }) => e,
            );
            const message = `Authorize ticket ${ticket}`;
            expect(err).toMatchObject({
              code: -32042,
              // The error's own message is the server's text too (SDK v1's default, which its
              // McpError writes with the code before it; the client's adds another).
              message: `MCP error -32042: ${s.trusted ? '' : `[${s.id}] `}MCP error -32042: URL elicitation required`,
              data: { elicitations: [{ mode: 'url', message: s.trusted ? message : `[${s.id}] ${message}`, url: `https://auth.example.test/ticket/${ticket}`, elicitationId: `el-${ticket}` }] },
            });
            // The hub asked nothing itself: the client opens the URL and tries again.
            expect(user.asks).toEqual([]);
            expect(textOf(await user.callTool(`${s.id}__elicit_url_required`, { ticket }))).toBe(`ticket ${ticket} authorized`);
          });
        }

      if (era === 'modern')
        it("an untrusted legacy server's steps at a URL (-32042), asked of a modern client, name it too", async () => {
          user.asks.length = 0;
          user.script.elicit = () => ({ action: 'accept' });
          const r = await user.callTool('ls__elicit_url_required', { ticket: 't1' });
          expect(textOf(r)).toBe('ticket t1 authorized');
          expect(user.asks.map((a) => a.params.message)).toEqual(['[ls] Authorize ticket t1']);
        });
    });
  }
});

// A request other than tools/call (router.ts): a prompts/get whose upstream answers -32042 (a
// modern quirk server, whose error reaches a legacy client with its code, as a legacy server's does).
describe("a -32042 of a request other than tools/call names its server to a legacy client", () => {
  let hub: HubProcess;
  let client: ClientV1;

  beforeAll(async () => {
    const quirk = nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_FAIL: '1' });
    hub = await startHub({ servers: { q: quirk, qt: { ...quirk, trust: 'trusted' } } });
    await waitForReady(hub.url, ['q', 'qt']);
    client = new ClientV1({ name: 'asker-prompt', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
    await client.connect(new TransportV1(new URL(hub.url)));
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await hub?.stop();
  });

  for (const id of ['q', 'qt']) {
    it(`${id === 'q' ? 'untrusted: named' : 'trusted: as it came'} (${id})`, async () => {
      const step = { mode: 'url', message: 'Switchyard needs you to sign in again', url: 'https://auth.example.test/again', elicitationId: 'el-1' };
      const err = await client.getPrompt({ name: `${id}__fail`, arguments: { code: '-32042', data: JSON.stringify({ elicitations: [step] }) } }).then(
        () => undefined,
        (e: { code?: number; data?: unknown }) => e,
      );
      expect(err).toMatchObject({
        code: -32042,
        message: `MCP error -32042: ${id === 'q' ? '[q] ' : ''}failed with -32042`,
        data: { elicitations: [{ ...step, message: id === 'q' ? `[q] ${step.message}` : step.message }] },
      });
    });
  }
});
