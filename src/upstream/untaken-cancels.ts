/**
 * A legacy cancellation of a request whose POST is unanswered still waits for the server to
 * have taken the request: a server dispatches a request before it answers its POST, and a
 * cancellation that came first would find no such request, the call then running on unasked.
 */
import type { ExchangeAbort } from '../transport/http-client.js';
import { monotonicNow } from '../monotonic.js';
import type { Pending } from './pending-call.js';

/** The most a cancellation waits for its request's POST to be answered, or the server's timeoutMs if shorter. */
export const UNTAKEN_CANCEL_WAIT_MS = 2_000;

/**
 * How long a cancellation of a request whose POST is unanswered still waits: what is left of
 * UNTAKEN_CANCEL_WAIT_MS (timeoutMs if shorter) since the request was sent. A call that ran
 * that long has its cancellation sent at once (a JSON-answering server's calls waited the whole
 * 2 s whatever their age). When it was sent is told by the hard cap's timer (hardSince, armed
 * as the request goes, again when a paused call resumes: never before the send), so no call
 * pays a clock read for it. Without one (no maxTotalTimeoutMs), for a request sent again since
 * (a renewed session, OAuthHttp after a 401), or with OAuth (a POST may wait for a token before
 * it goes: `tokenWait`), the whole wait.
 */
export function untakenWaitMs(timeoutMs: number, p: Pick<Pending, 'hardSince' | 'retried'>, ctl: ExchangeAbort, tokenWait: boolean): number {
  const most = Math.min(timeoutMs, UNTAKEN_CANCEL_WAIT_MS);
  if (p.hardSince === undefined || p.retried || ctl.resent || tokenWait) return most;
  return most - (monotonicNow() - p.hardSince);
}

/** The cancellations waiting for their request to be taken. */
export class UntakenCancels {
  private readonly waiting = new Set<() => void>();

  /**
   * `send` goes once the answer to `ctl`'s POST begins, or once `waitMs` have passed (a server
   * answering in JSON answers only at the end), or at the close (sendAll); the POST is cut
   * then, not now: a POST cut before its answer began ends at once, and so would the wait.
   * Settles once what `send` returned did.
   */
  after(ctl: ExchangeAbort, waitMs: number, send: () => Promise<void>): Promise<void> {
    return new Promise<void>((done) => {
      const go = (): void => {
        clearTimeout(t);
        if (!this.waiting.delete(go)) return;
        void send().then(done);
        ctl.abort();
      };
      this.waiting.add(go);
      const t = setTimeout(go, waitMs);
      t.unref();
      ctl.whenHeard(go);
    });
  }

  /** At the close, before the session's DELETE and the dropped connections: each waiting one goes now. */
  sendAll(): void {
    for (const go of [...this.waiting]) go();
  }
}
