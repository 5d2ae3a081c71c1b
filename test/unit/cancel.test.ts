import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Canceller, clientReason, reasonOf, unlessAborted, type Signal } from '../../src/cancel.js';

describe('unlessAborted and reasonOf', () => {
  it("gives the wait's own outcome, or onAbort's at once when the signal aborts first", async () => {
    expect(await unlessAborted(() => Promise.resolve(1), new Canceller().signal, () => 2)).toBe(1);
    await expect(unlessAborted(() => Promise.reject(new Error('own')), new Canceller().signal, () => 2)).rejects.toThrow('own');
    expect(await unlessAborted(() => Promise.resolve(1), undefined, () => 2)).toBe(1);
    const c = new Canceller();
    const never = new Promise<number>(() => undefined);
    const waiting = unlessAborted(() => never, c.signal, () => 2);
    c.abort('gone');
    expect(await waiting).toBe(2);
    const d = new Canceller();
    const thrown = unlessAborted(() => never, d.signal, () => {
      throw new Error(reasonOf(d.signal));
    });
    d.abort('the user stopped it');
    await expect(thrown).rejects.toThrow('the user stopped it');
  });

  it('starts nothing once the signal has aborted', async () => {
    const c = new Canceller();
    c.abort();
    let started = false;
    expect(await unlessAborted(() => ((started = true), Promise.resolve(1)), c.signal, () => 2)).toBe(2);
    expect(started).toBe(false);
    expect(reasonOf(c.signal)).toBe('request cancelled');
  });
});

describe('clientReason', () => {
  it("passes a client's reason on, cut to 200 characters and never inside a surrogate pair; none reads as the hub's default", () => {
    expect(clientReason({ requestId: 1, reason: 'user gave up' })).toBe('user gave up');
    for (const params of [undefined, {}, { reason: '' }, { reason: '  ' }, { reason: 7 }, { reason: { text: 'x' } }]) expect(clientReason(params)).toBeUndefined();
    const long = clientReason({ reason: 'x'.repeat(5000) })!;
    expect(long).toBe(`${'x'.repeat(200)}…`);
    const emoji = clientReason({ reason: `${'x'.repeat(199)}😀tail` })!;
    expect(emoji).toBe(`${'x'.repeat(199)}…`);
    const c = new Canceller();
    c.abort(clientReason({}));
    expect(reasonOf(c.signal)).toBe('request cancelled');
  });
});

describe('Canceller', () => {
  it('runs each listener once, in order, and keeps the reason', () => {
    const c = new Canceller();
    const seen: string[] = [];
    c.signal.addEventListener('abort', () => seen.push(`a:${String(c.signal.reason)}`));
    const asSignal: Signal = c.signal; // as code given a Signal sees it: AbortSignal's options are taken
    asSignal.addEventListener('abort', () => seen.push(`b:${c.signal.aborted}`), { once: true });
    expect(c.signal.aborted).toBe(false);
    c.abort('stop');
    c.abort('again');
    expect(seen).toEqual(['a:stop', 'b:true']);
    expect(c.signal.reason).toBe('stop');
  });

  it('gives an AbortError as the reason when none is given, like AbortController', () => {
    const c = new Canceller();
    c.abort();
    expect(c.signal.reason).toBeInstanceOf(Error);
    expect((c.signal.reason as Error).name).toBe('AbortError');
  });

  it('removes listeners, runs a listener added twice once, and never runs one added after the abort', () => {
    const c = new Canceller();
    let n = 0;
    const count = () => void n++;
    const gone = () => void (n += 100);
    c.signal.addEventListener('abort', count);
    c.signal.addEventListener('abort', count);
    c.signal.addEventListener('abort', gone);
    c.signal.removeEventListener('abort', gone);
    c.abort();
    c.signal.addEventListener('abort', count);
    expect(n).toBe(1);
  });

  it('runs every listener when one throws, then throws the first failure to whoever aborted', () => {
    const c = new Canceller();
    const ran: number[] = [];
    c.signal.addEventListener('abort', () => {
      ran.push(1);
      throw new Error('first');
    });
    c.signal.addEventListener('abort', () => {
      ran.push(2);
      throw new Error('second');
    });
    c.signal.addEventListener('abort', () => void ran.push(3));
    expect(() => c.abort()).toThrow('first');
    expect(ran).toEqual([1, 2, 3]);
  });

  it('accepts a real AbortSignal wherever a Signal is taken', () => {
    const ac = new AbortController();
    const s: Signal = ac.signal;
    let fired = false;
    s.addEventListener('abort', () => void (fired = true));
    ac.abort();
    expect(fired && s.aborted).toBe(true);
  });

  // The reason the class exists (src/cancel.ts): on Node 20 an AbortSignal, and whatever its
  // listeners reach, survives young-generation GCs and is promoted; a call's whole graph went
  // with it. The control shows the measurement sees that promotion. It runs in a child with a
  // fixed young generation: inside a busy test worker the heap's state moved the control's
  // figure from ~850 down to ~140 bytes per signal, and the first pass of each kind is a
  // warm-up that promotes less.
  it('is freed by a young-generation GC, listeners and what they reach included (an AbortSignal is not)', () => {
    const out = execFileSync(
      process.execPath,
      ['--expose-gc', '--max-semi-space-size=16', '--input-type=module', '-e', PROMOTION_PROBE],
      { cwd: process.cwd(), encoding: 'utf8' },
    );
    const { ours, node } = JSON.parse(out) as { ours: number; node: number };
    expect(ours).toBeLessThan(50);
    expect(node).toBeGreaterThan(Math.max(150, 4 * ours));
  });
});

// Bytes of old space per signal after two young GCs: the worst of three passes for ours, the
// best of three for Node's, each after one pass discarded.
const PROMOTION_PROBE = `
import v8 from 'node:v8';
import { Canceller } from './dist/src/cancel.js';
const oldUsed = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
const perSignal = (make) => {
  const n = 20000;
  gc();
  const before = oldUsed();
  for (let i = 0; i < n; i++) {
    const big = new Array(64).fill(i);
    make().signal.addEventListener('abort', () => void big.length, { once: true });
  }
  gc({ type: 'minor' });
  gc({ type: 'minor' });
  return (oldUsed() - before) / n;
};
const passes = (make) => { perSignal(make); return [perSignal(make), perSignal(make), perSignal(make)]; };
const ours = Math.max(...passes(() => new Canceller()));
const node = Math.min(...passes(() => new AbortController()));
process.stdout.write(JSON.stringify({ ours, node }));
`;
