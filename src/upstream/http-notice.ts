/**
 * POSTs that expect no answer of substance (a notification, a cancellation, the hub's answer to
 * a server's request), bounded in time: aborting one closes its socket (a connection whose
 * request is unanswered cannot serve another), so an upstream that leaves these unanswered
 * cannot pile up sockets until the hub runs out of descriptors.
 */
import { TransportError } from '../protocol/errors.js';
import type { HttpAnswer } from '../transport/http-client.js';
import { timeoutSignal } from '../transport/timeout-signal.js';
import type { HttpExchanges } from './oauth-client.js';

/** The most such a POST may stay unanswered, or the server's timeoutMs if shorter. */
export const NOTICE_TIMEOUT_MS = 5_000;

export function postNotice(http: HttpExchanges, frame: string, headers: Record<string, string>, timeoutMs: number): Promise<HttpAnswer> {
  const ms = Math.min(timeoutMs, NOTICE_TIMEOUT_MS);
  const t = timeoutSignal(ms);
  // A notification, a cancellation, an answer: harmless twice.
  return http.post(frame, { headers, signal: t.signal, replay: true }).then(
    (a) => (t.clear(), a),
    (err: unknown) => {
      t.clear();
      throw t.timedOut() ? new TransportError(`no answer within ${ms} ms`) : err;
    },
  );
}
