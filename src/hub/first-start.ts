/**
 * A call to a server that has not finished its first start. The start-up grace (3 s from the
 * hub's start) covers lists: they must not wait long for every server. A call names one server,
 * though, and a server started by `npx` or on a loaded machine can take longer than the grace:
 * its tools were then "Unknown" (a script piping `initialize` and `tools/call` into `switchyard
 * stdio` got that for a tool it was about to have). The call waits for that server instead,
 * bounded by its timeoutMs, as long as it would wait for the server's answer.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { spaceOf } from '../catalog/names.js';
import type { Signal } from '../cancel.js';

/**
 * The server whose `<prefix>__` space `hubName` lies in, when it is still on its first start
 * (state 'starting': never ready in this process) and `shown` to the caller.
 */
export function firstStarting(hubName: string, handles: Iterable<ServerHandle>, shown: (id: string) => boolean): ServerHandle | undefined {
  const byPrefix = new Map<string, ServerHandle>();
  for (const h of handles) if (h.config.prefix !== '') byPrefix.set(h.config.prefix, h);
  const owner = spaceOf(hubName, new Set(byPrefix.keys()));
  const h = owner === undefined ? undefined : byPrefix.get(owner);
  return h && h.upstream.state === 'starting' && shown(h.id) ? h : undefined;
}

/** Resolves once `h` leaves 'starting', after `ms`, or when `signal` aborts, whichever is first. */
export function leftStarting(h: ServerHandle, ms: number, signal: Signal | undefined): Promise<void> {
  if (h.upstream.state !== 'starting' || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      h.upstream.off('state', onState);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    // A failed attempt that will be tried again is 'starting' once more: keep waiting.
    const onState = (): void => void (h.upstream.state !== 'starting' && done());
    const timer = setTimeout(done, ms);
    h.upstream.on('state', onState);
    signal?.addEventListener('abort', done, { once: true });
  });
}
