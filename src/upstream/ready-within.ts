import type { Signal } from '../cancel.js';
import type { Upstream } from './types.js';

/** What a state listener is put on: an upstream (or a test's stand-in for one). */
type StateSource = Pick<Upstream, 'on' | 'off'>;

/**
 * The waits on each upstream, heard through one 'state' listener of its own while any waits: a
 * listener each put a dozen retries waiting for a server back after a crash, a dozen calls
 * waiting for a server's first start, or one start-up grace wait per endpoint group, past
 * Node's ten (MaxListenersExceededWarning). Any Upstream, a principal's own connection too.
 */
const waits = new WeakMap<StateSource, { heard: (s: string) => void; each: Set<(s: string) => void> }>();

/** Hears `u`'s state changes through its one shared listener (unlistenState ends it). */
export function listenState(u: StateSource, onState: (s: string) => void): void {
  let w = waits.get(u);
  if (!w) {
    const each = new Set<(s: string) => void>();
    // A copy: each wait that ends leaves the set as it is heard.
    const heard = (s: string): void => {
      for (const f of [...each]) f(s);
    };
    w = { heard, each };
    waits.set(u, w);
    u.on('state', heard);
  }
  w.each.add(onState);
}

export function unlistenState(u: StateSource, onState: (s: string) => void): void {
  const w = waits.get(u);
  if (!w || !w.each.delete(onState) || w.each.size > 0) return;
  u.off('state', w.heard);
  waits.delete(u);
}

/**
 * Resolves true once `u` is ready (at once when it is), false when it will not be within `ms`:
 * the time is up, `signal` aborted, or it failed or was stopped (given up on, or replaced by a
 * reload or a restart on request). Any Upstream, through its 'state' events.
 */
export function readyWithin(u: Upstream, ms: number, signal?: Signal): Promise<boolean> {
  if (u.state === 'ready') return Promise.resolve(true);
  if (u.state === 'failed' || u.state === 'stopped' || ms <= 0 || signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      unlistenState(u, onState);
      signal?.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onState = (s: string): void => {
      if (s === 'ready') done(true);
      else if (s === 'failed' || s === 'stopped') done(false);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(false), ms);
    listenState(u, onState);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
