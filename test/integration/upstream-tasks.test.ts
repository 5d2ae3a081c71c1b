/**
 * The hub routes no `tasks/*` method, so it never declares tasks to an upstream on a client's
 * behalf (digest §8.4, §8.16: only what it can relay end to end; nor any other extension, nor
 * an experimental capability), and a result it cannot relay
 * (resultType "task", or any value it does not know) is an error, not passed on as if final
 * (digest §2.2: an unrecognised value is invalid). Real hub, a raw modern stdio upstream that
 * echoes the _meta it gets and has a tool answering as the tasks extension does; raw HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';

const TASKS = 'io.modelcontextprotocol/tasks';

describe('tasks are not declared to upstreams, nor their results passed on', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { q: nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_TASK: '1' }) } });
    await waitForReady(hub.url, ['q']);
  });
  afterAll(async () => void (await hub?.stop()));

  const call = (id: string, name: string, caps: Json) =>
    post(hub.url, modernBody(id, 'tools/call', { name, arguments: { text: 'x' } }, modernMeta({ [META_CAPS]: caps })), modernHeaders('tools/call', name));
  const capsSeen = (r: { body?: { result?: Json } }) => ((r.body?.result?.structuredContent as Json).meta as Json)[META_CAPS];

  // Declared upstream, a feature is one the upstream may use; the hub can carry none it does not
  // know (digest §8.16), so an upstream told nothing falls back to core behaviour.
  it("a modern client's extensions (tasks among them) and experimental capabilities are not passed upstream; what the hub relays is", async () => {
    const caps = { elicitation: { form: {} }, extensions: { [TASKS]: {}, 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html'] } } };
    const r = await call('c1', 'q__echo', caps);
    expect(capsSeen(r)).toEqual({ elicitation: { form: {} } });
    expect(capsSeen(await call('c2', 'q__echo', { sampling: {}, experimental: { fancy: {} }, extensions: { 'x.example/e': { a: 1 } } }))).toEqual({ sampling: {} });
    // What the hub relays goes as the client declared it.
    const relayed = { elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: {} };
    expect(capsSeen(await call('c3', 'q__echo', relayed))).toEqual(relayed);
  });

  it("a legacy session's experimental capabilities are not passed to a modern upstream", async () => {
    const s = await legacySession(hub.url, { capabilities: { experimental: { fancy: {} }, roots: { listChanged: true } } });
    const r = await s.request(1, 'tools/call', { name: 'q__echo', arguments: { text: 'x' } });
    expect(((r.body?.result?.structuredContent as Json).meta as Json)[META_CAPS]).toEqual({ roots: {} });
  });

  // The client's server is the hub: a "thisServer" context it attached would be every upstream's.
  it('sampling.context is not passed upstream (either era of client); the rest of sampling is', async () => {
    expect(capsSeen(await call('x1', 'q__echo', { sampling: { context: {}, tools: {} }, roots: {} }))).toEqual({ sampling: { tools: {} }, roots: {} });
    const s = await legacySession(hub.url, { capabilities: { sampling: { context: {} } } });
    const r = await s.request(1, 'tools/call', { name: 'q__echo', arguments: { text: 'x' } });
    expect(((r.body?.result?.structuredContent as Json).meta as Json)[META_CAPS]).toEqual({ sampling: {} });
  });

  it("a legacy session's tasks capability is not passed to a modern upstream either", async () => {
    const s = await legacySession(hub.url, { capabilities: { tasks: { requests: { elicitation: { create: {} } } }, elicitation: {} } });
    const r = await s.request(1, 'tools/call', { name: 'q__echo', arguments: { text: 'x' } });
    expect(((r.body?.result?.structuredContent as Json).meta as Json)[META_CAPS]).toEqual({ elicitation: {} });
  });

  it('an upstream answer with resultType "task" is an error for the client, not a result', async () => {
    const r = await call('t1', 'q__task', { extensions: { [TASKS]: {} } });
    expect(r.body?.result).toBeUndefined();
    expect(r.body?.error).toMatchObject({ code: -32603, message: expect.stringContaining('resultType "task"') });
  });

  it('a completion/complete answered with a task, an input_required or an unknown resultType is an error for both eras', async () => {
    const complete = (value: string) => ({ ref: { type: 'ref/prompt', name: 'q__p' }, argument: { name: 'a', value } });
    const modern = (id: string, value: string) =>
      post(hub.url, modernBody(id, 'completion/complete', complete(value), modernMeta({ [META_CAPS]: { elicitation: {}, extensions: { [TASKS]: {} } } })), modernHeaders('completion/complete'));
    expect((await modern('k0', 'al')).body?.result).toMatchObject({ resultType: 'complete', completion: { values: ['al1', 'al2'] } });
    const legacy = await legacySession(hub.url, { capabilities: { elicitation: {} } });
    expect((await legacy.request(1, 'completion/complete', complete('al'))).body?.result).toEqual({ completion: { values: ['al1', 'al2'] } });
    let id = 2;
    for (const value of ['task', 'ask', 'odd']) {
      const m = await modern(`k-${value}`, value);
      expect(m.status, m.text).toBe(200);
      expect(m.body?.result, m.text).toBeUndefined();
      expect(m.body?.error).toMatchObject({ code: -32603, message: expect.stringContaining(`resultType "${value === 'ask' ? 'input_required' : value}"`) });
      const l = await legacy.request(id++, 'completion/complete', complete(value));
      expect(l.body?.result, l.text).toBeUndefined();
      expect(l.body?.error).toMatchObject({ code: -32603 });
    }
  });
});
