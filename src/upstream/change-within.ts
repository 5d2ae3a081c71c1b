import type { EventEmitter } from 'node:events';
import type { Signal } from '../cancel.js';

/** What a state listener is put on: an upstream (or a test's stand-in for one). */
export type StateSource = Pick<EventEmitter, 'on' | 'off'>;

/**
 * The waits on each upstream, heard through one 'state' listener of its own while any waits: a
 * listener each put a dozen retries waiting for a server back after a crash, a dozen calls
 * waiting for a server's first start, or one start-up grace wait per endpoint group, past
 * Node's ten (MaxListenersExceededWarning). Any Upstream, a principal's own connection too.
 */
const waits = new WeakMap<StateSource, { heard: (s: string) => void; each: Set<(s: string) => void> }>();

function listenState(u: StateSource, onState: (s: string) => void): void {
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

function unlistenState(u: StateSource, onState: (s: string) => void): void {
  const w = waits.get(u);
  if (!w || !w.each.delete(onState) || w.each.size > 0) return;
  u.off('state', w.heard);
  waits.delete(u);
}

/**
 * Resolves true once `ends` accepts a state change of one of `sources`, false after `ms` or once
 * a signal aborts (at once when one has: its 'abort' would never come). Its listeners and timer
 * are gone by then, whichever way it ended. The states before the call are the caller's to
 * judge: readyWithin answers at once from them, the start-up grace counts changes from now on.
 */
export function changeWithin(
  sources: readonly StateSource[],
  ms: number,
  ends: (from: StateSource, state: string) => boolean,
  ...signals: (Signal | undefined)[]
): Promise<boolean> {
  if (signals.some((s) => s?.aborted)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      for (const { from, onState } of heard) unlistenState(from, onState);
      for (const s of signals) s?.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onAbort = (): void => done(false);
    const timer = setTimeout(() => done(false), ms);
    const heard = sources.map((from) => {
      const onState = (s: string): void => void (ends(from, s) && done(true));
      listenState(from, onState);
      return { from, onState };
    });
    for (const s of signals) s?.addEventListener('abort', onAbort, { once: true });
  });
}
