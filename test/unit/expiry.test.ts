import { afterEach, describe, expect, it, vi } from 'vitest';
import { endAtExpiry } from '../../src/downstream/expiry.js';

afterEach(() => void vi.useRealTimers());

describe('endAtExpiry', () => {
  it('ends at the expiry, even one beyond the longest timer (24.8 days), and not before', () => {
    vi.useFakeTimers({ now: 0 });
    const end = vi.fn();
    const day = 24 * 3600 * 1000;
    endAtExpiry(40 * day, end);
    // Timer by timer: a delay over the limit would fire after 1 ms (and again, and again).
    vi.advanceTimersToNextTimer();
    expect(Date.now()).toBe(2 ** 31 - 1);
    expect(end).not.toHaveBeenCalled();
    vi.advanceTimersToNextTimer();
    expect(Date.now()).toBe(40 * day);
    expect(end).toHaveBeenCalledTimes(1);
  });

  it('ends from a timer when the credential is past its expiry already, never at once', () => {
    vi.useFakeTimers({ now: 10_000 });
    const end = vi.fn();
    endAtExpiry(9_000, end);
    expect(end).not.toHaveBeenCalled();
    vi.advanceTimersByTime(0);
    expect(end).toHaveBeenCalledTimes(1);
  });

  it('does nothing without an expiry, or once cancelled', () => {
    vi.useFakeTimers({ now: 0 });
    const end = vi.fn();
    endAtExpiry(undefined, end);
    endAtExpiry(1_000, end)();
    vi.advanceTimersByTime(10_000);
    expect(end).not.toHaveBeenCalled();
  });
});
