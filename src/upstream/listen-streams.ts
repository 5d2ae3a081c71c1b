/**
 * Which `subscriptions/listen` stream a server's notification belongs to: one in flight (the
 * stream it came on, or the subscriptionId in its `_meta`), or one that ended a moment ago,
 * whose sink still hears what comes tagged with its id; and the handle a listen stream is
 * held by. Sending the stream and handing it its messages stay with the connection
 * (UpstreamBase.listen, onNotification).
 */
import type { IdTable } from '../keyed-table.js';
import { META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import type { Pending } from './pending-call.js';
import { errMessage } from './lifecycle.js';
import type { ListenEnd, ListenHandle, ListenSink } from './types.js';

/**
 * How many ended listen streams are remembered, so that what comes tagged with their ids after
 * they ended still reaches their sinks: a change a server said on a stream as the hub closed it
 * (a newer one replaced it) may be a copy of what the newer one says, which the sink knows.
 */
export const ENDED_LISTENS = 32;

/** The listen stream in flight a message belongs to: the stream it came on, or its subscriptionId. */
export function listenOf(calls: IdTable<Pending>, params: Record<string, unknown>, via: Pending | undefined): Pending | undefined {
  if (via?.listen && calls.get(via.id) === via) return via;
  const meta = params._meta as Record<string, unknown> | undefined;
  const sid = meta?.[META_SUBSCRIPTION_ID];
  return sid !== undefined && isListenId(calls, sid) ? calls.get(Number(sid)) : undefined;
}

/** Whether `id` (a request id or a subscriptionId, as the server wrote it) is a listen stream in flight. */
export function isListenId(calls: IdTable<Pending>, id: unknown): boolean {
  if (typeof id !== 'number' && typeof id !== 'string') return false;
  const p = calls.get(Number(id));
  return p !== undefined && p.listen !== undefined;
}

/** The sinks of the last ENDED_LISTENS listen streams that ended, by their ids. */
export class EndedListens {
  private readonly sinks = new Map<number, ListenSink>();

  /** The stream `id` ended: its sink is kept, the oldest kept let go past ENDED_LISTENS. */
  add(id: number, sink: ListenSink): void {
    this.sinks.set(id, sink);
    if (this.sinks.size > ENDED_LISTENS) this.sinks.delete(this.sinks.keys().next().value!);
  }

  /** The sink of an ended listen stream a message belongs to: the stream it came on (HTTP), or its subscriptionId. */
  sinkOf(params: Record<string, unknown>, via: Pending | undefined): ListenSink | undefined {
    if (via?.listen) return via.listen;
    const sid = (params._meta as Record<string, unknown> | undefined)?.[META_SUBSCRIPTION_ID];
    return typeof sid === 'number' || typeof sid === 'string' ? this.sinks.get(Number(sid)) : undefined;
  }
}

/** The handle of a listen stream that could not be opened: over at once, for `reason`. */
export function refusedListen(reason: string): ListenHandle {
  return { close: () => undefined, ended: Promise.resolve({ reason }) };
}

/**
 * The handle of the listen stream `open` sends now, which `signal` ends. `retiredMs`: how long a
 * stream another replaced is still read (UpstreamBase.retiredListenMs), asked when it is.
 */
export function listenHandle(open: (signal: AbortSignal) => Promise<unknown>, retiredMs: () => number): ListenHandle {
  let settle!: (e: ListenEnd) => void;
  const ended = new Promise<ListenEnd>((resolve) => (settle = resolve));
  const ac = new AbortController();
  open(ac.signal).then(
    () => settle({ reason: 'ended by the server' }),
    (err: unknown) => settle(ac.signal.aborted ? { reason: 'closed' } : { reason: errMessage(err), error: err instanceof Error ? err : new Error(String(err)) }),
  );
  const close = (): void => ac.abort('listen closed');
  const retire = (): void => {
    const ms = retiredMs();
    if (ms <= 0) return close();
    const t = setTimeout(close, ms);
    t.unref();
    void ended.then(() => clearTimeout(t));
  };
  return { close, retire, ended };
}
