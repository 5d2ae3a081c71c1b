/**
 * The rate limit of refetches a list_changed sets off (src/catalog/refetch-gate.ts): the first at
 * once, then one running and one waiting, started at least the interval apart. Fake timers.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RefetchGate } from '../../src/catalog/refetch-gate.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A job that records its start and ends when the test says. */
function jobs(): { starts: number[]; job: (tag: number) => () => Promise<void>; finish: () => void } {
  const starts: number[] = [];
  const ends: (() => void)[] = [];
  return {
    starts,
    job: (tag) => () => {
      starts.push(tag);
      return new Promise<void>((r) => ends.push(r));
    },
    finish: () => ends.shift()?.(),
  };
}

describe('RefetchGate', () => {
  it('runs the first at once, and a storm as one more, the interval after', async () => {
    const g = new RefetchGate(1000, () => Date.now());
    const j = jobs();
    g.run('a', j.job(1));
    expect(j.starts).toEqual([1]);
    j.finish();
    for (let i = 2; i <= 500; i++) {
      g.run('a', j.job(i));
      await vi.advanceTimersByTimeAsync(1);
    }
    // 500 ms in: nothing more yet. At 1000 ms the last one asked for runs, once.
    expect(j.starts).toEqual([1]);
    await vi.advanceTimersByTimeAsync(600);
    expect(j.starts).toEqual([1, 500]);
    j.finish();
    await vi.advanceTimersByTimeAsync(5000);
    expect(j.starts).toEqual([1, 500]);
  });

  it('starts no job while one runs, however long it takes; keys are independent', async () => {
    const g = new RefetchGate(100, () => Date.now());
    const j = jobs();
    g.run('a', j.job(1));
    g.run('b', j.job(10));
    g.run('a', j.job(2));
    await vi.advanceTimersByTimeAsync(1000);
    expect(j.starts).toEqual([1, 10]);
    j.finish(); // 1
    await vi.advanceTimersByTimeAsync(0);
    expect(j.starts).toEqual([1, 10, 2]);
  });

  it('a change long after the last runs at once', async () => {
    const g = new RefetchGate(100, () => Date.now());
    const j = jobs();
    g.run('a', j.job(1));
    j.finish();
    await vi.advanceTimersByTimeAsync(500);
    g.run('a', j.job(2));
    expect(j.starts).toEqual([1, 2]);
  });
});
