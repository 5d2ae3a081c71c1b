/**
 * URL-mode elicitation between a legacy (2025-11-25) upstream and legacy clients, through the
 * real built hub: the upstream's notifications/elicitation/complete for a step finished after
 * its call ended (after a -32042, always) still reaches the client that was given the step, on
 * its session's standalone stream; and a client that did not declare URL elicitation is never
 * sent a -32042 it said it cannot take. The relay fixture (SDK v1) over stdio and HTTP; SDK v1
 * clients over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { streamWatchingFetch, waitForReady, type Json } from '../helpers/wire.js';
import { LEGACY_FIXTURE, MODERN_FIXTURE } from '../fixtures/translation/peers.js';
import { META_KEY } from './ledger-helpers.js';

const RELAY = 'test/fixtures/translation/legacy-relay.mjs';
let hub: HubProcess;
let fixture: HttpFixture;

beforeAll(async () => {
  fixture = await startHttpFixture(RELAY);
  hub = await startHub({ servers: { rs: nodeServer(RELAY), rh: { url: fixture.url }, ls: nodeServer(LEGACY_FIXTURE), ms: nodeServer(MODERN_FIXTURE) } });
  await waitForReady(hub.url, ['rs', 'rh', 'ls', 'ms']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  await fixture?.stop();
});

/** An SDK v1 client declaring `capabilities`, its GET stream open; `completed` resolves with each elicitationId completed to it. */
async function client(capabilities: Json) {
  const completed = new Map<string, () => void>();
  const heard: string[] = [];
  const c = new ClientV1({ name: 'url-legacy', version: '1.0.0' }, { capabilities });
  c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    heard.push(n.params.elicitationId);
    completed.get(n.params.elicitationId)?.();
  });
  const asked: Json[] = [];
  if ((capabilities.elicitation as Json | undefined) !== undefined)
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params as Json);
      return { action: 'accept' };
    });
  const watch = streamWatchingFetch();
  await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
  await watch.streamOpen;
  return {
    c,
    heard,
    asked,
    /** Resolves once `id` was completed to this client. */
    completion: (id: string) => (heard.includes(id) ? Promise.resolve() : new Promise<void>((r) => completed.set(id, r))),
  };
}

const URL_CAPS = { elicitation: { form: {}, url: {} } };

describe('notifications/elicitation/complete after the call ended', () => {
  it.each(['rs', 'rh'])('%s: a -32042’s step completed after the call reaches the client that got the -32042', async (up) => {
    const { c, completion } = await client(URL_CAPS);
    try {
      const err = await c.callTool({ name: `${up}__url_required_late`, arguments: {} }).then(
        () => undefined,
        (e: { code?: number; data?: { elicitations?: { elicitationId?: string }[] } }) => e,
      );
      expect(err?.code).toBe(-32042);
      const eid = err!.data!.elicitations![0]!.elicitationId!;
      expect(eid).toMatch(/^L-/);
      await completion(eid);
    } finally {
      await c.close();
    }
  }, 30_000);

  it.each(['rs', 'rh'])('%s: a URL elicitation accepted, the call answered, its completion after reaches the client', async (up) => {
    const { c, completion } = await client(URL_CAPS);
    try {
      const r = (await c.callTool({ name: `${up}__url_accept_late`, arguments: {} })) as { content: { text: string }[] };
      const eid = /url accept (A-\S+)/.exec(r.content[0]!.text)?.[1];
      expect(eid, r.content[0]!.text).toBeDefined();
      await completion(eid!);
    } finally {
      await c.close();
    }
  }, 30_000);

  it('reaches only that client, not another of the same principal', async () => {
    const a = await client(URL_CAPS);
    const b = await client(URL_CAPS);
    try {
      const err = await a.c.callTool({ name: 'rh__url_required_late', arguments: {} }).then(
        () => undefined,
        (e: { data?: { elicitations?: { elicitationId?: string }[] } }) => e,
      );
      const eid = err!.data!.elicitations![0]!.elicitationId!;
      await a.completion(eid);
      // b's stream carries a later completion of its own: had it been sent a's, it would come first.
      const err2 = await b.c.callTool({ name: 'rh__url_required_late', arguments: {} }).then(
        () => undefined,
        (e: { data?: { elicitations?: { elicitationId?: string }[] } }) => e,
      );
      const own = err2!.data!.elicitations![0]!.elicitationId!;
      await b.completion(own);
      expect(b.heard).toEqual([own]);
      expect(a.heard).toEqual([eid]);
    } finally {
      await a.c.close();
      await b.c.close();
    }
  }, 30_000);
});

describe('a -32042 for a legacy client that did not declare URL elicitation', () => {
  it.each([
    ['rs', 'form only', { elicitation: {} }],
    ['rh', 'form only', { elicitation: { form: {} } }],
    ['rs', 'no elicitation', {}],
    ['rh', 'no elicitation', {}],
  ] as const)('%s, %s: a tool error saying the step (its message, naming the server, and its URL) in words, never the -32042, nor its completion', async (up, _label, caps) => {
    const { c, heard } = await client(caps);
    try {
      const r = (await c.callTool({ name: `${up}__url_required_late`, arguments: {} })) as { isError?: boolean; content: { type: string; text: string }[] };
      expect(r.isError).toBe(true);
      const text = r.content[0]!.text;
      expect(text).toMatch(/did not declare URL elicitation/);
      expect(text).toContain(`[${up}] Sign in first`);
      expect(text).toMatch(/\(https:\/\/auth\.example\.test\/L-\S+\)/);
      // The step completes upstream 300 ms after the call: a URL-capable client's own completion
      // (same upstream, after this one's) comes through, and this client heard none.
      const other = await client(URL_CAPS);
      try {
        const err = await other.c.callTool({ name: `${up}__url_required_late`, arguments: {} }).then(
          () => undefined,
          (e: { data?: { elicitations?: { elicitationId?: string }[] } }) => e,
        );
        await other.completion(err!.data!.elicitations![0]!.elicitationId!);
      } finally {
        await other.c.close();
      }
      expect(heard).toEqual([]);
    } finally {
      await c.close();
    }
  }, 30_000);

  it.each(['rs', 'rh'])('%s: a prompts/get gets -32603 saying the step, never -32042', async (up) => {
    const { c } = await client({ elicitation: {} });
    try {
      const err = await c.getPrompt({ name: `${up}__url_prompt` }).then(
        () => undefined,
        (e: { code?: number; message?: string }) => e,
      );
      expect(err?.code).toBe(-32603);
      expect(err?.message).toContain(`[${up}] Sign in first (https://auth.example.test/P-`);
    } finally {
      await c.close();
    }
  }, 30_000);
});

describe('a -32042 and an idempotency key (legacy client)', () => {
  it('is no outcome kept for the key: the client, its step done, calls again with the same key and the call runs', async () => {
    const { c } = await client(URL_CAPS);
    try {
      const params = { name: 'ls__elicit_url_required', arguments: { ticket: 'keyed-legacy' }, _meta: { [META_KEY]: 'url-step-key' } };
      const err = await c.callTool(params).then(
        () => undefined,
        (e: { code?: number }) => e,
      );
      expect(err?.code).toBe(-32042);
      const again = (await c.callTool(params)) as { content: { text: string }[] };
      expect(again.content[0]!.text).toBe('ticket keyed-legacy authorized');
    } finally {
      await c.close();
    }
  }, 30_000);
});

describe('a modern upstream’s URL step, asked of a legacy client (recipe B)', () => {
  it('is completed to the client (notifications/elicitation/complete, the id the hub made up) once the upstream, retried with the accept, no longer asks it', async () => {
    const { c, asked, completion } = await client(URL_CAPS);
    try {
      const r = (await c.callTool({ name: 'ms__elicit_url', arguments: {} })) as { content: { text: string }[] };
      expect(r.content[0]!.text).toMatch(/^url action=accept/);
      const eid = asked.find((p) => p.mode === 'url')?.elicitationId;
      expect(typeof eid).toBe('string');
      await completion(eid as string);
    } finally {
      await c.close();
    }
  }, 30_000);
});

describe('a legacy upstream’s URL elicitation for a legacy client that declared form mode only', () => {
  it('is refused to the upstream with -32602, as the SDK client itself answers a mode it did not declare, not -32601 (its method is served)', async () => {
    const { c, asked } = await client({ elicitation: { form: {} } });
    try {
      const r = (await c.callTool({ name: 'ls__elicit_url', arguments: {} })) as { isError?: boolean; content: { text: string }[] };
      expect(r.isError).toBe(true);
      expect(r.content[0]!.text).toMatch(/MCP error -32602: .*elicitation\.url/);
      expect(asked).toEqual([]);
    } finally {
      await c.close();
    }
  }, 30_000);
});
