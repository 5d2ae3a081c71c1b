/**
 * POSTs that expect no answer of substance (a notification, a cancellation, the hub's answer to
 * a server's request), bounded in time: aborting one closes its socket (a connection whose
 * request is unanswered cannot serve another), so an upstream that leaves these unanswered
 * cannot pile up sockets until the hub runs out of descriptors.
 */
import { TransportError } from '../protocol/errors.js';
import { ExchangeAbort, type HttpAnswer } from '../transport/http-client.js';
import { ANSWERED_STREAM_LINGER_MS } from './stream-waits.js';
import { timeoutSignal } from '../transport/timeout-signal.js';
import type { HttpExchanges } from './oauth-client.js';

/** The most such a POST may stay unanswered, or the server's timeoutMs if shorter. */
export const NOTICE_TIMEOUT_MS = 5_000;

/** An exchange whose answer, once its status came, is given ANSWERED_STREAM_LINGER_MS to end before it is closed. */
export function tookOnStatus(): ExchangeAbort {
  const ctl = new ExchangeAbort();
  ctl.whenHeard(() => ctl.answered(ANSWERED_STREAM_LINGER_MS));
  return ctl;
}

export function postNotice(http: HttpExchanges, frame: string, headers: Record<string, string>, timeoutMs: number): Promise<HttpAnswer> {
  const ms = Math.min(timeoutMs, NOTICE_TIMEOUT_MS);
  const t = timeoutSignal(ms);
  // Its answer's status is all it waits for: an event stream a server opens on it (it should
  // answer 202, digest §6.2) and keeps open is closed soon after, not waited out to the timeout.
  const ctl = tookOnStatus();
  // A notification, a cancellation, an answer: harmless twice.
  return http.post(frame, { headers, signal: t.signal, abort: ctl, replay: true }).then(
    (a) => (t.clear(), a),
    (err: unknown) => {
      t.clear();
      throw t.timedOut() ? new TransportError(`no answer within ${ms} ms`) : err;
    },
  );
}
