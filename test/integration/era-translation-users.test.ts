/**
 * Must-show 5 of "Era translation", and the capability rule, through the real built hub:
 * two users eliciting at the same moment never receive each other's requests (every client ×
 * upstream era pair, including two legacy sessions on one legacy stdio upstream), and the hub
 * never asks a client for something it did not declare.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META_CAPS, legacySession, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { UPSTREAMS, USER_CAPABILITIES, legacyUser, modernUser, startTranslationHub, textOf, type TranslationHub, type User } from '../fixtures/translation/peers.js';

const ROUNDS = 3;
let th: TranslationHub;

beforeAll(async () => {
  th = await startTranslationHub();
}, 60_000);

afterAll(async () => {
  await th?.stop();
});

const connect = { legacy: legacyUser, modern: modernUser } as const;
const PAIRS = [
  ['legacy', 'legacy'],
  ['modern', 'modern'],
  ['legacy', 'modern'],
] as const;

describe.each(UPSTREAMS)('two users eliciting at once on $id ($era over $transport)', (up) => {
  it.each(PAIRS)('%s + %s clients: each is asked only its own questions', async (eraA, eraB) => {
    const users: User[] = await Promise.all([connect[eraA](th.url, `alice-${eraA}`), connect[eraB](th.url, `bob-${eraB}`)]);
    try {
      for (const u of users) {
        const me = u.label.split(' ').at(-1)!;
        // Slow answers keep both users' requests open at the same time.
        u.script.elicit = async () => {
          await new Promise((r) => setTimeout(r, 60));
          return { action: 'accept', content: { name: me } };
        };
      }
      const calls = users.flatMap((u) => {
        const me = u.label.split(' ').at(-1)!;
        return Array.from({ length: ROUNDS }, () => u.callTool(`${up.id}__elicit_form`, { who: me }).then((r) => ({ me, text: textOf(r) })));
      });
      const results = await Promise.all(calls);
      for (const r of results) expect(r.text).toBe(`action=accept content={"name":"${r.me}"}`);
      for (const u of users) {
        const me = u.label.split(' ').at(-1)!;
        expect(u.asks).toHaveLength(ROUNDS);
        for (const a of u.asks) expect(a.params.message).toBe(`[${up.id}] Hello ${me}, what is your name?`);
      }
    } finally {
      await Promise.all(users.map((u) => u.close()));
    }
  }, 60_000);
});

describe('a read the user answered for is never cached (digest §3.3)', () => {
  it.each([
    ['ms', 'modern-stdio'],
    ['mh', 'modern-http'],
  ])('legacy clients reading a resource of %s that asks who reads it are each asked, every time', async (_id, name) => {
    const uri = `consent://${name}/doc`;
    const [a, b] = await Promise.all([legacyUser(th.url, 'ada'), legacyUser(th.url, 'bob')]);
    try {
      const text = (r: Json) => ((r.contents as Json[])[0] as { text: string }).text;
      const first = text(await a.readResource(uri));
      expect(first).toMatch(/^doc for ada \(read \d+\)$/);
      expect(text(await b.readResource(uri))).toMatch(/^doc for bob /);
      const again = text(await a.readResource(uri));
      expect(again).toMatch(/^doc for ada /);
      expect(again).not.toBe(first); // read again upstream, not served from a cache
      expect(a.asks.map((x) => x.method)).toEqual(['elicitation/create', 'elicitation/create']);
      expect(b.asks).toHaveLength(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  }, 60_000);

  it('a modern client retrying with its answers is not served another user\'s read either', async () => {
    const uri = 'consent://modern-stdio/doc';
    const a = await legacyUser(th.url, 'ada');
    const m = await modernUser(th.url, 'mia');
    try {
      await a.readResource(uri);
      const r = await m.readResource(uri);
      expect(((r.contents as Json[])[0] as { text: string }).text).toMatch(/^doc for mia /);
      expect(m.asks).toHaveLength(1);
      // The upstream said public for a minute; a result holding the user's answer is no one's to keep.
      expect([r.ttlMs, r.cacheScope]).toEqual([0, 'private']);
    } finally {
      await Promise.all([a.close(), m.close()]);
    }
  }, 60_000);
});

describe('tool-enabled sampling from an upstream of either era (sampling.tools)', () => {
  const TOOL_USE = { role: 'assistant', content: [{ type: 'tool_use', id: 'tu1', name: 'get_weather', input: { city: 'Paris' } }], model: 'm', stopReason: 'toolUse' };
  const ANSWERED = 'sampled tool_use:get_weather({"city":"Paris"}) stop=toolUse';

  // The hub declared sampling without tools at the upstream's initialize, and an SDK 1.x server
  // refuses tool-enabled sampling then: no client could ever be asked, whatever it declared.
  it.each(['ls', 'lh', 'ms', 'mh'])('a legacy client that declares it is asked, and its tool_use reaches the upstream (%s)', async (id) => {
    const u = await legacyUser(th.url, `tools-${id}`, undefined, { ...USER_CAPABILITIES, sampling: { tools: {} } });
    try {
      u.script.sample = () => TOOL_USE;
      const r = await u.callTool(`${id}__sample_tools`);
      expect(textOf(r), JSON.stringify(r)).toBe(ANSWERED);
      expect(u.asks).toEqual([{ method: 'sampling/createMessage', params: expect.objectContaining({ tools: [expect.objectContaining({ name: 'get_weather' })], toolChoice: { mode: 'auto' } }) }]);
    } finally {
      await u.close();
    }
  });

  it.each(['ls', 'lh', 'ms', 'mh'])('a modern client that declares it gets the request, and its retry answers the upstream (%s)', async (id) => {
    const name = `${id}__sample_tools`;
    const caps = { sampling: { tools: {} } };
    const first = await post(th.url, modernBody(1, 'tools/call', { name, arguments: {} }, modernMeta({ [META_CAPS]: caps })), modernHeaders('tools/call', name));
    const asked = first.body?.result as Json;
    expect(asked, first.text).toMatchObject({ resultType: 'input_required' });
    const [[key, req]] = Object.entries(asked.inputRequests as Record<string, Json>);
    expect(req).toMatchObject({ method: 'sampling/createMessage', params: { tools: [expect.objectContaining({ name: 'get_weather' })] } });
    const retry = await post(
      th.url,
      modernBody(2, 'tools/call', { name, arguments: {}, inputResponses: { [key]: TOOL_USE }, requestState: asked.requestState }, modernMeta({ [META_CAPS]: caps })),
      modernHeaders('tools/call', name),
    );
    expect(textOf(retry.body?.result as Json), retry.text).toBe(ANSWERED);
  });

  it.each(['ls', 'lh', 'ms', 'mh'])('a client that declares sampling without tools is never asked: -32021 naming sampling.tools, or a refusal upstream (%s)', async (id) => {
    const name = `${id}__sample_tools`;
    const m = await post(th.url, modernBody(1, 'tools/call', { name, arguments: {} }, modernMeta({ [META_CAPS]: { sampling: {} } })), modernHeaders('tools/call', name));
    expect(m.body?.error, m.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: { tools: {} } } } });
    const s = await legacySession(th.url, { capabilities: { sampling: {} } });
    const r = await s.request(7, 'tools/call', { name, arguments: {} });
    expect(r.messages.filter((x) => x.method !== undefined), r.text).toEqual([]);
    // A legacy server hears the refusal and fails its tool saying so; for a modern server the hub
    // answers the legacy client with a tool error of its own (no -32021 in that era).
    const said = id.startsWith('l') ? /^sampling refused: .*did not declare sampling\.tools/ : /^the upstream needs a client capability this client did not declare: sampling\.tools$/;
    expect(r.body?.result, r.text).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(said) }] });
  });
});

describe('a client that did not declare the capability is never asked', () => {
  /** A raw modern tools/call with the given client capabilities. */
  async function modernCall(name: string, caps: Json, args: Json = {}) {
    const r = await post(th.url, modernBody(1, 'tools/call', { name, arguments: args }, modernMeta({ [META_CAPS]: caps })), modernHeaders('tools/call', name));
    return r;
  }

  it.each(['ls', 'lh', 'ms', 'mh'])('modern client without elicitation → -32021 naming it (%s)', async (id) => {
    const r = await modernCall(`${id}__elicit_form`, {}, { who: 'nobody' });
    expect(r.body?.error, r.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: expect.any(Object) } } });
    expect(r.messages.filter((m) => m.method !== undefined)).toEqual([]);
  });

  it.each(['ls', 'ms'])('modern client with form-only elicitation asked for URL mode → -32021 (%s)', async (id) => {
    const r = await modernCall(`${id}__elicit_url`, { elicitation: { form: {} } });
    expect(r.body?.error, r.text).toMatchObject({ code: -32021 });
  });

  it.each(['ls', 'lh'])('modern client with URL-only elicitation asked for a form → -32021 naming form (%s)', async (id) => {
    const r = await modernCall(`${id}__elicit_form`, { elicitation: { url: {} } }, { who: 'nobody' });
    expect(r.body?.error, r.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: { form: {} } } } });
    expect(r.messages.filter((m) => m.method !== undefined)).toEqual([]);
  });

  it.each(['ls', 'ms'])('modern client without sampling or roots → -32021 (%s); a legacy server asking roots hears -32601 instead', async (id) => {
    const s = await modernCall(`${id}__sample`, { elicitation: {} });
    expect(s.body?.error, s.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: expect.any(Object) } } });
    const r = await modernCall(`${id}__roots`, { elicitation: {} });
    if (id === 'ms') expect(r.body?.error, r.text).toMatchObject({ code: -32021, data: { requiredCapabilities: { roots: expect.any(Object) } } });
    // A legacy server asks for roots on its own too (as it starts, when told they changed), and
    // over stdio nothing says for which call: it hears what a legacy client without roots
    // answers and decides itself (this one fails its tool), as on a direct connection
    // (roots-unasked-modern.test.ts).
    else expect(r.body?.result, r.text).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringMatching(/-32601.*did not declare roots/) }] });
    expect(r.messages.filter((m) => m.method !== undefined)).toEqual([]);
  });

  it.each(['ls', 'lh', 'ms', 'mh'])('legacy client without capabilities: an error, and no request on its stream (%s)', async (id) => {
    const s = await legacySession(th.url);
    const r = await s.request(7, 'tools/call', { name: `${id}__elicit_form`, arguments: { who: 'nobody' } });
    expect(r.messages.filter((m) => m.method !== undefined), r.text).toEqual([]);
    // Never -32021 (a modern code): a tool error, as a legacy server's own refusal reads.
    expect(r.body?.result, r.text).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringMatching(/did not declare.*elicitation/) }] });
  });
});
