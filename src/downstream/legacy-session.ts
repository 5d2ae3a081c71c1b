import { randomBytes } from 'node:crypto';
import { CancelledError, HubStoppingError, INTERNAL_ERROR, InputTimeoutError, ClientRpcError, RpcError } from '../protocol/errors.js';
import { idKey, type Id, type Response } from '../protocol/jsonrpc.js';
import type { ClientCapabilities, Implementation, InputRequest, LoggingLevel } from '../protocol/types.js';
import type { MessageSink } from './core.js';
import { reasonOf, type Canceller, type Signal } from '../cancel.js';
import { KeyedTable } from '../keyed-table.js';
import { monotonicNow } from '../monotonic.js';
import type { SessionStreams } from './resumable.js';
import type { OwedUpdates } from './owed-updates.js';
import { declares, required, requiredNames, undeclaredCode } from '../protocol/client-capabilities.js';
import { inputResultProblem, normalInputResult } from '../protocol/input-results.js';
import { olderAsk } from './older-asks.js';
import { LEGACY } from '../protocol/era.js';

/** The call on whose behalf the hub asks its client something (LegacySession.ask). */
export interface AskingCall {
  /** Aborts when the call is cancelled or ends. */
  readonly signal: Signal;
  /** How long the client has to answer (policy.inputTimeoutMs); none: no limit. */
  readonly timeoutMs?: number;
  /** Aborts when the upstream that asked withdraws the question (or its call ended): withdrawn at the client too, the call goes on. */
  readonly withdrawn?: Signal;
  /**
   * Aborts when the connection that carries the question closes (an HTTP POST's answer stream),
   * or when the client can no longer answer (stdio: its stdin ended; the reason, a string, says so).
   */
  readonly gone?: Signal;
  /** Ends the call: the question timed out (InputTimeoutError) or can no longer be answered. */
  end(why: Error): void;
}

/**
 * The legacy session of one stdio pipe (StdioServer.session): the client's current session, and
 * what the pipe does when an initialize again replaces it (answers what the old one still owes).
 */
export interface StdioSessionSlot {
  current?: LegacySession;
  /** `by`: the exchange of the initialize that replaces it (still owed its own answer). */
  replaced?(old: LegacySession, by: { reply: unknown }): void;
}

/** How many cancellations of requests not seen yet a session keeps, and for how long (LegacySession.cancelledAhead). */
const CANCELLED_AHEAD_MAX = 16;
const CANCELLED_AHEAD_MS = 10_000;

/** One legacy (2025-11-25) client session: its handshake facts and its open server → client requests. */
export class LegacySession {
  initialized = false;
  logLevel: LoggingLevel | undefined;
  /**
   * When its initialize was answered (performance.now()): its client lists only after that, so a
   * list change made before it is in every list it gets, and it is not told of it (a change a
   * coalescing window said late, session-table.ts). Unset (a session taken back by a restarted
   * hub, whose client kept lists from before): told of every change.
   */
  listsFrom: number | undefined;
  /** The standalone GET stream (HTTP) or stdout (stdio), for notifications not tied to a request. */
  stream: MessageSink | undefined;
  /**
   * When it was last used (monotonicNow()): idle expiry and which session gives way go by it. Not
   * the wall clock: an NTP step or a laptop's resume moving it an hour ahead ended every session
   * at the next sweep, and one back kept sessions whose clients were gone an hour longer.
   */
  lastSeen = monotonicNow();
  /** The tool group of the endpoint the session was opened on (`/mcp/<group>`); it keeps it. */
  group: string | undefined;
  /** The API key that opened it (Identity.key): the session ends when that key is removed. */
  key: string | undefined;
  /** The API key that opened its GET stream: the session ends when that key is removed too. */
  streamKey: string | undefined;
  readonly inflight = new KeyedTable<Canceller>();
  /**
   * Cancellations of requests not seen yet. Over HTTP a client's notifications/cancelled comes
   * on a POST of its own, which may be read before the POST of the request it names (a client
   * that cancels at once, or one the scheduler held back): dropped, the request then ran, a
   * subscription was made that nobody holds, a write its user cancelled was carried out. A few,
   * for a few seconds: a session never uses a request id twice (MCP), so one naming a request
   * already answered (the usual race) is harmless, and lapses.
   */
  private ahead: { key: string; reason: string | undefined; at: number }[] = [];
  /** Its resumable SSE streams and what they keep for a reconnection (HTTP; made at its first streamed answer). */
  streams: SessionStreams | undefined;
  /** Its subscribed URIs owed an "updated" after a restart's take-back or a reload's move, said once its GET stream is open (OwedUpdates). */
  owedUpdates: OwedUpdates | undefined;
  /**
   * Names this session object in the ids of its questions. Another hub given the same key, or
   * this hub restarted, serves the session with an object of its own: counted from 1 alone, its
   * questions would share ids with these, and an answer reaching the other hub would be taken
   * there for another question (a user's accept applied to something it was not asked).
   */
  private readonly idPrefix = `sy-${randomBytes(6).toString('base64url')}-`;
  private nextId = 0;
  private readonly pending = new Map<string, { method: string; resolve: (r: Record<string, unknown>) => void; reject: (e: unknown) => void }>();

  constructor(
    readonly protocolVersion: string,
    readonly clientInfo: Implementation | undefined,
    readonly capabilities: ClientCapabilities,
    readonly principal: string,
    readonly id: string = randomBytes(18).toString('base64url'),
  ) {}

  /** A cancellation of a request this session is not running (cancelledAhead). */
  cancelledAhead(id: Id, reason: string | undefined): void {
    this.lapseAhead();
    if (this.ahead.length >= CANCELLED_AHEAD_MAX) this.ahead.shift();
    this.ahead.push({ key: idKey(id), reason, at: monotonicNow() });
  }

  /**
   * Whether request `id` was cancelled before it came, and the reason (its entry is let go);
   * false when not. Asked of every request: nothing is computed while none is kept.
   */
  takeCancelledAhead(id: Id): { reason: string | undefined } | false {
    if (this.ahead.length === 0) return false;
    this.lapseAhead();
    const key = idKey(id);
    const i = this.ahead.findIndex((a) => a.key === key);
    if (i < 0) return false;
    const [a] = this.ahead.splice(i, 1);
    return { reason: a!.reason };
  }

  private lapseAhead(): void {
    const since = monotonicNow() - CANCELLED_AHEAD_MS;
    while (this.ahead.length > 0 && this.ahead[0]!.at < since) this.ahead.shift();
  }

  /**
   * Send a server → client request on `sink` (the channel of the call that caused it) and wait
   * for the client's answer. Refused at once when the client did not declare the capability.
   * `call` bounds the wait: the call's cancellation withdraws the question; so does the client
   * not answering within `timeoutMs`, or the connection that carried the question closing
   * (`gone`), and then the call that asked ends too (`end`). On a resumable stream a cut
   * withdraws it only if the client has not reconnected within reconnectGrace(timeoutMs): its
   * reconnection replays the question, and a cut is no cancellation in this era. Withdrawn
   * means the client hears notifications/cancelled for it (digest §4) and the asker an error.
   */
  ask(sink: MessageSink, req: InputRequest, call?: AskingCall): Promise<Record<string, unknown>> {
    if (!declares(this.capabilities, req.method, req.params))
      return Promise.reject(new RpcError(undeclaredCode(this.capabilities, req.method), `the client did not declare ${requiredNames(required(req.method, req.params))}, which ${req.method} needs`));
    if (sink.closed) return Promise.reject(new RpcError(-32603, 'the client is no longer connected'));
    // A question nobody can hear would wait for the upstream's own timeout: refused at once.
    if (sink.canStream === false)
      return Promise.reject(new RpcError(-32603, `the client cannot be asked (${req.method}) on this answer: its request's Accept header does not take text/event-stream`));
    if (call?.signal.aborted || call?.withdrawn?.aborted) return Promise.reject(new CancelledError());
    // What an older revision's client cannot take: said its way where that says the same, else refused.
    if (this.protocolVersion < LEGACY && req.method !== 'roots/list') {
      const older = olderAsk(req, this.protocolVersion);
      if (older instanceof RpcError) return Promise.reject(older);
      req = older;
    }
    const id = `${this.idPrefix}${++this.nextId}`;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let grace: NodeJS.Timeout | undefined;
      let unwatch: (() => void) | undefined;
      const done = (): void => {
        this.pending.delete(id);
        if (timer) clearTimeout(timer);
        if (grace) clearTimeout(grace);
        unwatch?.();
        call?.signal.removeEventListener('abort', onAbort);
        call?.gone?.removeEventListener('abort', onGone);
        call?.withdrawn?.removeEventListener('abort', onWithdrawn);
      };
      /** false when it was answered (or withdrawn) already. */
      const withdraw = (why: string, err: Error): boolean => {
        if (!this.pending.has(id)) return false;
        done();
        if (!sink.closed) sink.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: why } });
        reject(err);
        return true;
      };
      // The call that asked is cancelled: so is our question to the client (digest §6.1).
      // Rejected with why it was: the asker (a modern upstream's round) ends the call with this.
      const onAbort = (): void => void withdraw('the request that asked was cancelled', new CancelledError(reasonOf(call!.signal)));
      // Whoever withdraws it may say why (the call that asked ended, say); else it was the server.
      const onWithdrawn = (): void => {
        const why = call?.withdrawn?.reason;
        if (typeof why === 'string') void withdraw(why, new CancelledError(why));
        else void withdraw('the server that asked withdrew it', new CancelledError('the server withdrew its request'));
      };
      const onGone = (): void => {
        if (unwatch !== undefined) return; // a resumable stream: onConnection decides
        const how = call?.gone?.reason;
        const err = typeof how === 'string' ? new AnswerStreamClosedError(req.method, undefined, undefined, how) : new AnswerStreamClosedError(req.method);
        if (withdraw(typeof how === 'string' ? how : 'the stream that carried it closed', err)) call!.end(err);
      };
      const onConnection = (connected: boolean): void => {
        if (connected) grace = void clearTimeout(grace);
        else if (grace === undefined) {
          const ms = reconnectGrace(call!.timeoutMs);
          grace = setTimeout(() => {
            const err = new AnswerStreamClosedError(req.method, ms);
            if (withdraw(`the stream that carried it closed and its client did not reconnect within ${ms} ms`, err)) call!.end(err);
          }, ms);
          grace.unref();
        }
      };
      this.pending.set(id, {
        method: req.method,
        resolve: (r) => {
          done();
          resolve(r);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      if (call) {
        call.signal.addEventListener('abort', onAbort, { once: true });
        call.gone?.addEventListener('abort', onGone, { once: true });
        call.withdrawn?.addEventListener('abort', onWithdrawn, { once: true });
        const ms = call.timeoutMs;
        if (ms !== undefined && ms < Infinity) {
          timer = setTimeout(() => {
            // Its stream cut, the client not back yet: it went away before its time ran out, and
            // its grace would end later. The call ends as it would have at the grace's end, as
            // cancelled, not as timeout, which is for a client still there that did not answer:
            // else a client vanished late in its time (or one whose cut a loaded hub saw late)
            // was recorded timed out, one vanished early cancelled.
            if (grace !== undefined) {
              const err = new AnswerStreamClosedError(req.method, undefined, ms);
              if (withdraw(`the stream that carried it closed and its client did not reconnect before its time to answer (${ms} ms) ran out`, err)) call.end(err);
              return;
            }
            const err = new InputTimeoutError(req.method, ms);
            if (withdraw(`the client did not answer within ${ms} ms`, new RpcError(INTERNAL_ERROR, err.message))) call.end(err);
          }, ms);
          timer.unref();
        }
      }
      const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method: req.method };
      if (req.params) msg.params = req.params;
      sink.send(msg);
      // The send made the answer a stream; a resumable one is watched for cuts and reconnections.
      if (call?.gone !== undefined && this.pending.has(id)) {
        unwatch = sink.watchConnection?.(onConnection);
        if (unwatch !== undefined && sink.connected === false) onConnection(false);
      }
      // Closed between the check above and now (the send found no one): it can never be answered.
      if (call?.gone?.aborted) onGone();
    });
  }

  /**
   * A client's answer to one of our requests; false when nothing was waiting for it. A result
   * that is not the asked method's result shape is passed on as an error, never as that result.
   */
  answer(msg: Response): boolean {
    const p = this.pending.get(String(msg.id));
    if (!p) return false;
    if ('error' in msg) {
      const e = RpcError.from(msg.error);
      p.reject(new ClientRpcError(e.code, e.message, e.data));
      return true;
    }
    const problem = inputResultProblem(p.method, msg.result);
    if (problem) p.reject(new RpcError(INTERNAL_ERROR, `the client answered ${p.method} with an invalid result: ${problem}`));
    else p.resolve(normalInputResult(p.method, msg.result as Record<string, unknown>));
    return true;
  }

  /**
   * A client's answer to one of our requests that is not a well-formed response (`problem`: its
   * result or error is not an object, or nests too deep): the question fails with that problem,
   * at once, as for an answer of the wrong shape. False when nothing was waiting for it.
   */
  answerMalformed(id: string | number, problem: string): boolean {
    const p = this.pending.get(String(id));
    if (!p) return false;
    p.reject(new RpcError(INTERNAL_ERROR, `the client answered ${p.method} with an invalid response: ${problem}`));
    return true;
  }

  /** The ids of the questions put to the client and not yet answered. */
  get openQuestions(): string[] {
    return [...this.pending.keys()];
  }

  /** close() was called: nothing more is sent to it. */
  ended = false;

  /**
   * `stopping`: the hub's stop ends it (the stdio hub), whose calls still running are answered so
   * (HubStoppingError), or end cancelled for the client gone (a CancelledError: stdout broke).
   */
  close(stopping?: HubStoppingError | CancelledError, ended?: string): void {
    this.ended = true;
    // The calls end first: one waiting for its client's answer to a question then ends as the
    // session's end or the hub's stop says (its row cancelled, or unavailable), not with the
    // question's 'session closed', which a modern upstream's round failed with first (rpc_error).
    const why = stopping ?? new SessionEndedError(ended);
    for (const c of this.inflight.values()) c.abort(why);
    for (const p of this.pending.values()) p.reject(new RpcError(-32603, 'session closed'));
    this.pending.clear();
    this.inflight.clear();
  }
}

/**
 * Why a call was cancelled when its session ended under it (DELETE, a revoked credential,
 * idleness, initialize again on stdio). Unlike a client's notifications/cancelled, its client
 * still waits for an answer to its request, and over HTTP is given one (Endpoint.legacyRequest).
 */
export class SessionEndedError extends CancelledError {
  /** `why`: what ended it, when the hub knows (a revoked API key), told after the sentence. */
  constructor(why?: string) {
    super(why === undefined ? 'the client session ended while the request was in flight' : `the client session ended while the request was in flight: ${why}`);
  }
}

/**
 * Why a call ended when the answer stream that carried its question closed (LegacySession.ask,
 * `gone`): one that cannot be resumed (a batch's), or a resumable one whose client did not
 * come back in time.
 */
export class AnswerStreamClosedError extends CancelledError {
  /**
   * `graceMs`: the stream was resumable, and its client did not reconnect within it;
   * `timeoutMs`: it did not reconnect before its time to answer ran out, within the grace;
   * `ended`: what else made an answer impossible (stdio: the client closed its input).
   */
  constructor(method: string, graceMs?: number, timeoutMs?: number, ended?: string) {
    super(
      ended !== undefined
        ? `${ended} while it was asked ${method}, so no answer can come`
        : timeoutMs !== undefined
        ? `the client's answer stream closed while it was asked ${method}, and the client did not reconnect before its time to answer (${timeoutMs} ms) ran out`
        : graceMs === undefined
          ? `the client's answer stream closed while it was asked ${method}; that stream cannot be resumed, so no answer can come`
          : `the client's answer stream closed while it was asked ${method}, and the client did not reconnect within ${graceMs} ms`,
    );
  }
}

/**
 * How long a question waits for its client to reconnect after a cut: 5 s, or half its answer
 * time (policy.inputTimeoutMs) if that is shorter. Not a setting of its own: it covers a
 * reconnect (the hub's SSE `retry:` hint is 1 s, so 5 s is several tries), not the user's
 * thinking time, which inputTimeoutMs gives and which a client back in time still has the rest
 * of; longer, a vanished client would hold the upstream (a legacy stdio server's asking calls
 * run one at a time) that much longer. docs/RELIABILITY.md says so.
 */
export const RECONNECT_GRACE_MS = 5_000;

export function reconnectGrace(timeoutMs: number | undefined): number {
  return timeoutMs === undefined || timeoutMs === Infinity ? RECONNECT_GRACE_MS : Math.min(RECONNECT_GRACE_MS, Math.max(1, Math.floor(timeoutMs / 2)));
}
