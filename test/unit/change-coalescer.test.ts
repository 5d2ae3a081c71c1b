import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ChangeCoalescer } from '../../src/hub/change-coalescer.js';

describe('ChangeCoalescer', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('says the first change at once and a burst after it once, at the end of the window', () => {
    const said: string[] = [];
    const c = new ChangeCoalescer((k: string) => void said.push(k), 250);
    c.change('tools', 'tools');
    expect(said).toEqual(['tools']);
    for (let i = 0; i < 2000; i++) c.change('tools', 'tools');
    expect(said).toEqual(['tools']);
    vi.advanceTimersByTime(250);
    expect(said).toEqual(['tools', 'tools']);
    // Nothing more came: the window closes without another word.
    vi.advanceTimersByTime(1000);
    expect(said).toEqual(['tools', 'tools']);
    // A later change is said at once again.
    c.change('tools', 'tools');
    expect(said).toHaveLength(3);
    c.close();
  });

  it('keeps keys apart, and says the latest arguments of a burst', () => {
    const said: unknown[][] = [];
    const c = new ChangeCoalescer((...a: unknown[]) => void said.push(a), 100);
    c.change('a', 'tools', 'p1');
    c.change('b', 'prompts');
    c.change('a', 'tools', 'p2');
    expect(said).toEqual([['tools', 'p1'], ['prompts']]);
    vi.advanceTimersByTime(100);
    expect(said).toEqual([['tools', 'p1'], ['prompts'], ['tools', 'p2']]);
    c.close();
  });

  it('combines the changes of a window with merge: one word for every server that changed in it', () => {
    const said: string[][] = [];
    const c = new ChangeCoalescer((servers: string[]) => void said.push(servers), 100, (a, b) => [[...a[0], ...b[0]]] as [string[]]);
    c.change('tools', ['s1']);
    c.change('tools', ['s2']);
    c.change('tools', ['s3']);
    expect(said).toEqual([['s1']]);
    vi.advanceTimersByTime(100);
    expect(said).toEqual([['s1'], ['s2', 's3']]);
    c.close();
  });

  it('says nothing more once closed', () => {
    const said: string[] = [];
    const c = new ChangeCoalescer((k: string) => void said.push(k), 100);
    c.change('k', 'k');
    c.change('k', 'k');
    c.close();
    vi.advanceTimersByTime(500);
    expect(said).toEqual(['k']);
  });
});
