import { describe, expect, it } from 'vitest';
import { ListCache } from '../../src/catalog/list-cache.js';

/** A fetch the test answers when it likes, counting how often the cache asked. */
function held() {
  const asked: ((items: string[]) => void)[] = [];
  const fetch = () =>
    new Promise<{ items: Record<string, unknown>[]; ttlMs: number; scope: 'public' }>((resolve) => {
      asked.push((names) => resolve({ items: names.map((name) => ({ name })), ttlMs: Infinity, scope: 'public' }));
    });
  return { fetch, asked };
}

describe('the list cache', () => {
  it('a list_changed that arrives while the list is being fetched makes that answer stale', async () => {
    const cache = new ListCache(() => 1000);
    const f = held();
    const first = cache.get('s\0tools', f.fetch);
    expect(f.asked).toHaveLength(1);
    cache.invalidate('s\0'); // the upstream changed after it took its snapshot
    f.asked[0]!(['old']);
    expect((await first).items).toEqual([{ name: 'old' }]); // served to whoever waited for it
    const second = cache.get('s\0tools', f.fetch);
    expect(f.asked).toHaveLength(2); // and fetched again by the next
    f.asked[1]!(['old', 'new']);
    expect((await second).items).toEqual([{ name: 'old' }, { name: 'new' }]);
    // With no change in flight, the answer keeps its freshness.
    expect((await cache.get('s\0tools', f.fetch)).items).toHaveLength(2);
    expect(f.asked).toHaveLength(2);
  });

  it('only the keys under the prefix are marked, and a failed fetch leaves no mark behind', async () => {
    const cache = new ListCache(() => 1000);
    const f = held();
    const a = cache.get('a\0tools', f.fetch);
    const b = cache.get('b\0tools', f.fetch);
    cache.invalidate('a\0');
    f.asked[0]!(['x']);
    f.asked[1]!(['y']);
    await Promise.all([a, b]);
    void cache.get('b\0tools', f.fetch);
    expect(f.asked).toHaveLength(2); // b stayed fresh

    const failing = cache.get('c\0tools', () => Promise.reject(new Error('down')));
    cache.invalidate('c\0');
    await expect(failing).rejects.toThrow('down');
    const c = held();
    const again = cache.get('c\0tools', c.fetch);
    c.asked[0]!(['z']);
    await again;
    void cache.get('c\0tools', c.fetch);
    expect(c.asked).toHaveLength(1); // the mark went with the failed fetch
  });
});
