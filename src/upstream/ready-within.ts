import type { Signal } from '../cancel.js';
import type { Upstream } from './types.js';

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
      u.off('state', onState);
      signal?.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onState = (s: string): void => {
      if (s === 'ready') done(true);
      else if (s === 'failed' || s === 'stopped') done(false);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(false), ms);
    u.on('state', onState);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
