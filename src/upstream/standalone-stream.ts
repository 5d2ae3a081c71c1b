/**
 * The standalone GET stream of a legacy Streamable HTTP server (digest §6.2): the server's
 * requests and notifications outside any call, list changes among them. It lives as long as
 * the session it was opened on, is opened again (resumed from its last event id when it has
 * one) when the server ends it or the network cuts it, and renews a session that a 404 says is
 * gone. Moved out of http-upstream.ts as it was; the upstream is its host.
 */
import { LEGACY, type Era } from '../protocol/era.js';
import { TransportError } from '../protocol/errors.js';
import type { Classified } from '../protocol/jsonrpc.js';
import type { Logger } from '../log.js';
import { ExchangeAbort, StreamCutError } from '../transport/http-client.js';
import { errMessage } from './lifecycle.js';
import type { HttpExchanges } from './oauth-client.js';
import { retryAfterSeconds } from './status-text.js';
import { sessionRefused } from './http-answers.js';
import { getStreamWaitMs } from './stream-waits.js';
import type { UpstreamState } from './types.js';

/** What the stream reads of its upstream, and what it tells it. */
export interface StandaloneStreamHost {
  readonly http: HttpExchanges;
  readonly log: Logger;
  /** The current legacy session (undefined: the server made none). */
  readonly session: string | undefined;
  /** The current session's headers (legacyHeaders). */
  readonly headers: Record<string, string>;
  readonly closed: boolean;
  readonly era: Era | undefined;
  readonly state: UpstreamState;
  /** A request or notification of the server's. */
  heard(c: Classified): void;
  /** What the server said may have been missed: lists taken "until list_changed" are not. */
  gap(): void;
  /**
   * A stream is open again (answered 2xx) after one of this session's was cut and not resumed:
   * what the server said in between is lost for good (its subscribed resources' updates too).
   */
  unheard(): void;
  /** A new session in place of `stale`, which a 404 said `gone` (HttpUpstream.renew). */
  renew(stale: string | undefined, gone: boolean): Promise<void>;
  /** The server is down: refuse its calls and probe it (HttpUpstream.foundDown). */
  foundDown(reason: string, minDelayMs: number): void;
}

export class StandaloneStream {
  private ctl: AbortController | undefined;
  private failures = 0;
  /**
   * The session whose GET stream opened (its answer began 2xx) at least once: one still running
   * counts, not only one the server ended (a stream cut by the network, then answered 404, is a
   * session gone, renewed).
   */
  private worked: string | undefined;
  /**
   * A stream of this session that had opened was cut (or ended) and opened again without
   * resumption (no event id, or the resumption refused), or the session is new (resetFailures):
   * the next one that opens says so (host.unheard), once, however many attempts it takes.
   */
  private lost = false;
  /**
   * Opened again without resumption (host.gap said so then): the lists fetched until the new
   * stream is open were taken while it was thought to come (Upstream.hearsNotifications), and a
   * change said before it opens is not heard; so the gap is said again once it is open.
   */
  private listsUnheard = false;

  /**
   * Messages of a stream opened for a session whose handshake is not finished (openEarly), held
   * until it is the host's (adopted): the hub answers on the current session's headers.
   */
  private held: Classified[] | undefined;

  constructor(private readonly host: StandaloneStreamHost) {}

  /**
   * Opens the stream of `session` before its handshake is finished (its notifications/initialized
   * not sent yet), and resolves once the server's answer to the GET began or the GET ended, at most
   * `ms` later. A server asks what it asks outside any call on this stream, and the SDK v1 server
   * drops such a request when no stream is open: one that asks as it is initialized (a
   * `roots/list` in `oninitialized`, as server-filesystem does) lost it, opened after, and waited
   * for an answer for good. What the stream brings is held until the session is the host's (adopted).
   */
  openEarly(session: { id: string | undefined; headers: Record<string, string> }, ms: number): Promise<void> {
    this.held = [];
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.open(undefined, session, () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Opened early for a session not yet the host's (openEarly), and not adopted since. */
  get early(): boolean {
    return this.held !== undefined;
  }

  /** The session the stream was opened early for is the host's now: what it brought is heard, in order. */
  adopted(): void {
    const held = this.held;
    this.held = undefined;
    if (held) for (const c of held) this.host.heard(c);
  }

  /** Open or being opened again: list changes will be heard (Upstream.hearsNotifications). */
  get on(): boolean {
    return this.ctl !== undefined;
  }

  /**
   * A new session's stream starts with no failures behind it. Its subscriptions are made again
   * as it is ready, and said updated as the server answers each (UpstreamSubscriptions.resubscribe),
   * maybe before this stream is open: what the server says until then is not heard, so its
   * opening says so (host.unheard) once more: a read too many rather than an update missed.
   */
  resetFailures(): void {
    this.failures = 0;
    this.lost = true;
    this.listsUnheard = false;
  }

  /** Closes the stream and keeps it closed (until open()). */
  stop(): void {
    this.ctl?.abort();
    this.ctl = undefined;
    this.held = undefined;
  }

  /**
   * The legacy standalone stream for unsolicited notifications; 405 means the server has none.
   * A stream the server ended after an event id is resumed from it (`Last-Event-ID`), after
   * the `retry:` it asked for: what it sent in between is replayed.
   */
  open(lastEventId?: string, early?: { id: string | undefined; headers: Record<string, string> }, begun?: () => void): void {
    this.ctl?.abort();
    const ctl = new AbortController();
    this.ctl = ctl;
    const session = early ? early.id : this.host.session;
    const again = (why: string, from?: string, retryMs?: number, atLeastMs = 0): void => {
      const delay = getStreamWaitMs(this.failures++, retryMs, atLeastMs);
      this.host.log.debug({ why, delay }, 'GET stream ended');
      setTimeout(() => {
        if (this.ctl !== ctl || this.host.closed || this.host.session !== session || this.host.era !== LEGACY) return;
        // Not resumed from an event: whatever the server said while it was down is lost. (A
        // session whose stream never opened lost nothing a subscriber was not told of: its
        // subscriptions were said updated as they were made, resubscribe.)
        if (from === undefined && this.worked === session) this.lost = true;
        this.open(from);
        if (from === undefined) {
          this.listsUnheard = true;
          this.host.gap();
        }
      }, delay).unref();
    };
    const base = early ? early.headers : this.host.headers;
    const headers = lastEventId === undefined ? base : { ...base, 'last-event-id': lastEventId };
    // Open once its answer began 2xx (the head of an event stream): what the server said before is lost, and said so now.
    const began = new ExchangeAbort();
    began.whenHeard(() => {
      begun?.();
      if (this.ctl !== ctl || began.status === undefined || began.status < 200 || began.status >= 300) return;
      this.worked = session;
      if (this.listsUnheard) {
        this.listsUnheard = false;
        this.host.gap();
      }
      if (this.lost) this.tellUnheard();
    });
    this.host.http.get({ headers, signal: ctl.signal, abort: began, onMessage: (c) => this.fromStream(c) }).then(
      (a) => {
        if (this.ctl !== ctl) return;
        if (a.status >= 200 && a.status < 300) {
          this.worked = session;
          // Open, if only for a moment (a server that ends each stream at once): said before it is opened again.
          if (this.lost) this.tellUnheard();
          if (a.messages > 0) this.failures = 0;
          const from = a.lastEventId ?? lastEventId;
          // The server's retry is a wait for a stream it keeps; without an event id there is nothing
          // to resume. A stream that brought nothing backs off (a `retry: 0` would be a busy loop);
          // one that brought messages waits at least GET_RETRY_MIN_MS.
          return again('closed by the server', from, from !== undefined && a.messages > 0 ? a.retryMs : undefined);
        }
        // A server unwell, busy (429, as long as its Retry-After asks, up to the longest backoff)
        // or slow (408), or holding the stream that was cut as still open (409: SDK v1 allows one
        // a session, and lets the old one go only once it finds its connection closed): the
        // stream is wanted still. Given up, no notification would come.
        if (a.status >= 500 || a.status === 429 || a.status === 408 || a.status === 409) return again(`HTTP ${a.status}`, lastEventId, undefined, (retryAfterSeconds(a.headers) ?? 0) * 1000);
        // Only while ready: otherwise the lifecycle is reconnecting (an open circuit keeps its cooldown).
        if ((a.status === 404 || (a.status === 400 && sessionRefused(a.body, undefined))) && session !== undefined && this.worked === session && this.host.state === 'ready') {
          // The session is gone (digest §6.2: initialize again; a 400 saying so, of servers
          // built on SDK v1's older examples, too). Waiting for the next call to
          // find out would lose every notification until then; the new session opens its own
          // stream. Only a session whose stream once opened: a server that answers every GET
          // 404 would have the hub initialize again and again.
          this.ctl = undefined;
          if (this.host.closed || this.host.session !== session) return;
          this.host.renew(session, a.status === 404).catch((err: unknown) =>
            this.host.closed
              ? this.host.log.debug('session renewal ended by the close')
              : this.host.log.warn({ err: errMessage(err) }, 'session gone (GET stream answered 404) and could not be renewed; the next call tries again'),
          );
          return;
        }
        // A resumption refused (the event is forgotten): a fresh stream, without the id.
        if (lastEventId !== undefined && a.status !== 404 && a.status !== 405) return again(`resumption refused (HTTP ${a.status})`);
        this.host.log.debug({ status: a.status }, 'no GET stream');
        this.ctl = undefined;
        // Lists taken "until list_changed" while the stream was thought to come are not.
        this.host.gap();
      },
      (err: unknown) => {
        if (this.ctl !== ctl || ctl.signal.aborted) return;
        // A server that refuses the connection (or whose name no longer resolves) is down: said at
        // once (`restarting`, probed with the handshake's backoff) rather than at the next call's
        // failure, with /healthz and `servers` showing it ready meanwhile. Calls in flight are
        // not cut (their own streams may still answer). Any other failure (a cut, a reset, a
        // timeout) keeps reconnecting the stream: the server may be there.
        if (err instanceof TransportError && err.notDelivered && this.host.state === 'ready' && this.host.session === session) {
          this.ctl = undefined;
          this.host.foundDown(`the server cannot be reached (its notification stream could not reconnect): ${errMessage(err)}`, 0);
          return;
        }
        again(errMessage(err), err instanceof StreamCutError ? err.lastEventId : lastEventId);
      },
    );
  }

  /** The server's notifications since the last stream was cut are lost: said once. */
  private tellUnheard(): void {
    this.lost = false;
    this.host.log.debug('GET stream open again, not resumed: what the server said meanwhile was not heard');
    this.host.unheard();
  }

  /**
   * A message on the standalone GET stream: the server's requests and notifications. A
   * response never belongs there (digest §6.2, GET: "No responses, except when resuming"; the
   * spec: the server MUST NOT send one "unless resuming a stream associated with a previous
   * client request"). The hub resumes a request's stream with a GET of its own (resume(), read
   * as that call's answer stream), and this stream, reopened with its own Last-Event-ID, is
   * replayed with what it carried, which holds no response either. So a response here answers
   * nothing: it is dropped (warn), never handed to whichever call in flight has its id, which
   * may be another caller's. (stdio, one stream for everything, still goes by the id.)
   */
  private fromStream(c: Classified): void {
    if (c.kind === 'response' || (c.kind === 'invalid' && c.response)) {
      this.host.log.warn({ id: c.kind === 'response' ? c.msg.id : c.id }, "dropped a response on the standalone GET stream (a response comes on its request's stream)");
      return;
    }
    if (this.held) this.held.push(c);
    else this.host.heard(c);
  }
}
