import { describe, expect, it, vi } from 'vitest';
import { cacheableRead, ReadCache } from '../../src/catalog/read-cache.js';

describe('resources/read cache', () => {
  it('fresh for ttlMs (remaining time reported), per partition unless public', () => {
    let now = 1000;
    const c = new ReadCache(() => now, 3);
    const r = { contents: [{ uri: 'a://x', text: 'x' }] };
    c.put('s', 'alice', 'a://x', r, 500, 'private');
    expect(c.get('s', 'alice', 'a://x')).toEqual({ result: r, remainingMs: 500, scope: 'private' });
    expect(c.get('s', 'bob', 'a://x')).toBeUndefined();
    now += 499;
    expect(c.get('s', 'alice', 'a://x')?.remainingMs).toBe(1);
    now += 1;
    expect(c.get('s', 'alice', 'a://x')).toBeUndefined();
    c.put('s', 'alice', 'a://y', r, 500, 'public');
    expect(c.get('s', 'bob', 'a://y')?.scope).toBe('public');
  });

  it('never keeps ttl 0, oversized or interim results; bounded; invalidated per URI or server', () => {
    const now = 0;
    const c = new ReadCache(() => now, 2);
    c.put('s', '', 'a://0', { contents: [] }, 0, 'public');
    c.put('s', '', 'a://big', { contents: [{ uri: 'a://big', text: 'x'.repeat(1024 * 1024 + 1) }] }, 1000, 'public');
    expect(c.size).toBe(0);
    for (const u of ['a://1', 'a://2', 'a://3']) c.put('s', '', u, { contents: [] }, 1000, 'public');
    expect(c.size).toBe(2);
    expect(c.get('s', '', 'a://1')).toBeUndefined(); // the oldest went first
    c.put('t', '', 'a://2', { contents: [] }, 1000, 'public');
    c.invalidate('s', 'a://2');
    expect(c.get('s', '', 'a://2')).toBeUndefined();
    expect(c.get('t', '', 'a://2')).toBeDefined();
    c.invalidate('t');
    expect(c.get('t', '', 'a://2')).toBeUndefined();
    expect(cacheableRead({ uri: 'a' }, { contents: [] })).toBe(true);
    expect(cacheableRead({ uri: 'a' }, { resultType: 'input_required' })).toBe(false);
    expect(cacheableRead({ uri: 'a', requestState: 'x' }, { contents: [] })).toBe(false);
    expect(cacheableRead({ uri: 'a', inputResponses: {} }, { contents: [] })).toBe(false);
  });

  it('does not keep a read whose URI (or server) changed while it was on its way', () => {
    const c = new ReadCache(() => 0);
    const r = { contents: [] };
    const before = c.mark();
    c.invalidate('s', 'a://x'); // resources/updated arrives before the read's answer
    c.put('s', '', 'a://x', r, 1000, 'public', before);
    expect(c.get('s', '', 'a://x')).toBeUndefined();
    c.put('s', '', 'a://y', r, 1000, 'public', before); // another URI is unaffected
    expect(c.get('s', '', 'a://y')).toBeDefined();
    const again = c.mark();
    c.put('s', '', 'a://x', r, 1000, 'public', again); // a read begun after the change is kept
    expect(c.get('s', '', 'a://x')).toBeDefined();
    const third = c.mark();
    c.invalidate('s'); // the whole server (a restart)
    c.put('s', '', 'a://z', r, 1000, 'public', third);
    expect(c.get('s', '', 'a://z')).toBeUndefined();
  });

  it('forgets old invalidations past a bound, and then keeps no read that began before', () => {
    const c = new ReadCache(() => 0);
    const early = c.mark();
    for (let i = 0; i <= 10_000; i++) c.invalidate('s', `a://${i}`);
    c.put('s', '', 'a://other', { contents: [] }, 1000, 'public', early);
    expect(c.get('s', '', 'a://other')).toBeUndefined();
    c.put('s', '', 'a://other', { contents: [] }, 1000, 'public', c.mark());
    expect(c.get('s', '', 'a://other')).toBeDefined();
  });

  it('freshness is measured on the monotonic clock: a wall clock stepped back does not keep a read for the step', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const c = new ReadCache();
      c.put('s', 'alice', 'a://x', { contents: [{ uri: 'a://x', text: 'x' }] }, 50, 'private');
      step = -3_600_000;
      await new Promise((r) => setTimeout(r, 80));
      expect(c.get('s', 'alice', 'a://x')).toBeUndefined();
    } finally {
      wall.mockRestore();
    }
  });
});
