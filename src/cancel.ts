/**
 * Cancellation for the per-call path: the part of AbortController / AbortSignal the hub uses,
 * as plain objects.
 *
 * Why not Node's own: on Node 20 every AbortSignal outlives the young-generation GC that should
 * have freed it, and so does everything its listeners reach. With one or two signals per call,
 * each call's whole object graph (request, response, context, closures) went to the old
 * generation: ~1.7 MB copied per scavenge at concurrency 1, 2–3 ms pauses, and a major GC to
 * free it. Measured with this class in their place: tools/call at concurrency 64 from 165–186
 * to 146 µs of CPU per call (docs/BENCHMARKS.md, "Young-generation GC").
 *
 * A real AbortSignal is a `Signal` too, so code that takes one accepts either.
 */
export interface Signal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

class CancelSignal implements Signal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] | null = null;

  // Listeners run once, on abort, in the order added; like EventTarget, a listener added twice
  // runs once, and one added after the abort never runs.
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    const l = (this.listeners ??= []);
    if (!l.includes(listener)) l.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const l = this.listeners;
    if (!l) return;
    const i = l.indexOf(listener);
    if (i >= 0) l.splice(i, 1);
  }

  /** @internal Canceller.abort */
  fire(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const l = this.listeners;
    this.listeners = null;
    if (!l) return;
    let failure: { err: unknown } | undefined;
    for (const f of l) {
      try {
        f();
      } catch (err) {
        failure ??= { err };
      }
    }
    // Every listener ran; the first failure still reaches whoever aborted.
    if (failure) throw failure.err;
  }
}

/** new AbortController(), for the hub's own use: `signal`, and `abort(reason?)`. */
export class Canceller {
  readonly signal = new CancelSignal();

  abort(reason?: unknown): void {
    this.signal.fire(reason === undefined ? abortError() : reason);
  }
}

function abortError(): Error {
  // The reason Node's AbortController gives: callers that read `reason` see the same shape.
  const err = new Error('This operation was aborted');
  err.name = 'AbortError';
  return err;
}

/**
 * A signal that follows `signal`, unless `wanted()` says, when it aborts, that the work is still
 * wanted by another caller: then it never fires, and the work runs to its end.
 */
export function unlessWanted(signal: Signal, wanted: () => boolean): Signal {
  const own = new Canceller();
  const follow = (): void => {
    if (!wanted()) own.abort(signal.reason);
  };
  if (signal.aborted) follow();
  else signal.addEventListener('abort', follow, { once: true });
  return own.signal;
}

/** Why a caller's signal aborted, as a CancelledError's message. */
export function reasonOf(signal: Signal): string {
  const r: unknown = signal.reason;
  if (typeof r === 'string') return r;
  if (r instanceof Error && r.name !== 'AbortError') return r.message;
  return 'request cancelled';
}

/**
 * The `reason` of a client's notifications/cancelled, as the hub passes it on (to the upstream's
 * cancellation and the call's row): a non-empty string, cut to 200 characters (it is the client's
 * free text); undefined for none, which reads "request cancelled".
 */
export function clientReason(params: Record<string, unknown> | undefined): string | undefined {
  const r = params?.reason;
  if (typeof r !== 'string' || r.trim() === '') return undefined;
  if (r.length <= 200) return r;
  // Not between the two halves of a surrogate pair.
  const cut = /[\uD800-\uDBFF]/.test(r[199]) ? 199 : 200;
  return `${r.slice(0, cut)}…`;
}

/**
 * What `start()` gives, unless `signal` aborts first: then what `onAbort` returns (or throws),
 * without waiting for it (a caller that went away is not held until a wait it no longer wants
 * ends). Not started at all once aborted. The listener is removed either way.
 */
export function unlessAborted<T>(start: () => Promise<T>, signal: Signal | undefined, onAbort: () => T): Promise<T> {
  if (!signal) return start();
  if (signal.aborted) return new Promise<T>((resolve) => resolve(onAbort()));
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => {
      try {
        resolve(onAbort());
      } catch (err) {
        reject(err);
      }
    };
    signal.addEventListener('abort', abort, { once: true });
    start().then(
      (v) => (signal.removeEventListener('abort', abort), resolve(v)),
      (err: unknown) => (signal.removeEventListener('abort', abort), reject(err)),
    );
  });
}
