/**
 * A legacy server's -32042 (URL elicitation required) for a modern client: the user's accept
 * means only that they agreed to open the URL (digest §5.1), so the request the hub issues again
 * at once (§5.3 A.7) still meets the -32042 while they are at it. The hub does not ask the same
 * step again (an SDK v2 client fulfilling rounds on its own opened the URL ten times in a moment,
 * and the call ended unfinished): it waits, issuing the request again as the server says the step
 * done (notifications/elicitation/complete) or, as that notification is optional, after a
 * doubling wait, until the user's time (policy.inputTimeoutMs) is up. Real built hub; the SDK v1
 * translation fixture over stdio and HTTP; an SDK v2 client (autoFulfill) as the user.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacyUser, modernUser, startTranslationHub, textOf, USER_CAPABILITIES, type TranslationHub, type User } from '../fixtures/translation/peers.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { queryRows } from './ledger-helpers.js';
import { nodeServer, startHub } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { LEGACY_FIXTURE } from '../fixtures/translation/peers.js';

const EVENTS = join(mkdtempSync(join(tmpdir(), 'sy-url-steps-')), 'events.log');
const steps = (ticket: string): number => readFileSync(EVENTS, 'utf8').split('\n').filter((e) => e === `url-step ${ticket}`).length;

let th: TranslationHub;
let user: User;

beforeAll(async () => {
  writeFileSync(EVENTS, '');
  th = await startTranslationHub({ policy: { inputTimeoutMs: 4_000 } }, { EVENTS_FILE: EVENTS });
  user = await modernUser(th.url, 'url-steps');
}, 60_000);
afterAll(async () => {
  await user?.close();
  await th?.stop();
});

describe.each(['ls', 'lh'])('a URL step of a legacy server (%s) the user accepted', (server) => {
  it('is asked once: the call waits for the server to say it done, and then runs', async () => {
    const ticket = `after-700-${server}`;
    const before = user.asks.length;
    const r = await user.callTool(`${server}__elicit_url_required`, { ticket });
    expect(textOf(r)).toBe(`ticket ${ticket} authorized`);
    expect(user.asks.slice(before).map((a) => a.params.url)).toEqual([`https://auth.example.test/ticket/${ticket}`]);
    // Issued again at once, and once more as the server said the step done: not polled meanwhile.
    expect(steps(ticket)).toBeLessThanOrEqual(4);
  }, 30_000);

  it('is asked once when the server never says it done either: the call tries again after a while', async () => {
    const ticket = `after-700-${server}-quiet`;
    const before = user.asks.length;
    const r = await user.callTool(`${server}__elicit_url_required`, { ticket });
    expect(textOf(r)).toBe(`ticket ${ticket} authorized`);
    expect(user.asks.length - before).toBe(1);
  }, 30_000);

  it('ends as a tool error once the user\'s time for it is up, asked once', async () => {
    const ticket = `after-600000-${server}`;
    const before = user.asks.length;
    const t0 = Date.now();
    const r = await user.callTool(`${server}__elicit_url_required`, { ticket });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toBe(`the user agreed to complete a step at a URL (https://auth.example.test/ticket/${ticket}), and the upstream did not find it done within 4000 ms`);
    expect(user.asks.length - before).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3_900);
    // A doubling wait (0.5 s, 1 s, 2 s, …): a handful of tries, not a busy loop.
    expect(steps(ticket)).toBeLessThanOrEqual(6);
  }, 30_000);
});

describe('a retry waiting for a URL step, whose client goes away', () => {
  it('ends the call, recorded cancelled, and the hub stops issuing it again', async () => {
    const ticket = 'after-600000-gone';
    const name = 'ls__elicit_url_required';
    const meta = modernMeta({ [META_CAPS]: USER_CAPABILITIES });
    const first = await post(th.url, modernBody('gone-1', 'tools/call', { name, arguments: { ticket } }, meta), modernHeaders('tools/call', name));
    const asked = (first.messages.find((m) => m.id === 'gone-1') as Json).result as Json;
    expect(asked.resultType).toBe('input_required');
    const answers = Object.fromEntries(Object.keys(asked.inputRequests as Json).map((k) => [k, { action: 'accept' }]));
    const ctl = new AbortController();
    const retry = fetch(th.url, {
      method: 'POST',
      headers: modernHeaders('tools/call', name),
      body: JSON.stringify(modernBody('gone-2', 'tools/call', { name, arguments: { ticket }, requestState: asked.requestState, inputResponses: answers }, meta)),
      signal: ctl.signal,
    }).then((r) => r.text());
    // Issued again at once and once more after the first wait: the retry is waiting.
    await expect.poll(() => steps(ticket), { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
    ctl.abort();
    await retry.catch(() => undefined);
    await expect.poll(async () => (await queryRows(join(th.hub.dir, 'ledger.db'), { tool: name })).find((r) => r.requestId === 'gone-2')?.outcome, { timeout: 5_000 }).toBe('cancelled');
    const after = steps(ticket);
    // Past the next wait (1 s, then 2 s): not issued again.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(steps(ticket)).toBe(after);
  }, 30_000);
});

// The other way round: a modern server asks a legacy client a URL step, and asks it again on the
// retry that carries the accept until the user is done (it learns of the step out of band).
describe.each(['ms', 'mh'])('a URL step of a modern server (%s) a legacy client accepted', (server) => {
  let legacy: User;
  beforeAll(async () => {
    legacy = await legacyUser(th.url, `url-steps-${server}`);
  });
  afterAll(async () => void (await legacy?.close()));

  it('is asked once: the hub answers the same step again with the accept, after a while, until the server finds it done', async () => {
    const ticket = `after-1200-${server}`;
    const r = await legacy.callTool(`${server}__url_until`, { ticket });
    expect(textOf(r)).toBe(`ticket ${ticket} done`);
    expect(legacy.asks.filter((a) => String(a.params.url).endsWith(ticket))).toHaveLength(1);
  }, 30_000);

  it("ends with an error once the client's time for it is up, asked once", async () => {
    const ticket = `after-600000-${server}`;
    const err = await legacy.callTool(`${server}__url_until`, { ticket }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toContain(`the client agreed to complete a step at a URL (https://auth.example.test/until/${ticket}), and the upstream did not find it done within 4000 ms`);
    expect(legacy.asks.filter((a) => String(a.params.url).endsWith(ticket))).toHaveLength(1);
  }, 30_000);
});

describe('a retry waiting for a URL step when the hub stops', () => {
  it('ends at the drain deadline, answered that the hub is shutting down, not a wait later', async () => {
    const DRAIN_MS = 2_000;
    const hub = await startHub({ listen: { drainTimeoutMs: DRAIN_MS }, policy: { inputTimeoutMs: 60_000 }, servers: { ls: nodeServer(LEGACY_FIXTURE, [], { EVENTS_FILE: EVENTS }) } });
    try {
      await waitForReady(hub.url, ['ls']);
      const ticket = 'after-600000-stop';
      const name = 'ls__elicit_url_required';
      const meta = modernMeta({ [META_CAPS]: USER_CAPABILITIES });
      const first = await post(hub.url, modernBody('stop-1', 'tools/call', { name, arguments: { ticket } }, meta), modernHeaders('tools/call', name));
      const asked = (first.messages.find((m) => m.id === 'stop-1') as Json).result as Json;
      const answers = Object.fromEntries(Object.keys(asked.inputRequests as Json).map((k) => [k, { action: 'accept' }]));
      const retry = post(hub.url, modernBody('stop-2', 'tools/call', { name, arguments: { ticket }, requestState: asked.requestState, inputResponses: answers }, meta), modernHeaders('tools/call', name));
      // Tried at once, then after 0.5, 1, 2 and 4 s: its next wait is 8 s long.
      await expect.poll(() => steps(ticket), { timeout: 15_000, interval: 50 }).toBeGreaterThanOrEqual(6);
      const t0 = Date.now();
      const exited = hub.stop('SIGTERM');
      const r = await retry;
      const took = Date.now() - t0;
      expect(r.body?.error, r.text).toMatchObject({ code: -32603, message: expect.stringMatching(/shutting down/) });
      expect(took).toBeLessThan(DRAIN_MS + 3_000);
      expect(await exited).toBe(0);
    } finally {
      if (hub.proc.exitCode === null) await hub.stop('SIGKILL');
    }
  }, 60_000);
});
