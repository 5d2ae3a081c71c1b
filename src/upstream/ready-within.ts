import type { Signal } from '../cancel.js';
import type { Upstream } from './types.js';
import { changeWithin } from './change-within.js';

/**
 * Resolves true once `u` is ready (at once when it is), false when it will not be within `ms`:
 * the time is up, `signal` aborted, or it failed or was stopped (given up on, or replaced by a
 * reload or a restart on request). Any Upstream, through its 'state' events.
 */
export function readyWithin(u: Upstream, ms: number, signal?: Signal): Promise<boolean> {
  if (u.state === 'ready') return Promise.resolve(true);
  if (u.state === 'failed' || u.state === 'stopped' || ms <= 0) return Promise.resolve(false);
  // Which change ended the wait: changeWithin says only that one did.
  let ready = false;
  return changeWithin([u], ms, (_, s) => (ready = s === 'ready') || s === 'failed' || s === 'stopped', signal).then(() => ready);
}
