/**
 * The calls every upstream connection carries, whatever its transport: fresh upstream ids,
 * the era envelope, progress-token remapping, timeouts that reset on progress, cancellation,
 * and routing of server-to-client traffic. Subclasses supply the bytes: transmit, cancel, reply
 * (and, through Lifecycle, connect/disconnect).
 *
 * This class keeps what runs on every call or needs the connection's state at each step: the
 * slot, sending, settling, the timers, the answers and the relaying of notifications and of a
 * server's requests. What stands alone is beside it: pending-call.ts (the call record),
 * hang-watch.ts (calls left unanswered, probation), call-timeout.ts, ask-target.ts (whose call
 * a server's request is), open-asks.ts and client-answers.ts (its questions at a client, their
 * answers, roots outside a call), listen-streams.ts, log-targets.ts, progress-info.ts.
 */
import { LEGACY, MODERN } from '../protocol/era.js';
import { legacyResult } from './legacy-result.js';
import {
  CancelledError,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  METHOD_NOT_FOUND,
  notSent,
  RpcError,
  TimeoutError,
  TransportError,
  UpstreamUnavailableError,
} from '../protocol/errors.js';
import { errorResponse, idKey, resultResponse, type Classified, type Notification, type Request } from '../protocol/jsonrpc.js';
import { legacyMeta, modernMeta, modernParamsJson, withMeta } from './envelope.js';
import { jsonText } from '../protocol/json-text.js';
import { askParamsProblem, MAX_OPEN_ASKS, relayedInput, relayedNotice } from '../protocol/input-results.js';
import { errMessage, Lifecycle } from './lifecycle.js';
import { Limiter, LimitError } from './limiter.js';
import { withRetries } from './retry.js';
import { readyWithin } from './ready-within.js';
import { upstreamError } from './upstream-error.js';
import { redactedExcerpt, redactLogMessage, redactLogText } from '../policy/secret-text.js';
import type { AskClient, CallOptions, ListenFilter, ListenHandle, ListenSink, Upstream } from './types.js';
import { reasonOf } from '../cancel.js';
import { IdTable, KeyedTable } from '../keyed-table.js';
import { monotonicNow } from '../monotonic.js';
import { askTarget } from './ask-target.js';
import { callTimeout, DECODE_WAIT_MS, timeoutReason } from './call-timeout.js';
import { answerFrame, failureFrame, RootsRelay } from './client-answers.js';
import { HangWatch } from './hang-watch.js';
import { EndedListens, isListenId, listenHandle, listenOf, refusedListen } from './listen-streams.js';
import { lateLogTarget, logTargets } from './log-targets.js';
import { OpenAsks, WITHDRAWN_BY_SERVER } from './open-asks.js';
import { progressInfo } from './progress-info.js';
import { UrlCompletions } from './url-completions.js';
import { HOLDS_OWN_SLOT, HOLDS_SLOT, hubsOwn, isList, nextToken, type Pending } from './pending-call.js';

export { errMessage, type UpstreamOptions } from './lifecycle.js';
// The call record, where the HTTP transport's modules import it from.
export { hubsOwn, type Pending } from './pending-call.js';
export { PROBATION_LIMITS, UNANSWERED_CALLS } from './hang-watch.js';

export abstract class UpstreamBase extends Lifecycle implements Upstream {
  private nextId = 0;
  /** The one principal this connection has carried calls for; null once it has carried two, or one made for several (CallOptions.principal null), until a new process (newProcess). */
  private servedFor: string | null | undefined;
  protected readonly pending = new IdTable<Pending>();
  private readonly byToken = new KeyedTable<Pending>();
  /** The sinks of the last few listen streams that ended (listen-streams.ts, ENDED_LISTENS). */
  private readonly endedListens = new EndedListens();
  /** Server-to-client requests relayed to a call's client and not yet answered, by the upstream's request id. */
  private readonly serverAsks = new OpenAsks();
  /** The client that last said its roots changed, which answers roots/list sent outside any call (rootsChanged). */
  private readonly roots = new RootsRelay();
  /**
   * The server asked roots/list outside any call and no client could answer it: it expects
   * notifications/roots/list_changed (the hub declares roots.listChanged) once one can
   * (rootsChanged, firstClient).
   */
  private rootsRefused = false;
  /** Where a URL-mode elicitation's completion goes once the call that asked it (or said -32042) has ended. */
  private readonly urlCompletions = new UrlCompletions();
  readonly limiter: Limiter = this.spec.limiter ?? new Limiter(this.spec.maxConcurrent ?? Infinity, this.spec.maxQueue ?? 0);
  /** Whether the server takes calls without answering them: the row of those left unanswered, its probation once back. */
  private readonly hang = new HangWatch(
    () => this.ownLimitMs(),
    () => this.servedWell(),
  );

  /**
   * A new server process of its own (stdio) is starting, the last one gone with whatever work it
   * did for the principals it served: none of their lines can come from this one. Served by two,
   * it counts as served by none now (a `servers restart` starts with none too), and the next
   * principal's lines are theirs again until another calls. Served by one, it stays theirs: their
   * client answers the new process's roots/list (rootsChanged). Not over HTTP: the server outlives
   * the connection, and other users' work in it too.
   */
  protected newProcess(): void {
    if (this.servedFor === null) this.servedFor = undefined;
  }

  /** A new connection is up: calls sent from now on are its (their timeouts count, not older ones'). */
  protected override connected(): void {
    this.hang.connected();
  }

  /** The server's own limit on a call: its timeoutMs, or its maxTotalTimeoutMs when shorter. */
  private ownLimitMs(): number {
    return Math.min(this.spec.timeoutMs, this.spec.maxTotalTimeoutMs ?? Infinity);
  }

  /**
   * Taken down for calls left unanswered (or, HTTP, a circuit opened by timeouts) and back since
   * (HangWatch.probation): the HTTP upstream puts a server its breaker opened on it.
   */
  protected get probation(): boolean {
    return this.hang.probation;
  }

  protected set probation(on: boolean) {
    this.hang.probation = on;
  }

  /** The server is being taken down as hung; `probation`: for calls left unanswered (HangWatch.wentHung). */
  protected wentHung(probation: boolean): void {
    this.hang.wentHung(probation);
  }

  /** Send a serialised request (`params` as on the wire); a failure to send is reported with failCall. */
  protected abstract transmit(p: Pending, frame: string, params: Record<string, unknown>): void;
  /** Tell the upstream to stop working on `p` (already settled locally). */
  protected abstract cancelUpstream(p: Pending, reason: string): void;
  /** Send an answer to a server-to-client request that arrived on `via` (or unattached). */
  protected abstract reply(frame: string, via: Pending | undefined): void;
  abstract notify(method: string, params?: Record<string, unknown>): void;

  /**
   * The hub tells only a connection that is `principal`'s (Hub.rootsChanged: its own, or any with
   * authentication off). Checked here too: once another principal's call has been on this
   * connection, the server's follow-up roots/list (outside any call) answered by this client
   * would have the roots it keeps be one user's in another's calls. One no call has been on yet
   * is no one else's: it becomes this principal's, as by a call (a client's first change often
   * comes before its first call, and was lost: the server kept no roots of its).
   */
  rootsChanged(principal: string, ask: AskClient, firstClient = false, canAsk?: () => boolean): boolean {
    if (this._era !== LEGACY || this._state !== 'ready') return false;
    if (firstClient && !(this.rootsRefused && this.roots.from === undefined) && !this.roots.gone) return false;
    if (this.servedFor === undefined) this.servedFor = principal;
    else if (this.servedFor !== principal) return false;
    this.roots.changed(principal, ask, canAsk);
    this.rootsRefused = false;
    this.notify('notifications/roots/list_changed');
    return true;
  }

  /**
   * The server asked roots/list where no client could be asked (a legacy HTTP server, on its
   * initialize answer stream): as for one asked outside any call, it is told the roots changed
   * once a client can answer (rootsChanged).
   */
  protected rootsUnasked(): void {
    this.rootsRefused = true;
  }

  /** A roots/list outside any call, answered by the client that said its roots changed. */
  private askRoots(msg: Request, from: { ask: AskClient }): void {
    this.roots.ask(msg, from).then(
      (result) => this.reply(answerFrame(msg, result, this.log), undefined),
      (err: unknown) => this.reply(failureFrame(msg, err), undefined),
    );
  }

  protected failInFlight(message: string): void {
    this.failAll(() => new TransportError(message));
  }

  get load(): { active: number; queued: number } {
    return this.limiter.load;
  }

  get busy(): boolean {
    for (const p of this.pending.values()) if (!p.internal && !p.listen) return true;
    return false;
  }

  request(method: string, params: Record<string, unknown>, opts?: CallOptions): Promise<Record<string, unknown>> {
    if (!opts?.retry || opts.retry.maxAttempts <= 1) return this.requestOnce(method, params, opts);
    // One limit for every attempt: a retry does not start the caller's total over.
    const deadline = this.deadlineFor(opts);
    return withRetries(method, opts.retry, () => this.requestOnce(method, params, opts, deadline), {
      signal: opts.signal,
      stop: opts.stop,
      until: deadline,
      whenReady: (ms) => this.whenReady(ms),
      onRetry: (attempt, delayMs, err) => this.log.info({ method, attempt, delayMs, err: err.message }, 'sending the request again (it is safe to)'),
    });
  }

  /**
   * Resolves true when ready now or within `ms`; false once it cannot be (closed, failed, time
   * up). Through readyWithin, whose waits share one listener of this upstream's state: a dozen
   * calls retried after a crash, a listener each, set off MaxListenersExceededWarning.
   */
  whenReady(ms: number): Promise<boolean> {
    if (this._state === 'ready') return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return readyWithin(this, ms);
  }

  /**
   * When a call that starts now must be over: its total limit (maxTotalTimeoutMs, which a
   * caller's `dev.switchyard/timeoutMs` shortens) from now. Waits for a slot or a turn and
   * retries count against it; undefined without a finite limit.
   */
  protected deadlineFor(opts: CallOptions | undefined): number | undefined {
    const total = opts?.maxTotalTimeoutMs ?? this.spec.maxTotalTimeoutMs;
    return total !== undefined && total < Infinity ? monotonicNow() + total : undefined;
  }

  /**
   * How long a call may wait for a slot or a turn: its answer timeout, or less when its total
   * limit (`deadline`, or one from now) leaves less. `until` is that total limit, for dispatch.
   */
  protected waitBudget(opts: CallOptions | undefined, deadline: number | undefined): { until: number | undefined; ms: number } {
    const until = deadline ?? this.deadlineFor(opts);
    const idle = opts?.timeoutMs ?? this.spec.timeoutMs;
    return { until, ms: until === undefined ? idle : Math.min(idle, until - monotonicNow()) };
  }

  private requestOnce(method: string, params: Record<string, unknown>, opts?: CallOptions, deadline?: number): Promise<Record<string, unknown>> {
    if (this._state !== 'ready') return Promise.reject(new UpstreamUnavailableError(this.id, this._state, this._lastError));
    if (opts?.signal?.aborted) return Promise.reject(notSent(new CancelledError(reasonOf(opts.signal))));
    // The hub's own fetch of a list takes no slot: with maxConcurrent 1, a client's call waited
    // behind it (behind a resources/list that never answers, for its whole timeout), and
    // /healthz showed a server no client called as busy; the other way, a refresh that found
    // clients' calls in every slot was refused "busy" (maxQueue 0) and the stale list served.
    // maxConcurrent bounds the calls made for clients; the hub's lists do not flood a server for
    // all that: the catalog fetches one list of a kind at a time per connection (ListCache.get
    // shares a fetch under way), page after page, and list_changed storms are rate-limited
    // (RefetchGate).
    if (isList(method)) return this.dispatch(method, params, opts, 0, deadline);
    // A free slot is taken here and given back when the call settles (settle()): no async
    // wrapper per call, which cost measurable time at concurrency 64 (docs/BENCHMARKS.md).
    const own = opts?.hubOwn === true;
    // The hub's own request's slot is counted as such by the limiter (it gives it back with
    // leave(true)), on whichever connection sharing the limiter it is held.
    const holds = own ? HOLDS_SLOT | HOLDS_OWN_SLOT : HOLDS_SLOT;
    if (this.limiter.tryEnter(own)) return this.dispatch(method, params, opts, holds, deadline);
    const signal = opts?.signal;
    const { until, ms } = this.waitBudget(opts, deadline);
    // A call that waited holds its slot like one that did not: settle() gives it back. One that
    // finds slots held by the hub's own requests may wait for those past maxQueue (the limiter
    // counts them, on every connection sharing it): with maxConcurrent 1 and maxQueue 0, a
    // client's call was refused "busy" while the hub renewed a subscription as the server came back.
    // The hub's own request waits past maxQueue (within its own timeout) and takes none of its
    // places: a subscription renewed as the server came back, finding the slots held by clients'
    // calls (or by its other renewals), was refused "busy", and its clients heard no more updates.
    return this.limiter.enter({ signal, waitMs: ms, onAbort: () => notSent(new CancelledError(signal ? reasonOf(signal) : undefined)), own }).then(
      () => {
        // The state may have changed while the call waited for a slot.
        if (this._state !== 'ready') {
          this.limiter.leave(own);
          throw new UpstreamUnavailableError(this.id, this._state, this._lastError);
        }
        return this.dispatch(method, params, opts, holds, until);
      },
      (err: unknown) => {
        throw err instanceof LimitError ? new UpstreamUnavailableError(this.id, 'busy', err.message) : err;
      },
    );
  }

  /**
   * One public request once it has a slot; stdio legacy upstreams add their call gate. `holds`:
   * what the call must give back when it settles (HOLDS_*), passed on to call().
   */
  protected dispatch(method: string, params: Record<string, unknown>, opts: CallOptions | undefined, holds: number, deadline?: number): Promise<Record<string, unknown>> {
    return this.call(method, params, opts, false, undefined, holds, deadline);
  }

  /** Gives back what a settled call held (subclasses add their own HOLDS_* bits). */
  protected release(holds: number): void {
    if (holds & HOLDS_SLOT) this.limiter.leave((holds & HOLDS_OWN_SLOT) !== 0);
  }

  /**
   * A public call ended (handshake and listen streams excluded): `err` undefined for a result.
   * The HTTP upstream feeds its circuit breaker from here.
   */
  protected onCallEnd(_p: Pending, _err: Error | undefined): void {}

  private ended(p: Pending, err: Error | undefined): void {
    if (p.internal || p.listen) return;
    this.noteUnanswered(p, err);
    this.onCallEnd(p, err);
  }

  /**
   * A call answered, or progress heard (its own included), since `p` was sent: a timeout of `p`
   * is then a slow call of a server working its calls, not one left unanswered (noteUnanswered;
   * the HTTP circuit breaker holds the same).
   */
  protected answeredSince(p: Pending): boolean {
    return p.answeredAtSend !== this.hang.answers;
  }

  /**
   * `p` was sent before the connection last became ready (HTTP calls in flight outlive a
   * reconnect): its timeout says how the server was then, not how it is now (noteUnanswered; the
   * HTTP circuit breaker holds the same).
   */
  protected sentBeforeReady(p: Pending): boolean {
    return p.gen !== this.hang.readyCount;
  }

  /**
   * A server that answers the hub's pings and handshakes but leaves its calls unanswered (a
   * worker hung, a lock never released) would stay `ready` for good, every call waiting out its
   * whole timeout. UNANSWERED_CALLS such timeouts in a row (one on probation), with no other
   * call answered in between (the hub's lists count neither way), take it down:
   * lastError says why, its calls are refused at once meanwhile, and the transport restarts it
   * (stdio: the process is ended and started again; HTTP: the circuit opens and the handshake
   * probes it). A caller's own shorter limit says nothing of the server; nor does a call sent
   * before the connection last became ready (HTTP calls in flight outlive a reconnect).
   */
  private noteUnanswered(p: Pending, err: Error | undefined): void {
    // The hub's own lists (the catalog's fetches: clients' lists are served from it) are no
    // calls, either way. Answered, they are no sign its calls are: like a ping, bookkeeping (the
    // hub fetches the lists of every server that becomes ready, which would end each probation
    // at once). Unanswered, they are no call left unanswered: a server whose resources/list
    // never answers, its tools working, was taken down after three of the hub's fetches (and
    // then at the first fetch as it came back, on probation, again and again), its calls in
    // flight failing, and lastError said "calls". So are its other requests of its own (a
    // subscription renewed as the server came back: answered, it ended every probation at once).
    if (hubsOwn(p)) return;
    if (err === undefined || err instanceof RpcError) return this.hang.answered();
    if (!(err instanceof TimeoutError) || err.callers || this.sentBeforeReady(p) || this._state !== 'ready') return;
    // A call answered, or progress heard (its own included), since this one was sent: the server
    // was working its calls meanwhile, and this one is slow, not unanswered. Otherwise calls
    // started together (a slow tool called three times at once) that outlast their timeout
    // together, or report progress until the total limit (maxTotalTimeoutMs) stops them, would
    // take down a server that answered other calls, or reported progress, all along.
    if (this.answeredSince(p)) return;
    // A `tasks/result` waits, by the spec, until its task ends: one out of time is a long task
    // (the server answered its tools/call at once), and ending the server would end its tasks.
    if (p.taskId !== undefined) return;
    // A call waits for the client's answer to the server's own question (an elicitation a user
    // may take minutes over): a server that takes its calls one at a time waits for it too, the
    // others in line behind it, and ending it would end that call under the user (the health
    // check spares it for the same reason).
    if (this.awaitsClient()) return;
    // One more in a row, or the row that says it hangs (HangWatch.unansweredCall).
    const n = this.hang.unansweredCall();
    if (n === 0) return;
    const ms = err.ms;
    this.callsUnanswered(
      n === 1
        ? `a call got no answer within its timeout (${ms} ms) again, before any was answered since the server was back: it still takes calls without answering them`
        : `${n} calls in a row got no answer within their timeout (${ms} ms), none answered in between: the server takes calls without answering them`,
    );
  }

  /** A call waits for the client's answer to a request the server made (its timeout paused). */
  protected awaitsClient(): boolean {
    for (const p of this.pending.values()) if (p.waits > 0) return true;
    return false;
  }

  /**
   * Take the server down for calls it leaves unanswered (noteUnanswered), and start it again:
   * as a server hung, not crashed (Lifecycle.lost and trip with `hung`: its own backoff, and no
   * count toward the crash-loop limit).
   */
  protected abstract callsUnanswered(reason: string): void;

  /**
   * Send a request. Public calls get the era envelope; internal (handshake) calls pass their
   * params exactly as they must appear on the wire.
   */
  protected call(
    method: string,
    params: Record<string, unknown>,
    opts: CallOptions | undefined,
    internal: boolean,
    listen?: ListenSink,
    holds = 0,
    deadline?: number,
  ): Promise<Record<string, unknown>> {
    const id = ++this.nextId;
    const timeoutMs = opts?.timeoutMs ?? this.spec.timeoutMs;
    const who = opts?.principal;
    if (who !== undefined && this.servedFor !== who) this.servedFor = this.servedFor === undefined ? who : null;
    return new Promise((resolve, reject) => {
      const p: Pending = { id, method, opts, timeoutMs, internal, resolve, reject, timer: undefined, token: undefined, waits: 0, onAbort: undefined, listen, holds, deadline, gen: this.hang.readyCount, answeredAtSend: this.hang.answers };
      if (method === 'tasks/result' && typeof params.taskId === 'string') p.taskId = params.taskId;
      try {
        this.send(p, params);
      } catch (err) {
        // A frame that could not be made (params with a bigint or a cycle) or sent: the call
        // ends here, and what it held is given back.
        if (this.isPending(p)) this.failCall(p, err as Error);
        else {
          this.letGo(p);
          reject(err);
        }
      }
    });
  }

  /** Frames `p` and sends it (call()'s body, outside the executor's context). */
  private send(p: Pending, params: Record<string, unknown>): void {
    const { id, method, opts, internal, listen, timeoutMs } = p;
    // A caller that went away, or whose time ran out, while the call waited is not sent at all.
    if (opts?.signal?.aborted) throw notSent(new CancelledError(reasonOf(opts.signal)));
    const hard = internal || listen ? undefined : (opts?.maxTotalTimeoutMs ?? this.spec.maxTotalTimeoutMs);
    const left = hard === undefined || p.deadline === undefined ? hard : Math.min(hard, p.deadline - monotonicNow());
    if (left !== undefined && left <= 0) throw notSent(new TimeoutError(this.id, hard!));
    let wire = params;
    let paramsJson: string | undefined;
    if (!internal) {
      if (opts?.onProgress || opts?.askProgress) {
        p.token = opts.progressToken ?? nextToken();
        opts.onToken?.(p.token);
      }
      const e = {
        paramsMeta: params._meta,
        meta: opts?.meta,
        progressToken: p.token,
        clientCapabilities: opts?.clientCapabilities,
        logLevel: opts?.logLevel,
        clientInfo: this.clientInfo,
      };
      // A modern request's text without the copy withMeta makes (modernParamsJson); the params
      // as they are are what the transport reads (an HTTP request's Mcp-* headers), as the copy was.
      if (this._era === MODERN) paramsJson = modernParamsJson(params, e);
      if (paramsJson === undefined) wire = withMeta(params, this._era === MODERN ? modernMeta(e) : legacyMeta(e));
    }
    // JSON.stringify({ jsonrpc: '2.0', id, method, params: wire })'s text (id is a counter's
    // integer): the envelope by hand, the params alone through the serialiser, ~1.5k
    // instructions a call less (callgrind, issue #9).
    const frame = '{"jsonrpc":"2.0","id":' + id + ',"method":' + jsonText(method) + ',"params":' + (paramsJson ?? JSON.stringify(wire)) + '}';
    // A listen stream lasts as long as the subscription; only its own end or close stops it.
    if (!listen) p.timer = setTimeout(() => this.timerFired(p), timeoutMs);
    if (hard !== undefined && hard < Infinity) {
      p.hardLeftMs = left;
      p.hardSince = monotonicNow();
      this.armHard(p, hard, left!);
    }
    if (opts?.signal) {
      p.onAbort = this.abortHandler(p);
      opts.signal.addEventListener('abort', p.onAbort, { once: true });
    }
    this.pending.set(id, p);
    if (p.token !== undefined) this.byToken.set(p.token, p);
    this.transmit(p, frame, wire);
  }

  private settle(p: Pending): boolean {
    if (this.pending.get(p.id) !== p) return false;
    this.pending.delete(p.id);
    if (p.timer) clearTimeout(p.timer);
    p.timer = undefined;
    if (p.hardTimer) clearTimeout(p.hardTimer);
    p.hardTimer = undefined;
    if (p.token !== undefined) this.byToken.delete(p.token);
    if (p.listen) this.endedListens.add(p.id, p.listen);
    if (p.onAbort) p.opts!.signal!.removeEventListener('abort', p.onAbort);
    if (p.waits > 0) this.serverAsks.withdrawFor(p);
    this.letGo(p);
    return true;
  }

  /** Gives back, once, what `p` held. */
  private letGo(p: Pending): void {
    if (p.holds === 0) return;
    const h = p.holds;
    p.holds = 0;
    this.release(h);
  }

  protected isPending(p: Pending): boolean {
    return this.pending.get(p.id) === p;
  }

  protected resolveCall(p: Pending, result: Record<string, unknown>): void {
    if (!this.settle(p)) return;
    this.ended(p, undefined);
    if (p.urlElicitations) this.urlCompletions.ended(p, undefined);
    p.resolve(result);
  }

  protected failCall(p: Pending, err: Error): void {
    if (!this.settle(p)) return;
    this.ended(p, err);
    this.urlCompletions.ended(p, err);
    p.reject(err);
  }

  protected failAll(make: (p: Pending) => Error): void {
    for (const p of this.pending.values()) this.failCall(p, make(p));
  }

  /**
   * A call's timer is due: judged after the event loop's next read of what came in (setImmediate
   * runs after the poll for I/O). A hub held up past the timeout (a long callback, a machine too
   * loaded to run it) runs due timers before it reads: an answer, or progress, that came in time
   * was waiting unread, and the call was failed as unanswered (and counted toward the restart of
   * a server that leaves calls unanswered). The spent timer is dropped meanwhile: progress read
   * then arms a new one (onNotification), as does the end of a wait for the client (resumeTimer).
   * An answer read then that came compressed is decoded on the thread pool, done a turn or more
   * later: it is waited for (up to DECODE_WAIT_MS), or the call failed as unanswered all the same.
   */
  private timerFired(p: Pending, hardMs?: number): void {
    if (hardMs === undefined) p.timer = undefined;
    else p.hardTimer = undefined;
    const due = monotonicNow();
    const judge = (): void => {
      if (!this.isPending(p)) return;
      if (p.ctl?.decoding === true && monotonicNow() - due < DECODE_WAIT_MS) return void setImmediate(judge);
      if (hardMs === undefined) {
        if (p.timer === undefined && p.waits === 0) this.onTimeout(p);
      } else if (p.waits > 0) {
        p.hardLeftMs = 0; // paused for the client meanwhile: due as soon as it resumes
      } else if (p.hardTimer === undefined) {
        this.onTimeout(p, hardMs);
      }
    };
    setImmediate(judge);
  }

  /** `hardMs`: the hard cap fired rather than the idle timeout. */
  private onTimeout(p: Pending, hardMs?: number): void {
    if (!this.settle(p)) return;
    const err = callTimeout(this.id, p, hardMs, this.ownLimitMs(), this.spec.maxTotalTimeoutMs);
    this.ended(p, err);
    p.reject(err);
    if (!p.internal) this.cancelUpstream(p, timeoutReason(p, hardMs));
  }

  /**
   * The caller's abort listener for `p`. Made inside call()'s executor, where it shared a context
   * with everything else the executor creates, it kept every call's objects alive through
   * young-generation GCs (measured: docs/BENCHMARKS.md, "Young-generation GC").
   */
  private abortHandler(p: Pending): () => void {
    return () => this.onAbort(p);
  }

  private onAbort(p: Pending): void {
    if (!this.settle(p)) return;
    const reason = reasonOf(p.opts!.signal!);
    this.ended(p, new CancelledError(reason));
    p.reject(new CancelledError(reason));
    if (!p.internal) this.cancelUpstream(p, reason);
  }

  /** Every message from the upstream; `via` is the call whose HTTP answer stream carried it. */
  protected handleMessage(c: Classified, via?: Pending): void {
    switch (c.kind) {
      case 'response': {
        const rid = c.msg.id;
        const p = this.answered(rid, via);
        if (p === undefined || !this.isPending(p)) {
          this.log.debug({ id: rid }, 'dropped a response to no call in flight');
          return;
        }
        if ('error' in c.msg) this.failCall(p, upstreamError(c.msg.error));
        else this.resolveCall(p, this._era === LEGACY ? legacyResult(c.msg.result) : c.msg.result);
        return;
      }
      case 'request':
        return this.onServerRequest(c.msg, via);
      case 'notification':
        return this.onNotification(c.msg, via);
      case 'invalid': {
        // An answer the hub cannot take (the transport logged it): its call fails now, saying
        // why, rather than at its timeout or as an answer that "ended without a response".
        const p = c.response && c.id !== undefined ? this.answered(c.id, via) : undefined;
        if (p !== undefined) return this.failCall(p, new TransportError(`server "${this.id}" answered with a message the hub refuses: ${c.error.message}`));
        this.log.warn({ reason: c.error.message }, 'skipped an invalid message from the upstream');
      }
    }
  }

  /**
   * The call a response with id `rid` answers. One that came on a call's own answer stream (its
   * POST's, or that stream resumed) answers that call only (digest §6.2: each message goes on
   * one stream, the response on its request's): a response there naming another call in flight
   * would hand one caller's answer to another, so it is dropped. An id-less error on that
   * stream is its call's. Elsewhere (stdio's one stream) the id says which; the legacy HTTP
   * standalone GET stream, which may carry no response (digest §6.2), never brings one here.
   */
  private answered(rid: unknown, via: Pending | undefined): Pending | undefined {
    if (via === undefined) return rid === undefined || rid === null ? undefined : this.pending.get(typeof rid === 'number' ? rid : Number(rid));
    if (rid === undefined || rid === null || (typeof rid === 'number' ? rid : Number(rid)) === via.id) return via;
    this.log.warn({ id: rid, stream: via.id }, "dropped a response on a call's answer stream that names another request");
    return undefined;
  }

  private onServerRequest(msg: Request, via: Pending | undefined): void {
    if (this._era === MODERN) {
      // 2026-07-28 servers never send requests (they ask with input_required, digest §5) and
      // clients never send responses (§1.2): not relayed, not answered, only logged.
      this.log.warn({ method: msg.method, id: msg.id }, 'a modern server sent a request, which its era forbids; ignored');
      return;
    }
    if (msg.method === 'ping') return this.reply(JSON.stringify(resultResponse(msg.id, {})), via);
    // A question on the stream of a call the hub cancelled (its stream is read until the
    // cancellation was taken): answered, an error, only after that cancellation, which the
    // answer would otherwise overtake (as in onServerRequest's end), ending the call unaware.
    if (via?.cancelSent !== undefined && !this.isPending(via)) {
      const sent = via.cancelSent;
      return void sent.then(() => this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(INTERNAL_ERROR, `the call this ${msg.method} came with has ended`))), via));
    }
    const { target, nobody, inFlight } = askTarget(this.pending, msg, via);
    if (inFlight !== undefined) {
      this.log.warn({ method: msg.method, inFlight }, 'server request with several calls in flight; refused');
      return this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(INTERNAL_ERROR, 'ambiguous: several calls in flight'))), via);
    }
    if (target === undefined) {
      // Outside any call a roots/list (a server asking after a list_changed the hub passed on, or
      // as it starts) goes to the client that said its roots changed, while this connection's
      // calls are still its principal's alone.
      const from = this.roots.from;
      if (nobody !== undefined && via === undefined && msg.method === 'roots/list' && from !== undefined && this.servedFor === from.principal) return this.askRoots(msg, from);
      if (nobody !== undefined && via === undefined && msg.method === 'roots/list') this.rootsRefused = true;
      if (nobody !== undefined) return this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(INTERNAL_ERROR, nobody))), via);
      return this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(METHOD_NOT_FOUND, `client does not support ${msg.method}`))), via);
    }
    // A question of the wrong shape is the server's mistake: it is told so (-32602), and nobody
    // is asked what could not be put to them (a form with no schema). (Only a legacy server asks.)
    const bad = askParamsProblem(msg.method, msg.params, true);
    if (bad !== undefined) {
      this.log.warn({ method: msg.method, problem: bad }, 'server request of the wrong shape refused');
      return this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(INVALID_PARAMS, `Invalid params: ${bad}`))), via);
    }
    const p = target;
    // Past MAX_OPEN_ASKS the upstream is answered with an error at once: each would otherwise
    // be held, with its stream frame and listeners, in the hub and at the client until answered.
    if (p.waits >= MAX_OPEN_ASKS) {
      p.refusedAsks = (p.refusedAsks ?? 0) + 1;
      if (p.refusedAsks === 1) this.log.warn({ method: msg.method, open: p.waits }, 'server requests refused: too many open at the client for one call');
      return this.reply(JSON.stringify(errorResponse(msg.id, new RpcError(INTERNAL_ERROR, `too many requests to the client at once (${MAX_OPEN_ASKS} open for this call)`))), via);
    }
    this.pauseTimer(p);
    const key = idKey(msg.id);
    const withdrawn = this.serverAsks.open(key, p);
    const eid = msg.params?.elicitationId;
    if (msg.method === 'elicitation/create' && typeof eid === 'string') (p.urlElicitations ??= new Set()).add(eid);
    let answer: Promise<Record<string, unknown>>;
    try {
      answer = p.opts!.onServerRequest!(relayedInput({ method: msg.method, params: msg.params }, p.opts!.asker, p.opts!.askerInMeta), withdrawn.signal);
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer
      .then(
        (result) => answerFrame(msg, result, this.log),
        (err: unknown) => {
          // A question withdrawn (the call was cancelled, or the upstream withdrew it) is no failure.
          if (!(err instanceof RpcError) && !(err instanceof CancelledError)) this.log.warn({ method: msg.method, err: errMessage(err) }, 'server request handler failed');
          return failureFrame(msg, err);
        },
      )
      .then((frame) => {
        this.serverAsks.close(key, withdrawn);
        this.resumeTimer(p);
        // Cancelled by the upstream itself: it wants no answer (digest §4).
        if (withdrawn.signal.reason === WITHDRAWN_BY_SERVER) return;
        if (p.cancelSent === undefined) this.reply(frame, via);
        else void p.cancelSent.then(() => this.reply(frame, via));
      });
  }

  /** Waiting for the user is not the upstream's time: both timers stop while the client is asked. */
  private pauseTimer(p: Pending): void {
    if (p.waits++ > 0) return;
    if (p.timer) clearTimeout(p.timer);
    p.timer = undefined;
    if (p.hardTimer || p.hardLater !== undefined) {
      if (p.hardTimer) clearTimeout(p.hardTimer);
      p.hardTimer = undefined;
      p.hardLater = undefined;
      p.hardLeftMs = Math.max(0, p.hardLeftMs! - (monotonicNow() - p.hardSince!));
    }
  }

  private resumeTimer(p: Pending): void {
    if (--p.waits > 0 || !this.isPending(p) || p.listen) return;
    p.timer = setTimeout(() => this.timerFired(p), p.timeoutMs);
    if (p.hardLeftMs !== undefined) {
      const total = p.opts?.maxTotalTimeoutMs ?? this.spec.maxTotalTimeoutMs!;
      p.hardSince = monotonicNow();
      this.armHard(p, total, p.hardLeftMs);
    }
  }

  /**
   * Arms the hard cap's timer (`leftMs` from hardSince) just after the idle timer was (re)started,
   * or, when the idle timer is due first (its timeoutMs no longer than leftMs: of two timers due
   * alike the idle one, armed first, is judged first), leaves it for later: `hardLater`. It is
   * armed then only if the idle timer is put off (progress: hardDue), or its time left kept when
   * the call pauses (pauseTimer). Why:
   * a call's second timer, with its list insert and removal, cost ~2k instructions a call on the
   * event loop, for a cap that only matters once progress has refreshed the idle timer (issue #9).
   */
  private armHard(p: Pending, total: number, leftMs: number): void {
    if (leftMs < p.timeoutMs) p.hardTimer = setTimeout(() => this.timerFired(p, total), leftMs);
    else p.hardLater = total;
  }

  /**
   * The idle timer is about to be put off: a hard cap left for later is armed now, for the time
   * left of it since hardSince, or judged at once if that is over (as its timer, due, would be).
   */
  private hardDue(p: Pending): void {
    const total = p.hardLater!;
    p.hardLater = undefined;
    const left = p.hardLeftMs! - (monotonicNow() - p.hardSince!);
    if (left > 0) p.hardTimer = setTimeout(() => this.timerFired(p, total), left);
    else this.timerFired(p, total);
  }

  private onNotification(msg: Notification, via: Pending | undefined): void {
    const params = msg.params ?? {};
    // The upstream withdraws one of its own requests to the client: so does the hub, at the client.
    if (msg.method === 'notifications/cancelled' && this.serverAsks.size > 0 && this.serverAsks.withdrawnByServer(params.requestId, via)) return;
    if (msg.method === 'notifications/elicitation/complete' && typeof params.elicitationId === 'string') {
      // To the client that was asked the URL-mode elicitation of that id, while its call runs.
      for (const p of this.pending.values()) {
        if (!p.urlElicitations?.has(params.elicitationId)) continue;
        try {
          p.opts?.onElicitationComplete?.(params);
        } catch (err) {
          this.log.warn({ err: errMessage(err) }, 'elicitation-complete handler threw');
        }
        return;
      }
      // Its call has ended (a -32042's steps are always done after it): to the same client still.
      const late = this.urlCompletions.take(params.elicitationId);
      if (late !== undefined) {
        try {
          late(params);
        } catch (err) {
          this.log.warn({ err: errMessage(err) }, 'elicitation-complete handler threw');
        }
        return;
      }
    }
    if (msg.method === 'notifications/progress') {
      const t = params.progressToken;
      const p = t === undefined ? undefined : this.byToken.get(typeof t === 'string' ? t : String(t));
      // Its call answered or ended (a server that reports past its end, on the call's stream or
      // another): a token no longer active, whose progress means nothing (digest §4). Said, not relayed.
      if (p === undefined) return void this.log.debug({ method: via?.method, onCallStream: via !== undefined }, 'progress for no call in flight (its call answered or ended): dropped');
      if (p.hardLater !== undefined) this.hardDue(p);
      if (p.timer) p.timer.refresh();
      // Due, and waiting to be judged (timerFired): heard in time after all, its wait starts again.
      else if (p.waits === 0 && !p.listen) p.timer = setTimeout(() => this.timerFired(p), p.timeoutMs);
      this.hang.answered();
      if (!p.opts?.onProgress) return;
      const info = progressInfo(params);
      if (info === undefined) return;
      try {
        p.opts.onProgress(info);
      } catch (err) {
        this.log.warn({ err: errMessage(err) }, 'progress handler threw');
      }
      return;
    }
    const stream = listenOf(this.pending, params, via);
    // A server ending a stdio subscription may say so with notifications/cancelled (digest §4.1).
    if (stream && msg.method === 'notifications/cancelled') return this.resolveCall(stream, {});
    const sink = stream ? stream.listen : this.endedListens.sinkOf(params, via);
    if (sink) {
      let kept: boolean | void = undefined;
      try {
        kept = sink({ method: msg.method, params });
      } catch (err) {
        this.log.warn({ err: errMessage(err) }, 'listen handler threw');
      }
      if (msg.method === 'notifications/subscriptions/acknowledged' || kept === false) return;
    } else if (msg.method === 'notifications/cancelled' && isListenId(this.pending, params.requestId)) {
      return this.resolveCall(this.pending.get(Number(params.requestId))!, {});
    }
    if (msg.method === 'notifications/message') {
      if (via !== undefined && !this.isPending(via)) return this.lateLog(via, params);
      const targets = logTargets(this.pending, via, this._era === MODERN, this.servedFor);
      if (targets.length > 0) {
        // Without the related-task of a task the hub runs itself, as its questions go (relayedInput).
        const line = redactLogMessage(relayedNotice(params));
        for (const p of targets) {
          try {
            p.opts!.onLog!(line);
          } catch (err) {
            this.log.warn({ err: errMessage(err) }, 'log handler threw');
          }
        }
        return;
      }
      if (via === undefined && this.servedFor === null)
        this.log.debug({ lineLevel: typeof params.level === 'string' ? params.level.slice(0, 16) : undefined }, "a log line no call could be told as its own, on a connection that served several principals: relayed to no client");
    }
    this.emit('notification', { method: msg.method, params });
  }

  /**
   * A log line on the answer stream of a call already answered (or ended): it is about that
   * call, and no other's (it was emitted upstream-wide, where nothing takes a log line: lost).
   * A legacy session's client takes its lines session-wide (digest §4): it is told still. A
   * 2026-07-28 line is request-scoped and its request is over, so it goes to the hub's log.
   */
  private lateLog(via: Pending, params: Record<string, unknown>): void {
    const line = redactLogMessage(relayedNotice(params));
    if (lateLogTarget(via)) {
      try {
        via.opts!.onLog!(line);
      } catch (err) {
        this.log.warn({ err: errMessage(err) }, 'log handler threw');
      }
      return;
    }
    const level = typeof line.level === 'string' ? line.level.slice(0, 16) : undefined;
    const data = typeof line.data === 'string' ? line.data : JSON.stringify(line.data ?? null);
    this.log.info({ method: via.method, lineLevel: level, data: redactedExcerpt(data, 500, redactLogText) }, "a log line came on a call's answer stream after its answer; its call is over, so no client is told");
  }

  listen(filter: ListenFilter, onMessage: ListenSink): ListenHandle {
    if (this._state !== 'ready' || this._era !== MODERN) return refusedListen(this._state !== 'ready' ? `upstream is ${this._state}` : 'not a modern upstream');
    return listenHandle(
      (signal) => this.call('subscriptions/listen', { notifications: filter }, { signal }, false, onMessage),
      () => this.retiredListenMs(),
    );
  }

  /**
   * How long a listen stream another replaced is still read (ListenHandle.retire): 0 where the
   * server's messages come in the order it wrote them, as on one pipe.
   */
  protected retiredListenMs(): number {
    return 0;
  }
}
