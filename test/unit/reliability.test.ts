/**
 * The reliability building blocks, each against its own rule: the concurrency limiter and its
 * bounded queue, the breaker's reading of outcomes, the retry rule and loop, and the in-flight
 * counter used to drain on SIGTERM.
 */
import { describe, expect, it } from 'vitest';
import { CancelledError, RpcError, TimeoutError, TransportError, UpstreamUnavailableError } from '../../src/protocol/errors.js';
import { evidenceOf, FailureStreak } from '../../src/upstream/breaker.js';
import { retryAfterSeconds, statusError, statusText } from '../../src/upstream/status-text.js';
import { CallGate } from '../../src/upstream/call-gate.js';
import { Limiter, LimitError } from '../../src/upstream/limiter.js';
import { Canceller } from '../../src/cancel.js';
import { backoffMs, mayRetry, withRetries } from '../../src/upstream/retry.js';
import { InFlight } from '../../src/router/inflight.js';
import { KnownRoutes } from '../../src/router/down-tools.js';
import { ShownRoutes } from '../../src/hub/shown-routes.js';

function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('Limiter', () => {
  /** A request in a slot, as rpc-base runs one: enter, do the work, leave where it settles. */
  const inSlot = <T>(l: Limiter, work: () => Promise<T>, o?: Parameters<Limiter['enter']>[0]): Promise<T> =>
    l.enter(o).then(() => work().finally(() => l.leave()));

  it('takes up to maxActive at once, queues up to maxQueue in order, refuses beyond', async () => {
    const l = new Limiter(2, 1);
    const gates = [deferred(), deferred(), deferred()];
    const order: number[] = [];
    const runs = gates.map((g, i) => inSlot(l, async () => (await g.promise, order.push(i), i)));
    expect(l.load).toEqual({ active: 2, queued: 1 });
    await expect(l.enter()).rejects.toMatchObject({ name: 'LimitError', reason: 'full' });
    gates[0].resolve();
    await runs[0];
    // The queued one took the freed slot; it finishes once released.
    expect(l.load).toEqual({ active: 2, queued: 0 });
    gates[2].resolve();
    gates[1].resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2]);
    expect(order).toEqual([0, 2, 1]);
    expect(l.load).toEqual({ active: 0, queued: 0 });
  });

  it('a waiter leaves the queue when its caller cancels or waits too long', async () => {
    const l = new Limiter(1, 5);
    const hold = deferred();
    const first = inSlot(l, () => hold.promise);
    const ac = new AbortController();
    const cancelled = l.enter({ signal: ac.signal, onAbort: () => new CancelledError('gone') });
    const waited = l.enter({ waitMs: 30 });
    expect(l.load.queued).toBe(2);
    ac.abort();
    await expect(cancelled).rejects.toBeInstanceOf(CancelledError);
    await expect(waited).rejects.toSatisfy((e: unknown) => e instanceof LimitError && e.reason === 'waited');
    expect(l.load).toEqual({ active: 1, queued: 0 });
    hold.resolve();
    await first;
    expect(l.load.active).toBe(0);
  });

  it('enter resolves holding a slot, at once or once leave hands one over; the caller gives it back', async () => {
    const l = new Limiter(1, 1);
    await l.enter();
    expect(l.load).toEqual({ active: 1, queued: 0 });
    let entered = false;
    const second = l.enter().then(() => (entered = true));
    await expect(l.enter()).rejects.toMatchObject({ name: 'LimitError', reason: 'full' });
    await Promise.resolve();
    expect(entered).toBe(false);
    l.leave(); // handed to the waiter: the slot stays taken
    await second;
    expect(l.load).toEqual({ active: 1, queued: 0 });
    l.leave();
    expect(l.load).toEqual({ active: 0, queued: 0 });
    // A waiter that waited too long holds nothing.
    await l.enter();
    await expect(l.enter({ waitMs: 20 })).rejects.toSatisfy((e: unknown) => e instanceof LimitError && e.reason === 'waited');
    l.leave();
    expect(l.load).toEqual({ active: 0, queued: 0 });
  });

  it('tryEnter takes a free slot only while nobody waits; leave hands it to the first waiter', async () => {
    const l = new Limiter(1, 2);
    expect(l.tryEnter()).toBe(true);
    expect(l.tryEnter()).toBe(false);
    const order: number[] = [];
    const a = inSlot(l, async () => order.push(1));
    const b = inSlot(l, async () => order.push(2));
    expect(l.load).toEqual({ active: 1, queued: 2 });
    l.leave();
    await a;
    await b;
    expect(order).toEqual([1, 2]);
    expect(l.load).toEqual({ active: 0, queued: 0 });
    expect(l.tryEnter()).toBe(true);
    l.leave();
    expect(l.load.active).toBe(0);
  });
});

describe('Limiter queue', () => {
  const queueLength = (l: Limiter): number => (l as unknown as { queue: unknown[] }).queue.length;

  it('skips waiters that gave up, serves the rest in order, and does not keep those that left', async () => {
    const l = new Limiter(1, 5000);
    await l.enter(); // the only slot, held
    const order: number[] = [];
    const aborts: Canceller[] = [];
    const waits: Promise<void>[] = [];
    // 3,000 waiters; all but every 500th give up. More than COMPACT_AT left early: the queue is
    // cut down while they wait.
    for (let i = 0; i < 3000; i++) {
      const ac = new Canceller();
      aborts.push(ac);
      waits.push(
        l.enter({ signal: ac.signal }).then(
          () => {
            order.push(i);
            l.leave();
          },
          () => undefined,
        ),
      );
    }
    aborts.forEach((ac, i) => i % 500 !== 0 && ac.abort());
    expect(l.load).toEqual({ active: 1, queued: 6 });
    expect(queueLength(l)).toBeLessThan(1100);
    l.leave();
    await Promise.all(waits);
    expect(order).toEqual([0, 500, 1000, 1500, 2000, 2500]);
    expect(l.load).toEqual({ active: 0, queued: 0 });
    expect(queueLength(l)).toBe(0);
  });

  it('keeps a queue that is always busy from growing: served waiters are cut off its head', async () => {
    const l = new Limiter(1, 10);
    await l.enter();
    const waiting = [l.enter(), l.enter()];
    let longest = 0;
    for (let i = 0; i < 5000; i++) {
      waiting.push(l.enter());
      l.leave(); // the oldest waiter gets the slot…
      await waiting.shift(); // …and holds it; two still wait
      longest = Math.max(longest, queueLength(l));
    }
    expect(l.load).toEqual({ active: 1, queued: 2 });
    expect(longest).toBeLessThanOrEqual(2048);
  });
});

describe('CallGate', () => {
  it('shares among calls that cannot be asked, lets an exclusive call in alone, in arrival order', async () => {
    const g = new CallGate();
    const order: string[] = [];
    expect(g.tryEnter(false)).toBe(true);
    expect(g.tryEnter(false)).toBe(true);
    expect(g.tryEnter(true)).toBe(false); // two shared inside
    const alone = g.run(true, async () => order.push('alone'));
    // Someone waits: a shared call that could enter does not overtake it.
    expect(g.tryEnter(false)).toBe(false);
    const shared = g.run(false, async () => order.push('shared'));
    g.leave(false);
    expect(order).toEqual([]);
    g.leave(false);
    await alone;
    await shared;
    expect(order).toEqual(['alone', 'shared']);
    expect(g.tryEnter(true)).toBe(true);
    expect(g.tryEnter(false)).toBe(false);
    g.leave(true);
    expect(g.tryEnter(false)).toBe(true);
  });
});

describe('circuit breaker evidence', () => {
  it('answers are health; 401/403/429, 413/414/431 and cancellations say nothing; transport failures and timeouts count', () => {
    expect(evidenceOf(undefined)).toBe('healthy');
    expect(evidenceOf(new RpcError(-32602, 'bad'))).toBe('healthy');
    expect(evidenceOf(new TransportError('HTTP 401', 401))).toBe('none');
    expect(evidenceOf(new TransportError('HTTP 403', 403))).toBe('none');
    expect(evidenceOf(new TransportError('HTTP 429: the upstream is rate-limiting the hub', 429))).toBe('none');
    // Refused for the request's own size: about that request.
    for (const status of [413, 414, 431]) expect(evidenceOf(new TransportError(`HTTP ${status}`, status))).toBe('none');
    expect(evidenceOf(new TransportError('HTTP 404', 404))).toBe('unwell');
    expect(evidenceOf(new CancelledError())).toBe('none');
    expect(evidenceOf(new TransportError('HTTP 503', 503))).toBe('unwell');
    expect(evidenceOf(new TransportError('ECONNREFUSED', undefined, true))).toBe('unwell');
    expect(evidenceOf(new TimeoutError('s', 5))).toBe('unwell');
    const callers = new TimeoutError('s', 5);
    callers.callers = true; // the caller's own, shorter limit
    expect(evidenceOf(callers)).toBe('none');
  });

  it("a bare status in words: 429 is rate limiting; Retry-After in seconds or as a date, on 429 and 503", () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(statusText(429, {}, now)).toBe('HTTP 429: the upstream is rate-limiting the hub');
    expect(statusText(429, { 'retry-after': ' 120 ' }, now)).toBe('HTTP 429: the upstream is rate-limiting the hub; it asks to wait 120 s (Retry-After)');
    expect(statusText(503, { 'retry-after': 'Thu, 01 Jan 2026 00:01:30 GMT' }, now)).toBe('HTTP 503; it asks to wait 90 s (Retry-After)');
    expect(retryAfterSeconds({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(retryAfterSeconds({ 'retry-after': '-5' }, now)).toBeUndefined();
    expect(statusText(500, { 'retry-after': '5' }, now)).toBe('HTTP 500');
    // The wait goes with the error, for the retry loop to keep to.
    expect(statusError(429, { 'retry-after': '2' })).toMatchObject({ status: 429, retryAfterMs: 2000 });
    expect(statusError(500, { 'retry-after': '2' }).retryAfterMs).toBeUndefined();
  });

  it('opens on the Nth consecutive failure; a success or reset starts over', () => {
    const s = new FailureStreak(3);
    expect(s.record('unwell', 'a')).toBe(false);
    expect(s.record('none')).toBe(false);
    expect(s.record('unwell', 'b')).toBe(false);
    expect(s.record('healthy')).toBe(false);
    expect(s.count).toBe(0);
    expect([s.record('unwell'), s.record('unwell'), s.record('unwell', 'last')]).toEqual([false, false, true]);
    expect(s.lastFailure).toBe('last');
    s.reset();
    expect(s.count).toBe(0);
  });

  it('tells a streak of timeouts alone (a hung server) from one with any other failure in it', () => {
    const s = new FailureStreak(3);
    expect(s.onlyTimeouts).toBe(false); // no streak
    s.record('unwell', 't', true);
    s.record('none');
    expect(s.record('unwell', 't', true)).toBe(false);
    expect(s.onlyTimeouts).toBe(true);
    s.record('unwell', '503');
    expect(s.onlyTimeouts).toBe(false);
    s.record('healthy');
    s.record('unwell', 't', true);
    expect(s.onlyTimeouts).toBe(true); // a new streak
  });
});

describe('retry rule', () => {
  const tool = { maxAttempts: 3, budgetMs: 1000 };
  const idem = { ...tool, idempotent: true };
  it('never delivered: always; may have run: only idempotent (reads are); never after an answer, busy, 401/403, 413/414/431, cancel, timeout', () => {
    const refused = new TransportError('ECONNREFUSED', undefined, true);
    const lost = new TransportError('connection lost');
    expect(mayRetry(refused, 'tools/call', tool)).toBe(true);
    expect(mayRetry(new UpstreamUnavailableError('s', 'starting'), 'tools/call', tool)).toBe(true);
    // Busy is answered at once (a bounded queue's refusal), never held through a backoff.
    expect(mayRetry(new UpstreamUnavailableError('s', 'busy'), 'tools/call', tool)).toBe(false);
    expect(mayRetry(new UpstreamUnavailableError('s', 'failed'), 'tools/call', tool)).toBe(false);
    expect(mayRetry(new UpstreamUnavailableError('s', 'stopped'), 'tools/call', tool)).toBe(false);
    expect(mayRetry(lost, 'tools/call', tool)).toBe(false);
    expect(mayRetry(lost, 'tools/call', idem)).toBe(true);
    expect(mayRetry(lost, 'resources/read', tool)).toBe(true);
    expect(mayRetry(new TransportError('HTTP 401', 401), 'tools/call', idem)).toBe(false);
    expect(mayRetry(new TransportError('HTTP 403', 403), 'resources/read', tool)).toBe(false);
    for (const status of [413, 414, 431]) expect(mayRetry(new TransportError(`HTTP ${status}`, status), 'resources/read', tool)).toBe(false);
    expect(mayRetry(new RpcError(-32603, 'x'), 'tools/call', idem)).toBe(false);
    expect(mayRetry(new CancelledError(), 'tools/call', idem)).toBe(false);
    expect(mayRetry(new TimeoutError('s', 1), 'tools/call', idem)).toBe(false);
    expect(mayRetry(new Error('bug'), 'tools/call', idem)).toBe(false);
  });

  it('refused before it ran (429, 503 + Retry-After: TransportError.refused): a write too; and after an attempt that may have run, giving up says so', async () => {
    const limited = (status: number): TransportError => Object.assign(new TransportError(`HTTP ${status}`, status), { refused: true, retryAfterMs: 0 });
    expect(mayRetry(limited(429), 'tools/call', tool)).toBe(true);
    expect(mayRetry(limited(503), 'tools/call', tool)).toBe(true);
    // A refused credential is refused again, whatever else it says.
    expect(mayRetry(Object.assign(new TransportError('HTTP 401', 401), { refused: true }), 'tools/call', idem)).toBe(false);
    let n = 0;
    const hooks = { whenReady: async () => true, random: () => 0 };
    expect(await withRetries('tools/call', tool, async () => (++n < 3 ? Promise.reject(limited(429)) : 'ran'), hooks)).toBe('ran');
    expect(n).toBe(3);
    // Refused every time: the last refusal, as it came (its key is freed).
    await expect(withRetries('tools/call', tool, () => Promise.reject(limited(503)), hooks)).rejects.toMatchObject({ status: 503, refused: true });
    // An idempotent call's earlier attempt lost its answer (it may have run): a refusal after it does not free its key.
    n = 0;
    const after = withRetries('tools/call', idem, () => Promise.reject(++n === 1 ? new TransportError('connection lost') : limited(429)), hooks);
    await expect(after).rejects.toThrow('(an earlier attempt may have run)');
    await expect(after).rejects.not.toMatchObject({ refused: true });
  });

  it('backs off exponentially with jitter, capped', () => {
    expect(backoffMs(1, () => 0)).toBe(50);
    expect(backoffMs(1, () => 0.999)).toBe(150);
    expect(backoffMs(3, () => 0.5)).toBe(400);
    expect(backoffMs(20, () => 0.5)).toBe(2000);
  });

  it('sends again what was never delivered, and stops at maxAttempts', async () => {
    let n = 0;
    const hooks = { whenReady: async () => true, random: () => 0 };
    const r = await withRetries('tools/call', tool, async () => (++n < 3 ? Promise.reject(new TransportError('refused', undefined, true)) : 'ok'), hooks);
    expect([r, n]).toEqual(['ok', 3]);
    n = 0;
    await expect(withRetries('tools/call', tool, async () => (n++, Promise.reject(new TransportError('refused', undefined, true))), hooks)).rejects.toMatchObject({ notDelivered: true });
    expect(n).toBe(3);
    // An attempt that throws instead of rejecting is retried the same way, never thrown at the caller.
    n = 0;
    const throwing = (): Promise<string> => {
      if (++n < 2) throw new TransportError('refused', undefined, true);
      return Promise.resolve('ok');
    };
    const p = withRetries('tools/call', tool, throwing, hooks);
    expect(await p).toBe('ok');
    expect(n).toBe(2);
  });

  it("waits as long as a server's Retry-After asks, if longer than the backoff: past the budget, no retry at all", async () => {
    const busy = (ms: number | undefined) => () => {
      const err = new TransportError('HTTP 503', 503);
      err.retryAfterMs = ms;
      return Promise.reject(err);
    };
    let n = 0;
    const policy = { maxAttempts: 3, budgetMs: 3_000 };
    const counted = (f: () => Promise<never>) => () => (n++, f());
    await expect(withRetries('tools/list', policy, counted(busy(60_000)), { whenReady: async () => true })).rejects.toMatchObject({ status: 503 });
    expect(n).toBe(1);
    const waits: number[] = [];
    n = 0;
    await expect(withRetries('tools/list', policy, counted(busy(300)), { whenReady: async () => true, random: () => 0, onRetry: (_a, ms) => waits.push(ms) })).rejects.toMatchObject({ status: 503 });
    expect([n, waits]).toEqual([3, [300, 300]]); // not the 50 and 100 ms of the backoff
  });

  it('after an attempt that may have run, a later "not delivered" failure is reported as possibly run', async () => {
    let n = 0;
    const errs = [new TransportError('connection lost'), new UpstreamUnavailableError('s', 'busy')];
    const err = await withRetries('tools/call', { ...idem, maxAttempts: 2 }, async () => Promise.reject(errs[n++]), { whenReady: async () => true, random: () => 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).notDelivered).toBe(false);
    expect((err as Error).message).toMatch(/an earlier attempt may have run/);
  });

  it('gives up when the budget is spent, or when the upstream will not be ready in time', async () => {
    let n = 0;
    let t = 0;
    const now = () => t;
    const fail = async () => {
      n++;
      t += 400;
      throw new TransportError('refused', undefined, true);
    };
    // Attempts end at 400, 800, 1200 ms (fake clock); a retry starts only if it can within 1000 ms.
    await expect(withRetries('tools/call', { maxAttempts: 10, budgetMs: 1000 }, fail, { whenReady: async () => true, now, random: () => 0 })).rejects.toThrow('refused');
    expect(n).toBe(3);
    n = 0;
    const asked: number[] = [];
    await expect(withRetries('tools/call', { maxAttempts: 10, budgetMs: 1000 }, async () => (n++, Promise.reject(new UpstreamUnavailableError('s', 'restarting'))), { whenReady: async (ms) => (asked.push(ms), false), random: () => 0 })).rejects.toThrow('restarting');
    expect(n).toBe(1);
    expect(asked[0]).toBeGreaterThan(0);
  });

  it('stops at once when the caller cancels during the wait', async () => {
    const ac = new AbortController();
    const p = withRetries('tools/call', { maxAttempts: 5, budgetMs: 10_000 }, async () => Promise.reject(new TransportError('refused', undefined, true)), { signal: ac.signal, whenReady: async () => true, random: () => 1 });
    setTimeout(() => ac.abort(), 20);
    await expect(p).rejects.toBeInstanceOf(CancelledError);
  });

  it('stops at once when the caller cancels while the upstream is not ready again (it does not wait for it)', async () => {
    const ac = new AbortController();
    let ready!: (ok: boolean) => void;
    const whenReady = () => new Promise<boolean>((r) => (ready = r)); // reconnecting, for as long as the test likes
    const t0 = Date.now();
    const p = withRetries('tools/call', { maxAttempts: 5, budgetMs: 10_000 }, async () => Promise.reject(new TransportError('refused', undefined, true)), { signal: ac.signal, whenReady, random: () => 0 });
    setTimeout(() => ac.abort(), 100);
    const settled = await Promise.race([p.then(() => 'resolved', (e: unknown) => e), new Promise((r) => setTimeout(() => r('still waiting'), 600))]);
    ready(true);
    expect(settled).toBeInstanceOf(CancelledError);
    expect((settled as CancelledError).notSent).toBe(true); // nothing was delivered
    expect(Date.now() - t0).toBeLessThan(600);
  });
});

describe('InFlight', () => {
  it("idle resolves only once the work queued as the last request left has run (its answer's write), not a few jobs before it", async () => {
    const f = new InFlight();
    f.enter();
    const idle = f.idle(1000);
    let written = false;
    f.leave();
    // As an answer written a few promise jobs after the routing left (its caller resuming).
    void Promise.resolve()
      .then(() => undefined)
      .then(() => undefined)
      .then(() => (written = true));
    expect(await idle).toBe(true);
    expect(written).toBe(true);
  });

  it('idle resolves true when the last request in flight leaves, false at the deadline', async () => {
    const f = new InFlight();
    expect(await f.idle(10)).toBe(true);
    f.enter();
    f.enter();
    expect(f.count).toBe(2);
    expect(await f.idle(20)).toBe(false);
    const idle = f.idle(1000);
    let settled = false;
    void idle.then(() => (settled = true));
    f.leave();
    await Promise.resolve();
    expect(settled).toBe(false);
    f.leave();
    expect(await idle).toBe(true);
    expect(f.count).toBe(0);
  });
});

describe('KnownRoutes', () => {
  it('remembers a tool per group, and forgets a server entirely', () => {
    const k = new KnownRoutes();
    k.remember(undefined, 'a__x', 'a');
    k.remember('small', 'a__x', 'a');
    k.remember(undefined, 'b__y', 'b');
    expect(k.serverOf(undefined, 'a__x')).toBe('a');
    expect(k.serverOf('other', 'a__x')).toBeUndefined();
    k.forgetServer('a');
    expect([k.serverOf(undefined, 'a__x'), k.serverOf('small', 'a__x'), k.serverOf(undefined, 'b__y')]).toEqual([undefined, undefined, 'b']);
  });
});

describe('ShownRoutes', () => {
  it('forgets every name once the groups change, and asks the catalog again', async () => {
    let known: string | undefined = 'a';
    const routes = new ShownRoutes({ knownTool: () => (known === undefined ? undefined : ({ server: { id: known } } as never)), downItem: () => undefined });
    const ctx = { group: 'small', principal: 'p' } as never;
    await routes.learn({ tools: [{ name: 'a__x' }] }, ctx);
    known = undefined; // the new groups no longer show it
    expect(routes.serverOf('a__x', ctx)).toBe('a'); // remembered while a server is down
    routes.forgetAll();
    expect(routes.serverOf('a__x', ctx)).toBeUndefined();
  });

  it('asks the catalog for a down server\'s stored name only when no list showed it, and does not remember the answer', () => {
    let down: string | undefined = 'b';
    const asked: unknown[] = [];
    const routes = new ShownRoutes({
      knownTool: (name: string) => (name === 'a__x' ? ({ server: { id: 'a' } } as never) : undefined),
      downItem: (kind: string, name: string, view: unknown) => (asked.push([kind, name, view]), down === undefined ? undefined : ({ server: { id: down } } as never)),
    });
    const ctx = { group: 'g', principal: 'p' } as never;
    expect(routes.serverOf('a__x', ctx)).toBe('a');
    expect(asked).toEqual([]);
    expect(routes.serverOf('b__y', ctx)).toBe('b');
    expect(asked).toEqual([['tools', 'b__y', { principal: 'p', group: 'g' }]]);
    down = undefined; // back, and without that tool: unknown again
    expect(routes.serverOf('b__y', ctx)).toBeUndefined();
  });
});
