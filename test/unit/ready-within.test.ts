/**
 * readyWithin's waits on one upstream share one 'state' listener of it: a dozen retries waiting
 * for a server back after a crash set off Node's MaxListenersExceededWarning (group-grace has
 * the real processes). An EventEmitter stands in for the upstream's state events.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { readyWithin } from '../../src/upstream/ready-within.js';
import type { Upstream } from '../../src/upstream/types.js';

function upstream(state: string): Upstream & { go(s: string): void } {
  const u = new EventEmitter() as EventEmitter & { state: string; go(s: string): void };
  u.state = state;
  u.go = (s) => {
    u.state = s;
    u.emit('state', s);
  };
  return u as unknown as Upstream & { go(s: string): void };
}

describe('readyWithin', () => {
  it('a dozen waits on one upstream listen to it once, each ends on its own, and the listener goes with the last', async () => {
    const u = upstream('restarting');
    const ac = new AbortController();
    const cut = readyWithin(u, 60_000, ac.signal);
    const waits = Array.from({ length: 12 }, () => readyWithin(u, 60_000));
    expect(u.listenerCount('state')).toBe(1);
    ac.abort();
    expect(await cut).toBe(false);
    expect(u.listenerCount('state')).toBe(1);
    u.go('starting');
    u.go('ready');
    expect(await Promise.all(waits)).toEqual(waits.map(() => true));
    expect(u.listenerCount('state')).toBe(0);
  });

  it('failed or stopped ends every wait false; a wait after that listens anew', async () => {
    const u = upstream('restarting');
    const waits = [readyWithin(u, 60_000), readyWithin(u, 60_000)];
    u.go('failed');
    expect(await Promise.all(waits)).toEqual([false, false]);
    expect(u.listenerCount('state')).toBe(0);
    u.go('restarting');
    const again = readyWithin(u, 60_000);
    expect(u.listenerCount('state')).toBe(1);
    u.go('stopped');
    expect(await again).toBe(false);
    expect(u.listenerCount('state')).toBe(0);
  });

  it('a wait whose time is up leaves the others listening', async () => {
    const u = upstream('restarting');
    const short = readyWithin(u, 10);
    const long = readyWithin(u, 60_000);
    expect(await short).toBe(false);
    expect(u.listenerCount('state')).toBe(1);
    u.go('ready');
    expect(await long).toBe(true);
    expect(await readyWithin(u, 0)).toBe(true);
  });
});
