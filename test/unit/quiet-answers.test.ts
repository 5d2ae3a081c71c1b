import { afterEach, describe, expect, it, vi } from 'vitest';
import { QuietAnswers } from '../../src/downstream/quiet-answers.js';

afterEach(() => void vi.useRealTimers());

const answer = () => ({ streamed: 0, beginStream() { this.streamed++; } });

describe('QuietAnswers', () => {
  it('streams an answer still watched after one to two ticks, once; an answered one never', () => {
    vi.useFakeTimers();
    const q = new QuietAnswers(100);
    const quiet = answer();
    const answered = answer();
    q.watch(quiet);
    q.watch(answered);
    vi.advanceTimersByTime(100);
    expect(quiet.streamed).toBe(0);
    q.unwatch(answered);
    vi.advanceTimersByTime(100);
    expect(quiet.streamed).toBe(1);
    expect(answered.streamed).toBe(0);
    vi.advanceTimersByTime(1000);
    expect(quiet.streamed).toBe(1);
    expect(q.size).toBe(0);
  });

  it('holds no timer while nothing is watched, and starts one for the next call', () => {
    vi.useFakeTimers();
    const q = new QuietAnswers(100);
    const a = answer();
    q.watch(a);
    q.unwatch(a);
    vi.advanceTimersByTime(300);
    expect(vi.getTimerCount()).toBe(0);
    const b = answer();
    q.watch(b);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(150);
    expect(b.streamed).toBe(0);
    vi.advanceTimersByTime(50);
    expect(b.streamed).toBe(1);
  });
});
