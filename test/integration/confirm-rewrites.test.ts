/**
 * The user confirms what will run: a plugin's beforeCall runs before the user is asked, so the
 * confirmation shows the arguments as the hook rewrote them, a hook's deny refuses without
 * asking, and a modern client's retry whose hooks make other arguments than the user confirmed
 * is asked again rather than run. The real built hub, a real plugin file, a real stdio upstream,
 * SDK v1 and v2 clients and raw modern requests over loopback HTTP.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';
import { USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';

const CONFIRM = 'switchyard/confirm';

let hub: HubProcess;
let stats: string;

beforeAll(async () => {
  const dir = tmp();
  stats = join(dir, 'stats.json');
  // "fixed" becomes the same text every attempt; "moving" a new one each attempt; "deny" is refused.
  writeFileSync(
    join(dir, 'rewrite.mjs'),
    `let n = 0;
    export default { name: 'rewrite', beforeCall(ctx) {
      const t = ctx.arguments.text;
      if (t === 'deny') return { deny: 'not this one' };
      if (t === 'fixed') return { arguments: { text: 'REWRITTEN-fixed' } };
      if (t === 'moving') return { arguments: { text: 'REWRITTEN-' + ++n } };
    } };`,
  );
  hub = await startHub(
    {
      plugins: { paths: ['./rewrite.mjs'] },
      policy: { confirm: ['m__echo'] },
      servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', STATS_FILE: stats }) },
    },
    { dir },
  );
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const calls = () => (JSON.parse(readFileSync(stats, 'utf8')) as Record<string, number>)['tools/call'] ?? 0;
const textOf = (r: unknown) => String((r as { content: { text: string }[] }).content[0]?.text ?? '');

type Asking = { resultType?: string; requestState?: string; inputRequests?: Record<string, { params: { message: string } }>; isError?: boolean; content?: { text: string }[] };

function ask(id: string, text: string, extra: Json = {}) {
  return post(hub.url, modernBody(id, 'tools/call', { name: 'm__echo', arguments: { text }, ...extra }, modernMeta({ [META_CAPS]: { elicitation: { form: {} } } })), modernHeaders('tools/call', 'm__echo'));
}

const accept = (a: Asking) => ({ requestState: a.requestState, inputResponses: Object.fromEntries(Object.keys(a.inputRequests!).map((k) => [k, { action: 'accept', content: {} }])) });

describe('confirmation of arguments a plugin rewrites', () => {
  it('a modern client (SDK v2) is asked about the rewritten arguments, and they run', async () => {
    const asked: string[] = [];
    const c = new V2Client({ name: 'confirm-rewrite', version: '1' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
    c.setRequestHandler('elicitation/create', async (req) => {
      asked.push(String((req.params as { message?: string }).message));
      return { action: 'accept', content: {} };
    });
    await c.connect(new V2Transport(new URL(hub.url)));
    try {
      const r = await c.callTool({ name: 'm__echo', arguments: { text: 'fixed' } });
      expect(textOf(r)).toBe('echo:REWRITTEN-fixed');
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain('REWRITTEN-fixed');
      expect(asked[0]).not.toContain('"fixed"');
    } finally {
      await c.close();
    }
  });

  it('a legacy client (SDK v1) is asked about the rewritten arguments on its session', async () => {
    const asked: string[] = [];
    const c = new V1Client({ name: 'confirm-rewrite-legacy', version: '1' }, { capabilities: { elicitation: {} } });
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(String(req.params.message));
      return { action: 'accept', content: {} };
    });
    await c.connect(new V1Transport(new URL(hub.url)));
    try {
      const r = await c.callTool({ name: 'm__echo', arguments: { text: 'fixed' } });
      expect(textOf(r)).toBe('echo:REWRITTEN-fixed');
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain('REWRITTEN-fixed');
    } finally {
      await c.close();
    }
  });

  it('a retry whose hooks make other arguments than the user confirmed is asked again, not run', async () => {
    const before = calls();
    const first = (await ask('mv-1', 'moving')).body?.result as Asking;
    expect(first.resultType).toBe('input_required');
    const shown = Object.values(first.inputRequests!)[0].params.message;
    expect(shown).toContain('REWRITTEN-');
    const again = (await ask('mv-2', 'moving', accept(first))).body?.result as Asking;
    expect(again.resultType).toBe('input_required');
    const reshown = Object.values(again.inputRequests!)[0].params.message;
    expect(reshown).toContain('REWRITTEN-');
    expect(reshown).not.toBe(shown);
    expect(calls()).toBe(before);
    // What the user confirmed and what runs agree: the confirmed retry of "fixed" runs.
    const fixed = (await ask('fx-1', 'fixed')).body?.result as Asking;
    const ran = (await ask('fx-2', 'fixed', accept(fixed))).body?.result as Asking;
    expect(textOf(ran)).toBe('echo:REWRITTEN-fixed');
    expect(calls()).toBe(before + 1);
  });

  it("a hook's deny refuses the call without asking the user", async () => {
    const r = (await ask('deny-1', 'deny')).body?.result as Asking;
    expect(r.resultType).not.toBe('input_required');
    expect(r.isError).toBe(true);
    expect(textOf(r)).toMatch(/refused by plugin rewrite: not this one/);
  });
});

describe("a confirmed call whose modern upstream then asks questions of its own", () => {
  let th: TranslationHub;
  beforeAll(async () => {
    const dir = tmp();
    // The `who` the upstream is called with: the same every attempt ("fixed"), or the same for
    // two attempts (the question and its confirmed retry) and another from the third on.
    writeFileSync(
      join(dir, 'who.mjs'),
      `let n = 0;
      export default { name: 'who', beforeCall(ctx) {
        const w = ctx.arguments.who;
        if (w === 'fixed') return { arguments: { who: 'R' } };
        if (w === 'later') return { arguments: { who: ++n <= 2 ? 'S' : 'S' + n } };
      } };`,
    );
    th = await startTranslationHub({ plugins: { paths: ['./who.mjs'] }, policy: { confirm: ['ms__elicit_form'] } }, {}, { dir });
  }, 60_000);
  afterAll(async () => void (await th?.stop()));

  let nextId = 1;
  async function call(who: string, extra: Json = {}): Promise<Json> {
    const id = `t${nextId++}`;
    const r = await post(th.url, modernBody(id, 'tools/call', { name: 'ms__elicit_form', arguments: { who }, ...extra }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', 'ms__elicit_form'));
    const m = r.messages.find((x) => x.id === id);
    if (!m?.result) throw new Error(`${r.status} ${r.text}`);
    return m.result as Json;
  }
  const answer = (r: Json) =>
    Object.fromEntries(Object.keys(r.inputRequests as Json).map((k) => [k, k === CONFIRM ? { action: 'accept', content: {} } : { action: 'accept', content: { name: 'Ada' } }]));

  it('the rewrite the user confirmed carries through the upstream\'s rounds: asked once, then completes', async () => {
    const asked: string[][] = [];
    let r = await call('fixed');
    for (let round = 0; r.resultType === 'input_required' && round < 6; round++) {
      asked.push(Object.keys(r.inputRequests as Json));
      r = await call('fixed', { requestState: r.requestState, inputResponses: answer(r) });
    }
    expect(r).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
    expect(asked).toEqual([[CONFIRM], [expect.not.stringMatching(CONFIRM)]]);
  });

  it("a round whose hooks rewrite otherwise than the user confirmed has the user asked again", async () => {
    const first = await call('later');
    expect(Object.keys(first.inputRequests as Json)).toEqual([CONFIRM]);
    // Confirmed: the upstream's own question comes next (it ran with what the user saw).
    const upstreamAsks = await call('later', { requestState: first.requestState, inputResponses: answer(first) });
    expect(upstreamAsks.resultType).toBe('input_required');
    expect(Object.keys(upstreamAsks.inputRequests as Json)).not.toContain(CONFIRM);
    // Its answer comes back with other arguments from the hooks: the hub's question again.
    const again = await call('later', { requestState: upstreamAsks.requestState, inputResponses: answer(upstreamAsks) });
    expect(again).toMatchObject({ resultType: 'input_required' });
    expect(Object.keys(again.inputRequests as Json)).toEqual([CONFIRM]);
  });
});
