import type { Upstream } from './types.js';
import { monotonicNow } from '../monotonic.js';

/**
 * Resolves once `upstream` has no call in flight or waiting, or `ms` has passed: a connection
 * taken out of use (a reload, `servers restart`) is closed after it, so its calls may finish.
 * On the monotonic clock: a wall clock stepped back an hour kept a connection taken out of use
 * (and its process) that hour longer, and one stepped ahead cut its calls at once.
 */
export async function drained(upstream: Pick<Upstream, 'load'>, ms: number): Promise<void> {
  const deadline = monotonicNow() + ms;
  while (monotonicNow() < deadline && (upstream.load.active > 0 || upstream.load.queued > 0)) await new Promise((r) => setTimeout(r, 50));
}
