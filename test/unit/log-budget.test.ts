/** LogBudget: a few lines of one kind per window, and the count of those left out in the next one written. */
import { describe, expect, it } from 'vitest';
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
});
