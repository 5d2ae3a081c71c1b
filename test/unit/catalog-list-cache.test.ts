import { describe, expect, it, vi } from 'vitest';
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

  it('a list asked for after a list_changed does not share the fetch under way since before it', async () => {
    const cache = new ListCache(() => 1000);
    const f = held();
    const before = cache.get('s\0tools', f.fetch);
    cache.invalidate('s\0');
    const after = cache.get('s\0tools', f.fetch);
    expect(f.asked).toHaveLength(2);
    f.asked[1]!(['old', 'new']);
    f.asked[0]!(['old']);
    expect((await before).items).toEqual([{ name: 'old' }]);
    expect((await after).items).toEqual([{ name: 'old' }, { name: 'new' }]);
    // The newer fetch is the one kept, fresh: nothing changed while it was on its way.
    expect((await cache.get('s\0tools', f.fetch)).items).toHaveLength(2);
    expect(f.asked).toHaveLength(2);
  });

  it('only the keys under the prefix are marked, and a failed fetch leaves no mark behind', async () => {
    // No wait after a failure (the next test's): the fetch after it is the one looked at.
    const cache = new ListCache(() => 1000, undefined, undefined, 0);
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

  it('a failed fetch is not tried again before its wait is over: the same error, or the stale entry with the time to the retry; a change said ends the wait', async () => {
    let now = 1000;
    const cache = new ListCache(() => now, undefined, undefined, 5000);
    let fetches = 0;
    const failing = () => (fetches++, Promise.reject(new Error('down')));
    await expect(cache.get('n\0tools', failing)).rejects.toThrow('down');
    now += 4999;
    await expect(cache.get('n\0tools', failing)).rejects.toThrow('down');
    expect(fetches).toBe(1);
    now += 1;
    await expect(cache.get('n\0tools', failing)).rejects.toThrow('down');
    expect(fetches).toBe(2);
    cache.invalidate('n\0');
    await expect(cache.get('n\0tools', failing)).rejects.toThrow('down');
    expect(fetches).toBe(3);

    const ok = () => Promise.resolve({ items: [{ name: 'a' }], ttlMs: 100, scope: 'public' as const });
    const e = await cache.get('s\0tools', ok);
    now += 200;
    expect(cache.remainingMs(e)).toBe(0);
    fetches = 0;
    expect(await cache.get('s\0tools', failing)).toBe(e);
    expect(cache.remainingMs(e)).toBe(5000);
    now += 3000;
    expect(await cache.get('s\0tools', failing)).toBe(e);
    expect(fetches).toBe(1);
    expect(cache.remainingMs(e)).toBe(2000);
    expect(cache.stats.staleServed).toBe(2);
  });

  it("a principal's partition is its key alone: alice's change leaves alice2's list fresh, a kind's covers both", async () => {
    const cache = new ListCache(() => 1000);
    const f = held();
    const alice = 's\0tools\0principal:alice';
    const alice2 = 's\0tools\0principal:alice2';
    const lists = [cache.get(alice, f.fetch), cache.get(alice2, f.fetch)];
    f.asked[0]!(['a']);
    f.asked[1]!(['a2']);
    await Promise.all(lists);
    for (const change of ['invalidate', 'expire', 'drop'] as const) {
      cache[change](alice);
      expect(cache.peek(alice2)?.items, change).toEqual([{ name: 'a2' }]);
      void cache.get(alice2, f.fetch);
      expect(f.asked, change).toHaveLength(2); // still fresh: not fetched again
    }
    cache.invalidate('s\0tools');
    void cache.get(alice2, f.fetch);
    expect(f.asked).toHaveLength(3);
  });
});

describe('a change found when an entry expires', () => {
  function lists(ttlMs: number) {
    let names = ['a'];
    return {
      set: (n: string[]) => (names = n),
      fetch: async () => ({ items: names.map((name) => ({ name })), ttlMs, scope: 'public' as const }),
    };
  }

  it('is told once (onChanged), not when the list is the same, and not when invalidate told it already', async () => {
    const clock = { t: 0 };
    const told: string[] = [];
    const cache = new ListCache(() => clock.t, undefined, (k) => told.push(k));
    const up = lists(5000);
    await cache.get('s\0tools', up.fetch);
    clock.t += 6000;
    await cache.get('s\0tools', up.fetch); // expired, same list
    expect(told).toEqual([]);
    up.set(['a', 'b']);
    clock.t += 6000;
    await cache.get('s\0tools', up.fetch); // expired, changed, nobody said so
    expect(told).toEqual(['s\0tools']);
    up.set(['a']);
    cache.invalidate('s\0'); // the server said so: clients were told then
    clock.t += 6000;
    await cache.get('s\0tools', up.fetch);
    expect(told).toEqual(['s\0tools']);
  });

  it('is told when the list it served in place of a failed refresh after a list_changed (the old one, to those told) is found changed; not twice', async () => {
    const clock = { t: 0 };
    const told: string[] = [];
    const cache = new ListCache(() => clock.t, undefined, (k) => told.push(k), 5000);
    let failing = false;
    let names = ['a'];
    const fetch = async () => {
      if (failing) throw new Error('lists are failing');
      return { items: names.map((name) => ({ name })), ttlMs: Infinity, scope: 'public' as const };
    };
    await cache.get('s\0tools', fetch);
    failing = true;
    names = ['a', 'b'];
    cache.invalidate('s\0'); // list_changed: clients are told, and list again...
    expect((await cache.get('s\0tools', fetch)).items).toEqual([{ name: 'a' }]); // ...and get the old list
    failing = false;
    clock.t += 5000;
    expect((await cache.get('s\0tools', fetch)).items).toHaveLength(2);
    expect(told).toEqual(['s\0tools']); // those clients hear of it again
    clock.t += 5000;
    names = ['a', 'b', 'c'];
    cache.invalidate('s\0');
    await cache.get('s\0tools', fetch);
    expect(told).toEqual(['s\0tools']); // a change said, and fetched: told by whoever said it, not here
  });

  it('serves the stale entry in place of a refresh not back within the stale wait, one fetch for all; the refresh, changed, is told', async () => {
    const clock = { t: 0 };
    const told: string[] = [];
    const cache = new ListCache(() => clock.t, undefined, (k) => told.push(k), 5000, 20);
    const f = held();
    const first = cache.get('s\0tools', f.fetch);
    f.asked[0]!(['a']);
    await first;
    cache.invalidate('s\0'); // list_changed: clients are told, and list again...
    const waiting = [cache.get('s\0tools', f.fetch), cache.get('s\0tools', f.fetch)];
    // ...and, the refresh hanging, get the list held (a real 20 ms timer; the clock stands still).
    for (const e of await Promise.all(waiting)) expect(e.items).toEqual([{ name: 'a' }]);
    expect(f.asked).toHaveLength(2);
    // Whoever asks once the wait is over is not held again by the same refresh.
    clock.t += 20;
    expect((await cache.get('s\0tools', f.fetch)).items).toEqual([{ name: 'a' }]);
    expect(f.asked).toHaveLength(2);
    expect(cache.stats.staleServed).toBe(3);
    f.asked[1]!(['a', 'b']);
    await expect.poll(() => told).toEqual(['s\0tools']); // the clients given the old list hear of it
    expect((await cache.get('s\0tools', f.fetch)).items).toHaveLength(2);
  });

  it('a list kept 0 ms that stood in for a slow refresh is told changed only after a change was said', async () => {
    const told: string[] = [];
    const cache = new ListCache(() => 0, undefined, (k) => told.push(k), 5000, 20);
    let n = 0;
    const asked: (() => void)[] = [];
    // Slow (answered when the test says), and different at every answer.
    const fetch = () => new Promise<{ items: Record<string, unknown>[]; ttlMs: number; scope: 'public' }>((resolve) => asked.push(() => resolve({ items: [{ name: `v${++n}` }], ttlMs: 0, scope: 'public' })));
    const first = cache.get('z\0tools', fetch);
    asked[0]!();
    await first;
    for (let i = 1; i <= 3; i++) {
      expect((await cache.get('z\0tools', fetch)).items).toEqual([{ name: `v${i}` }]); // stood in after 20 ms
      asked[i]!();
      await expect.poll(() => cache.peek('z\0tools')?.items).toEqual([{ name: `v${i + 1}` }]);
    }
    expect(told).toEqual([]);
    cache.invalidate('z\0'); // said: clients told, and list again
    expect((await cache.get('z\0tools', fetch)).items).toEqual([{ name: 'v4' }]);
    asked[4]!();
    await expect.poll(() => told).toEqual(['z\0tools']); // they got the list from before it: told again
  });

  it('a refresh back within the stale wait is what its waiters get, and the same list told nowhere', async () => {
    const told: string[] = [];
    const cache = new ListCache(() => 0, undefined, (k) => told.push(k), 5000, 60_000);
    const f = held();
    const first = cache.get('s\0tools', f.fetch);
    f.asked[0]!(['a']);
    await first;
    cache.invalidate('s\0');
    const again = cache.get('s\0tools', f.fetch);
    f.asked[1]!(['a', 'b']);
    expect((await again).items).toHaveLength(2);
    expect(cache.stats.staleServed).toBe(0);
    expect(told).toEqual([]); // invalidate's change: told by whoever said it
  });

  it('is not told for a list that is never fresh (ttlMs 0), nor more than once a second', async () => {
    const clock = { t: 0 };
    const told: string[] = [];
    const cache = new ListCache(() => clock.t, undefined, (k) => told.push(k));
    const never = lists(0);
    await cache.get('z\0tools', never.fetch);
    never.set(['b']);
    await cache.get('z\0tools', never.fetch);
    expect(told).toEqual([]);
    const quick = lists(10);
    await cache.get('q\0tools', quick.fetch);
    for (let i = 0; i < 20; i++) {
      quick.set([`n${i}`]);
      clock.t += 20;
      await cache.get('q\0tools', quick.fetch);
    }
    expect(told).toEqual(['q\0tools']); // 400 ms of changes: one
    clock.t += 1000;
    quick.set(['later']);
    await cache.get('q\0tools', quick.fetch);
    expect(told).toHaveLength(2);
  });
});

describe('a change found inside the once-a-second window', () => {
  it('is told at the window end, not dropped (the clients told of the one before kept that list)', async () => {
    vi.useFakeTimers();
    try {
      const told: string[] = [];
      const cache = new ListCache(Date.now, undefined, (k) => told.push(k));
      let names = ['v1'];
      const fetch = async () => ({ items: names.map((name) => ({ name })), ttlMs: 300, scope: 'public' as const });
      await cache.get('s\0tools', fetch);
      names = ['v2'];
      vi.advanceTimersByTime(400);
      await cache.get('s\0tools', fetch);
      expect(told).toEqual(['s\0tools']); // v2, at once
      names = ['v3'];
      vi.advanceTimersByTime(400);
      await cache.get('s\0tools', fetch);
      expect(told).toHaveLength(1); // v3: inside the window
      vi.advanceTimersByTime(600);
      expect(told).toEqual(['s\0tools', 's\0tools']); // v3, at the window end
      vi.advanceTimersByTime(5000);
      expect(told).toHaveLength(2); // nothing more to say
    } finally {
      vi.useRealTimers();
    }
  });

  it('is not told for a server dropped meanwhile, nor after close', async () => {
    vi.useFakeTimers();
    try {
      const told: string[] = [];
      const cache = new ListCache(Date.now, undefined, (k) => told.push(k));
      let n = 0;
      const fetch = async () => ({ items: [{ name: `t${n++}` }], ttlMs: 100, scope: 'public' as const });
      for (let i = 0; i < 3; i++) {
        await cache.get('s\0tools', fetch);
        vi.advanceTimersByTime(200);
      }
      expect(told).toHaveLength(1);
      cache.drop('s\0');
      vi.advanceTimersByTime(2000);
      expect(told).toHaveLength(1);
      // Nor once the cache is closed (the hub stops).
      for (let i = 0; i < 3; i++) {
        await cache.get('s\0tools', fetch);
        vi.advanceTimersByTime(200);
      }
      expect(told).toHaveLength(2);
      cache.close();
      vi.advanceTimersByTime(2000);
      expect(told).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('ListCache.expire (a notification stream was down)', () => {
  it("lets go of a fetch under way when its key is dropped: the next get fetches afresh, and the dropped one's answer or failure is not kept", async () => {
    const cache = new ListCache(() => 1000);
    const f = held();
    const old = cache.get('s\0tools', f.fetch); // on the connection a reload is about to replace
    cache.drop('s\0');
    const fresh = cache.get('s\0tools', f.fetch);
    expect(f.asked).toHaveLength(2); // not joined to the old one
    f.asked[1]!(['new']);
    expect((await fresh).items).toEqual([{ name: 'new' }]);
    f.asked[0]!(['old']);
    expect((await old).items).toEqual([{ name: 'old' }]); // its own waiters still get it
    expect(cache.peek('s\0tools')?.items).toEqual([{ name: 'new' }]);
    // Failed after the drop (its connection closed): no failure is kept for the key.
    const failing = cache.get('t\0tools', () => Promise.reject(new Error('closed')));
    cache.drop('t\0');
    await expect(failing).rejects.toThrow('closed');
    const next = held();
    const again = cache.get('t\0tools', next.fetch);
    expect(next.asked).toHaveLength(1);
    next.asked[0]!(['t1']);
    expect((await again).items).toEqual([{ name: 't1' }]);
  });

  it('a fetcher that throws at once fails the get with its own error, and waits its retry as any failure', async () => {
    const cache = new ListCache(() => 1000);
    await expect(cache.get('s\0tools', () => { throw new Error('at once'); })).rejects.toThrow('at once');
    const f = held();
    await expect(cache.get('s\0tools', f.fetch)).rejects.toThrow('at once');
    expect(f.asked).toHaveLength(0);
  });

  it('makes entries stale without telling anyone; the refresh tells clients only if the list differs', async () => {
    const clock = { t: 1000 };
    const told: string[] = [];
    const cache = new ListCache(() => clock.t, undefined, (k) => told.push(k));
    let items = [{ name: 'a' }];
    let fetches = 0;
    const fetch = async () => {
      fetches++;
      return { items, ttlMs: Infinity, scope: 'private' as const };
    };
    await cache.get('s\0tools', fetch);
    await cache.get('s\0tools', fetch);
    expect(fetches).toBe(1); // kept until list_changed
    clock.t += 5000;
    cache.expire('s\0');
    expect(told).toEqual([]); // nothing said yet
    await cache.get('s\0tools', fetch);
    expect(fetches).toBe(2);
    expect(told).toEqual([]); // the same list: nothing to say
    items = [{ name: 'a' }, { name: 'b' }];
    clock.t += 5000;
    cache.expire('s\0');
    await cache.get('s\0tools', fetch);
    expect(told).toEqual(['s\0tools']); // it changed while unheard: now said
  });

  it('an entry received in the same millisecond is stale too', async () => {
    const clock = { t: 1000 };
    const cache = new ListCache(() => clock.t);
    let fetches = 0;
    const fetch = async () => ({ items: [{ name: `v${++fetches}` }], ttlMs: Infinity, scope: 'private' as const });
    await cache.get('s\0tools', fetch);
    cache.expire('s\0');
    expect((await cache.get('s\0tools', fetch)).items).toEqual([{ name: 'v2' }]);
  });

  it('freshness is measured on the monotonic clock: a wall clock stepped back does not keep a list fresh for the step', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const cache = new ListCache();
      let n = 0;
      const fetch = async () => ({ items: [{ n: ++n }], ttlMs: 50, scope: 'public' as const });
      await cache.get('s\0tools', fetch);
      step = -3_600_000;
      await new Promise((r) => setTimeout(r, 80));
      // On the wall clock the list was received an hour ahead: fresh (and told to clients so) for an hour.
      const e = await cache.get('s\0tools', fetch);
      expect(e.items).toEqual([{ n: 2 }]);
      expect(cache.remainingMs(e)).toBeLessThanOrEqual(50);
    } finally {
      wall.mockRestore();
    }
  });
});
