/**
 * A list's content snapshot (what a pagination cursor names): the same for the same items and
 * scopes whatever objects hold them (another process, another hub), different when an item,
 * their order or a part's scope differs; and the same as a SHA-256 of the whole list's JSON (so
 * cursors issued before items were serialised one by one stay good).
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { contentSnapshot } from '../../src/catalog/snapshot.js';

const tool = (name: string, description = 'd') => ({ name, description, inputSchema: { type: 'object' } });

describe('contentSnapshot', () => {
  it('depends on the content only: fresh copies of the same items give the same snapshot', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ name: fc.string(), description: fc.string() }), { maxLength: 20 }), fc.string(), (items, scopes) => {
        const copies = JSON.parse(JSON.stringify(items)) as Record<string, unknown>[];
        expect(contentSnapshot(scopes, copies)).toBe(contentSnapshot(scopes, items));
      }),
    );
  });

  it('changes with an item, the order of items, or a scope', () => {
    const items = [tool('a__x'), tool('b__y')];
    const base = contentSnapshot('a|b', items);
    expect(contentSnapshot('a|b', [items[0], tool('b__y', 'changed')])).not.toBe(base);
    expect(contentSnapshot('a|b', [items[1], items[0]])).not.toBe(base);
    expect(contentSnapshot('a|b:private', items)).not.toBe(base);
    expect(contentSnapshot('a|b', items.slice(0, 1))).not.toBe(base);
    expect(contentSnapshot('a|b', items)).toBe(base);
    expect(base).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('is the digest of the scopes and the whole list as JSON, item texts kept or not', () => {
    fc.assert(
      fc.property(fc.array(fc.dictionary(fc.string(), fc.jsonValue()), { maxLength: 12 }), fc.string(), (items, scopes) => {
        const whole = createHash('sha256').update(scopes).update('\n').update(JSON.stringify(items)).digest('base64url').slice(0, 22);
        expect(contentSnapshot(scopes, items)).toBe(whole);
        expect(contentSnapshot(scopes, items)).toBe(whole); // from the kept texts
      }),
    );
  });

  it('serialises an item once: after a change only the new items are serialised again', () => {
    const items = Array.from({ length: 50 }, (_, i) => tool(`s__t${i}`));
    const spy = vi.spyOn(JSON, 'stringify');
    try {
      contentSnapshot('s', items);
      expect(spy).toHaveBeenCalledTimes(50);
      spy.mockClear();
      const changed = [...items.slice(0, 49), tool('s__t49', 'changed')];
      contentSnapshot('s', changed);
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('items are not run together: moving text from one item to the next changes it', () => {
    expect(contentSnapshot('', [{ a: 'xy' }, { a: '' }])).not.toBe(contentSnapshot('', [{ a: 'x' }, { a: 'y' }]));
  });
});
