/**
 * An upstream MCP server behind Streamable HTTP. The era is probed with a modern
 * `server/discover` POST (digest §2.3); auth trouble, 5xx, network errors and timeouts say
 * nothing about the era and only delay the start. Legacy servers get `initialize`, a session,
 * `MCP-Protocol-Version` on every later request, the GET stream and a DELETE at the end.
 * Modern servers get the full envelope and the mirrored routing headers on every POST.
 *
 * This class keeps what needs the connection's state at every step: the calls' POSTs and
 * their answer streams, the legacy session's life, the circuit and the health check. What
 * stands alone is beside it: http-probe.ts (the era probe), request-headers.ts,
 * http-credentials.ts, standalone-stream.ts (the legacy GET stream), stream-waits.ts,
 * untaken-cancels.ts and http-notice.ts (legacy cancellations and notices); the work a close waits for is ../pending-work.ts.
 */
import { LEGACY, LEGACY_VERSIONS, MODERN, type Era } from '../protocol/era.js';
import { CancelledError, INTERNAL_ERROR, RpcError, TimeoutError, TransportError, UNSUPPORTED_PROTOCOL_VERSION, UpstreamUnavailableError } from '../protocol/errors.js';
import { errorResponse, isObj, resultResponse, type Classified, type ErrorResponse, type Request } from '../protocol/jsonrpc.js';
import type { Logger } from '../log.js';
import { ExchangeAbort, StreamCutError, type HttpAnswer } from '../transport/http-client.js';
import { LEGACY_CLIENT_CAPABILITIES } from './envelope.js';
import { legacySessionHeaders, legacySessionVersion, modernRequestHeaders } from './request-headers.js';
import { refusedAsLegacy, refusedAsModern, speaksNot, type ProbeVerdict } from './era-probe.js';
import { probeHttpEra } from './http-probe.js';
import { evidenceOf, FailureStreak, type CircuitState } from './breaker.js';
import { ParamHeaderIndex } from './param-headers.js';
import { errMessage, hubsOwn, type Pending, type UpstreamOptions } from './rpc-base.js';
import { askedWaitMs } from './lifecycle.js';
import { replayable } from './retry.js';
import { monotonicNow } from '../monotonic.js';
import { tcpReachable } from '../transport/tcp-reachable.js';
import { timeoutSignal } from '../transport/timeout-signal.js';
import { PendingWork } from '../pending-work.js';
import { ANSWERED_STREAM_LINGER_MS, resumeWaitMs, RESUME_FAILURES } from './stream-waits.js';
import { StandaloneStream, type StandaloneStreamHost } from './standalone-stream.js';
import { postNotice, tookOnStatus } from './http-notice.js';
import { UntakenCancels, untakenWaitMs } from './untaken-cancels.js';
import { HandshakingUpstream, serverFacts } from './handshake.js';
import { upstreamError } from './upstream-error.js';
import { answerProblem, answers, bodyError, sessionIdOf, sessionNotFound, sessionRefused } from './http-answers.js';
import { retryAfterSeconds, statusError, statusText } from './status-text.js';
import type { HttpExchanges } from './oauth-client.js';
import { httpExchanges, refusalText } from './http-credentials.js';
import type { CallOptions, UpstreamSpec } from './types.js';
import { counted } from '../counted.js';

/**
 * The most a session's DELETE takes, and the most a close waits for a legacy handshake or a
 * cancellation under way: a server that holds them open must not hold the hub's stop.
 */
const DELETE_TIMEOUT_MS = 2_000;
/**
 * The longest a legacy handshake waits for its GET stream to open before it says it is
 * initialized (adopt): a server answers a GET at once (a stream, or 405); one that does not is
 * not waited for longer, and a question it sends as it is initialized may then be lost again.
 */
const EARLY_GET_WAIT_MS = 2_000;
/**
 * How long a modern listen stream another replaced is still read (ListenHandle.retire). A change
 * the server said before it took the new stream went on the old one only, and nothing orders two
 * connections: its bytes may come after the new stream's acknowledgement (a busy hub reading its
 * sockets in another order, a proxy that buffers one of them). Closed at the acknowledgement,
 * as it was, that change was lost.
 */
const RETIRED_LISTEN_MS = 1_000;
/**
 * After a request refused as of another era had the era probed again and the server was found
 * in the same era still, its refusals are relayed as plain errors this long before another one
 * reconnects: a server that refuses some request that way is not reconnected to at each such call.
 */
const REFUSAL_REPROBE_MS = 30_000;

/** The longest a resumption answered 429 or 503 waits for what its Retry-After asks (the call's timeout bounds it too). */
const RESUME_BUSY_MAX_MS = 30_000;

/** A health check answered 5xx short of the breaker's limit is repeated this soon (or at healthCheckMs if sooner). */
const HEALTH_RECHECK_MS = 1_000;

export class HttpUpstream extends HandshakingUpstream {
  /** The HttpClient, or OAuthHttp around it when the server has `oauth`. */
  private readonly http: HttpExchanges;
  private session: string | undefined;
  /** Headers of every legacy request after initialize; rebuilt when the session changes. */
  private legacyHeaders: Record<string, string> = {};
  private renewing: Promise<void> | undefined;
  /** Legacy handshakes under way (initialize: a renewal, a reconnect), each settled once a session it opened is the upstream's or ended. */
  private readonly handshaking = new PendingWork();
  /** Session DELETEs under way (endSession). */
  private readonly ending = new PendingWork();
  /** Legacy cancellations under way (their POSTs), and those waiting for their request to be taken (cancelUpstream). */
  private readonly cancelling = new PendingWork();
  private readonly untaken = new UntakenCancels();
  /**
   * The session a 404 said is gone (renew): nothing to end there. A 400 saying the server holds
   * no such session (sessionRefused) does not set it: that may come of a proxy that dropped the
   * header, the server holding the session still, so the replaced one is ended (retire) as the
   * digest asks of a client done with a session (§6.2), best effort: a server that has no such
   * session answers the DELETE 400 or 404.
   */
  private gone: string | undefined;
  /** Sessions replaced while calls still ran on them: ended (DELETE) once the last of those is over. */
  private readonly retiring = new Set<string>();
  /** The legacy standalone GET stream (standalone-stream.ts). */
  private readonly getStream: StandaloneStream;
  private readonly paramHeaders = new ParamHeaderIndex();
  private internalIds = 0;
  private readonly streak: FailureStreak;
  private tripped = false;
  /** The reconnect under way was caused by a request the server refused as of an era it no longer speaks (refusedEra): the era then. */
  private refusalReconnect: Era | undefined;
  /** When such a reconnect last found the server in the same era still (monotonicNow(): see REFUSAL_REPROBE_MS). */
  private stillSameEraAt = -Infinity;
  /** When a call last ended or the server became ready (monotonicNow()): idle since. */
  private activeAt = 0;

  constructor(spec: UpstreamSpec, log: Logger, opts?: UpstreamOptions) {
    // The crash-loop cap is for processes that keep dying; a remote server that is away is
    // probed with growing backoff (up to maxMs) so that it is back soon after it is.
    super(spec, log, { ...opts, backoff: { crashLimit: Infinity, ...opts?.backoff } });
    if (!spec.url) throw new Error(`server "${spec.id}": an HTTP upstream needs a url`);
    this.http = httpExchanges(spec, spec.url, this.log);
    this.getStream = new StandaloneStream(this.standaloneHost());
    this.streak = new FailureStreak(spec.circuitBreaker?.failures ?? Infinity);
    this.on('state', (s: string) => {
      if (s !== 'ready') return;
      this.tripped = false;
      this.streak.reset();
      this.activeAt = monotonicNow();
    });
  }

  /** What the standalone stream reads of this upstream and tells it, read when it needs it. */
  private standaloneHost(): StandaloneStreamHost {
    // Getters, not copies: the stream reads the session, era and state as they are at each use.
    const u = this;
    return {
      http: this.http,
      log: this.log,
      get session() {
        return u.session;
      },
      get headers() {
        return u.legacyHeaders;
      },
      get closed() {
        return u.closed;
      },
      get era() {
        return u._era;
      },
      get state() {
        return u._state;
      },
      heard: (c) => this.handleMessage(c),
      gap: () => void this.emit('gap'),
      // Its subscribed resources are said updated to their subscribers (UpstreamSubscriptions, which knows them).
      unheard: () => void this.emit('unheard'),
      renew: (stale, gone) => this.renew(stale, gone),
      foundDown: (reason, minDelayMs) => this.foundDown(reason, minDelayMs),
    };
  }

  /** Closed while calls flow; open after a streak of failures; half-open while the reconnect probe runs. */
  get circuit(): CircuitState {
    if (!this.tripped) return 'closed';
    return this.attempting ? 'half-open' : 'open';
  }

  protected override onCallEnd(p: Pending, err: Error | undefined): void {
    this.activeAt = monotonicNow();
    // After the call's own cancellation, if it has one (sent right after this), not before it.
    const s = p.session;
    // One waiting for its request to be taken is sent first too: a server whose DELETE does not
    // end the session's handlers would otherwise find the cancellation's session gone.
    if (s !== undefined && this.retiring.has(s)) setImmediate(() => void (p.cancelSent ?? Promise.resolve()).then(() => this.retiring.has(s) && this.retire(s)));
    if (this._state !== 'ready') return;
    let e = evidenceOf(err);
    // The hub's own lists (and requests) failing say that list is broken, not that the server is
    // down: a server whose resources/list always timed out, its tools working, had its circuit
    // opened every `failures` fetches (on probation, as by timeouts), its calls refused for the
    // cool-down. A connection refused is the server down, whatever was asked; an answer, even to
    // a list, is a server there.
    if (e === 'unwell' && hubsOwn(p) && !(err instanceof TransportError && err.notDelivered)) e = 'none';
    // A `tasks/result` waits, by the spec, until its task ends: one out of time is a long task
    // (the server took its call at once), as noteUnanswered holds too, not a server down.
    if (e === 'unwell' && p.taskId !== undefined && err instanceof TimeoutError) e = 'none';
    // Nor is a timeout whose wait saw a call answered or progress heard: a slow call of a working
    // server, as noteUnanswered holds. A slow tool called `failures` times at once while other
    // calls were answered opened the circuit (the answers came first), its calls refused for the
    // cool-down. Nor is one of a call sent before the connection last became ready (calls in
    // flight outlive a reconnect): it says how the server was before its circuit opened, as
    // noteUnanswered holds; counted, it was the first failure of the new connection's streak, and
    // one more (failures: 2) opened the circuit of a server back and well.
    if (e === 'unwell' && err instanceof TimeoutError && (this.answeredSince(p) || this.sentBeforeReady(p))) e = 'none';
    if (!this.streak.record(e, err?.message, err instanceof TimeoutError)) return;
    this.tripped = true;
    // Opened by calls left unanswered and nothing else, the server is hung, as when calls left
    // unanswered take it down (callsUnanswered): it is restarted as a hung one (its own backoff,
    // counted under reason="hung"), not as one that failed; a breaker whose `failures` is under
    // UNANSWERED_CALLS opened first, and its restarts read as failures.
    const hung = this.streak.onlyTimeouts;
    // Opened by a call left unanswered, it is back on probation: its handshake is answered, but
    // that says nothing of its calls (rpc-base noteUnanswered), and a circuit closed by it alone
    // would take a whole streak of timeouts again, opening and closing for good.
    if (hung) this.wentHung(true);
    else if (err instanceof TimeoutError) this.probation = true;
    const reason = `circuit open after ${counted(this.streak.count, 'consecutive failure')}; last: ${this.streak.lastFailure ?? 'unknown'}`;
    this.streak.reset();
    // The last failure's Retry-After (a 503 asking for a while) outlasts a shorter cool-down:
    // a probe sooner is refused again.
    this.trip(reason, Math.max(this.spec.circuitBreaker?.cooldownMs ?? 0, askedWaitMs(err)), hung);
  }

  /**
   * Calls left unanswered (rpc-base noteUnanswered): the circuit opens, as after a streak of
   * failures (its cool-down, calls refused meanwhile), and the handshake probes the server.
   */
  protected callsUnanswered(reason: string): void {
    if (this._state !== 'ready') return;
    this.streak.reset();
    this.foundDown(reason, this.spec.circuitBreaker?.cooldownMs ?? 0, true);
  }

  /** The legacy session id, if any (for status and tests; never log it). */
  get sessionId(): string | undefined {
    return this.session;
  }

  override request(method: string, params: Record<string, unknown>, opts?: CallOptions): Promise<Record<string, unknown>> {
    const r = super.request(method, params, opts);
    if (method !== 'tools/list') return r;
    return r.then((res) => {
      if (this._era === MODERN) this.paramHeaders.learn(res);
      return res;
    });
  }

  /** Legacy: the standalone stream, which carries list changes, is open or being reopened (see Upstream). */
  get hearsNotifications(): boolean {
    return this._era !== LEGACY || this.getStream.on;
  }

  learnTools(tools: readonly Record<string, unknown>[]): void {
    if (this._era === MODERN) this.paramHeaders.learn({ tools });
  }

  protected async connect(): Promise<void> {
    await this.handshake();
    const refused = this.refusalReconnect;
    this.refusalReconnect = undefined;
    if (refused !== undefined && this._era === refused) {
      this.stillSameEraAt = monotonicNow();
      this.log.warn(`the era probed again is still ${refused}: for ${REFUSAL_REPROBE_MS / 1000} s such refusals are relayed as errors`);
    }
  }


  protected probe(): Promise<ProbeVerdict> {
    return probeHttpEra(this.http, this.spec, `sy-${++this.internalIds}`, this.discoverParams(), this.log);
  }

  /**
   * The legacy handshake. The new session replaces the old one only once it works; one it
   * opened that does not (a close meanwhile, notifications/initialized failing, an answer the
   * hub cannot take) is ended (DELETE), not left open on the server: a renewal or a restart
   * would otherwise leave one behind at each attempt. A close waits for it a while (closeWaits).
   */
  protected initialize(): Promise<void> {
    const run = this.legacyHandshake();
    this.handshaking.add(run);
    return run;
  }

  private async legacyHandshake(): Promise<void> {
    const initId = `sy-${++this.internalIds}`;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: initId,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: LEGACY_CLIENT_CAPABILITIES, clientInfo: this.clientInfo },
    });
    const t = timeoutSignal(this.spec.timeoutMs);
    let result: Record<string, unknown> | undefined;
    let error: RpcError | undefined;
    let a: HttpAnswer;
    // An answer stream the server keeps open past the response (it should close it, digest
    // §6.2) is closed by the hub, as a call's is: waited out, the handshake failed at timeoutMs.
    const ctl = new ExchangeAbort();
    try {
      // Sent again after a lost kept-alive connection: an initialize the server did take after all leaves a session unused.
      a = await this.http.post(body, {
        signal: t.signal,
        abort: ctl,
        replay: true,
        onMessage: (c) => {
          if (c.kind === 'request') return this.answerEarly(c.msg, ctl);
          if (c.kind !== 'response') return;
          if ('error' in c.msg) error = upstreamError(c.msg.error);
          else result = c.msg.result;
          ctl.answered(ANSWERED_STREAM_LINGER_MS);
        },
      });
    } catch (err) {
      throw t.timedOut() ? new TransportError(`initialize: no answer within ${this.spec.timeoutMs} ms`) : err;
    } finally {
      t.clear();
    }
    if (a.status < 200 || a.status >= 300) {
      throw bodyError(a.body, initId) ?? statusError(a.status, a.headers, `initialize: ${answerProblem(a, this.spec.url!) ?? statusText(a.status, a.headers)}`);
    }
    const session = sessionIdOf(a.headers['mcp-session-id']);
    const headers = legacySessionHeaders(legacySessionVersion(result?.protocolVersion), session);
    try {
      await this.adopt(a, result, error, session, headers);
    } catch (err) {
      this.getStreamBack();
      if (session !== undefined) await this.endSession(headers);
      throw err;
    }
  }

  /**
   * A request the server sends on the `initialize` answer stream, before the response: answered
   * at once, on the session that answer opens (its header came with the stream), not on the one
   * the hub may still hold (a renewal). A `ping` (the one request it may send then, and it may
   * send it at any time: digest §2.1) with its empty result; anything else (a roots/list, an
   * elicitation, a sampling: it should wait for notifications/initialized) with an error, as no
   * call of the hub's is there whose client could be asked. Ignored, a server that waits for the
   * answer held its handshake, and the hub's, until one of them timed out.
   */
  private answerEarly(msg: Request, ctl: ExchangeAbort): void {
    if (this.closed) return;
    const frame =
      msg.method === 'ping'
        ? resultResponse(msg.id, {})
        : errorResponse(msg.id, new RpcError(INTERNAL_ERROR, `${msg.method} sent before the session was initialized: until notifications/initialized a server may send only ping and logging, and no call of the hub's is there to ask it for`));
    if (msg.method !== 'ping') this.log.warn({ method: msg.method }, 'the upstream sent a request before the session was initialized; answered with an error');
    if (msg.method === 'roots/list') this.rootsUnasked();
    const headers = legacySessionHeaders(LEGACY, sessionIdOf(ctl.headers?.['mcp-session-id']));
    postNotice(this.http, JSON.stringify(frame), headers, this.spec.timeoutMs).then(
      (a) => {
        if (a.status >= 300) this.log.warn({ status: a.status, method: msg.method }, 'the upstream did not accept our answer to its request');
      },
      (err: unknown) => this.log.debug({ err: errMessage(err), method: msg.method }, 'could not answer a request sent before the initialize response'),
    );
  }

  /** The rest of the handshake, once `initialize` was answered 2xx (with `session`, if the server made one). */
  private async adopt(a: HttpAnswer, result: Record<string, unknown> | undefined, error: RpcError | undefined, session: string | undefined, headers: Record<string, string>): Promise<void> {
    if (error) throw error;
    if (!result) throw new TransportError(`initialize: ${answerProblem(a, this.spec.url!) ?? 'no result in the answer'}`, a.status);
    const version = result.protocolVersion;
    if (typeof version !== 'string' || !(LEGACY_VERSIONS as readonly string[]).includes(version)) {
      throw new Error(`initialize answered with protocol version ${JSON.stringify(version)}, which the hub does not speak`);
    }
    // Closed while initialize was answered: the session is ended (the caller) without being told it is initialized.
    if (this.closed) throw new UpstreamUnavailableError(this.id, 'stopped');
    const f = serverFacts(result, result.serverInfo);
    const old = this.session;
    this._era = LEGACY;
    this._protocolVersion = version;
    this._capabilities = f.capabilities;
    this._serverInfo = f.serverInfo;
    this._instructions = f.instructions;
    // The GET stream first: a server may ask something outside any call as soon as it is
    // initialized (a roots/list in its oninitialized), and sends it on that stream or nowhere.
    this.getStream.resetFailures();
    await this.getStream.openEarly({ id: session, headers }, Math.min(this.spec.timeoutMs, EARLY_GET_WAIT_MS));
    if (this.closed) throw new UpstreamUnavailableError(this.id, 'stopped');
    // Bounded like initialize: a server that holds this POST open would hold the start (and
    // every renewal of the session, which later 404s join) for good.
    const nt = timeoutSignal(this.spec.timeoutMs);
    try {
      const n = await this.http.post('{"jsonrpc":"2.0","method":"notifications/initialized"}', { headers, signal: nt.signal, abort: tookOnStatus(), replay: true });
      if (n.status >= 300) this.log.warn({ status: n.status }, 'notifications/initialized was not accepted');
    } catch (err) {
      throw nt.timedOut() ? new TransportError(`notifications/initialized: no answer within ${this.spec.timeoutMs} ms`) : err;
    } finally {
      nt.clear();
    }
    // Closed meanwhile (the hub stopping, a reload removing the server), as a renewal of the
    // session may be: the new session is nobody's. Made the current one, it had a GET stream
    // opened on it and the renewal said the closed upstream `ready` again; its close's DELETE
    // went to the old one. It is ended instead (the caller), the close waiting for that.
    if (this.closed) throw new UpstreamUnavailableError(this.id, 'stopped');
    // The new session is the calls' only once notifications/initialized was taken there. A
    // renewal runs while the upstream is ready: a call sent meanwhile on the new session (another
    // POST, another connection) could reach the server before it, and a server may refuse
    // requests until then (the Python SDK's refuse all but ping). Sent to the old one, it meets
    // the 404 and waits for this renewal (renew).
    this.session = session;
    this.legacyHeaders = headers;
    this.getStream.adopted();
    // A reconnect (a circuit that opened, a lost connection) leaves the old session open on the
    // server: end it, as the digest asks of a client done with one (§6.2), once its calls are over.
    if (old !== undefined && old !== this.session && old !== this.gone) this.retire(old);
    this.gone = undefined;
  }

  /**
   * A handshake that failed after its GET stream opened early (adopt): that stream goes; the
   * session still current, if the new one was to replace it (a reconnect, a renewal), has its own
   * opened again, as the early one replaced it.
   */
  private getStreamBack(): void {
    if (!this.getStream.early) return;
    this.getStream.stop();
    if (!this.closed && this._era === LEGACY && this.session !== undefined) this.getStream.open();
  }

  /** DELETE a replaced session, or wait for the calls still running on it. */
  private retire(session: string): void {
    for (const p of this.pending.values())
      if (p.session === session) {
        this.retiring.add(session);
        return;
      }
    this.retiring.delete(session);
    void this.endSession(this.sessionHeaders(session));
  }

  /** DELETE a session (`headers` name it), bounded, best effort; a close waits for it before it drops the connections. */
  private endSession(headers: Record<string, string>): Promise<void> {
    const t = timeoutSignal(DELETE_TIMEOUT_MS);
    const done = this.ending.add(this.http.delete({ headers, signal: t.signal }));
    void done.then(() => t.clear());
    return done;
  }

  /**
   * What a close waits for before it drops the connections (which fails whatever is still
   * under way): a legacy handshake under way, up to DELETE_TIMEOUT_MS, so that a session it
   * opens is ended rather than left open on the server; and every DELETE sent.
   */
  private async closeWaits(): Promise<void> {
    await this.handshaking.within(DELETE_TIMEOUT_MS);
    await this.ending.drained();
  }

  /** The legacy headers of a session, current or not. */
  private sessionHeaders(session: string | undefined): Record<string, string> {
    if (session === this.session) return this.legacyHeaders;
    return legacySessionHeaders(this._protocolVersion ?? LEGACY, session);
  }

  protected transmit(p: Pending, frame: string, params: Record<string, unknown>): void {
    let headers: Record<string, string>;
    if (this._era === MODERN) {
      headers = modernRequestHeaders(p.method, params, this.paramHeaders);
    } else {
      headers = this.legacyHeaders;
      p.session = this.session;
      p.frame = frame;
    }
    this.post(p, frame, headers);
  }

  private post(p: Pending, frame: string, headers: Record<string, string>): void {
    const ctl = new ExchangeAbort();
    p.ctl = ctl;
    // Sent again after a lost kept-alive connection only if it could be after any failure (retry.ts).
    this.http.post(frame, { headers, abort: ctl, onMessage: this.answerSink(p, ctl), replay: replayable(p.method, p.opts?.retry) }).then(
      (a) => this.afterPost(p, a),
      (err: unknown) => {
        if (!this.isPending(p)) return;
        // Cut after an event id: the stream goes on from it, as one the server ended would.
        if (this._era === LEGACY && err instanceof StreamCutError) return this.resume(p, err.lastEventId, err.retryMs, 0);
        this.stopWaiting(p, err instanceof TransportError ? err : new TransportError(errMessage(err)));
      },
    );
  }

  /**
   * The call fails because its answer stream ended or broke before the response (and could not
   * be resumed). A legacy server may still be running it: a dropped stream is no cancellation in
   * that era (digest §6.2), and with nobody waiting for its answer it would run on unasked. So it
   * is told, as for a timeout. (A modern server took the closed stream as the cancellation.)
   */
  private stopWaiting(p: Pending, err: TransportError): void {
    if (!this.isPending(p)) return;
    this.failCall(p, err);
    if (this._era === LEGACY && !err.notDelivered) this.cancelUpstream(p, `the hub stopped waiting for the answer: ${err.message}`);
  }

  /** The messages of a call's answer stream (a POST's, or its resumption): once its response came, the stream may not linger. */
  private answerSink(p: Pending, ctl: ExchangeAbort): (c: Classified) => void {
    return (c) => {
      if (c.kind === 'response' && 'error' in c.msg && this.refusedInBand(p, c.msg, ctl.status ?? 200)) return void ctl.answered(ANSWERED_STREAM_LINGER_MS);
      this.handleMessage(c, p);
      if (c.kind === 'response' && !this.isPending(p)) ctl.answered(ANSWERED_STREAM_LINGER_MS);
    };
  }

  /**
   * A call's own error response, inside a 2xx answer, that says the server no longer speaks the
   * era or version the hub holds of it (a -32022 whose `supported` lacks it): the refusal the
   * spec sends as a 400 (refusedAsModern, refusedAsLegacy), which some servers answer in-band.
   * Relayed as the call's answer, every call met it until the hub was restarted; it reconnects
   * and probes the era as for the 400 (refusedEra). Whether it was handled so.
   */
  private refusedInBand(p: Pending, msg: ErrorResponse, status: number): boolean {
    const e = msg.error;
    if (!isObj(e) || e.code !== UNSUPPORTED_PROTOCOL_VERSION || !this.isPending(p)) return false;
    if (this.spec.era !== 'auto' || p.listen || monotonicNow() - this.stillSameEraAt < REFUSAL_REPROBE_MS) return false;
    // The call's own (or an id-less one, the answer's refusal): another request's goes the usual way (dropped).
    if (msg.id !== undefined && msg.id !== null && Number(msg.id) !== p.id) return false;
    const why = speaksNot(status, e, this._era === MODERN ? MODERN : (this._protocolVersion ?? LEGACY));
    if (why === undefined) return false;
    // Out of undici's callback: the reconnect it sets off says the state to listeners that may start exchanges.
    queueMicrotask(() => this.isPending(p) && this.refusedEra(p, status, why));
    return true;
  }

  private afterPost(p: Pending, a: HttpAnswer): void {
    if (!this.isPending(p)) return;
    const s = a.status;
    const problem = answerProblem(a, this.spec.url!);
    if (s >= 200 && s < 300) {
      if (this._era === LEGACY && a.lastEventId !== undefined && problem === undefined) return this.resume(p, a.lastEventId, a.retryMs, 0);
      return this.stopWaiting(p, new TransportError(problem ?? (s === 202 ? 'the upstream accepted the request without answering it' : 'the answer ended without a response'), s));
    }
    if (p.session !== undefined && this._era === LEGACY) {
      const gone = s === 404 && (!answers(a.body, p) || sessionNotFound(a.body, p.id));
      if (gone || (s === 400 && sessionRefused(a.body, p.id))) {
        if (!p.retried) return this.renewSession(p, gone);
        // Refused so again on the session just made for it: still before anything ran, so not
        // the call's answer (its -32001 was relayed as one, kept and replayed for its key).
        return this.failCall(p, new TransportError(`the server refused the session again right after it was renewed (HTTP ${s}), so the request did not run`, s, true));
      }
    }
    // The hub's own listen stream is no call: a server without one may refuse it with a bare 404
    // or 405 (ListenManager then leaves it be), which says nothing about the era of its calls.
    if (this.spec.era === 'auto' && !p.listen && monotonicNow() - this.stillSameEraAt >= REFUSAL_REPROBE_MS) {
      const why = this._era === MODERN ? refusedAsModern(s, a.body, p.id) : refusedAsLegacy(s, a.body, this._protocolVersion ?? LEGACY, p.id);
      if (why !== undefined) return this.refusedEra(p, s, why);
    }
    if (s === 401 || s === 403) {
      const refused = new TransportError(`HTTP ${s}: ${refusalText(this.spec, a)}`, s);
      refused.refused = true;
      return this.failCall(p, refused);
    }
    const rpc = bodyError(a.body, p.id);
    // A 5xx is the server failing, whatever its body says: transport trouble (and breaker
    // evidence). So is a 429 whatever its body says: a rate limit (a Switchyard hub's names the
    // request's id), no answer of the call's, kept and replayed for its idempotency key. A 429,
    // or a 503 asking to be asked again later (Retry-After: load shed, maintenance; a proxy's
    // 503 for a backend that failed under the request asks nothing), refused the request before
    // it ran (`refused`): its key is freed, and it may be sent again after the wait (retry.ts).
    if (s >= 500 || s === 429) {
      const err = statusError(s, a.headers, `${statusText(s, a.headers)}${rpc ? `: ${rpc.message}` : ''}`);
      if (rpc && s >= 500) err.rpcBody = true;
      if (s === 429 || (s === 503 && err.retryAfterMs !== undefined)) err.refused = true;
      return this.failCall(p, err);
    }
    this.failCall(p, rpc ?? (problem ? new TransportError(problem, s) : statusError(s, a.headers)));
  }

  /**
   * A server found modern refused a request as no 2026-07-28 one (refusedAsModern): redeployed
   * legacy-only at the same URL, it answers every call so (a legacy "no session" 400), answers
   * that are no JSON-RPC error of the call's and so would never make the hub connect again. So
   * for a legacy session's request refused with a -32022 that lacks its version (refusedAsLegacy:
   * a server redeployed modern-only).
   * The request was refused before dispatch (an answer naming no request, or none at all), so it
   * did not run: the call fails as not delivered, which frees its idempotency key and lets the
   * hub's retry policy send it once more when the server is back (with the default retry, the
   * caller sees no failure; with `maxAttempts: 1`, a retryable error). The connection is made
   * again at once (calls in flight are left to finish), and its handshake probes the era, as
   * every reconnect of a modern server does (digest §2.3: re-probe if the cached assumption fails).
   */
  private refusedEra(p: Pending, status: number, why: string): void {
    const era = this._era ?? LEGACY;
    const version = era === MODERN ? MODERN : (this._protocolVersion ?? LEGACY);
    if (this._state === 'ready') {
      this.log.warn({ why }, `a ${version} request was refused as no request of that era; connecting again to probe the era`);
      this.refusalReconnect = era;
      // Before the call ends: its failure is not counted against the circuit, which would wait out a cooldown.
      this.trip(`a ${version} request was refused (${why}); probing the era again`, 0);
    }
    this.failCall(
      p,
      new TransportError(`server "${this.id}" did not take the request as a ${version} one (${why}), so it did not run; the server may now speak another protocol era, and the hub is connecting again to find out: try again`, status, true),
    );
  }

  /**
   * A 404 to a request that carried a session id, with no JSON-RPC response to that request in
   * its body, means the session is gone (so does a 400 saying so: sessionRefused). The server
   * looks the session up before dispatching anything, so the request was not executed: renew
   * the session (once, shared by every call that hit the same 404) and send the same frame
   * again, once. A second 404 fails the call. A renewal that fails (a restarted server still
   * starting) fails it as not delivered: it never ran, so its key is freed and the retry policy
   * may send it again, a write too, where it was one that may have run, never sent again.
   */
  private renewSession(p: Pending, gone: boolean): void {
    p.retried = true;
    const stale = p.session;
    this.renew(stale, gone).then(
      () => {
        if (!this.isPending(p)) return;
        p.session = this.session;
        // The old session, replaced but not known gone, waits for its calls (retire): this one is off it now.
        if (stale !== undefined && this.retiring.has(stale)) this.retire(stale);
        this.post(p, p.frame!, this.legacyHeaders);
      },
      (err: unknown) => this.failCall(p, new TransportError(`session expired and could not be renewed: ${errMessage(err)}`, undefined, true)),
    );
  }

  /**
   * A new session in place of `stale` (once, however many found it gone); settles when it is
   * open. `gone`: a 404 said so (nothing to end); otherwise the old session is ended once replaced.
   */
  private renew(stale: string | undefined, gone: boolean): Promise<void> {
    if (this.session === stale) {
      // One 404 among the answers that set off this renewal says the session is gone.
      if (gone) this.gone = stale;
      else if (this.renewing === undefined) this.gone = undefined;
      this.log.info('legacy session expired; initializing again');
      this.renewing ??= this.initialize()
        // Said only while ready: a renewal a call in flight set off after the circuit opened
        // (a 404 it met then) would otherwise have it `ready` again before its cool-down, a
        // reconnect still scheduled, which says `ready` itself (the hub resubscribes then).
        .then(() => {
          if (this._state === 'ready') this.setState('ready', 'session renewed');
        })
        .finally(() => (this.renewing = undefined));
    }
    return this.renewing ?? Promise.resolve();
  }

  /**
   * A legacy server may end the connection of a POST's event stream after an event id and keep
   * the stream (digest §6.2): the hub waits what its `retry:` asked, then GETs with
   * `Last-Event-ID`, and the server replays the rest of that stream, the response included. It
   * may do so again and again while a long call runs; the call's own timeout bounds it, and a
   * resumption that brings nothing waits longer each time. A resumption the server refuses
   * (405: it keeps no events; 404: the session is gone) fails the call: whether it ran is
   * unknown, so it is not sent again. A stream cut by the network after an event id is resumed
   * like one the server ended; a resumption that fails outright is tried again, up to
   * RESUME_FAILURES times in a row.
   */
  private resume(p: Pending, lastEventId: string, retryMs: number | undefined, idle: number, failed = 0, atLeastMs = 0): void {
    const wait = Math.max(resumeWaitMs(retryMs, idle), atLeastMs);
    this.log.debug({ wait, idle }, 'answer stream ended after an event id; resuming');
    const stream = p.session;
    setTimeout(() => {
      if (!this.isPending(p)) return;
      // A session a reconnect replaced lives on (retiring) while its calls run: they resume there.
      if (stream !== this.session && !(stream !== undefined && this.retiring.has(stream)))
        return this.failCall(p, new TransportError('the session was renewed before the answer stream could be resumed'));
      const ctl = new ExchangeAbort();
      // Its request was taken long ago (its POST was answered): a cancellation need not wait for this.
      ctl.heard = true;
      p.ctl = ctl;
      this.http.get({ headers: { ...this.sessionHeaders(stream), 'last-event-id': lastEventId }, resumedFrom: lastEventId, abort: ctl, onMessage: this.answerSink(p, ctl) }).then(
        (a) => {
          if (!this.isPending(p)) return;
          const s = a.status;
          if (s >= 200 && s < 300 && answerProblem(a, this.spec.url!) === undefined) {
            // Only a message is progress: a server may name a new event id each time and send nothing.
            return this.resume(p, a.lastEventId ?? lastEventId, a.retryMs ?? retryMs, a.messages > 0 ? 0 : idle + 1);
          }
          // Busy (429), or unavailable and asking to be asked again later (503 + Retry-After): the
          // stream and its events are kept, so it is asked again after the wait it asks (within
          // the call's timeout, RESUME_FAILURES times in a row at most), as a resumption the
          // network failed is; failed at once, the call was one that may have run, its key unknown.
          const busy = s === 429 || s === 503 ? retryAfterSeconds(a.headers) : undefined;
          if ((s === 429 || busy !== undefined) && failed + 1 < RESUME_FAILURES) return this.resume(p, lastEventId, retryMs, idle + 1, failed + 1, Math.min((busy ?? 0) * 1000, RESUME_BUSY_MAX_MS));
          const why = s === 405 ? 'the upstream keeps no events to resume from (405)' : s === 404 ? 'the session is gone (404)' : `HTTP ${s}`;
          this.stopWaiting(p, new TransportError(`the answer stream ended before the response and could not be resumed: ${answerProblem(a, this.spec.url!) ?? why}`, s));
        },
        (err: unknown) => {
          if (!this.isPending(p)) return;
          if (err instanceof StreamCutError) return this.resume(p, err.lastEventId, err.retryMs ?? retryMs, err.messages > 0 ? 0 : idle + 1);
          if (!(err instanceof CancelledError) && failed + 1 < RESUME_FAILURES) return this.resume(p, lastEventId, retryMs, idle + 1, failed + 1);
          this.stopWaiting(p, new TransportError(`the answer stream was cut before the response and could not be resumed: ${errMessage(err)}`, err instanceof TransportError ? err.status : undefined));
        },
      );
    }, wait).unref();
  }

  protected override retiredListenMs(): number {
    return this._era === MODERN ? RETIRED_LISTEN_MS : 0;
  }

  protected cancelUpstream(p: Pending, reason: string): void {
    const ctl = p.ctl;
    if (this._era !== LEGACY) return void ctl?.abort();
    // A disconnect is not a cancellation in legacy; say it, then stop reading.
    const frame = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: p.id, reason } });
    // To the session the request went to, which a reconnect may have replaced since.
    const headers = this.sessionHeaders(p.session);
    const send = (): Promise<void> => this.cancelling.add(postNotice(this.http, frame, headers, this.spec.timeoutMs));
    const wait = ctl instanceof ExchangeAbort && !ctl.heard ? untakenWaitMs(this.spec.timeoutMs, p, ctl, this.spec.oauth !== undefined) : 0;
    if (wait <= 0 || !(ctl instanceof ExchangeAbort)) {
      p.cancelSent = send();
      return void ctl?.abort();
    }
    // The request's POST is unanswered still: the server may not have it yet (it dispatches a
    // request before it answers its POST). It goes once that POST is taken, or once it waited
    // enough, or at the close (closeCancels).
    p.cancelSent = this.untaken.after(ctl, wait, send);
  }

  /**
   * An answer to a request the server sent on a call's stream goes to that call's session: a
   * reconnect (an open circuit) may have replaced it while the client was asked, and the new
   * session, which never asked, drops it, the call then waiting out its timeout.
   */
  protected reply(frame: string, via: Pending | undefined): void {
    if (this.closed) return void this.log.debug('answer to the upstream request dropped: the upstream closed');
    const headers = this.era !== LEGACY ? { 'mcp-protocol-version': MODERN } : via?.session !== undefined ? this.sessionHeaders(via.session) : this.legacyHeaders;
    postNotice(this.http, frame, headers, this.spec.timeoutMs).then(
      (a) => {
        if (a.status >= 300) this.log.warn({ status: a.status }, 'the upstream did not accept our answer to its request');
      },
      (err: unknown) =>
        // A close drops the connections under an answer still on its way: said at every stop otherwise.
        this.closed ? this.log.debug('answer to the upstream request dropped: the upstream closed') : this.log.warn({ err: errMessage(err) }, 'could not answer the upstream request'),
    );
  }

  notify(method: string, params?: Record<string, unknown>): void {
    if (this._state !== 'ready' || this._era !== LEGACY) {
      // Modern HTTP defines no client notifications; cancellation is closing the stream.
      this.log.debug({ method }, 'notification dropped');
      return;
    }
    const frame = JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
    const send = (): void =>
      void postNotice(this.http, frame, this.legacyHeaders, this.spec.timeoutMs).catch((err: unknown) =>
        this.closed ? this.log.debug({ method }, 'notification dropped: the upstream closed before it was taken') : this.log.warn({ err: errMessage(err), method }, 'notification failed'),
      );
    // The session is being renewed: the old one is gone, and the new one is the calls' only once
    // its notifications/initialized was taken (initialize). Said on it then, in order; not at all
    // if a close ended the renewal (it would go to the gone session, or fail on the dropped
    // connections, a warning at every stop).
    const later = (): void => (this.closed ? this.log.debug({ method }, 'notification dropped: closed while the session was renewed') : send());
    if (this.renewing !== undefined) return void this.renewing.then(later, later);
    send();
  }

  /**
   * A server that gets no calls would be shown ready however long it has been down or hung:
   * /healthz, `servers` and failMode's answers said so until the next call failed (and, hung,
   * only after that call's whole timeout). Idle `ms`, it is asked something cheap (legacy: ping,
   * which also keeps its session in use; modern: server/discover), waited for as long as a call
   * (timeoutMs). An answer, even an error, is a server there, but a 5xx is a server failing (a proxy whose
   * backend is gone answers every request 502 at once): it marks it down. So does a connection
   * refused (or a name that no longer resolves), as the GET stream's failure does, and no answer at
   * all, whether no new connection completes (a host gone or frozen) or one does (a process
   * hung, or a host gone behind something that still accepts): either way calls would only
   * wait out their timeout, so they are refused at once while it reconnects, and it is ready
   * again once its handshake is answered. An open notification stream (the legacy GET, a
   * modern listen) is no reason to skip the check: a host that vanishes without a FIN or RST
   * leaves that stream open, silent, until TCP keepalive gives up, minutes later.
   */
  protected checkHealth(): void {
    // The interval as it is now (a reload may have changed it since this check was armed).
    const ms = this.spec.healthCheckMs ?? 0;
    // Not ready: armed again when it is (its reconnect probes it meanwhile).
    if (this.closed || this._state !== 'ready' || ms <= 0) return;
    const idle = monotonicNow() - this.activeAt;
    // Calls in flight: they find out themselves (their timeouts are breaker evidence).
    if (this.busy) return this.armHealthCheck(ms);
    // A call lately: idle `ms` from its end.
    if (idle < ms) return this.armHealthCheck(ms, ms - idle);
    const activeAt = this.activeAt;
    const [method, params] = this._era === LEGACY ? ['ping', {}] : ['server/discover', this.discoverParams()];
    const again = (): void => this.armHealthCheck();
    const after = `health check after ${Math.round(idle / 1000)} s idle`;
    const probeMs = this.spec.probeTimeoutMs;
    // Unanswered, the check waits as long as a call would (timeoutMs): a server slow to answer
    // (a busy or cold one) answers calls too, and taken for down at probeTimeoutMs it was
    // restarted at every check, its calls refused meanwhile. A host gone or frozen is found
    // sooner: at probeTimeoutMs a new connection is tried, and one that does not complete
    // either (no RST comes: the check sat on a kept-alive socket) marks it down then.
    let over = false;
    const gone = setTimeout(() => {
      void tcpReachable(this.spec.url!, probeMs).then((why) => {
        if (over || why === undefined || this.checksOff || this.closed || this._state !== 'ready' || this.activeAt !== activeAt) return;
        over = true;
        this.foundDown(`the server cannot be reached (${after}: no answer, and ${why})`, 0);
      });
    }, probeMs);
    gone.unref();
    const waitMs = Math.max(probeMs, this.spec.timeoutMs);
    this.call(method, params, { timeoutMs: waitMs }, true).then(
      () => {
        clearTimeout(gone);
        if (!over) again();
        over = true;
      },
      (err: unknown) => {
        clearTimeout(gone);
        // Found gone meanwhile: its reconnect has the server in hand (and checks it once ready).
        if (over) return;
        over = true;
        // A reload turned checks off (healthCheckMs 0) while this one waited: the operator asked for none.
        if (this.checksOff) return;
        if (err instanceof TransportError && err.notDelivered && this._state === 'ready') {
          this.foundDown(`the server cannot be reached (${after}): ${errMessage(err)}`, 0);
          return;
        }
        if (this.closed || this._state !== 'ready') return again();
        // Answered, but as a server that is unwell (a 5xx: a proxy whose backend is gone answers
        // every request 502 at once): every call would fail the same way. Not a 5xx carrying the
        // server's own JSON-RPC error: that is the server, there (one without `ping` answers it
        // 500 -32601, and was taken for down at every idle check). One such answer is one failure
        // toward the circuit breaker, as a call's 5xx is: one 502 of a proxy mid-redeploy had it
        // down at once (for a Retry-After's length), where calls take circuitBreaker.failures.
        // Short of that, it is checked again soon (after what a Retry-After asks), so an idle
        // server whose every answer is a 5xx is down within seconds, not intervals.
        if (err instanceof TransportError && err.status !== undefined && err.status >= 500 && !err.rpcBody) {
          const why = `the server is failing (${after}): ${errMessage(err)}`;
          if (!this.streak.record('unwell', why)) return this.armHealthCheck(ms, Math.max(Math.min(ms, HEALTH_RECHECK_MS), askedWaitMs(err)));
          const n = this.streak.count;
          this.streak.reset();
          this.foundDown(`${why} (${counted(n, 'consecutive failure')})`, Math.max(this.spec.circuitBreaker?.cooldownMs ?? 0, askedWaitMs(err)));
          return;
        }
        if (!(err instanceof TimeoutError)) {
          this.log.debug({ err: errMessage(err) }, 'health check: answered, or failed in a way that says the server is there');
          return again();
        }
        // No answer for as long as a call waits. A new connection tells a host gone from a
        // process that accepts but does not answer; both are down for the hub's calls.
        void tcpReachable(this.spec.url!, probeMs).then((why) => {
          // A call answered meanwhile: the server answers after all.
          if (this.checksOff || this.closed || this._state !== 'ready' || this.activeAt !== activeAt) return again();
          if (why !== undefined) return this.foundDown(`the server cannot be reached (${after}: no answer, and ${why})`, 0);
          // There, and answering nothing: hung, as a stdio process its check finds silent is (its
          // own backoff, its restarts counted as a hang's), and for the same reason on no probation.
          this.wentHung(false);
          this.foundDown(`the server is not answering (${after}: no answer within ${waitMs} ms, though a new connection to it completes)`, 0, true);
        });
      },
    );
  }

  private get checksOff(): boolean {
    return (this.spec.healthCheckMs ?? 0) <= 0;
  }

  /**
   * The server found down or unwell without a call (health check, GET stream): its calls are
   * refused and its handshake probes it, as for an open circuit, and /healthz says so (circuit
   * `open`, then `half-open`) rather than `closed` beside `restarting`.
   */
  private foundDown(reason: string, minDelayMs: number, hung = false): void {
    if (this._state !== 'ready') return;
    this.tripped = true;
    this.trip(reason, minDelayMs, hung);
  }

  override close(): Promise<void> {
    // A sessionless legacy server has no DELETE to end its calls in flight: each is cancelled
    // (sent before the connections are dropped, closeCancels), or it would run on unasked.
    if (!this.closed && this._era === LEGACY && this.session === undefined)
      for (const p of this.pending.values()) if (!p.internal && !p.listen) this.cancelUpstream(p, 'the hub stopped');
    // Stop reading every answer stream; the base class then fails the calls.
    for (const p of this.pending.values()) p.ctl?.abort();
    return super.close();
  }

  /**
   * At the close, before the session's DELETE and the dropped connections: the cancellations
   * still waiting for their request to be taken go now (a call cancelled just before a stop
   * was otherwise never told: the DELETE ended the wait's connections, and a sessionless
   * server ran it on), and those under way are waited for, DELETE_TIMEOUT_MS at most.
   */
  private async closeCancels(): Promise<void> {
    this.untaken.sendAll();
    await this.cancelling.within(DELETE_TIMEOUT_MS);
  }

  protected async disconnect(): Promise<void> {
    this.getStream.stop();
    // A reconnect attempt that failed (not a close) leaves the session be: calls still run on it
    // (a circuit that opens does not drop them), which its DELETE would end unanswered. The
    // attempt that succeeds retires it once they are over (initialize).
    if (!this.closed) return;
    await this.closeCancels();
    const session = this.session;
    this.session = undefined;
    if (session !== undefined) await this.endSession(this.legacyHeaders);
    await this.closeWaits();
    this.http.close();
  }
}
