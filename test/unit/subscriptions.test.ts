import { describe, expect, it } from 'vitest';
import { isSubResource, Subscriptions } from '../../src/router/subscriptions.js';

describe('resource subscriptions', () => {
  it('a sub-resource lies below its parent at a "/" boundary', () => {
    expect(isSubResource('file:///dir/a', 'file:///dir')).toBe(true);
    expect(isSubResource('file:///dir/a', 'file:///dir/')).toBe(true);
    expect(isSubResource('file:///dir2', 'file:///dir')).toBe(false);
    expect(isSubResource('file:///dir', 'file:///dir')).toBe(false);
    expect(isSubResource('x://a', '')).toBe(false);
  });

  it("an update of a sub-resource reaches the parent's subscribers and its own, on the same server only", () => {
    const s = new Subscriptions();
    s.add('fs', 'file:///dir', 'a');
    s.add('fs', 'file:///dir/x', 'b');
    s.add('other', 'file:///dir', 'c');
    expect([...s.subscribers('fs', 'file:///dir/x')].sort()).toEqual(['a', 'b']);
    expect([...s.subscribers('fs', 'file:///dir/y')]).toEqual(['a']);
    expect([...s.subscribers('fs', 'file:///dirt')]).toEqual([]);
    expect([...s.subscribers('fs', 'file:///dir')]).toEqual(['a']);
  });

  it('finds where a subscriber holds a URI, whichever server the URI routes to now', () => {
    const s = new Subscriptions();
    s.add('old', 'x://a', 'A');
    s.add('other', 'x://a', 'B', 'principal:bob');
    expect(s.heldBy('A', 'x://a')).toEqual([{ server: 'old', conn: '' }]);
    expect(s.heldBy('B', 'x://a')).toEqual([{ server: 'other', conn: 'principal:bob' }]);
    expect(s.heldBy('A', 'x://b')).toEqual([]);
  });
});
