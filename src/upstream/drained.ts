import type { Upstream } from './types.js';

/**
 * Resolves once `upstream` has no call in flight or waiting, or `ms` has passed: a connection
 * taken out of use (a reload, `servers restart`) is closed after it, so its calls may finish.
 */
export async function drained(upstream: Pick<Upstream, 'load'>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && (upstream.load.active > 0 || upstream.load.queued > 0)) await new Promise((r) => setTimeout(r, 50));
}
