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
    s.addToFilter('fs', 'file:///dir', 'a', '', 'alice');
    s.addToFilter('fs', 'file:///dir/x', 'b', '', 'bob');
    s.addToFilter('other', 'file:///dir', 'c', '', 'carol');
    expect([...s.subscribers('fs', 'file:///dir/x')].sort()).toEqual(['a', 'b']);
    expect([...s.subscribers('fs', 'file:///dir/y')]).toEqual(['a']);
    expect([...s.subscribers('fs', 'file:///dirt')]).toEqual([]);
    expect([...s.subscribers('fs', 'file:///dir')]).toEqual(['a']);
  });

  it('finds where a subscriber holds a URI, whichever server the URI routes to now', () => {
    const s = new Subscriptions();
    s.addToFilter('old', 'x://a', 'A', '', 'alice');
    s.addToFilter('other', 'x://a', 'B', 'principal:bob', 'bob');
    expect(s.heldBy('A', 'x://a')).toEqual([{ server: 'old', conn: '' }]);
    expect(s.heldBy('B', 'x://a')).toEqual([{ server: 'other', conn: 'principal:bob' }]);
    expect(s.heldBy('A', 'x://b')).toEqual([]);
  });
});

describe("a principal's share of a listen filter", () => {
  it('bounds its distinct URIs and their characters per server connection; others have their own; leaving gives it back', () => {
    const s = new Subscriptions({ maxUris: 3, maxChars: 16 });
    expect(s.addToFilter('m', 'x://1', 'a1', '', 'alice')).toEqual({ first: true });
    expect(s.addToFilter('m', 'x://2', 'a1', '', 'alice')).toEqual({ first: true });
    // Another session of hers holding a URI she holds costs nothing more.
    expect(s.addToFilter('m', 'x://2', 'a2', '', 'alice')).toEqual({ first: false });
    // 18 characters: past 16.
    expect(s.addToFilter('m', 'x://3333', 'a1', '', 'alice')).toBeUndefined();
    expect(s.addToFilter('m', 'x:3', 'a1', '', 'alice')).toEqual({ first: true });
    // Three URIs: at the count (15 characters would do).
    expect(s.addToFilter('m', 'x:', 'a2', '', 'alice')).toBeUndefined();
    expect(s.uris('m').sort()).toEqual(['x://1', 'x://2', 'x:3']);
    // Bob's share is his own; another server, or her own connection, another share.
    expect(s.addToFilter('m', 'x://4', 'b1', '', 'bob')).toEqual({ first: true });
    expect(s.addToFilter('m', 'x://1', 'b1', '', 'bob')).toEqual({ first: false });
    expect(s.addToFilter('n', 'x://4', 'a1', '', 'alice')).toEqual({ first: true });
    expect(s.addToFilter('m', 'x://4', 'a1', 'principal:alice', 'alice')).toEqual({ first: true });
    // x://2 is let go by both her sessions before it makes room.
    s.remove('m', 'x://2', 'a1');
    expect(s.addToFilter('m', 'x://5', 'a1', '', 'alice')).toBeUndefined();
    s.removeSubscriber('a2');
    expect(s.addToFilter('m', 'x://5', 'a1', '', 'alice')).toEqual({ first: true });
    s.removeSubscriber('a1');
    for (const u of ['x://6', 'x://7', 'x://8']) expect(s.addToFilter('m', u, 'a3', '', 'alice')).toEqual({ first: true });
  });
});

describe('resource subscriptions made upstream (join)', () => {
  /** An upstream subscribe the test settles. */
  function upstream() {
    const calls: { resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
    const make = () => new Promise<string>((resolve, reject) => void calls.push({ resolve, reject }));
    return { calls, make };
  }
  const settle = () => new Promise((r) => setTimeout(r, 0));

  it('counts a subscriber only once the upstream holds it; those who come meanwhile are counted with it', async () => {
    const s = new Subscriptions();
    const up = upstream();
    const a = s.join('fs', 'x://a', 'A', '', up.make);
    const b = s.join('fs', 'x://a', 'B', '', up.make);
    await settle();
    expect(up.calls.length).toBe(1);
    expect([...s.subscribers('fs', 'x://a')]).toEqual([]);
    expect(s.uris('fs')).toEqual([]);
    up.calls[0]!.resolve('made');
    expect(await a).toEqual({ made: 'made' });
    expect(await b).toEqual({});
    expect([...s.subscribers('fs', 'x://a')].sort()).toEqual(['A', 'B']);
    // Held: a later one is counted without asking the upstream.
    expect(await s.join('fs', 'x://a', 'C', '', up.make)).toEqual({});
    expect(up.calls.length).toBe(1);
  });

  it("says whom a URI is held for: its holders' one principal (waiters counted with the maker), else null", async () => {
    const s = new Subscriptions();
    const up = upstream();
    const a = s.join('fs', 'x://a', 'A1', '', up.make, undefined, 'alice');
    const b = s.join('fs', 'x://a', 'A2', '', up.make, undefined, 'alice');
    await settle();
    up.calls[0]!.resolve('made');
    await Promise.all([a, b]);
    expect(s.heldFor('fs', 'x://a')).toBe('alice');
    expect(await s.join('fs', 'x://a', 'B', '', up.make, undefined, 'bob')).toEqual({});
    expect(s.heldFor('fs', 'x://a')).toBe(null);
    // Bob gone: Alice's alone again. A holder of no known principal counts as another.
    s.remove('fs', 'x://a', 'B');
    expect(s.heldFor('fs', 'x://a')).toBe('alice');
    expect(await s.join('fs', 'x://a', 'C', '', up.make)).toEqual({});
    expect(s.heldFor('fs', 'x://a')).toBe(null);
    s.removeSubscriber('C');
    expect(s.heldFor('fs', 'x://a')).toBe('alice');
    // Each connection its own.
    expect(await s.join('fs', 'x://a', 'B', 'principal:bob', () => Promise.resolve('made'), undefined, 'bob')).toEqual({ made: 'made' });
    expect([s.heldFor('fs', 'x://a'), s.heldFor('fs', 'x://a', 'principal:bob')]).toEqual(['alice', 'bob']);
  });

  it('when the upstream subscribe fails, its maker is not counted and the first waiter makes its own attempt', async () => {
    const s = new Subscriptions();
    const up = upstream();
    const a = s.join('fs', 'x://a', 'A', '', up.make);
    const b = s.join('fs', 'x://a', 'B', '', up.make);
    const c = s.join('fs', 'x://a', 'C', '', up.make);
    await settle();
    up.calls[0]!.reject(new Error('transient'));
    await expect(a).rejects.toThrow('transient');
    await settle();
    // B tries again; C waits for B's attempt. Nobody is counted meanwhile.
    expect(up.calls.length).toBe(2);
    expect([...s.subscribers('fs', 'x://a')]).toEqual([]);
    up.calls[1]!.resolve('again');
    expect(await b).toEqual({ made: 'again' });
    expect(await c).toEqual({});
    expect([...s.subscribers('fs', 'x://a')].sort()).toEqual(['B', 'C']);
    expect(up.calls.length).toBe(2);
  });

  it('fails each waiter only by an attempt of its own', async () => {
    const s = new Subscriptions();
    const up = upstream();
    const a = s.join('fs', 'x://a', 'A', '', up.make);
    const b = s.join('fs', 'x://a', 'B', '', up.make);
    await settle();
    up.calls[0]!.reject(new Error('first'));
    await expect(a).rejects.toThrow('first');
    await settle();
    up.calls[1]!.reject(new Error('second'));
    await expect(b).rejects.toThrow('second');
    expect(s.uris('fs')).toEqual([]);
    expect(s.heldBy('B', 'x://a')).toEqual([]);
  });

  it('a subscriber that leaves while the upstream subscribe is made is not counted; when nobody stays, the subscription is unheld', async () => {
    const s = new Subscriptions();
    const up = upstream();
    const a = s.join('fs', 'x://a', 'A', '', up.make);
    const b = s.join('fs', 'x://a', 'B', '', up.make);
    await settle();
    expect(s.heldBy('B', 'x://a')).toEqual([{ server: 'fs', conn: '' }]);
    expect(s.removeSubscriber('B')).toEqual([]); // nothing counted yet, so nothing to unsubscribe
    expect(s.remove('fs', 'x://a', 'A')).toBe(false);
    up.calls[0]!.resolve('made');
    expect(await a).toEqual({ made: 'made', unheld: true });
    expect(await b).toEqual({ left: true });
    expect(s.uris('fs')).toEqual([]);
  });

  it('a subscribe is made upstream only once an unsubscribe of that URI on that connection was answered: on another connection it could overtake it', async () => {
    const s = new Subscriptions();
    const up = upstream();
    let answer!: () => void;
    const gone = s.unsubscribing('fs', '', 'x://a', () => new Promise<void>((r) => (answer = r)));
    const b = s.join('fs', 'x://a', 'B', '', up.make);
    // Another URI, or another connection, does not wait.
    const c = s.join('fs', 'x://a', 'C', 'principal:carol', up.make);
    await settle();
    expect(up.calls).toHaveLength(1);
    answer();
    await gone;
    await settle();
    expect(up.calls).toHaveLength(2);
    up.calls[0]!.resolve('c');
    up.calls[1]!.resolve('b');
    expect([await b, await c]).toEqual([{ made: 'b' }, { made: 'c' }]);
    // Made with nobody staying, it is let go (unmake), and the next subscribe waits for that too.
    const d = s.join('fs', 'x://b', 'D', '', up.make, () => new Promise<void>((r) => (answer = r)));
    await settle();
    s.remove('fs', 'x://b', 'D');
    up.calls[2]!.resolve('d');
    expect(await d).toEqual({ made: 'd', unheld: true });
    const e = s.join('fs', 'x://b', 'E', '', up.make);
    await settle();
    expect(up.calls).toHaveLength(3);
    answer();
    await settle();
    expect(up.calls).toHaveLength(4);
    up.calls[3]!.resolve('e');
    expect(await e).toEqual({ made: 'e' });
  });

  it('counts what each subscriber holds: once per URI and connection, down on unsubscribe and when its session ends', async () => {
    const s = new Subscriptions();
    s.addToFilter('fs', 'file:///a', 'sess1', '', 'alice');
    s.addToFilter('fs', 'file:///a', 'sess1', '', 'alice');
    s.addToFilter('fs', 'file:///a', 'sess2', '', 'alice');
    await s.join('fs', 'file:///b', 'sess1', '', async () => 'made');
    await s.join('fs', 'file:///b', 'sess1', '', async () => 'again');
    expect([s.countOf('sess1'), s.countOf('sess2')]).toEqual([2, 1]);
    s.remove('fs', 'file:///a', 'sess1');
    s.remove('fs', 'file:///a', 'sess1');
    expect(s.countOf('sess1')).toBe(1);
    s.removeSubscriber('sess1');
    expect([s.countOf('sess1'), s.countOf('sess2')]).toEqual([0, 1]);
  });

  it("looks at a subscriber's own subscriptions only: unsubscribes among 200,000 of 200 sessions cost what they do among 10", () => {
    // Shares without bounds: this is the cost of the bookkeeping, not of the share's limits.
    /** The same work for sess7 (and sess9 leaving) among `sessions` sessions of 1000 URIs each: its time (ms). */
    const run = (sessions: number): { ms: number; s: Subscriptions } => {
      const s = new Subscriptions({ maxUris: Infinity, maxChars: Infinity });
      for (let sess = 0; sess < sessions; sess++) for (let i = 0; i < 1000; i++) s.addToFilter('fs', `file:///d${sess}/${i}`, `sess${sess}`, '', `p${sess}`);
      const t0 = performance.now();
      for (let i = 0; i < 2000; i++) {
        expect(s.heldBy('sess7', `file:///d7/${i % 1000}`)).toHaveLength(1);
        s.remove('fs', `file:///d7/${i % 1000}`, 'sess7');
        s.addToFilter('fs', `file:///d7/${i % 1000}`, 'sess7', '', 'p7');
      }
      expect(s.removeSubscriber('sess9')).toHaveLength(1000);
      return { ms: performance.now() - t0, s };
    };
    // Judged against the same work among 10 sessions, not against a wall-clock bound (a loaded
    // machine failed that): a walk of every session's subscriptions per call made it several
    // times that, seconds; the bookkeeping of one's own makes it about the same.
    const few = run(10).ms;
    const { ms, s } = run(200);
    expect(ms, `${ms.toFixed(0)} ms among 200 sessions, ${few.toFixed(0)} ms among 10`).toBeLessThan(3 * few + 100);
    expect([s.countOf('sess7'), s.countOf('sess9'), s.uris('fs').length]).toEqual([1000, 0, 199_000]);
  });

  it("looks at one connection's URIs only: a re-listen's filter and an update's subscribers stay cheap among 100,000", () => {
    const s = new Subscriptions({ maxUris: Infinity, maxChars: Infinity });
    for (let sess = 0; sess < 100; sess++) for (let i = 0; i < 1000; i++) s.addToFilter('fs', `file:///d${sess}/${i}`, `sess${sess}`, '', `p${sess}`);
    s.addToFilter('small', 'x://a', 'A', '', 'alice');
    s.addToFilter('fs', 'file:///d7', 'B', '', 'bob');
    const t0 = performance.now();
    for (let i = 0; i < 2000; i++) {
      expect(s.uris('small')).toEqual(['x://a']);
      expect(s.uris('fs', 'principal:bob')).toEqual([]);
      expect([...s.subscribers('fs', `file:///d7/${i % 1000}`)].sort()).toEqual(['B', 'sess7']);
    }
    // Each walked every server's keys: a minute here (generous: the machine may be loaded).
    expect(performance.now() - t0).toBeLessThan(5000);
    expect([...s.subscribers('fs', 'file:///d7/x/y')]).toEqual(['B']);
    expect([...s.subscribers('small', 'x://a/b')]).toEqual(['A']);
    expect(s.uris('fs')).toHaveLength(100_001);
    s.removeSubscriber('A');
    expect(s.uris('small')).toEqual([]);
  });
});
