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
import { modernUser, startTranslationHub, textOf, type TranslationHub, type User } from '../fixtures/translation/peers.js';

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
