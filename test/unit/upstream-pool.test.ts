/**
 * Which principals get a connection of their own to an upstream (PrincipalUpstreams.isolated),
 * and which servers may have such connections at all (splits: their main connection's tools
 * list is then not listed at ready, Catalog.listAtReady); which are closed (idle, or past the
 * pool's bound), and that one with a call running never is (a real stdio fixture).
 */
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PrincipalUpstreams } from '../../src/auth/upstream-pool.js';
import type { ServerHandle } from '../../src/catalog/catalog.js';
import { createUpstream } from '../../src/upstream/index.js';
import { drained } from '../../src/upstream/drained.js';
import type { Upstream, UpstreamSpec } from '../../src/upstream/types.js';
import { ROOT } from '../helpers/hub-process.js';

const pools: PrincipalUpstreams[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) void p.closeAll();
});

function pool(authRequired: boolean): PrincipalUpstreams {
  const p = new PrincipalUpstreams(
    () => {
      throw new Error('no connection is made here');
    },
    () => ({}) as never,
    authRequired,
    pino({ level: 'silent' }),
  );
  pools.push(p);
  return p;
}

const handle = (config: Record<string, unknown>, era: string | undefined): ServerHandle => ({ id: 's', config: { id: 's', ...config }, upstream: { era } }) as unknown as ServerHandle;

describe('PrincipalUpstreams', () => {
  it('stdio servers are one process for everyone', () => {
    const h = handle({ command: 'node', credentials: { alice: { headers: {} } } }, '2025-11-25');
    expect([pool(true).splits(h), pool(true).isolated(h, 'alice')]).toEqual([false, false]);
  });

  it('an HTTP server with credentials of some principal splits; only those principals get their own', () => {
    const h = handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} } } }, '2026-07-28');
    const p = pool(false);
    expect([p.splits(h), p.isolated(h, 'alice'), p.isolated(h, 'carol')]).toEqual([true, true, false]);
    expect(pool(false).splits(handle({ url: 'http://127.0.0.1:1/mcp', credentials: {} }, '2026-07-28'))).toBe(false);
  });

  it('a principal named as a property of every object (a token subject such as toString or __proto__) has no credentials of its own', () => {
    const h = handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} } } }, '2026-07-28');
    const p = pool(false);
    const names = ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf'];
    expect(names.map((n) => p.isolated(h, n))).toEqual(names.map(() => false));
    // Not known before the main connection's handshake: for them the era decides, as for anyone without credentials.
    expect(names.map((n) => p.knownBeforeReady(h, n))).toEqual(names.map(() => false));
    expect([p.isolated(h, 'alice'), p.knownBeforeReady(h, 'alice')]).toEqual([true, true]);
  });

  it('with authentication on, a server not known to be stateless splits (a legacy session is per user); a modern one does not', () => {
    const legacy = handle({ url: 'http://127.0.0.1:1/mcp' }, '2025-11-25');
    const unknown = handle({ url: 'http://127.0.0.1:1/mcp' }, undefined);
    const modern = handle({ url: 'http://127.0.0.1:1/mcp' }, '2026-07-28');
    expect([pool(true).splits(legacy), pool(true).splits(unknown), pool(true).splits(modern)]).toEqual([true, true, false]);
    expect(pool(false).splits(legacy)).toBe(false);
  });
});

describe('PrincipalUpstreams idle sweep', () => {
  it('closes a connection unused past idleMs, but not one that holds subscriptions (inUse)', async () => {
    const closed: string[] = [];
    const made = (name: string) => ({ start: async () => undefined, close: async () => void closed.push(name), on: () => undefined }) as never;
    let n = 0;
    const names = ['alice', 'bob'];
    const p = new PrincipalUpstreams(
      () => made(names[n++]!),
      () => ({}) as never,
      false,
      pino({ level: 'silent' }),
      { idleMs: 30, inUse: (_server, principal) => principal === 'bob' },
    );
    pools.push(p);
    const h = handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} }, bob: { headers: {} } } }, '2025-11-25');
    await p.for(h, 'alice');
    await p.for(h, 'bob');
    expect(p.size).toBe(2);
    await new Promise((r) => setTimeout(r, 150));
    expect(closed).toEqual(['alice']);
    expect(p.size).toBe(1);
  });
});

describe("PrincipalUpstreams' connections", () => {
  it("are made without a health check of their own: the server's main connection has one for /healthz", async () => {
    const specs: UpstreamSpec[] = [];
    const stub = { start: async () => undefined, close: async () => undefined, on: () => undefined } as unknown as Upstream;
    const p = new PrincipalUpstreams((s) => (specs.push(s), stub), () => ({ id: 's', url: 'http://127.0.0.1:1/mcp', healthCheckMs: 30_000 }) as UpstreamSpec, false, pino({ level: 'silent' }));
    pools.push(p);
    await p.for(handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} } } }, '2026-07-28'), 'alice');
    expect(specs.map((s) => s.healthCheckMs)).toEqual([0]);
  });
});

describe('PrincipalUpstreams and calls in flight', () => {

  it("closes no connection whose call still runs: not for another principal's connection past max, nor as idle (a call longer than idleMs)", async () => {
    // The pool's clock moves only when the test says; its sweeper's timer is real.
    let now = 0;
    const fixture = join(ROOT, 'test/fixtures/servers/sdk1-server.mjs');
    const spec = { id: 's', command: process.execPath, args: [fixture], era: 'auto', timeoutMs: 10_000, probeTimeoutMs: 5_000, maxFrameBytes: 1 << 22 } as UpstreamSpec;
    // Alice's connection is a real stdio server; bob's an idle stand-in (it never calls).
    const closed: string[] = [];
    const idle = { start: async () => undefined, close: async () => void closed.push('bob'), on: () => undefined, busy: false } as unknown as Upstream;
    let made = 0;
    const p = new PrincipalUpstreams((s, l) => (made++ === 0 ? createUpstream(s, l) : idle), () => spec, true, pino({ level: 'silent' }), { idleMs: 30, max: 1, now: () => now });
    pools.push(p);
    const h = { id: 's', config: { id: 's', command: process.execPath, processPerPrincipal: true }, upstream: { era: undefined } } as unknown as ServerHandle;
    const alice = await p.for(h, 'alice');
    const call = alice.request('tools/call', { name: 'slow', arguments: { ms: 600 } });
    // Bob's first call takes the pool past max while alice's runs.
    expect(await p.for(h, 'bob')).toBe(idle);
    expect(p.existing(h, 'alice')).toBe(alice);
    // Both are past idleMs: the sweep closes bob's, and keeps alice's while her call runs.
    now += 60_000;
    const deadline = performance.now() + 5_000;
    while (closed.length === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(closed).toEqual(['bob']);
    expect(p.existing(h, 'alice')).toBe(alice);
    await expect(call).resolves.toMatchObject({ content: [{ type: 'text', text: 'slept 600' }] });
    // Idle once its call is over: swept then.
    now += 60_000;
    while (p.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(p.size).toBe(0);
  }, 20_000);
});

describe('PrincipalUpstreams idle expiry, when the wall clock is stepped (NTP, a laptop resumed)', () => {
  afterEach(() => void vi.useRealTimers());

  it('is measured on the monotonic clock: an hour ahead closes no connection idle less than idleMs, an hour back keeps none longer', async () => {
    // Only Date and performance: the pool's sweeper is run here rather than waited for.
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    vi.advanceTimersByTime(1_000);
    const closed: string[] = [];
    const p = new PrincipalUpstreams(() => ({ start: async () => undefined, close: async () => void closed.push('alice'), on: () => undefined, busy: false }) as never, () => ({}) as never, false, pino({ level: 'silent' }), { idleMs: 60_000 });
    pools.push(p);
    const sweep = (): void => (p as unknown as { sweep(): void }).sweep();
    await p.for(handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} } } }, '2025-11-25'), 'alice');
    vi.setSystemTime(Date.now() + 3_600_000);
    sweep();
    // Before, on the wall clock, her connection (a processPerPrincipal process) was closed.
    expect([closed, p.size]).toEqual([[], 1]);
    vi.setSystemTime(Date.now() - 7_200_000);
    vi.advanceTimersByTime(60_001);
    sweep();
    // ...and an hour back kept it open an hour past idleMs.
    expect([closed, p.size]).toEqual([['alice'], 0]);
  });
});

describe('drained (the wait for calls in flight before a connection taken out of use is closed)', () => {
  afterEach(() => void vi.useRealTimers());

  it('waits its time on the monotonic clock: a wall clock stepped an hour ahead does not cut it short', async () => {
    // Only Date: its 50 ms polls are real timers.
    vi.useFakeTimers({ toFake: ['Date'] });
    const load = { active: 1, queued: 0 };
    let done = false;
    const wait = drained({ load } as never, 10_000).then(() => (done = true));
    vi.setSystemTime(Date.now() + 3_600_000);
    await new Promise((r) => setTimeout(r, 200));
    // Before, its first poll found the deadline past, and the connection was closed under its call.
    expect(done).toBe(false);
    load.active = 0;
    await wait;
  });
});
