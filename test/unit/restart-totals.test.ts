/**
 * Restarts of a server id since the hub started, over its connections: a connection done
 * counting leaves its count, not itself. A server a reload removed stayed in memory whole (its
 * stopped upstream) as the last connection counted, one per id removed, for as long as the hub ran.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { PrincipalRestartTotals, RestartTotals } from '../../src/hub/restart-totals.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

it('counts restarts over every connection of an id, across a removal and a return, without holding a removed one', async () => {
  const totals = new RestartTotals();
  const first = { restarts: 2 };
  totals.connected('a', first);
  expect(totals.of('a', first)).toBe(2);
  const second = { restarts: 1 };
  totals.connected('a', second); // a restart on request
  expect(totals.of('a', second)).toBe(3);

  let removed: { restarts: number; big: unknown[] } | undefined = { restarts: 4, big: new Array(1000).fill('x') };
  totals.connected('b', removed);
  const gone = new WeakRef(removed);
  removed = undefined;
  totals.retain(new Set(['a'])); // a reload removed b
  await new Promise((r) => setImmediate(r));
  gc();
  expect(gone.deref()).toBeUndefined();
  expect(totals.of('a', second)).toBe(3);

  const back = { restarts: 0 };
  totals.connected('b', back); // b returns: its earlier restarts still count
  expect(totals.of('b', back)).toBe(4);
});

it("sums principals' own connections' restarts by server id, keeping a closed one's count but not the connection", () => {
  const totals = new PrincipalRestartTotals();
  const alice = { restarts: 1 };
  const bob = { restarts: 0 };
  totals.opened('s', alice);
  totals.opened('s', bob);
  expect(totals.of('s')).toBe(1);
  bob.restarts = 2;
  expect(totals.of('s')).toBe(3);
  totals.closed('s', alice); // idle, evicted, or its server restarted
  totals.closed('s', alice); // counted once
  alice.restarts = 9; // no longer read
  expect(totals.of('s')).toBe(3);
  totals.opened('s', { restarts: 0 }); // alice again: a fresh connection
  expect(totals.of('s')).toBe(3);
  expect(totals.of('other')).toBe(0);
});

it('keeps the restarts after a hang apart, over connections and principals alike', () => {
  const totals = new RestartTotals();
  const first = { restarts: 3, hungRestarts: 2 };
  totals.connected('a', first);
  const second = { restarts: 1, hungRestarts: 1 };
  totals.connected('a', second);
  expect([totals.of('a', second), totals.hungOf('a', second)]).toEqual([4, 3]);
  totals.retain(new Set());
  const back = { restarts: 0, hungRestarts: 0 };
  totals.connected('a', back);
  expect([totals.of('a', back), totals.hungOf('a', back)]).toEqual([4, 3]);
  const principals = new PrincipalRestartTotals();
  const alice = { restarts: 2, hungRestarts: 1 };
  principals.opened('s', alice);
  principals.opened('s', { restarts: 1 });
  expect([principals.of('s'), principals.hungOf('s')]).toEqual([3, 1]);
  principals.closed('s', alice);
  expect([principals.of('s'), principals.hungOf('s')]).toEqual([3, 1]);
});
