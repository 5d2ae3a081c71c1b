/**
 * Restarts of a server id since the hub started, over its connections: a connection done
 * counting leaves its count, not itself. A server a reload removed stayed in memory whole (its
 * stopped upstream) as the last connection counted, one per id removed, for as long as the hub ran.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { RestartTotals } from '../../src/hub/restart-totals.js';

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
