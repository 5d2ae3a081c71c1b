/**
 * changeWithin, the wait under readyWithin, firstAttemptEnded and the start-up grace: however it
 * ends, nothing of it is left on the upstreams, the signals or the timers. EventEmitters stand in
 * for the upstreams' state events; the clock is faked for the deadline.
 */
import { EventEmitter, getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { changeWithin } from '../../src/upstream/change-within.js';

/** Whether `p` has settled, once what is queued has run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

function leftOver(sources: EventEmitter[], signals: AbortSignal[]): number[] {
  return [...sources.map((u) => u.listenerCount('state')), ...signals.map((s) => getEventListeners(s, 'abort').length), vi.getTimerCount()];
}

describe('changeWithin', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => void vi.useRealTimers());

  it('ends true at the first change `ends` accepts, of any of its sources, and leaves nothing behind', async () => {
    const [a, b] = [new EventEmitter(), new EventEmitter()];
    const ac = new AbortController();
    const wait = changeWithin([a, b], 60_000, (from, s) => from === b && s === 'ready', ac.signal);
    expect(leftOver([a, b], [ac.signal])).toEqual([1, 1, 1, 1]);
    a.emit('state', 'ready');
    b.emit('state', 'starting');
    expect(await settled(wait)).toBe(false);
    b.emit('state', 'ready');
    expect(await wait).toBe(true);
    expect(leftOver([a, b], [ac.signal])).toEqual([0, 0, 0, 0]);
  });

  it('ends false at its deadline, and leaves nothing behind', async () => {
    const u = new EventEmitter();
    const ac = new AbortController();
    const wait = changeWithin([u], 1_000, () => false, ac.signal);
    u.emit('state', 'starting');
    vi.advanceTimersByTime(999);
    expect(await settled(wait)).toBe(false);
    vi.advanceTimersByTime(1);
    expect(await wait).toBe(false);
    expect(leftOver([u], [ac.signal])).toEqual([0, 0, 0]);
  });

  it('ends false as any of its signals aborts, and leaves nothing on the others', async () => {
    const u = new EventEmitter();
    const [request, stop] = [new AbortController(), new AbortController()];
    const wait = changeWithin([u], 60_000, () => true, undefined, request.signal, stop.signal);
    stop.abort();
    expect(await wait).toBe(false);
    expect(leftOver([u], [request.signal, stop.signal])).toEqual([0, 0, 0, 0]);
  });

  it('ends false at once for a signal aborted already, listening to nothing and with no timer', async () => {
    const u = new EventEmitter();
    const ac = new AbortController();
    ac.abort();
    const wait = changeWithin([u], 60_000, () => true, ac.signal);
    expect(leftOver([u], [])).toEqual([0, 0]);
    expect(await wait).toBe(false);
  });

  it("waits on one source share one listener of it: one that ends leaves the others', the last takes it away", async () => {
    const u = new EventEmitter();
    const short = changeWithin([u], 10, () => false);
    const long = changeWithin([u], 60_000, (_, s) => s === 'ready');
    expect(u.listenerCount('state')).toBe(1);
    vi.advanceTimersByTime(10);
    expect(await short).toBe(false);
    expect(u.listenerCount('state')).toBe(1);
    u.emit('state', 'ready');
    expect(await long).toBe(true);
    expect(leftOver([u], [])).toEqual([0, 0]);
  });
});
