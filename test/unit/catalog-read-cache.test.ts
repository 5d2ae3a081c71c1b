import { describe, expect, it } from 'vitest';
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
});
