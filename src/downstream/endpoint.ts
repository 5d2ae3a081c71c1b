import { CredentialRevokedError } from '../auth/held-credential.js';
import { methodTable } from '../protocol/method-table.js';
import { answeredId, type BodyEnds } from './oversize-body.js';
import { INVALID_MESSAGE } from '../policy/gate.js';
import type { Logger } from '../log.js';
import { LEGACY, LEGACY_VERSIONS, MODERN, MODERN_VERSIONS } from '../protocol/era.js';
import {
  CancelledError,
  HubStoppingError,
  InputTimeoutError,
  INVALID_PARAMS,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  METHOD_NOT_FOUND,
  NOT_INITIALIZED,
  RpcError,
} from '../protocol/errors.js';
import { BATCH_VERSION, errorResponse, NOT_A_MESSAGE, idKey, resultResponse, type Classified, type Id, type Notification, type Request } from '../protocol/jsonrpc.js';
import { DRAIN_MS_HEADER, KEYS_KEPT_HEADER, MAX_BODY_HEADER } from '../protocol/meta.js';
import { LOG_LEVELS, type ClientCapabilities, type Implementation, type LoggingLevel, type ServerCapabilities } from '../protocol/types.js';
import type { CallContext } from '../router/context.js';
import { classifyEra, unsupportedLegacyVersion, type EraVerdict } from './classify.js';
import { listResponse, resultAnswer } from '../protocol/serialized.js';
import type { HubCore, MovedSubscriptions } from './core.js';
import type { Exchange } from './exchange.js';
import type { SessionIds } from './session-ids.js';
import type { SessionMemory } from './session-memory.js';
import type { LostEndpoint } from '../config/reload.js';
import { AnswerStreamClosedError, LegacySession, SessionEndedError, type StdioSessionSlot } from './legacy-session.js';
import { primes, ReplayBudget, SessionStreams } from './resumable.js';
import { spanOfMeta } from '../protocol/trace-context.js';
import { eraOfRequest } from '../protocol/request-era.js';
import { capabilitiesProblem, implementationProblem } from '../protocol/client-capabilities.js';
import { listenFilterProblem, ListenHub } from './listen.js';
import { asRpc, modernErrorStatus, stoppedError, toLegacyError, toLegacyResult, toModernError, toModernResult } from './results.js';
import { Canceller, clientReason } from '../cancel.js';
import { KeyedTable } from '../keyed-table.js';
import { LogBudget } from '../log-budget.js';
import { legacyContext, modernContext } from './call-context.js';
import { checkModern, checkModernHeaders } from './modern-envelope.js';
import { legacyMetaProblem } from './legacy-meta.js';
import { monotonicNow } from '../monotonic.js';
import { shownId, shownName } from '../protocol/shown-value.js';
import { named, recordRefused, refusalFacts, refusedMembers } from './refusal-rows.js';
import { batchRefusal } from './batch-rules.js';
import { capabilitiesWhileOpen, unanswered } from './startup-wait.js';
import { DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, NO_ROOM, NO_ROOM_HEADERS, noRoomError, SessionTable, type NoRoom } from './session-table.js';

type Params = Record<string, unknown>;

/**
 * Methods the hub routes, and the capability family each needs. Looked up by the method a client
 * named (methodTable: no prototype): `toString` found Object's function, which no server offers,
 * so a modern `toString` waited out the start-up grace before its -32601.
 */
const FAMILY = methodTable<keyof ServerCapabilities>({
  'tools/list': 'tools',
  'tools/call': 'tools',
  'prompts/list': 'prompts',
  'prompts/get': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resources',
  'resources/read': 'resources',
  'resources/subscribe': 'resources',
  'resources/unsubscribe': 'resources',
  'completion/complete': 'completions',
});
/** The array field of each list result, whose pages are shared across answers (see Serialized). */
const LIST_FIELD = methodTable<string>({
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
});
const LEGACY_ONLY = new Set(['resources/subscribe', 'resources/unsubscribe']);

/**
 * The hub's MCP endpoint for both eras: classifies each message, keeps legacy sessions,
 * validates modern envelopes, turns everything into an era-neutral CallContext for the core,
 * and converts results and errors back into the caller's era.
 */
export class Endpoint {
  /** The legacy sessions held, and their lifetimes (session-table.ts). */
  private readonly table: SessionTable;
  /** The table's HTTP sessions, by id (the same map). */
  readonly sessions: Map<string, LegacySession>;
  readonly listen: ListenHub;
  /** What every legacy session's resumable streams keep, together (resumable.ts). */
  readonly replayBudget = new ReplayBudget();
  /** Malformed client responses are warned of a few a minute: a client can send any number. */
  private readonly malformedWarnings = new LogBudget(10, 60_000);

  constructor(
    private readonly core: HubCore,
    private readonly log: Logger,
    /**
     * maxPendingPerSession: requests one legacy session may have in flight (back-pressure).
     * sessionIdleTimeoutMs, maxSessions: when legacy HTTP sessions end without a DELETE.
     * inputTimeoutMs: how long a legacy client's answer to a question may take.
     */
    private readonly limits: {
      maxPendingPerSession?: number;
      sessionIdleTimeoutMs?: number;
      maxSessions?: number;
      maxSessionsPerPrincipal?: number;
      /** policy.inputTimeoutMs: how long a legacy client has to answer a question the hub relays to it. */
      inputTimeoutMs?: number;
    } = {},
    /** Session ids that carry their session, so a restarted hub (or another) takes them back. */
    private readonly sessionIds?: SessionIds,
    /** What such sessions gathered (subscriptions, a log level), taken back with them. */
    private readonly memory?: SessionMemory,
  ) {
    this.listen = new ListenHub(core, log, {
      perPrincipal: limits.maxSessionsPerPrincipal ?? DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
      total: limits.maxSessions ?? DEFAULT_MAX_SESSIONS,
    });
    this.table = new SessionTable(core, log, limits, sessionIds, memory);
    this.sessions = this.table.sessions;
  }

  /**
   * One parsed message from an HTTP POST or a stdio line. `session` is the stdio session, if any.
   * Not async: a modern request, the usual message, is modern()'s own promise, which its caller
   * takes directly (an async function awaiting it resumes one turn after the answer, for nothing).
   * Never throws: what fails is a rejection, as from an async function.
   */
  message(c: Classified, ex: Exchange, stdioSession?: StdioSessionSlot): Promise<void> {
    if (c.kind !== 'request') return this.otherMessage(c, ex, stdioSession);
    let verdict: EraVerdict;
    try {
      verdict = classifyEra(c.msg.method, c.msg.params, ex.header('mcp-protocol-version'));
    } catch (err) {
      return Promise.reject(err);
    }
    return verdict.era === 'modern' ? this.modern(c.msg, ex) : this.otherMessage(c, ex, stdioSession, verdict);
  }

  /** message() for all but a modern request; `verdict`: a request's era, already worked out. */
  private async otherMessage(c: Classified, ex: Exchange, stdioSession?: StdioSessionSlot, verdict?: EraVerdict): Promise<void> {
    // A malformed response is still a response: JSON-RPC never answers one. It goes where a
    // well-formed one would (the question it answers, which fails with its problem) or nowhere.
    if (c.kind === 'invalid' && !c.response) {
      const rows: Parameters<typeof recordRefused>[1][] = c.members ? refusedMembers(c.members, ex.requestBytes) : [];
      // A lone malformed message's row names the era its method and `_meta` claim say (as a
      // well-formed one's would: eraOfRequest), not legacy for want of a method it records.
      const raw = c.message;
      const era = raw && rows.length === 0 ? eraOfRequest(typeof raw.method === 'string' ? raw.method : undefined, raw.params, ex.header('mcp-protocol-version')) : undefined;
      if (rows.length === 0) rows.push({ id: c.id, method: c.method ?? INVALID_MESSAGE, target: c.target });
      for (const r of rows) await recordRefused(this.core, r, ex, c.error, era);
      // A notification is never answered (JSON-RPC): over stdio nothing is written; over HTTP its
      // POST is refused with a status, whose body may say why (digest §6.2, §6.3).
      if (c.notification && ex.transport === 'stdio') return ex.reply(undefined, 202);
      ex.reply(errorResponse(c.id, c.error), 400);
      if (c.methodless) this.methodlessAnswer(c.id!, c.error, ex, stdioSession);
      return;
    }
    const msg = c.kind === 'invalid' ? undefined : (c.msg as Request | Notification);
    const method = msg && 'method' in msg ? msg.method : undefined;
    const params = msg && 'method' in msg ? msg.params : undefined;
    verdict ??= classifyEra(method, params, ex.header('mcp-protocol-version'), c.kind === 'notification');
    if (verdict.era === 'invalid') {
      if (c.kind === 'request') await recordRefused(this.core, c.msg, ex, verdict.error);
      ex.reply(errorResponse(c.kind === 'request' ? c.msg.id : undefined, verdict.error), verdict.status);
      return;
    }
    if (verdict.era === 'modern') {
      // A notification (a modern request went to modern() in message()). Modern clients send no
      // notifications over HTTP (nothing to do but check the headers it carries, then accept it: a client may still send one, as the SDK v2 does on closing a
      // listen, and closing the stream is what cancels); on stdio only notifications/cancelled.
      const bad = ex.transport === 'http' && c.kind === 'notification' ? checkModernHeaders(c.msg.method, c.msg.params, ex, true) : null;
      if (bad) return ex.reply(errorResponse(undefined, bad.error), bad.status);
      if (c.kind === 'notification' && c.msg.method === 'notifications/cancelled' && stdioSession) this.cancelModernStdio(c.msg);
      ex.reply(undefined, 202);
      return;
    }
    return this.legacy(c, ex, stdioSession);
  }

  // ---------------------------------------------------------------- modern (2026-07-28)

  private readonly modernInflight = new KeyedTable<Canceller>();

  private cancelModernStdio(n: Notification): void {
    // Only an id names a request (a missing one named the request whose id is the string "undefined").
    const id = n.params?.requestId;
    if (typeof id !== 'string' && typeof id !== 'number') return;
    const key = idKey(id);
    const ac = this.modernInflight.get(key);
    if (!ac) return;
    // Cancelled, it is in flight no more for its client, which may send its id again at once
    // (digest §1.2: a modern id differs only from those in flight); nothing more is sent for it.
    this.modernInflight.delete(key);
    ac.abort(clientReason(n.params));
  }

  private async modern(req: Request, ex: Exchange): Promise<void> {
    const bad = checkModern(req, ex);
    // Over HTTP nothing but the client going away cancels a request, so the exchange's own
    // signal serves; over stdio notifications/cancelled does, which needs a controller.
    const ac = ex.transport === 'stdio' ? new Canceller() : undefined;
    const signal = ac ? ac.signal : ex.closed;
    const ctx = modernContext(req, ex, signal);
    if (bad) {
      await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: bad.error.code, errorMessage: bad.error.message }, refusalFacts(req.params, bad.error));
      ex.reply(errorResponse(req.id, bad.error), bad.status);
      return;
    }
    // On stdio an id names one request in flight (digest §1.2), a listen stream's as long as it
    // is open: a second one would get an answer the client cannot tell apart, and take the
    // first one's cancellation (a second listen with it could never be cancelled at all).
    if (ac && this.modernInflight.has(idKey(req.id))) {
      const err = new RpcError(INVALID_REQUEST, `request id ${shownId(req.id)} is already in flight`);
      await recordRefused(this.core, req, ex, err, MODERN);
      return ex.reply(errorResponse(req.id, err));
    }
    if (req.method === 'server/discover') {
      const capabilities = await capabilitiesWhileOpen(this.core, ex);
      if (!capabilities) return unanswered(this.core, req, ex, ctx);
      const result: Params = { supportedVersions: [...MODERN_VERSIONS], capabilities: this.modernCaps(capabilities), ttlMs: 0, cacheScope: 'public' };
      const instructions = this.core.instructions(ex.group);
      if (instructions) result.instructions = instructions;
      await this.core.recordLocal(req.method, ctx, { outcome: 'ok' });
      ex.reply(resultResponse(req.id, toModernResult(req.method, result, this.core.serverInfo)), 200, this.handshakeHeaders(ex));
      return;
    }
    if (req.method === 'subscriptions/listen') {
      // Its id is taken at once (stdio), and free again when the stream ends or never opens.
      const taken = ac ? idKey(req.id) : undefined;
      const free = (): void => {
        if (taken !== undefined && this.modernInflight.get(taken) === ac) this.modernInflight.delete(taken);
      };
      if (taken !== undefined) this.modernInflight.set(taken, ac!);
      // Its answer is an event stream and nothing else: a POST whose Accept refuses one has no
      // answer it can take (the SDK would stream it all the same).
      if (ex.transport === 'http' && ex.sink.canStream === false) {
        const err = new RpcError(INVALID_REQUEST, 'Not Acceptable: a subscriptions/listen is answered with an event stream, and the Accept header does not take text/event-stream');
        await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
        return ex.reply(errorResponse(req.id, err), 406);
      }
      const filterBad = listenFilterProblem(req.params?.notifications);
      if (filterBad) {
        free();
        const err = new RpcError(INVALID_PARAMS, `Invalid params: ${filterBad}`);
        await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
        return ex.reply(errorResponse(req.id, err));
      }
      // Held at once: requests that come together must not all pass the count.
      const slot = this.listen.reserve(ex.principal, ex.transport === 'http');
      if (!slot) {
        free();
        const err = new RpcError(INTERNAL_ERROR, 'Service Unavailable: too many open listen streams, try again later');
        await recordRefused(this.core, req, ex, err, MODERN);
        return ex.reply(errorResponse(req.id, err), 503, NO_ROOM_HEADERS);
      }
      await this.core.recordLocal(req.method, ctx, { outcome: 'ok' });
      // Over stdio the exchange closes when the stream is cancelled or ended (or the pipe is).
      if (taken !== undefined) ex.closed.addEventListener('abort', free, { once: true });
      void this.listen.open(req, ex, slot).then((open) => {
        if (!open || ex.closed.aborted) free();
      });
      return;
    }
    // Cancellable from here: a notifications/cancelled that comes while the hub waits below finds it.
    const onClose = () => ac?.abort(ex.closed.reason);
    if (ac) {
      ex.closed.addEventListener('abort', onClose);
      this.modernInflight.set(idKey(req.id), ac);
      // Cancelled while it waited to be let in (its turn at policy.rateLimit): the client's
      // cancellation closed its exchange before the hub got here, and still holds.
      if (ex.closed.aborted) ac.abort(ex.closed.reason);
    }
    try {
      const family = FAMILY[req.method];
      // A fresh hub (stdio: every spawn) may get its first request while upstreams still start: wait for them (bounded).
      // The capabilities of what the client's endpoint shows (/mcp/<group>), as its discover says.
      let offered = family && !LEGACY_ONLY.has(req.method) ? this.core.offers(family, ctx.group) : false;
      let goesOn = false;
      if (family && !LEGACY_ONLY.has(req.method) && !offered) {
        const grace = this.core.familyInGrace?.(req.method, req.params ?? {}, ctx.group) ?? 'wait';
        if (grace === 'on') goesOn = true;
        else if (grace === 'wait') {
          // Waited for no longer than its client does: one gone meanwhile is recorded so then, not
          // refused (-32601) when the grace ends.
          const capabilities = await capabilitiesWhileOpen(this.core, ex);
          if (!capabilities) return await unanswered(this.core, req, ex, ctx);
          offered = Boolean(capabilities[family]);
        }
      }
      // A server never seen counts only with the list families: a completion of its prompt's
      // argument is let through while it starts, to wait for it as a call does.
      if (!offered && !goesOn && !this.core.namesFirstStarting?.(req.method, req.params ?? {}, ctx.group)) {
        const err = new RpcError(METHOD_NOT_FOUND, `method not found: ${shownName(req.method)}`);
        await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
        ex.reply(errorResponse(req.id, err), ex.transport === 'http' ? 404 : 200);
        return;
      }
      const result = await this.core.handle(req.method, req.params ?? {}, ctx);
      const modern = toModernResult(req.method, result, this.core.serverInfo);
      const field = LIST_FIELD[req.method];
      const items = field ? modern[field] : undefined;
      if (field && Array.isArray(items)) {
        const { [field]: _items, ...rest } = modern;
        ex.reply(listResponse(req.id, field, items, rest));
      } else ex.reply(resultAnswer(req.id, result, modern));
    } catch (err) {
      // The hub's stop ended it (stdio): the client still waits, and is told (its row says unavailable).
      if (signal.reason instanceof HubStoppingError) return ex.reply(errorResponse(req.id, stoppedError(signal.reason)));
      if (err instanceof CancelledError || signal.aborted) {
        ex.reply(undefined, 202); // the stream is gone or the client cancelled: nothing more is sent
        return;
      }
      // A held call whose API key a reload revoked: the status and challenge the edge gives that key now.
      if (err instanceof CredentialRevokedError) return ex.reply(errorResponse(req.id, err), err.refusal.status, err.refusal.headers);
      const rpc = toModernError(asRpc(err, this.log));
      ex.reply(errorResponse(req.id, rpc), modernErrorStatus(rpc));
    } finally {
      if (ac) {
        ex.closed.removeEventListener('abort', onClose);
        // Its id may be another request's by now (this one was cancelled, and the id sent again).
        if (this.modernInflight.get(idKey(req.id)) === ac) this.modernInflight.delete(idKey(req.id));
      }
    }
  }

  private modernCaps(c: ServerCapabilities): ServerCapabilities {
    // Subscriptions are per listen stream in the modern era; `subscribe` stays meaningful.
    return c;
  }

  // ---------------------------------------------------------------- legacy (2025-11-25)

  private async legacy(c: Classified, ex: Exchange, stdio?: StdioSessionSlot): Promise<void> {
    if (c.kind === 'request' && c.msg.method === 'initialize') return this.initialize(c.msg, ex, stdio);
    const unsupported = ex.transport === 'http' ? unsupportedLegacyVersion(ex.header('mcp-protocol-version')) : null;
    if (unsupported) {
      if (c.kind === 'request') await recordRefused(this.core, c.msg, ex, unsupported, LEGACY);
      return ex.reply(errorResponse(c.kind === 'request' ? c.msg.id : undefined, unsupported), 400);
    }
    const session = stdio ? stdio.current : this.sessionOf(ex);
    if (!session && c.kind === 'request' && c.msg.method === 'ping' && (stdio || ex.header('mcp-session-id') === undefined)) {
      // Before initialize a client may send ping, and only ping (digest §2.1); it is answered,
      // over HTTP too when it names no session (`switchyard connect` sends its client's so: it
      // answered it itself, with no row here, where `stdio` records it). One naming a session
      // that has ended is still 404, so that its client starts anew.
      const ctx: CallContext = { requestId: c.msg.id, principal: ex.principal, clientEra: LEGACY, clientCapabilities: {}, signal: new Canceller().signal, requestBytes: ex.requestBytes, span: spanOfMeta(c.msg.params?._meta, ex) };
      await this.core.recordLocal('ping', ctx, { outcome: 'ok' });
      return ex.reply(resultResponse(c.msg.id, {}), 200);
    }
    if (session === NO_ROOM) {
      const err = noRoomError();
      if (c.kind === 'request') await recordRefused(this.core, c.msg, ex, err, LEGACY);
      return ex.reply(errorResponse(c.kind === 'request' ? c.msg.id : undefined, err), 503, NO_ROOM_HEADERS);
    }
    if (!session) {
      const sid = ex.header('mcp-session-id');
      if (c.kind !== 'request') {
        // Over HTTP a session that ended is 404 (the client starts a new one), a missing id 400.
        if (stdio) {
          if (c.kind === 'invalid') this.warnMalformed(c.id, c.error.message, 'malformed client response dropped: no session asked anything');
          return ex.reply(undefined, 202);
        }
        return sid === undefined
          ? ex.reply(errorResponse(undefined, new RpcError(INVALID_REQUEST, 'Bad Request: Mcp-Session-Id header is required')), 400)
          : ex.reply(errorResponse(undefined, new RpcError(-32001, 'Session not found')), 404);
      }
      const err =
        sid === undefined
          ? new RpcError(INVALID_REQUEST, ex.transport === 'http' ? 'Bad Request: Mcp-Session-Id header is required' : NOT_INITIALIZED)
          : new RpcError(-32001, 'Session not found');
      await recordRefused(this.core, c.msg, ex, err, LEGACY);
      return ex.reply(errorResponse(c.msg.id, err), sid === undefined ? 400 : 404);
    }
    if (session.principal !== ex.principal || session.group !== ex.group) {
      // A session id is not a credential: another principal cannot ride on it. Nor is it a way
      // out of its endpoint: opened on /mcp and sent to /mcp/<group>, it would have kept /mcp's
      // view there (and a session taken back after a restart is matched by its group too).
      if (c.kind !== 'request') return ex.reply(undefined, 404);
      const err = new RpcError(-32001, 'Session not found');
      await recordRefused(this.core, c.msg, ex, err, LEGACY);
      return ex.reply(errorResponse(c.msg.id, err), 404);
    }
    session.lastSeen = monotonicNow();
    // A new message of the session: the answers it read in full on this connection are let go (resumable.ts).
    if (session.streams !== undefined && session.streams.size > 0 && ex.connection !== undefined) session.streams.acknowledge(ex.connection);
    if (c.kind === 'response') {
      if (!session.answer(c.msg)) this.log.debug({ id: c.msg.id }, 'late or unknown client response dropped');
      return ex.reply(undefined, 202);
    }
    if (c.kind === 'invalid') {
      // A response that breaks JSON-RPC (a result or error that is not an object): the question
      // it answers fails with that problem, as one of the wrong shape would; to nothing, dropped.
      if (c.id === undefined || !session.answerMalformed(c.id, c.error.message))
        this.warnMalformed(c.id, c.error.message, 'malformed client response dropped: it answers no open question');
      return ex.reply(undefined, 202);
    }
    if (c.kind === 'notification') {
      this.legacyNotification(session, c.msg);
      return ex.reply(undefined, 202);
    }
    if (c.kind === 'request') return this.legacyRequest(session, c.msg, ex);
  }

  /**
   * A request read but never served: the stdio server stopped while it waited behind an
   * initialize being answered, or it came once the server had stopped. Answered and recorded as one that comes while the hub drains
   * (`unavailable`), not left without an answer or a row. `unanswered`: why it gets no answer
   * (its client closed stdout, or cancelled it): recorded `cancelled` with that reason, as a call
   * running then is. Its row names the era its `_meta` claims (stdio has no header: a modern
   * request was recorded legacy). `unheard`: called once it is answered, why its client did not
   * get the answer (its write met a closed stdout), or undefined: the row is written after it.
   */
  async refuseUnserved(msg: Request, ex: Exchange, unanswered?: string, unheard?: () => Promise<string | undefined>): Promise<void> {
    const era = eraOfRequest(msg.method, msg.params, ex.header('mcp-protocol-version'));
    if (unanswered !== undefined) {
      try {
        await recordRefused(this.core, msg, ex, new RpcError(INTERNAL_ERROR, unanswered), era, { outcome: 'cancelled', errorKind: null, errorMessage: unanswered });
      } finally {
        ex.reply(undefined);
      }
      return;
    }
    const err = new RpcError(INTERNAL_ERROR, 'the hub is shutting down; send the request again once it is back');
    const refused = { outcome: 'unavailable', errorKind: 'transport', errorMessage: err.message } as const;
    if (unheard) {
      // Answered first: the answer the client never got (the write that met its closed end) is
      // recorded as its leaving (cancelled), not as a refusal it was told.
      ex.reply(errorResponse(msg.id, err));
      const gone = await unheard();
      await recordRefused(this.core, msg, ex, err, era, gone === undefined ? refused : { outcome: 'cancelled', errorKind: null, errorMessage: gone });
      return;
    }
    try {
      await recordRefused(this.core, msg, ex, err, era, refused);
    } finally {
      // Answered even once the ledger has closed (the last moments of a stop).
      ex.reply(errorResponse(msg.id, err));
    }
  }

  /**
   * What a JSON-RPC batch sent with this session id meets: `takes`, only on a session of this
   * principal negotiated at 2025-03-26, the one revision with batches; `gone`, an id that names
   * no session of this principal on this endpoint (ended, never issued, another's), told so as a
   * lone message would be (404), or its client would never start anew; otherwise `refuses`: the
   * batch is refused as one invalid message.
   */
  batchSession(sessionId: string | undefined, principal: string, group?: string, credentialKey?: string): 'takes' | 'refuses' | 'gone' {
    if (sessionId === undefined) return 'refuses';
    const s = this.table.sessionFor(sessionId, principal, group, credentialKey);
    // No room to take it back: its members are each told so, as its lone messages would be.
    if (s === NO_ROOM) return this.sessionIds?.reopen(sessionId)?.protocolVersion === BATCH_VERSION ? 'takes' : 'refuses';
    if (s === undefined || s.principal !== principal) return 'gone';
    return s.protocolVersion === BATCH_VERSION ? 'takes' : 'refuses';
  }

  /**
   * A batch whose session is not here (batchSession: `gone`): answered as its lone messages would
   * be, and each of its requests recorded as one would be (refusedMembers); one of notifications
   * and junk only, or over the cap, has one `(invalid)` row.
   */
  async batchWithoutSession(members: readonly unknown[], ex: Exchange): Promise<void> {
    const err = new RpcError(-32001, 'Session not found');
    const rows: Parameters<typeof recordRefused>[1][] = refusedMembers(members, ex.requestBytes);
    if (rows.length === 0) rows.push({ method: INVALID_MESSAGE });
    for (const r of rows) await recordRefused(this.core, r, ex, err, LEGACY);
    ex.reply(errorResponse(undefined, err), 404);
  }

  /** Why a batch the session takes is refused whole, or null (batch-rules.ts), at this endpoint's maxPendingPerSession. */
  batchRefusal(members: readonly unknown[], headerVersion: string | undefined, headerKey?: string): RpcError | null {
    return batchRefusal(members, headerVersion, headerKey, this.limits.maxPendingPerSession);
  }

  /**
   * A POST of session `sid` refused as larger than `max` bytes (413): when its ends show a
   * response (oversize-body.ts), the question it answers fails at once, rather than waiting out
   * policy.inputTimeoutMs for an answer its client will not send again. Without an id, the one
   * question open on the session is the one it answers; with several open, none can be told.
   */
  answerTooLarge(sid: string, principal: string, group: string | undefined, ends: BodyEnds, max: number): void {
    const session = this.sessions.get(sid);
    if (!session || session.principal !== principal || session.group !== group) return;
    const seen = answeredId(ends);
    if (seen.response === false) return;
    const open = session.openQuestions;
    const id = seen.id ?? (seen.response && open.length === 1 ? open[0] : undefined);
    const problem = `it was larger than the hub takes (listen.maxBodyBytes, ${max} bytes) and was refused with 413`;
    if (id !== undefined ? !session.answerMalformed(id, problem) : seen.response) this.warnMalformed(seen.id, problem, 'oversize client response dropped: it answers no open question the hub can tell');
  }

  /**
   * A message with an id and no method, nor a result or error (or no `jsonrpc: "2.0"`): refused
   * (-32600) as any message that is none, yet when its id names a question the hub put to the
   * client's session it can only be the client's answer to it, malformed. That question fails at
   * once with the problem, as one answered with a result of the wrong shape does; it waited out
   * policy.inputTimeoutMs for an answer the client had given. A session taken back after a
   * restart has no questions open, so over HTTP only a session held here is looked at.
   */
  private methodlessAnswer(id: Id, err: RpcError, ex: Exchange, stdio?: StdioSessionSlot): void {
    const sid = stdio ? undefined : ex.header('mcp-session-id');
    const session = stdio ? stdio.current : sid === undefined ? undefined : this.sessions.get(sid);
    if (!session || session.principal !== ex.principal || session.group !== ex.group) return;
    session.answerMalformed(id, err.message === NOT_A_MESSAGE ? 'it has neither a result nor an error' : err.message);
  }

  /** A malformed client response, warned of within the budget (a client can send any number). */
  private warnMalformed(id: Id | undefined, problem: string, msg: string): void {
    const b = this.malformedWarnings.take();
    if (b) this.log.warn(b.skipped > 0 ? { id, problem, leftOutBefore: b.skipped } : { id, problem }, msg);
  }

  private sessionOf(ex: Exchange): LegacySession | NoRoom | undefined {
    const sid = ex.header('mcp-session-id');
    return sid === undefined ? undefined : this.table.sessionFor(sid, ex.principal, ex.group, ex.credentialKey);
  }

  private legacyNotification(session: LegacySession, n: Notification): void {
    switch (n.method) {
      case 'notifications/initialized':
        session.initialized = true;
        // stdio: its stream (stdout) is open now; HTTP: once its GET stream opens (streamOpened).
        this.rootsChanged(session, true);
        break;
      case 'notifications/cancelled': {
        const id = n.params?.requestId;
        if (typeof id !== 'string' && typeof id !== 'number') break;
        const call = session.inflight.get(idKey(id));
        if (call) call.abort(clientReason(n.params));
        else session.cancelledAhead(id, clientReason(n.params));
        break;
      }
      case 'notifications/roots/list_changed':
        this.rootsChanged(session);
        break;
      default:
        break; // unknown notifications: nothing to do
    }
  }

  /**
   * Passed on to the servers only if the client can be asked for its roots outside a call (on
   * its GET stream, or stdout): a server that hears of the change asks at once, with no call of
   * the client's to carry the question, and an unanswerable ask would change nothing.
   */
  /**
   * `firstClient`: the client did not say its roots changed; it can be asked for them now (stdio
   * initialized, an HTTP GET stream opened), which a server refused them before any client could
   * be, or whose client answering them can be asked no more, is told (Upstream.rootsChanged).
   */
  rootsChanged(session: LegacySession, firstClient = false): void {
    if (!session.capabilities.roots || !this.core.rootsChanged) return;
    if (!askable(session)) {
      if (!firstClient) this.log.debug({ principal: session.principal }, 'client roots changed, but it has no stream to be asked on: not passed on');
      return;
    }
    const idle = new Canceller().signal;
    this.core.rootsChanged(session.principal, session.group, (req, withdrawn) => {
      if (!askable(session)) return Promise.reject(new RpcError(INTERNAL_ERROR, 'the client that said its roots changed can no longer be asked'));
      // No call of its own: bounded by the time a client has to answer, and ends nothing else.
      return session.ask(session.stream!, req, { signal: idle, withdrawn, timeoutMs: this.limits.inputTimeoutMs, end: () => undefined });
    }, firstClient, () => askable(session));
  }

  private async initialize(req: Request, ex: Exchange, stdio?: StdioSessionSlot): Promise<void> {
    // Another principal's session is "not found" here too: its id must not confirm it exists;
    // nor is another endpoint's (/mcp, /mcp/<group>), which every other method there does not find.
    const sid = ex.header('mcp-session-id');
    const held = sid === undefined ? undefined : this.sessions.get(sid);
    if (ex.transport === 'http' && held !== undefined && held.principal === ex.principal && held.group === ex.group) {
      const err = new RpcError(INVALID_REQUEST, 'session already initialized');
      await recordRefused(this.core, req, ex, err, LEGACY);
      return ex.reply(errorResponse(req.id, err), 400);
    }
    // The shapes of 2025-11-25's InitializeRequest the hub reads: refused here rather than failing every later call.
    const p = req.params ?? {};
    const capsBad = p.capabilities === undefined ? undefined : capabilitiesProblem(p.capabilities);
    const infoBad = p.clientInfo === undefined ? undefined : implementationProblem(p.clientInfo);
    if (capsBad || infoBad) {
      const err = new RpcError(INVALID_PARAMS, `Invalid params: ${capsBad ? `capabilities ${capsBad}` : `clientInfo ${infoBad}`}`);
      await recordRefused(this.core, req, ex, err, LEGACY);
      return ex.reply(errorResponse(req.id, err), 400);
    }
    if (!stdio && !this.table.roomForSession(ex.principal)) {
      const err = noRoomError();
      await recordRefused(this.core, req, ex, err, LEGACY);
      return ex.reply(errorResponse(req.id, err), 503, NO_ROOM_HEADERS);
    }
    const requested = typeof p.protocolVersion === 'string' ? p.protocolVersion : LEGACY;
    // Echo a legacy version we know; anything else (a modern one included) gets our newest legacy version.
    const version = (LEGACY_VERSIONS as readonly string[]).includes(requested) ? requested : LEGACY;
    const caps = (p.capabilities && typeof p.capabilities === 'object' ? p.capabilities : {}) as ClientCapabilities;
    const clientInfo = p.clientInfo as Implementation | undefined;
    const id = stdio ? undefined : this.sessionIds?.issue({ protocolVersion: version, clientInfo, capabilities: caps, principal: ex.principal, group: ex.group });
    if (id !== undefined) this.memory?.opened(id, ex.credentialKey);
    const session = new LegacySession(version, clientInfo, caps, ex.principal, id);
    session.group = ex.group;
    session.key = ex.credentialKey;
    if (stdio) {
      // initialize again: the old session ends, and what it held upstream (subscriptions) is let go.
      // What it still owes its client is answered first (StdioServer.sessionReplaced), before this
      // initialize is: on the one pipe, an answer read before the initialize's is the old session's.
      const old = stdio.current;
      if (old) {
        stdio.replaced?.(old, ex);
        old.close();
        this.table.stdioSessions.delete(old.id);
        this.core.sessionClosed(old.id);
      }
      stdio.current = session;
      session.stream = ex.sink;
      // Notifications not tied to a request (list changes, resource updates) go to stdout too.
      for (const [id, s] of this.table.stdioSessions) if (s.ended) this.table.stdioSessions.delete(id);
      this.table.stdioSessions.set(session.id, session);
    } else this.sessions.set(session.id, session);
    const ctx = legacyContext(session, req, ex, new Canceller().signal, this.limits);
    const capabilities = await capabilitiesWhileOpen(this.core, ex);
    if (!capabilities) return unanswered(this.core, req, ex, ctx);
    // Not before the wait for servers starting: one ready meanwhile is in the client's first lists.
    session.listsFrom = performance.now();
    const result: Params = { protocolVersion: version, capabilities, serverInfo: this.core.serverInfo };
    const instructions = this.core.instructions(ex.group);
    if (instructions) result.instructions = instructions;
    await this.core.recordLocal('initialize', ctx, { outcome: 'ok' });
    ex.reply(resultResponse(req.id, result), 200, stdio ? undefined : { 'mcp-session-id': session.id, ...this.handshakeHeaders(ex) });
  }

  /**
   * What an HTTP handshake's answer says of the hub besides: that idempotency keys are honoured
   * (KEYS_KEPT_HEADER), the largest body it reads (MAX_BODY_HEADER), and how long its calls
   * may answer when it stops (DRAIN_MS_HEADER).
   */
  private handshakeHeaders(ex: Exchange): Record<string, string> | undefined {
    if (ex.transport !== 'http') return undefined;
    const h: Record<string, string> = {};
    if (this.core.keepsIdempotencyKeys === true) h[KEYS_KEPT_HEADER] = 'kept';
    if (this.core.maxBodyBytes !== undefined) h[MAX_BODY_HEADER] = String(this.core.maxBodyBytes);
    if (this.core.drainTimeoutMs !== undefined) h[DRAIN_MS_HEADER] = String(this.core.drainTimeoutMs);
    return h;
  }

  private async legacyRequest(session: LegacySession, req: Request, ex: Exchange): Promise<void> {
    const ac = new Canceller();
    // On stdio a closed exchange is a cancellation (or the hub stopping) that came while the
    // request waited to be let in (its turn at policy.rateLimit): it still holds. (Over HTTP a
    // closed stream is no cancellation in this era.)
    if (ex.transport === 'stdio' && ex.closed.aborted) ac.abort(ex.closed.reason);
    const ctx = legacyContext(session, req, ex, ac.signal, this.limits, ac);
    // Its cancellation came first (LegacySession.cancelledAhead): not carried out, answered as a
    // request cancelled while it ran is (MCP: nothing), and its row says so.
    const ahead = session.takeCancelledAhead(req.id);
    if (ahead) {
      const err = new CancelledError(ahead.reason);
      await this.core.recordLocal(req.method, ctx, { outcome: 'cancelled', errorKind: null, errorMessage: err.message }, named(req.params));
      return ex.reply(undefined, 202);
    }
    const metaBad = legacyMetaProblem(req.params);
    if (metaBad) {
      await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: metaBad.code, errorMessage: metaBad.message }, named(req.params));
      return ex.reply(errorResponse(req.id, metaBad));
    }
    if (req.method === 'ping') {
      await this.core.recordLocal('ping', ctx, { outcome: 'ok' });
      return ex.reply(resultResponse(req.id, {}));
    }
    if (req.method === 'logging/setLevel') {
      const level = req.params?.level;
      if (!LOG_LEVELS.includes(level as LoggingLevel)) {
        const err = new RpcError(INVALID_PARAMS, `invalid log level: ${shownName(level)}`);
        await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
        return ex.reply(errorResponse(req.id, err));
      }
      session.logLevel = level as LoggingLevel;
      if (this.sessions.get(session.id) === session) this.memory?.levelSet(session.id, session.logLevel);
      await this.core.recordLocal(req.method, ctx, { outcome: 'ok' });
      return ex.reply(resultResponse(req.id, {}));
    }
    const family = FAMILY[req.method];
    if (!family || (!this.core.offers(family, session.group) && !this.core.namesFirstStarting?.(req.method, req.params ?? {}, session.group))) {
      const err = new RpcError(METHOD_NOT_FOUND, `method not found: ${shownName(req.method)}`);
      await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, named(req.params));
      return ex.reply(errorResponse(req.id, err));
    }
    const max = this.limits.maxPendingPerSession ?? Infinity;
    if (session.inflight.size >= max) {
      const err = new RpcError(-32000, `too many requests in flight on this session (the limit is ${max}); wait for answers before sending more`);
      await this.core.recordLocal(req.method, ctx, { outcome: 'denied', errorKind: 'policy', errorCode: err.code, errorMessage: err.message }, named(req.params));
      // As the hub's other 429s: when to try again (clients back off by it).
      return ex.reply(errorResponse(req.id, err), 429, RETRY_SOON);
    }
    const key = idKey(req.id);
    if (session.inflight.has(key)) {
      // Its answer could not be told from the other's, and it would slip past the limit above.
      const err = new RpcError(INVALID_REQUEST, `request id ${shownId(req.id)} is already in flight on this session`);
      await this.core.recordLocal(req.method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message }, named(req.params));
      return ex.reply(errorResponse(req.id, err), 400);
    }
    session.inflight.set(key, ac);
    // Over HTTP its answer stream, if it becomes one, is resumable (digest §6.2; resumable.ts).
    if (ex.transport === 'http' && ex.sink.canStream) ex.sink.resumeIn = session.streams ??= new SessionStreams(primes(session.protocolVersion), session.id, this.replayBudget);
    try {
      const result = await this.core.handle(req.method, req.params ?? {}, ctx);
      if (result.resultType === 'input_required') {
        // Translating MRTR for legacy clients is the era-translation layer's job; never leak it.
        throw new RpcError(-32603, 'the upstream needs input from the user, which the hub cannot relay to this client yet');
      }
      this.remember(session, req);
      ex.reply(resultAnswer(req.id, result, toLegacyResult(req.method, result, session.protocolVersion)));
    } catch (err) {
      // The hub's limit on the client's answer ended the call: the client, still there, is told.
      const reason = ac.signal.reason;
      if (reason instanceof InputTimeoutError) return ex.reply(errorResponse(req.id, err instanceof RpcError ? toLegacyError(err) : new RpcError(INTERNAL_ERROR, reason.message)));
      // Over HTTP a request is answered (202 is for notifications), as any request naming an
      // ended session is (404), so an SDK client fails it now rather than at its own timeout.
      // Not here on stdio, where the session ends by EOF or by initialize again: the pipe answered
      // what it owed before the new initialize's answer (StdioServer.sessionReplaced); later, an
      // answer to the old session's id could be read as one to the new session's same id.
      // Ended by the hub, not by its client, which resumes the stream and waits for the answer.
      if (reason instanceof AnswerStreamClosedError) return ex.reply(errorResponse(req.id, new RpcError(INTERNAL_ERROR, reason.message)));
      // The hub's stop ended it (stdio): the client still waits, and is told (its row says unavailable).
      if (reason instanceof HubStoppingError) return ex.reply(errorResponse(req.id, stoppedError(reason)));
      if (reason instanceof SessionEndedError && ex.transport === 'http')
        return ex.reply(errorResponse(req.id, new RpcError(-32001, `Session not found: ${reason.message}`)), 404);
      if (err instanceof CancelledError || ac.signal.aborted) return ex.reply(undefined, 202);
      // A held call its key no longer lets through (a scope it lost; the session goes on): the
      // status and challenge the edge gives that key now, as a modern client's is answered.
      if (err instanceof CredentialRevokedError) return ex.reply(errorResponse(req.id, err), err.refusal.status, err.refusal.headers);
      ex.reply(errorResponse(req.id, toLegacyError(asRpc(err, this.log))));
    } finally {
      session.inflight.delete(key);
      // Ended while it was made (a DELETE, idleness, or on stdio an initialize again, in the
      // middle of a burst): its subscriptions were released before this one was counted, which
      // nothing would release. (A stdio session is not in `sessions`: ended is what says it.)
      if (req.method === 'resources/subscribe' && session.ended) this.core.sessionClosed(session.id);
    }
  }

  /** A subscription an HTTP session made or gave up, kept for a restarted hub that takes it back. */
  private remember(session: LegacySession, req: Request): void {
    const uri = req.params?.uri;
    if (!this.memory || typeof uri !== 'string' || this.sessions.get(session.id) !== session) return;
    // Unsubscribed before its GET stream came back: not said updated then (OwedUpdates).
    if (req.method === 'resources/unsubscribe') session.owedUpdates?.unsubscribed(uri);
    if (req.method === 'resources/subscribe') this.memory.subscribed(session.id, uri);
    else if (req.method === 'resources/unsubscribe') this.memory.unsubscribed(session.id, uri);
  }

  /** SessionTable.sessionFor: the session with this id, or one taken back (or NO_ROOM). */
  sessionFor(sid: string, principal: string, group: string | undefined, credentialKey?: string): LegacySession | NoRoom | undefined {
    return this.table.sessionFor(sid, principal, group, credentialKey);
  }

  /** SessionTable.deleteSession: DELETE. */
  deleteSession(sid: string, principal: string, group: string | undefined, credentialKey?: string): boolean {
    return this.table.deleteSession(sid, principal, group, credentialKey);
  }

  close(): void {
    this.table.close();
  }

  /** SessionTable.stopCalls: the hub stops; each legacy call still running ends. */
  stopCalls(): void {
    this.table.stopCalls();
  }

  /** SessionTable.endSessionsOf: a revoked principal's or removed key's sessions end. */
  endSessionsOf(principals: ReadonlySet<string>, keys?: ReadonlySet<string>, lost?: LostEndpoint): number {
    return this.table.endSessionsOf(principals, keys, lost);
  }

  /**
   * A reload changed the owner of URIs clients hold: their legacy sessions and listen streams are
   * subscribed again at the owners now (SessionTable and ListenHub resubscribeMoved); how many of each.
   */
  async resubscribeMoved(moved: MovedSubscriptions): Promise<{ sessions: number; listenStreams: number }> {
    const sessions = await this.table.resubscribeMoved(moved);
    return { sessions, listenStreams: await this.listen.resubscribeMoved(moved) };
  }

  /** SessionTable.endSessionsOfGroups: the sessions of groups a reload removed end. */
  endSessionsOfGroups(gone: (group: string) => boolean): number {
    return this.table.endSessionsOfGroups(gone);
  }
}

/** A session at listen.maxPendingPerSession: a place frees as soon as one of its answers comes. */
const RETRY_SOON: Readonly<Record<string, string>> = { 'retry-after': '1' };

export type { Id };

/** Whether a session can be sent a request outside any of its calls: it is open, with a stream that reaches it. */
function askable(s: LegacySession): boolean {
  return !s.ended && s.stream !== undefined && !s.stream.closed && s.stream.connected !== false;
}
