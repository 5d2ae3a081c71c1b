/**
 * A call to a server that has not finished its first start. The start-up grace (3 s from the
 * hub's start by default, SWITCHYARD_STARTUP_GRACE_MS) covers lists: they must not wait long for every server. A call names one server,
 * though, and a server started by `npx` or on a loaded machine can take longer than the grace:
 * its tools were then "Unknown" (a script piping `initialize` and `tools/call` into `switchyard
 * stdio` got that for a tool it was about to have). The call waits for that server instead,
 * bounded by its timeoutMs, as long as it would wait for the server's answer. So does a call by a
 * name an earlier hub process gave that server (kept in the ledger), a `prompts/get`, and a
 * `completion/complete` of a prompt's argument (it was "Unknown completion reference"). Once an
 * attempt has failed (a command that exits, a URL that refuses) the wait ends: the caller hears
 * why at once rather than after the retries.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { spaceOf } from '../catalog/names.js';
import type { Signal } from '../cancel.js';
import { changeWithin } from '../upstream/change-within.js';

/** Still on its first attempt to start: never ready in this process, no attempt failed yet. */
export function onFirstAttempt(h: ServerHandle): boolean {
  return h.upstream.state === 'starting' && h.upstream.lastError === undefined;
}

/**
 * A failMode "closed" server not ready and past its first attempt to start (one failed: it is
 * starting again or restarting, or given up on): every call that acts is refused, in the
 * start-up grace too, as /healthz then says ("refusing"). The grace waits only for a first attempt.
 */
export function closedPastFirstAttempt(handles: Iterable<ServerHandle>): boolean {
  for (const h of handles) if (h.config.failMode === 'closed' && h.upstream.state !== 'ready' && !onFirstAttempt(h)) return true;
  return false;
}

/**
 * The servers a name no route knows may belong to, when on their first attempt to start and
 * `shown` to the caller: the one whose `<prefix>__` space the name lies in; for a name in no
 * prefix space, every server without a prefix (`"prefix": ""`), since such a server may own
 * any name outside the other prefixes' spaces (its tools were "Unknown" while it started).
 */
export function firstStarting(hubName: string, handles: Iterable<ServerHandle>, shown: (id: string) => boolean): ServerHandle[] {
  const byPrefix = new Map<string, ServerHandle>();
  const bare: ServerHandle[] = [];
  for (const h of handles) {
    if (h.config.prefix !== '') byPrefix.set(h.config.prefix, h);
    else bare.push(h);
  }
  const owner = spaceOf(hubName, new Set(byPrefix.keys()));
  const candidates = owner === undefined ? bare : [byPrefix.get(owner)!];
  return candidates.filter((h) => onFirstAttempt(h) && shown(h.id));
}

/** The prompt a request names: a `prompts/get`'s, or the one whose argument a `completion/complete` completes. */
export function promptNamed(method: string, params: Record<string, unknown>): string | undefined {
  if (method === 'prompts/get') return typeof params.name === 'string' ? params.name : undefined;
  if (method !== 'completion/complete') return undefined;
  const ref = params.ref as { type?: unknown; name?: unknown } | null | undefined;
  return ref?.type === 'ref/prompt' && typeof ref.name === 'string' ? ref.name : undefined;
}

/**
 * Resolves true once `h`'s first attempt ends (ready or failed), false after `ms` or when `signal`
 * (the request's) or `stop` (the hub's stop beginning) aborts, whichever is first. Nothing runs
 * upstream for the request meanwhile: a stop's drain, which waits for what does, need not wait
 * for it (its listen.drainTimeoutMs held Ctrl-C's exit that long). Heard through the upstream's
 * shared state listener (changeWithin): many calls waiting put no listener each on the server.
 */
export function firstAttemptEnded(h: ServerHandle, ms: number, signal: Signal | undefined, stop?: Signal): Promise<boolean> {
  if (!onFirstAttempt(h)) return Promise.resolve(true);
  // A failed attempt that will be tried again is 'starting' once more, with its reason.
  return changeWithin([h.upstream], ms, () => !onFirstAttempt(h), signal, stop);
}
