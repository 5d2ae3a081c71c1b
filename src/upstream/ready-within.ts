import type { Signal } from '../cancel.js';
import type { Upstream } from './types.js';

/**
 * The waits on each upstream, heard through one 'state' listener of its own while any waits: a
 * listener each put a dozen retries waiting for a server back after a crash (or subscribes for
 * one restarting) past Node's ten (MaxListenersExceededWarning). Any Upstream, a principal's own
 * connection too, which the hub's emitter of its configured servers' states (Hub.upstreamStates)
 * does not hear.
 */
const waits = new WeakMap<Upstream, { heard: (s: string) => void; each: Set<(s: string) => void> }>();

function listen(u: Upstream, onState: (s: string) => void): void {
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

function unlisten(u: Upstream, onState: (s: string) => void): void {
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
      unlisten(u, onState);
      signal?.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onState = (s: string): void => {
      if (s === 'ready') done(true);
      else if (s === 'failed' || s === 'stopped') done(false);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(false), ms);
    listen(u, onState);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
