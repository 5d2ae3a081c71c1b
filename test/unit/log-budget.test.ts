/** LogBudget: a few lines of one kind per window, and the count of those left out in the next one written. */
import { describe, expect, it, vi } from 'vitest';
import { LogBudget } from '../../src/log-budget.js';

describe('LogBudget', () => {
  it('lets `max` lines through per window and says in the next written line how many it left out', () => {
    let now = 1_000;
    const b = new LogBudget(3, 60_000, () => now);
    expect([b.take(), b.take(), b.take()]).toEqual([{ skipped: 0 }, { skipped: 0 }, { skipped: 0 }]);
    for (let i = 0; i < 500; i++) expect(b.take()).toBeUndefined();
    now += 59_999;
    expect(b.take()).toBeUndefined();
    now += 1;
    expect(b.take()).toEqual({ skipped: 501 });
    expect(b.take()).toEqual({ skipped: 0 });
  });

  it('a wall clock stepped back does not silence the kind for the length of the step', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const b = new LogBudget(1, 200);
      expect(b.take()).toEqual({ skipped: 0 });
      expect(b.take()).toBeUndefined();
      step = -3_600_000;
      await new Promise((r) => setTimeout(r, 250)); // the window is over
      // Measured on the wall clock, the window began an hour in the future: nothing written for an hour.
      expect(b.take()).toEqual({ skipped: 1 });
    } finally {
      wall.mockRestore();
    }
  });
});
