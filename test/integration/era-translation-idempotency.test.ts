/**
 * A call that is asked of the user on its way (URL steps of a legacy upstream, for a modern
 * client) keeps one outcome: the one it ends with. Its ledger row says so, and an idempotency
 * key stores it for replay, not the first attempt's -32042; a step the user turned down frees
 * the key. Real fixture upstreams behind the real built hub, on the raw wire.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { USER_CAPABILITIES, startTranslationHub, type TranslationHub } from '../fixtures/translation/peers.js';
import { META_KEY, queryRows, type Row } from './ledger-helpers.js';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

let th: TranslationHub;
let nextId = 1;

beforeAll(async () => {
  th = await startTranslationHub();
}, 60_000);
afterAll(async () => void (await th?.stop()));

/** A modern tools/call under an idempotency key; the JSON-RPC answer (result or error). */
async function call(name: string, args: Json, key: string, extra: Json = {}): Promise<Json> {
  const id = nextId++;
  const meta = modernMeta({ [META_CAPS]: USER_CAPABILITIES, [META_KEY]: key });
  const r = await post(th.url, modernBody(id, 'tools/call', { name, arguments: args, ...extra }, meta), modernHeaders('tools/call', name));
  const m = r.messages.find((x) => x.id === id);
  if (!m) throw new Error(`${r.status} ${r.text}`);
  return m as Json;
}

const stepAnswer = (r: Json, action: string) => Object.fromEntries(Object.keys((r.result as Json).inputRequests as Json).map((k) => [k, { action }]));

describe('URL steps of a legacy upstream, for a modern client with an idempotency key', () => {
  it('accepted: the row and the stored answer are the final result, which a retry of the key replays', async () => {
    const args = { ticket: 'idem-ok' };
    const first = await call('ls__elicit_url_required', args, 'key-url-ok');
    expect(first.result).toMatchObject({ resultType: 'input_required' });
    const done = await call('ls__elicit_url_required', args, 'key-url-ok', { requestState: (first.result as Json).requestState, inputResponses: stepAnswer(first, 'accept') });
    expect(done.result).toMatchObject({ content: [{ type: 'text', text: 'ticket idem-ok authorized' }] });
    const replay = await call('ls__elicit_url_required', args, 'key-url-ok');
    expect(replay.error).toBeUndefined();
    expect(replay.result).toMatchObject({ content: [{ type: 'text', text: 'ticket idem-ok authorized' }] });
    const rows = await queryRows(join(th.hub.dir, 'ledger.db'), { tool: 'ls__elicit_url_required' });
    const outcomes = rows.filter((r) => r.idempotencyKey === 'key-url-ok').map((r) => [r.outcome, r.errorCode]);
    // The first request was a round (answered input_required); the call ended on the retry.
    expect(outcomes).toEqual([
      ['input_required', null],
      ['ok', null],
      ['replayed', null],
    ]);
  });

  it('turned down: a tool error, the row finished, and the key free for the next attempt', async () => {
    const args = { ticket: 'idem-no' };
    const first = await call('ls__elicit_url_required', args, 'key-url-no');
    const declined = await call('ls__elicit_url_required', args, 'key-url-no', { requestState: (first.result as Json).requestState, inputResponses: stepAnswer(first, 'decline') });
    expect(declined.result).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringContaining('answered "decline"') }] });
    // Not replayed: the call runs again (and the fixture remembers the ticket now).
    const again = await call('ls__elicit_url_required', args, 'key-url-no');
    expect(again.result).toMatchObject({ content: [{ type: 'text', text: 'ticket idem-no authorized' }] });
    const rows = await queryRows(join(th.hub.dir, 'ledger.db'), { tool: 'ls__elicit_url_required' });
    const outcomes = rows.filter((r) => r.idempotencyKey === 'key-url-no').map((r) => r.outcome);
    expect(outcomes).not.toContain('in_flight');
    expect(outcomes).toContain('tool_error');
    expect(outcomes.at(-1)).toBe('ok');
  });
});

describe('URL steps asked again and again', () => {
  it('end after 10 rounds as a tool error, never as -32042 (retired for modern clients)', async () => {
    const args = { ticket: 'always-again' };
    let r = await call('ls__elicit_url_required', args, 'key-url-again');
    let rounds = 0;
    while ((r.result as Json | undefined)?.resultType === 'input_required' && rounds < 15) {
      rounds++;
      r = await call('ls__elicit_url_required', args, 'key-url-again', { requestState: (r.result as Json).requestState, inputResponses: stepAnswer(r, 'accept') });
    }
    expect(r.error).toBeUndefined();
    expect(r.result).toMatchObject({ isError: true, content: [{ type: 'text', text: 'the upstream still asked for steps at a URL after 10 rounds' }] });
    expect(rounds).toBe(10);
  });
});

describe('a legacy client that cancels while the hub asks it for a modern upstream', () => {
  it("has the hub's question cancelled too, and the call recorded as cancelled, not answered -32800 on the key's retry", async () => {
    const client = new ClientV1({ name: 'cancelling', version: '1.0.0' }, { capabilities: USER_CAPABILITIES });
    let asked: AbortSignal | undefined;
    client.setRequestHandler(ElicitRequestSchema, (_req, extra) => {
      asked = extra.signal;
      return new Promise(() => {}); // the user never answers
    });
    await client.connect(new TransportV1(new URL(th.url)));
    try {
      const ac = new AbortController();
      const call = client.callTool({ name: 'ms__elicit_form', arguments: { who: 'X' }, _meta: { [META_KEY]: 'key-cancel' } }, undefined, { signal: ac.signal, timeout: 30_000 });
      const deadline = Date.now() + 10_000;
      while (!asked && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(asked).toBeDefined();
      ac.abort();
      await expect(call).rejects.toThrow();
      while (!asked!.aborted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(asked!.aborted).toBe(true); // notifications/cancelled for the hub's own elicitation
      let rows = await queryRows(join(th.hub.dir, 'ledger.db'), { tool: 'ms__elicit_form' });
      while (!rows.some((r) => r.idempotencyKey === 'key-cancel' && r.outcome !== 'in_flight') && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        rows = await queryRows(join(th.hub.dir, 'ledger.db'), { tool: 'ms__elicit_form' });
      }
      expect(rows.filter((r) => r.idempotencyKey === 'key-cancel').map((r) => [r.outcome, r.errorCode])).toEqual([['cancelled', null]]);
      // The key's retry is not handed a stored -32800 as if it were the call's answer.
      const again = await client.callTool({ name: 'ms__elicit_form', arguments: { who: 'X' }, _meta: { [META_KEY]: 'key-cancel' } }, undefined, { timeout: 5_000 }).then(
        (r) => JSON.stringify(r),
        (e: Error) => e.message,
      );
      expect(again).not.toMatch(/-32800|request cancelled/);
      expect(again).toContain('outcome is unknown'); // it may have run upstream: the key is held
    } finally {
      await client.close();
    }
  });
});

describe("a legacy client that refuses what a modern upstream's input_required asks", () => {
  it('leaves its idempotency key free: the refusal is the client\'s, not the call\'s outcome, and is not replayed', async () => {
    const client = new ClientV1({ name: 'refusing', version: '1.0.0' }, { capabilities: USER_CAPABILITIES });
    let refuse = true;
    let asked = 0;
    client.setRequestHandler(CreateMessageRequestSchema, () => {
      asked++;
      if (refuse) throw new McpError(-1, 'the user said no');
      return { role: 'assistant', model: 'm-agrees', content: { type: 'text', text: 'yes' } } as never;
    });
    await client.connect(new TransportV1(new URL(th.url)));
    try {
      const call = () => client.callTool({ name: 'ms__sample', arguments: {}, _meta: { [META_KEY]: 'key-refused' } }, undefined, { timeout: 30_000 });
      await expect(call()).rejects.toThrow(/the user said no/);
      refuse = false;
      // The user agrees now: the call runs (the upstream and the user asked again), not a replayed -1.
      const again = await call();
      expect(again).toMatchObject({ content: [{ type: 'text', text: 'sampled text=yes model=m-agrees' }] });
      expect(asked).toBe(2);
      const rows = await queryRows(join(th.hub.dir, 'ledger.db'), { tool: 'ms__sample' });
      // The first row still says how that call ended.
      expect(rows.filter((r) => r.idempotencyKey === 'key-refused').map((r) => [r.outcome, r.errorCode])).toEqual([
        ['rpc_error', -1],
        ['ok', null],
      ]);
    } finally {
      await client.close();
    }
  });

  // A round that failed was ended upstream with one last retry answering `cancel` (meant for an
  // upstream holding the call, found by its requestState): one that gave no requestState holds
  // nothing, and the retry only ran its tool again from the start.
  it('does not have a stateless round (no requestState) run again upstream to be told cancel', async () => {
    const client = new ClientV1({ name: 'refusing-stateless', version: '1.0.0' }, { capabilities: USER_CAPABILITIES });
    client.setRequestHandler(ElicitRequestSchema, () => {
      throw new McpError(-1, 'the user said no');
    });
    await client.connect(new TransportV1(new URL(th.url)));
    try {
      await expect(client.callTool({ name: 'ms__elicit_form', arguments: { who: 'Refuser' } }, undefined, { timeout: 30_000 })).rejects.toThrow(/the user said no/);
      const ran = (what: string) => th.hub.logs.some((l) => l.includes(`elicit_form ran for Refuser: ${what}`));
      // The upstream's stderr reaches the hub's log on a pipe of its own: under load, after the answer.
      await expect.poll(() => ran('asking'), { timeout: 5_000, interval: 50 }).toBe(true);
      // The same upstream answers a call made after it: a last retry would have been sent before
      // it (its stderr line may come a moment after that answer).
      expect(await client.callTool({ name: 'ms__echo', arguments: { text: 'after' } })).toMatchObject({ content: [{ type: 'text', text: 'echo:after' }] });
      for (const until = Date.now() + 1_000; Date.now() < until && !ran('cancel'); ) await new Promise((r) => setTimeout(r, 50));
      expect(ran('cancel')).toBe(false);
    } finally {
      await client.close();
    }
  });

  // A code JSON-RPC reserves reads as about the request it answers: passed on as it was, the
  // client's -32601 for roots/list said tools/call was not found. No inputResponses value can
  // carry an error (digest §5.1), so the upstream hears nothing and the call ends at the client.
  it('that refuses roots/list with -32601 gets an error naming the refused question, not -32601 for its tools/call', async () => {
    const client = new ClientV1({ name: 'rootless', version: '1.0.0' }, { capabilities: USER_CAPABILITIES });
    client.setRequestHandler(ListRootsRequestSchema, () => {
      throw new McpError(-32601, 'Method not found');
    });
    await client.connect(new TransportV1(new URL(th.url)));
    try {
      const err = await client.callTool({ name: 'ms__roots', arguments: {} }, undefined, { timeout: 30_000 }).then(
        () => undefined,
        (e: { code?: number; message?: string }) => e,
      );
      expect(err).toMatchObject({ code: -32603, message: expect.stringContaining('the client refused roots/list (error -32601: ') });
    } finally {
      await client.close();
    }
  });
});

// Last in this file: it kills the modern stdio server (which is back, ready, when it ends).
describe('a modern client whose retry of an input_required comes while the server restarts after a crash', () => {
  // The retry was refused at once ("unavailable"), as a first call is: the user's answer lost
  // unless the client sent it again by itself, which no client does for a tool error.
  it('waits a little for the server to be back, and is answered', async () => {
    const name = 'ms__elicit_form';
    const send = async (params: Json): Promise<Json> => {
      const id = nextId++;
      const r = await post(th.url, modernBody(id, 'tools/call', params, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
      const m = r.messages.find((x) => x.id === id);
      if (!m) throw new Error(`${r.status} ${r.text}`);
      return m as Json;
    };
    const first = await send({ name, arguments: { who: 'Crash' } });
    const state = (first.result as Json | undefined)?.requestState;
    expect(state, JSON.stringify(first)).toMatch(/^sy1\./);
    // Its pid, from the hub's debug log of the spawn.
    const spawned = th.hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
    const pid = spawned.filter((l) => l.server === 'ms').at(-1)?.pid as number;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGKILL');
    const health = async () => ((await (await fetch(new URL('/healthz', th.url))).json()) as { servers: { id: string; state: string }[] }).servers.find((s) => s.id === 'ms')!.state;
    for (const until = Date.now() + 10_000; (await health()) === 'ready'; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('the server never went down');
    const retry = await send({ name, arguments: { who: 'Crash' }, requestState: state, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } });
    expect(retry.result, JSON.stringify(retry)).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
    expect((retry.result as { isError?: boolean } | undefined)?.isError).toBeUndefined();
  }, 30_000);

  // A read's and a prompt's round carry the user's answer as a tool call's does: their retries
  // were refused at once ("unavailable") while a tool call's waited.
  it('a resources/read and a prompts/get retry wait too, and are answered (their rows ok)', async () => {
    const uri = 'consent://modern-stdio/doc';
    const send = async (method: string, name: string, params: Json): Promise<Json> => {
      const id = `round-${nextId++}`;
      const r = await post(th.url, modernBody(id, method, params, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders(method, name));
      const m = r.messages.find((x) => x.id === id);
      if (!m) throw new Error(`${r.status} ${r.text}`);
      return m as Json;
    };
    const read = await send('resources/read', uri, { uri });
    const prompt = await send('prompts/get', 'ms__greeting', { name: 'ms__greeting' });
    const readState = (read.result as Json | undefined)?.requestState;
    const promptState = (prompt.result as Json | undefined)?.requestState;
    expect(readState, JSON.stringify(read)).toMatch(/^sy1\./);
    expect(promptState, JSON.stringify(prompt)).toMatch(/^sy1\./);
    const spawned = th.hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
    process.kill(spawned.filter((l) => l.server === 'ms').at(-1)?.pid as number, 'SIGKILL');
    const health = async () => ((await (await fetch(new URL('/healthz', th.url))).json()) as { servers: { id: string; state: string }[] }).servers.find((s) => s.id === 'ms')!.state;
    for (const until = Date.now() + 10_000; (await health()) === 'ready'; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('the server never went down');
    const answer = { who: { action: 'accept', content: { name: 'Ada' } } };
    const [readAgain, promptAgain] = await Promise.all([
      send('resources/read', uri, { uri, requestState: readState, inputResponses: answer }),
      send('prompts/get', 'ms__greeting', { name: 'ms__greeting', requestState: promptState, inputResponses: answer }),
    ]);
    expect(readAgain.result, JSON.stringify(readAgain)).toMatchObject({ contents: [{ uri, text: expect.stringContaining('doc for Ada') }] });
    expect(promptAgain.result, JSON.stringify(promptAgain)).toMatchObject({ messages: [{ content: { type: 'text', text: 'Greet Ada' } }] });
    const rows = (await queryRows(join(th.hub.dir, 'ledger.db'), {})).filter((r) => r.requestId === readAgain.id || r.requestId === promptAgain.id);
    expect(rows.map((r) => [r.method, r.outcome]).sort()).toEqual([
      ['prompts/get', 'ok'],
      ['resources/read', 'ok'],
    ]);
  }, 30_000);

  // The wait ends at the client's cancellation; its row said `unavailable` (the server down),
  // as if the hub had refused it, though the client went away while it waited.
  it('cancelled by its client while it waits: recorded cancelled, not unavailable', async () => {
    const name = 'ms__elicit_form';
    const id = `cancel-wait-${nextId++}`;
    const first = await post(th.url, modernBody(nextId++, 'tools/call', { name, arguments: { who: 'Gone' } }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', name));
    const state = ((first.messages.at(-1) as Json).result as Json | undefined)?.requestState;
    expect(state, first.text).toMatch(/^sy1\./);
    const spawned = th.hub.logs.filter((l) => l.includes('"msg":"spawned"')).map((l) => JSON.parse(l) as Json);
    process.kill(spawned.filter((l) => l.server === 'ms').at(-1)?.pid as number, 'SIGKILL');
    const health = async () => ((await (await fetch(new URL('/healthz', th.url))).json()) as { servers: { id: string; state: string }[] }).servers.find((s) => s.id === 'ms')!.state;
    for (const until = Date.now() + 10_000; (await health()) === 'ready'; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('the server never went down');
    const ac = new AbortController();
    const body = modernBody(id, 'tools/call', { name, arguments: { who: 'Gone' }, requestState: state, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } }, modernMeta({ [META_CAPS]: USER_CAPABILITIES }));
    const sent = fetch(th.url, { method: 'POST', headers: modernHeaders('tools/call', name), body: JSON.stringify(body), signal: ac.signal }).then((r) => r.text()).catch(() => undefined);
    setTimeout(() => ac.abort(), 30);
    await sent;
    let row: Row | undefined;
    for (const until = Date.now() + 10_000; !row && Date.now() < until; await new Promise((r) => setTimeout(r, 50)))
      row = (await queryRows(join(th.hub.dir, 'ledger.db'), { tool: name })).find((r) => r.requestId === id && r.outcome !== 'in_flight');
    expect(row && [row.outcome, row.errorKind]).toEqual(['cancelled', null]);
    // Back for the next test file's callers.
    for (const until = Date.now() + 10_000; (await health()) !== 'ready'; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('the server never came back');
  }, 30_000);
});
