/**
 * Fault suite, retry safety (issue 6, case 5): a call that may have run is never sent again
 * unless the tool is idempotent by trusted configuration — the operator's annotations in the
 * config, or a trusted server's own — and never after a 401. A stdio upstream that dies after
 * receiving a call, and an HTTP upstream that drops its answer stream, are the two ways a call
 * "may have run".
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { perProcess } from './upstream-helpers.js';
import { queryRows } from './ledger-helpers.js';
import { callTool, isToolError, QUIRKS, rowsFor, startFaultHttp, text, waitForState, waitUntil, type FaultHttp } from './faults-helpers.js';

let hub: HubProcess;
let db: string;
let dir: string;
const https: Record<string, FaultHttp> = {};

function crashy(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...nodeServer(`${QUIRKS}/crash-mid-call.mjs`, [], { QUIRK_CRASH_ONCE: join(dir, `${name}.once`), QUIRK_LOG: join(dir, `${name}.log`) }),
    ...extra,
  };
}

/** tools/call requests each process of a quirk fixture received. */
function callsPerProcess(name: string): number[] {
  return perProcess(join(dir, `${name}.log`)).map((msgs) => msgs.filter((m) => m.method === 'tools/call').length);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-retry-'));
  for (const id of ['hu', 'ht', 'hc']) https[id] = await startFaultHttp(join(dir, `${id}.log`));
  hub = await startHub(
    {
      servers: {
        plain: crashy('plain'),
        idem: crashy('idem', { tools: { echo: { annotations: { idempotentHint: true } } } }),
        // Trusted, but the operator says no: the config wins over the server's claim.
        vetoed: crashy('vetoed', { trust: 'trusted', tools: { echo: { annotations: { idempotentHint: false } } } }),
        hu: { url: https.hu.url },
        ht: { url: https.ht.url, trust: 'trusted' },
        hc: { url: https.hc.url, tools: { drop: { annotations: { idempotentHint: true } }, deny401: { annotations: { idempotentHint: true } } } },
      },
    },
    { dir },
  );
  db = join(hub.dir, 'ledger.db');
  await Promise.all(['plain', 'idem', 'vetoed', 'hu', 'ht', 'hc'].map((id) => waitForState(hub.url, id, ['ready'])));
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
  await Promise.all(Object.values(https).map((f) => f.stop()));
});

const httpCalls = (id: string, name: string) => https[id].log().filter((e) => e.method === 'tools/call' && e.name === name).length;

describe('retries never run a write twice', () => {
  it('stdio, not idempotent: the upstream died after receiving the call; it is not sent again', async () => {
    const a = await callTool(hub.url, 'plain__echo', { w: 1 }, { 'dev.switchyard/idempotency-key': 'k-plain' });
    expect(isToolError(a)).toBe(true);
    expect(text(a)).toMatch(/connection lost/);
    await waitForState(hub.url, 'plain', ['ready']);
    expect(callsPerProcess('plain').reduce((x, y) => x + y, 0)).toBe(1);
    const [row] = await rowsFor(db, 'plain__echo');
    expect(row.outcome).toBe('unavailable');
    // The client's own retry with the same key is refused: the first attempt may have run.
    const again = await callTool(hub.url, 'plain__echo', { w: 1 }, { 'dev.switchyard/idempotency-key': 'k-plain' });
    expect(text(again)).toMatch(/outcome is unknown/);
    expect(callsPerProcess('plain').reduce((x, y) => x + y, 0)).toBe(1);
  });

  it('stdio, idempotent by config: sent again once the upstream is back, and answered', async () => {
    const a = await callTool(hub.url, 'idem__echo', { w: 2 });
    expect(isToolError(a)).toBe(false);
    expect(text(a)).toBe('survived');
    // One tools/call to the process that died, one to its successor.
    expect(callsPerProcess('idem').filter((n) => n > 0)).toEqual([1, 1]);
    const [row] = await rowsFor(db, 'idem__echo');
    expect(row.outcome).toBe('ok');
    expect(hub.logs.some((l) => l.includes('sending the request again') && l.includes('"server":"idem"'))).toBe(true);
  });

  it('stdio, trusted server but the config says not idempotent: not sent again', async () => {
    const a = await callTool(hub.url, 'vetoed__echo', {});
    expect(isToolError(a)).toBe(true);
    expect(callsPerProcess('vetoed').reduce((x, y) => x + y, 0)).toBe(1);
  });

  it('HTTP, dropped answer stream: an untrusted server claiming idempotency is not believed', async () => {
    const a = await callTool(hub.url, 'hu__drop');
    expect(isToolError(a)).toBe(true);
    expect(httpCalls('hu', 'drop')).toBe(1);
  });

  it('HTTP, dropped answer stream: a trusted claim, or the operator config, allows the retries', async () => {
    for (const id of ['ht', 'hc']) {
      const a = await callTool(hub.url, `${id}__drop`);
      // Every attempt is dropped too: after maxAttempts (3) the caller gets the error.
      expect(isToolError(a)).toBe(true);
      expect(httpCalls(id, 'drop')).toBe(3);
      const [row] = await rowsFor(db, `${id}__drop`);
      expect(row.outcome).toBe('unavailable');
    }
  });

  it('HTTP 401 is never retried, idempotent or not', async () => {
    const a = await callTool(hub.url, 'hc__deny401');
    expect(isToolError(a)).toBe(true);
    expect(text(a)).toMatch(/HTTP 401/);
    expect(httpCalls('hc', 'deny401')).toBe(1);
  });

  // RFC 9110: a 401 or 403 says the request was not applied; RELIABILITY says the refused request
  // did not run. Its key was left unknown, and a retry after a new login refused as "may have run".
  it('HTTP 401 to a keyed call frees its key: the retry with it is sent (and refused again), not refused as of an unknown outcome', async () => {
    const keyed = { 'dev.switchyard/idempotency-key': 'deny401-key' };
    const first = await callTool(hub.url, 'hu__deny401', {}, keyed);
    expect([isToolError(first), text(first)]).toEqual([true, expect.stringMatching(/HTTP 401/)]);
    const again = await callTool(hub.url, 'hu__deny401', {}, keyed);
    expect([isToolError(again), text(again)]).toEqual([true, expect.stringMatching(/HTTP 401/)]);
    expect(httpCalls('hu', 'deny401')).toBe(2);
    expect((await rowsFor(db, 'hu__deny401', 2)).map((r) => r.outcome)).toEqual(['unavailable', 'unavailable']);
  });

  // The refusal's list of causes named none true of a server that answered 503.
  it('HTTP 503 to a keyed call leaves its key unknown, and the refusal of its retry names that cause among the ways', async () => {
    const keyed = { 'dev.switchyard/idempotency-key': 'boom503-key' };
    expect(text(await callTool(hub.url, 'hu__boom503', {}, keyed))).toMatch(/HTTP 503/);
    const again = await callTool(hub.url, 'hu__boom503', {}, keyed);
    expect([isToolError(again), text(again)]).toEqual([true, expect.stringContaining('outcome is unknown')]);
    expect(text(again)).toContain('was failed by it (an HTTP 5xx)');
    expect(httpCalls('hu', 'boom503')).toBe(1);
  });

  // A 429, or a 503 asking to be asked again later (Retry-After), refused the request before it
  // ran (RFC 6585 §4, RFC 9110 §15.6.4): a write too is sent again once the wait is over, within
  // the retry budget; it was failed at once, its key left unknown.
  it('HTTP 429 or 503 with Retry-After: 1 to a write: sent again after the second it asks, answered, one row', async () => {
    for (const status of [429, 503]) {
      const t0 = performance.now();
      const a = await callTool(hub.url, 'hu__limited', { tag: `wait-${status}`, status, retryAfter: 1 });
      expect([isToolError(a), text(a)]).toEqual([false, `limited wait-${status} ran`]);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(950);
      const sent = https.hu.log().filter((e) => e.name === 'limited' && e.method === 'tools/call');
      expect(sent.slice(-2).map((e) => e.status)).toEqual([status, 200]);
      expect(Number(sent.at(-1)!.at) - Number(sent.at(-2)!.at)).toBeGreaterThanOrEqual(950);
    }
    expect((await rowsFor(db, 'hu__limited', 2)).map((r) => r.outcome)).toEqual(['ok', 'ok']);
  });

  it('HTTP 429 asking a wait past the retry budget: not sent again, the error says how long it asks, and the key is freed (the retry with it runs)', async () => {
    const before = httpCalls('hu', 'limited');
    // The second asks nothing in its status but names the request in a JSON-RPC error body, as
    // a Switchyard hub's rate limit does: relayed as the call's answer, it was kept for the key
    // and replayed to every retry with it.
    for (const [tag, extra] of [
      ['long', {}],
      ['hub', { rpcBody: true }],
    ] as const) {
      const keyed = { 'dev.switchyard/idempotency-key': `limited-${tag}` };
      const args = { tag, retryAfter: 86_400, ...extra };
      const first = await callTool(hub.url, 'hu__limited', args, keyed);
      expect(isToolError(first)).toBe(true);
      expect(text(first)).toContain('HTTP 429: the upstream is rate-limiting the hub; it asks to wait 86400 s (Retry-After)');
      if (tag === 'hub') expect(text(first)).toContain('Too Many Requests: the rate limit is exhausted');
      const again = await callTool(hub.url, 'hu__limited', args, keyed);
      expect([isToolError(again), text(again)]).toEqual([false, `limited ${tag} ran`]);
    }
    expect(httpCalls('hu', 'limited') - before).toBe(4);
  });

  it('HTTP 503 with Retry-After to a write whose caller goes away during the wait: not sent again, its row says cancelled', async () => {
    const gone = () => https.hu.log().filter((e) => e.name === 'limited' && e.tag === 'gone');
    const ac = new AbortController();
    const call = callTool(hub.url, 'hu__limited', { tag: 'gone', status: 503, retryAfter: 3 }, {}, ac.signal).catch(() => undefined);
    await waitUntil('the refused attempt', async () => gone().length > 0);
    ac.abort();
    await call;
    // The row is written once the call is over: its retry loop has ended then.
    await waitUntil('the cancelled row', async () => (await queryRows(db, { tool: 'hu__limited' })).some((r) => r.outcome === 'cancelled'));
    expect(gone().map((e) => e.status)).toEqual([503]);
  });
});
