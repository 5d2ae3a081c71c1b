/**
 * A stdio ↔ Streamable HTTP bridge to a running hub: each message a local client writes (one
 * JSON-RPC message per line) becomes one POST with the headers its era needs, and every
 * message the hub answers (JSON or SSE) becomes one line back. Legacy: the Mcp-Session-Id of
 * the initialize answer rides on every later request, a GET stream carries server
 * notifications, DELETE ends the session; a batch line is one POST too (forwardBatch). Modern: the headers mirror the body
 * (MCP-Protocol-Version, Mcp-Method, Mcp-Name, and Mcp-Param-* for `x-mcp-header` arguments,
 * learnt from the tools/list results passing through) and `notifications/cancelled` closes the
 * request's stream, which is how HTTP cancels (digest §6.3).
 */
import { redactLogText, type Logger } from '../log.js';
import { LEGACY } from '../protocol/era.js';
import { INTERNAL_ERROR, INVALID_REQUEST, NOT_INITIALIZED, PARSE_ERROR, RpcError } from '../protocol/errors.js';
import { encodeHeaderValue, firstHeaderValue, plainHeaderValue } from '../protocol/header-value.js';
import { batchOf, classify, errorResponse, parseFrame, resultResponse, type Classified, type Id } from '../protocol/jsonrpc.js';
import { DRAIN_MS_HEADER, KEYS_KEPT_HEADER, MAX_BODY_HEADER, META_CLIENT_CAPABILITIES, META_IDEMPOTENCY_KEY, META_PROTOCOL_VERSION } from '../protocol/meta.js';
import { ParamHeaderIndex } from '../upstream/param-headers.js';
import { replayable } from '../upstream/retry.js';
import { HttpClient, type HttpAnswer } from './http-client.js';
import { methodTable } from '../protocol/method-table.js';
import { Canceller } from '../cancel.js';
import { PendingWork } from '../pending-work.js';
import { cancelledLater, unservedLine } from '../downstream/stdio-lines.js';

export interface BridgeOptions {
  url: string;
  /** e.g. Authorization; sent on every request, never logged. */
  headers?: Record<string, string>;
  maxFrameBytes?: number;
  /** The longest wait between attempts to reopen the notification stream (default 3000 ms). */
  streamRetryMaxMs?: number;
  log: Logger;
  /** The hub said the largest request body it reads (listen.maxBodyBytes), on a handshake's answer. */
  onMaxBody?: (bytes: number) => void;
}

// Looked up by the method a client named: no prototype (methodTable).
const NAME_FIELD = methodTable<'name' | 'uri'>({ 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' });
const GET_RETRY_MS = [250, 1000, 3000];
/** What a request of a session an initialize again replaced is answered with (as `switchyard stdio` has it). */
const SESSION_REPLACED = 'the client session ended while the request was in flight: the client sent initialize again, which starts a new session';
/** The hub's MCP endpoints: a 404 elsewhere is a wrong --url, not a missing session. */
const MCP_PATH = /^\/mcp(\/[^/]+)?\/?$/;

/**
 * A tools/call whose `_meta` names an idempotency key (the only way a stdio client gives one):
 * sent twice, the hub runs it once, the second waiting for the first's answer or given the one
 * it kept (README "Idempotency"). An empty key is refused by the hub, so it is no key here.
 */
function keyedCall(method: string, params: Record<string, unknown> | undefined): boolean {
  if (method !== 'tools/call') return false;
  const key = (params?._meta as Record<string, unknown> | undefined)?.[META_IDEMPOTENCY_KEY];
  return typeof key === 'string' && key !== '';
}

/**
 * The request whose answer stream carried a question of the hub's (`answers`: where its answer
 * goes, a batch member's), or a batch's stream (`live`: its members still running).
 */
type Carrier = { id: Id; f: Inflight; answers?: object[] } | { batch: { live(): { id: Id; f: Inflight }[]; answers: object[] } };

interface Inflight {
  id: Id;
  /** A batch member's: where its answer goes (the batch's array), not a line of its own. */
  answers?: object[];
  ac: Canceller;
  answered: boolean;
  cancelled: boolean;
  /** Sent as a 2026-07-28 request: cancelled by closing its stream, never by a POST. */
  modern: boolean;
}

export class HttpBridge {
  private readonly http: HttpClient;
  private sessionId: string | undefined;
  private legacyVersion: string | undefined;
  private getStream: AbortController | undefined;
  /** Requests in flight by id, the first sent under each (a cancel names it). */
  private readonly inflight = new Map<string, Inflight>();
  /**
   * Every request in flight, one sent again under an id in flight too: each is answered and
   * cancelled at a stop. The second under an id took the first's place in `inflight`, and the
   * stop answered neither, the first running on at the hub.
   */
  private readonly running = new Set<Inflight>();
  private readonly pending = new PendingWork();
  /**
   * The hub's questions to the local client (its server → client requests: elicitation, sampling,
   * roots) not answered yet, by id (inflightKey), each with the request whose answer stream
   * carried it (none: the notification stream, or a batch's). At stdin EOF they can never be
   * answered (inputEnded); a line of only such an id is the client's malformed answer (line).
   */
  private readonly questions = new Map<string, { id: Id; method: string; carrier?: Carrier }>();
  /** Lines wait while an initialize is in flight, so they carry its session id. */
  private gate: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly params = new ParamHeaderIndex();
  /**
   * The local client's legacy initialize (its text), to open a new session with when the hub
   * no longer knows ours (it restarted, or the session ended idle): the client cannot, as it
   * never sees HTTP, and a session lost for good would leave it broken until it is restarted.
   */
  private initBody: string | undefined;
  private renewing: Promise<boolean> | undefined;
  private renewals = 0;
  /** Whether the hub ever answered over HTTP, and why the last message that could not reach it did not. */
  private reached = false;
  private missed: string | undefined;
  /** Whether the hub served a request of ours, and what its last refusal of our credential (401) said. */
  private served = false;
  private keyRefused: string | undefined;
  /**
   * The hub's last handshake (initialize, server/discover) said it honours idempotency keys
   * (KEYS_KEPT_HEADER). Until one says so, a keyed tools/call is not sent again after a lost
   * kept-alive connection: a hub with the ledger off, or one too old to say, would run it twice.
   */
  private keysKept = false;
  /** The hub's listen.drainTimeoutMs, as its last handshake said it (DRAIN_MS_HEADER). */
  private hubDrainMs: number | undefined;
  /**
   * Why a request is no longer sent (a stop signal came): each is answered so here. Sent, it ran
   * at the hub while the bridge ended, and one read once the bridge closed got no answer at all.
   */
  private refusing: string | undefined;

  /** How long calls in flight may answer at stdin EOF: the hub's listen.drainTimeoutMs, as `stdio` gives them; `fallback` until a handshake says it. */
  drainMs(fallback: number): number {
    return this.hubDrainMs ?? fallback;
  }

  /**
   * A message failed because the hub was not reachable, and it never was: why (the connection's
   * error), else undefined. How `connect` exits (3, no daemon, as the CLI's other commands: an
   * IDE's log shows a failed server rather than one that ended normally).
   */
  get neverReached(): string | undefined {
    return this.reached ? undefined : this.missed;
  }

  /**
   * The hub refused the bridge's credential (401) and served none of its requests: what it said,
   * else undefined. `connect` exits 1 saying so: it exited 0, an IDE's log showing a server that
   * ended normally, its key wrong or missing.
   */
  get keyNeverTaken(): string | undefined {
    return this.served ? undefined : this.keyRefused;
  }

  constructor(
    private readonly opts: BridgeOptions,
    /** Writes one message to the local client (a line on stdout). */
    private readonly emit: (msg: object) => void,
  ) {
    this.http = new HttpClient({ url: opts.url, headers: opts.headers, maxFrameBytes: opts.maxFrameBytes ?? 64 * 1024 * 1024, log: opts.log });
    this.shownUrl = redactLogText(opts.url);
  }

  /** The hub's address as messages to the client show it: a password or token in it redacted. */
  private readonly shownUrl: string;

  /** One line from the local client. Never throws. */
  line(text: string): void {
    if (text.trim() === '') return;
    if (this.refusing !== undefined && this.refuseLine(text, this.refusing)) return;
    if (this.closed) return;
    const batch = batchOf(text);
    if (batch) {
      const p = this.gate.then(() => this.unlessStopping(text, () => this.forwardBatch(batch, text))).catch((err) => this.opts.log.error({ err: String(err) }, 'bridge: forwarding a batch failed'));
      this.pending.add(p);
      return;
    }
    const c = parseFrame(text);
    if (c.kind === 'invalid') {
      // A malformed answer (or only the id) of a question the hub asked: the client answered it.
      if ((c.methodless || c.response) && this.questions.size > 0) this.questions.delete(inflightKey(c.id));
      this.pending.add(this.gate.then(() => this.unlessStopping(text, () => this.forwardInvalid(c, text))));
      return;
    }
    if (c.kind === 'response' && this.questions.size > 0) this.questions.delete(inflightKey(c.msg.id));
    const p = this.gate.then(() => this.unlessStopping(text, () => this.forward(c, text))).catch((err) => this.opts.log.error({ err: String(err) }, 'bridge: forwarding failed'));
    this.pending.add(p);
    if (c.kind === 'request' && c.msg.method === 'initialize') this.gate = p;
  }

  /**
   * From now on (a stop signal) each request read is answered with `why` and not sent, as
   * `stdio` refuses the lines it reads while it stops; the client's other messages (a cancel, an
   * answer to a question) still go to the hub while the bridge drains.
   */
  refuseNew(why: string): void {
    this.refusing ??= why;
  }

  /**
   * `send` a line that waited behind an initialize, unless a stop signal came meanwhile: then its
   * requests are answered as one read after the signal (refuseLine), as `stdio` refuses the lines
   * it holds behind an initialize when it stops. Sent, it went into a bridge closing, unanswered.
   */
  private unlessStopping(text: string, send: () => Promise<void>): Promise<void> | void {
    if (this.refusing !== undefined && this.refuseLine(text, this.refusing)) return;
    return send();
  }

  /**
   * A line read while refusing: its requests are answered `why` (a batch's in one array, as its
   * answers would have come; one cancelled later in the batch owed none), a malformed one with its
   * error, as the hub would answer it. False when it holds none (a notification, an answer).
   */
  private refuseLine(text: string, why: string): boolean {
    const { batch, owed, cancels } = unservedLine(text);
    if (owed.length === 0) return false;
    const answers: object[] = [];
    for (const { c, at } of owed) {
      if (c.kind === 'request') {
        if (!cancelledLater(cancels, c.msg.id, at)) answers.push(errorResponse(c.msg.id, new RpcError(INTERNAL_ERROR, why)));
      } else answers.push(errorResponse(c.id, c.error));
    }
    this.opts.log.debug({ requests: owed.length }, 'bridge: a line read while stopping answered here, not sent');
    if (batch) {
      if (answers.length > 0) this.emit(answers);
    } else for (const a of answers) this.emit(a);
    return true;
  }

  /**
   * A line longer than the bridge reads, never read whole (`c`: what its ends say, tooLargeLine):
   * it cannot be sent on. A request (or what may be one) is answered with the error and the id
   * an end shows, as `stdio` answers it, so its client does not wait on it; the client's answer
   * to a question is given to the hub as an error answer, which fails the question at once
   * rather than leaving it open for policy.inputTimeoutMs. The hub never sees the line, so it
   * has no row there: the bridge's log says what was refused.
   */
  tooLong(c: Extract<Classified, { kind: 'invalid' }>, maxBytes: number): void {
    if (this.closed) return;
    this.opts.log.warn({ id: c.id, method: c.method, response: c.response === true, maxBytes }, 'bridge: a line larger than the bridge reads was refused unread (not sent to the hub)');
    if (!c.response) return this.emit(errorResponse(c.id, c.error));
    const q = c.id === undefined ? undefined : this.questions.get(inflightKey(c.id));
    if (!q) return;
    this.questions.delete(inflightKey(c.id));
    const answer = errorResponse(q.id, new RpcError(INVALID_REQUEST, `the client's answer was a line larger than switchyard connect reads (${maxBytes} bytes)`));
    this.pending.add(this.gate.then(() => this.notify(JSON.stringify(answer), this.legacyHeaders())));
  }

  /** The ids of the hub's questions not answered yet (the one a too-long answer with no id shown answers, when it is the only one). */
  get openQuestions(): string[] {
    return [...this.questions.values()].map((q) => String(q.id));
  }

  /**
   * stdin ended: the questions the hub put to the local client can never be answered (their
   * answers come only on stdin), so the calls that asked them end at once, as in `stdio`: each
   * is cancelled at the hub (recorded cancelled, the question withdrawn, its upstream told) and
   * answered here with the reason. They held the exit for the whole drain, then the session's
   * DELETE ended them as the session ending.
   */
  inputEnded(): void {
    for (const [key, q] of this.questions) {
      this.questions.delete(key);
      const reason = `the client closed its input (stdin) while it was asked ${q.method}, so no answer can come`;
      let c = q.carrier;
      if (c && 'batch' in c) {
        // A 2025-03-26 batch's stream carried it: the member that asked is the one still running
        // when only one is, and it ends as a lone request would, its error among the batch's
        // answers (as `stdio` answers it). With several, which asked is not said on the wire:
        // the question itself is answered with the reason, which fails it at the hub at once, the
        // others left to run. Either way it held the exit for the whole drain.
        const running = c.batch.live();
        if (running.length !== 1) {
          const answer = errorResponse(q.id, new RpcError(INTERNAL_ERROR, reason));
          this.pending.add(this.notify(JSON.stringify(answer), this.legacyHeaders()));
          continue;
        }
        c = { ...running[0]!, answers: c.batch.answers };
      }
      if (!c || c.f.answered || c.f.cancelled || c.f.modern) continue;
      c.f.cancelled = true;
      const error = errorResponse(c.id, new RpcError(INTERNAL_ERROR, reason));
      if (c.answers) c.answers.push(error);
      else this.emit(error);
      const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: c.id, reason } };
      this.pending.add(this.notify(JSON.stringify(cancel), this.legacyHeaders()));
    }
  }

  /**
   * An initialize again (`by`) is answered, opening a new session in place of ours: each legacy
   * request still in flight in the old one is answered now with an error saying so, before the
   * new initialize's answer, as \`stdio\` does (the old session's DELETE then ends it at the hub).
   * Its answer (404, the session ended) came after the new initialize's, where it could be taken
   * for one to the new session's request of the same id.
   */
  private sessionReplaced(by: Inflight): void {
    for (const f of this.running) {
      if (f === by || f.modern || f.answered || f.cancelled) continue;
      f.cancelled = true;
      this.emit(errorResponse(f.id, new RpcError(INTERNAL_ERROR, SESSION_REPLACED)));
    }
  }

  /**
   * A message from the hub for the local client; `carrier`: the request whose answer stream it
   * came on. A request is a question to the client, kept until it is answered or withdrawn.
   */
  private heard(m: Exclude<Classified, { kind: 'invalid' }>, carrier?: Carrier): void {
    if (m.kind === 'request') this.questions.set(inflightKey(m.msg.id), { id: m.msg.id, method: m.msg.method, carrier });
    else if (m.kind === 'notification' && m.msg.method === 'notifications/cancelled' && this.questions.size > 0) this.questions.delete(inflightKey(m.msg.params?.requestId));
    this.emit(m.msg);
  }

  /**
   * The bridge is stopped (a signal): what still runs is ended now, as `stdio` ends it: each
   * request its client waits on is answered with `reason` (a batch member's among its batch's
   * answers) and cancelled at the hub (a legacy one by notifications/cancelled, recorded
   * cancelled with the reason and its upstream told; a modern one by closing its stream). Left to
   * close(), they got no answer, and a legacy call ran on at the hub, its session open until
   * it idled out if the process exited first.
   */
  stopNow(reason: string): void {
    for (const f of this.running) {
      if (f.answered || f.cancelled) continue;
      f.cancelled = true;
      const error = errorResponse(f.id, new RpcError(INTERNAL_ERROR, reason));
      if (f.answers) f.answers.push(error);
      else this.emit(error);
      if (f.modern) {
        f.ac.abort();
        continue;
      }
      const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: f.id, reason } };
      this.pending.add(this.notify(JSON.stringify(cancel), this.legacyHeaders()));
    }
  }

  /**
   * The local client is gone: let answers in flight finish (bounded), then end the session.
   * `unfinished`: what a request still running once the drain ran out is answered with, and
   * cancelled at the hub with (stopNow); cut off, it got no answer and its row no reason.
   */
  async close(drainMs = 5_000, unfinished?: string): Promise<void> {
    if (this.closed) return;
    await this.pending.within(drainMs);
    if (unfinished !== undefined && this.running.size > 0) {
      this.stopNow(unfinished);
      // The cancellations reach the hub before the session's end does.
      await this.pending.within(1_000);
    }
    this.closed = true;
    for (const f of this.running) f.ac.abort();
    this.getStream?.abort();
    if (this.sessionId) {
      await this.http
        .delete({ headers: this.legacyHeaders() })
        .catch((err) => this.opts.log.debug({ err: String(err) }, 'bridge: DELETE failed'));
    }
    this.http.close();
  }

  private legacyHeaders(): Record<string, string> {
    const h: Record<string, string> = {};
    if (this.sessionId) h['mcp-session-id'] = this.sessionId;
    if (this.legacyVersion) h['mcp-protocol-version'] = this.legacyVersion;
    return h;
  }

  private modernHeaders(c: Classified & { kind: 'request' | 'notification' }, version: string): Record<string, string> {
    // A method no header can carry (plainHeaderValue) goes without one: the hub answers it -32601
    // as `stdio` does, where the header made the POST fail and the client was told the hub was
    // not reachable.
    const h: Record<string, string> = plainHeaderValue(c.msg.method) ? { 'mcp-protocol-version': version, 'mcp-method': c.msg.method } : { 'mcp-protocol-version': version };
    const field = NAME_FIELD[c.msg.method];
    const v = field ? c.msg.params?.[field] : undefined;
    if (typeof v === 'string') h['mcp-name'] = encodeHeaderValue(v);
    if (c.msg.method === 'tools/call' && c.msg.params) this.params.apply(c.msg.params, h);
    return h;
  }

  private async forward(c: Exclude<Classified, { kind: 'invalid' }>, body: string): Promise<void> {
    const claim = c.kind === 'response' ? undefined : (c.msg.params?._meta as Record<string, unknown> | undefined)?.[META_PROTOCOL_VERSION];
    const modern = typeof claim === 'string';
    if (c.kind === 'notification' && c.msg.method === 'notifications/cancelled') {
      // Which request it names says how to cancel it, not the notification's own _meta (a
      // cancel needs none): a modern request's stream is closed (HTTP has no client
      // notifications, digest §6.3); a legacy cancel goes to the hub, which ends that request's
      // answer with nothing, the answer the client expects now.
      const f = this.inflight.get(inflightKey(c.msg.params?.requestId));
      if (f) f.cancelled = true;
      if (f?.modern) return f.ac.abort();
      if (!f && (modern || this.sessionId === undefined)) return; // nothing of ours to cancel
      return this.notify(body, this.legacyHeaders());
    }
    if (modern && c.kind === 'notification') return;
    // A legacy notification or answer before initialize: dropped, as `stdio` drops it (no session
    // asked anything); the hub refused it (400) and the bridge logged that refusal as a fault.
    if (!modern && c.kind !== 'request' && this.legacyVersion === undefined) return this.opts.log.debug({ kind: c.kind }, 'bridge: a notification or answer before initialize dropped');
    let headers = modern ? this.modernHeaders(c as Classified & { kind: 'request' | 'notification' }, claim) : this.legacyHeaders();
    // initialize opens a session: a second one (the client starts over) is sent without the old id.
    if (!modern && c.kind === 'request' && c.msg.method === 'initialize') headers = {};
    if (c.kind !== 'request') return this.notify(body, headers);
    const id = c.msg.id;
    const f: Inflight = { id, ac: new Canceller(), answered: false, cancelled: false, modern };
    const key = inflightKey(id);
    this.running.add(f);
    if (!this.inflight.has(key)) this.inflight.set(key, f);
    let a: HttpAnswer | undefined;
    let negotiated: string | undefined;
    const usedSession = this.sessionId;
    const onMessage = (m: Classified): void => {
      if (f.cancelled) {
        // The client was told nothing more comes for it; but a question it carried is still
        // withdrawn (the hub's notifications/cancelled for it), as `stdio` writes it: dropped,
        // the client was left with the question open, its user asked for nothing.
        if (m.kind === 'notification' && m.msg.method === 'notifications/cancelled' && this.questions.has(inflightKey(m.msg.params?.requestId))) this.heard(m);
        return;
      }
      if (m.kind === 'response' && inflightKey(m.msg.id) === key) {
        f.answered = true;
        const v = 'result' in m.msg ? m.msg.result.protocolVersion : undefined;
        if (typeof v === 'string') negotiated = v;
        if (typeof v === 'string' && c.msg.method === 'initialize' && !modern && this.sessionId !== undefined) this.sessionReplaced(f);
        if (c.msg.method === 'tools/list' && 'result' in m.msg) this.params.learn(m.msg.result);
      }
      if (m.kind !== 'invalid') this.heard(m, carrier);
    };
    const carrier = { id, f };
    // Sent again after a lost kept-alive connection unless it may have run: a tools/call only
    // when it carries an idempotency key and the hub said it honours keys (keysKept), by which
    // it runs the call once (keyedCall).
    const replay = replayable(c.msg.method, undefined) || (this.keysKept && keyedCall(c.msg.method, c.msg.params));
    try {
      a = await this.http.post(body, { headers, signal: f.ac.signal, onMessage, replay });
      if (a.status === 404 && !modern && usedSession !== undefined && c.msg.method !== 'initialize' && !f.cancelled && (await this.renewSession(usedSession))) {
        a = await this.http.post(body, { headers: this.legacyHeaders(), signal: f.ac.signal, onMessage, replay });
      }
      if (modern && a.status === 400 && c.msg.method === 'tools/call' && !f.cancelled && (await this.learnParamHeaders(claim, a))) {
        // Refused before it ran (a missing Mcp-Param-* mirror of a tool we had not seen listed): once
        // more, still cancellable and still held to answering.
        a = await this.http.post(body, { headers: this.modernHeaders(c, claim), signal: f.ac.signal, onMessage, replay });
      }
    } catch (err) {
      if (!f.cancelled && !this.closed) {
        this.missed = redactLogText((err as Error).message);
        this.fail(id, `the hub at ${this.shownUrl} is not reachable: ${this.missed}`);
      }
      return;
    } finally {
      this.running.delete(f);
      if (this.inflight.get(key) === f) this.inflight.delete(key);
      // Its stream is over: the questions it carried were answered or withdrawn, or never will be.
      if (this.questions.size > 0) for (const [k, q] of this.questions) if (q.carrier === carrier) this.questions.delete(k);
    }
    this.reached = true;
    if (a.status >= 200 && a.status < 300) {
      this.served = true;
      if (c.msg.method === 'server/discover' && f.answered) this.learnKeys(a);
      if (c.msg.method === 'initialize' && !modern) {
        this.initBody = body; // what a renewed session is opened with: the initialize the hub took
        this.initialized(a, negotiated);
      }
      if (!f.answered && !f.cancelled) this.fail(id, 'the hub ended the answer stream without a response');
      return;
    }
    // Told already that nothing (more) comes for it: cancelled, or its session replaced.
    if (f.cancelled) return;
    // Before initialize (or after one the hub refused) there is no session to put it in: said as
    // `stdio` says it (the row the hub wrote names the HTTP reason). "Mcp-Session-Id header is
    // required" sent a stdio client looking for a header it cannot send.
    if (!modern && usedSession === undefined && a.status === 400 && c.msg.method !== 'initialize' && refusedAs(a, INVALID_REQUEST)) {
      // Before initialize a client may send ping (digest §2.1): the daemon answers one with no
      // session (and records it); an older one refused it so, which is no failure of the client.
      if (c.msg.method === 'ping') return this.emit(resultResponse(id, {}));
      return this.fail(id, NOT_INITIALIZED, INVALID_REQUEST);
    }
    this.forwardHttpError(id, a);
  }

  /**
   * A JSON-RPC batch goes to the hub whole, as the client wrote it: the hub takes one on a
   * session at 2025-03-26 and refuses it otherwise (as over HTTP, and as `stdio` does), and its
   * batch rules hold (an initialize in it, the in-flight limit). What a member streams meanwhile
   * (progress, a question to the client) comes on lines of its own; the members' answers leave
   * together, as one line holding their array, as `switchyard stdio` writes them. A cancel
   * naming a member goes to the hub, and nothing is passed on for that member.
   */
  private async forwardBatch(members: unknown[], body: string): Promise<void> {
    const ac = new Canceller();
    const requests: { id: Id; key: string; f: Inflight }[] = [];
    const answers: object[] = [];
    let replay = true;
    const classified = members.map(classify);
    const cancels: { params: Record<string, unknown>; at: number }[] = [];
    classified.forEach((c, at) => {
      if (c.kind === 'notification' && c.msg.method === 'notifications/cancelled') cancels.push({ params: c.msg.params ?? {}, at });
    });
    for (const [at, c] of classified.entries()) {
      if (c.kind !== 'request') continue;
      // One its client cancels later in the same batch is owed no answer (MCP), as `stdio` has it:
      // the hub records it cancelled, and nothing comes for it.
      const cancelled = cancels.length > 0 && cancelledLater(cancels, c.msg.id, at) !== undefined;
      const f: Inflight = { id: c.msg.id, ac, answered: false, cancelled, modern: false, answers };
      const key = inflightKey(c.msg.id);
      requests.push({ id: c.msg.id, key, f });
      this.running.add(f);
      if (!this.inflight.has(key)) this.inflight.set(key, f);
      replay &&= replayable(c.msg.method, undefined);
    }
    const live = () => requests.filter((q) => !q.f.answered && !q.f.cancelled);
    const carrier: Carrier = { batch: { live, answers } };
    const onMessage = (m: Classified): void => {
      if (m.kind === 'invalid') return;
      if (m.kind !== 'response') return this.heard(m, carrier);
      // Every answer on this exchange is a member's: one naming no request (an id-less error for
      // a member that was none) goes in the array too.
      const id = m.msg.id;
      const r = id === undefined || id === null ? undefined : requests.find((q) => q.key === inflightKey(id) && !q.f.answered);
      if (r) r.f.answered = true;
      if (!r?.f.cancelled) answers.push(m.msg);
    };
    const usedSession = this.sessionId;
    let a: HttpAnswer;
    try {
      a = await this.http.post(body, { headers: this.legacyHeaders(), signal: ac.signal, onMessage, replay, batch: true });
      if (a.status === 404 && usedSession !== undefined && live().length > 0 && (await this.renewSession(usedSession))) {
        a = await this.http.post(body, { headers: this.legacyHeaders(), signal: ac.signal, onMessage, replay, batch: true });
      }
    } catch (err) {
      if (!this.closed) {
        this.missed = redactLogText((err as Error).message);
        const message = `the hub at ${this.shownUrl} is not reachable: ${this.missed}`;
        const failed = live().map((q) => errorResponse(q.id, new RpcError(INTERNAL_ERROR, message)));
        if (failed.length > 0) this.emit(failed);
      }
      return;
    } finally {
      for (const q of requests) {
        this.running.delete(q.f);
        if (this.inflight.get(q.key) === q.f) this.inflight.delete(q.key);
      }
      if (this.questions.size > 0) for (const [k, q] of this.questions) if (q.carrier === carrier) this.questions.delete(k);
    }
    this.reached = true;
    if (a.status >= 300) {
      // The hub refused it whole: its error (no id, as for any batch refused) is the answer.
      const c = a.body ? parseFrame(a.body) : undefined;
      return this.emit(c?.kind === 'response' && 'error' in c.msg ? c.msg : errorResponse(undefined, new RpcError(INTERNAL_ERROR, `the hub answered HTTP ${a.status}`)));
    }
    for (const q of live()) answers.push(errorResponse(q.id, new RpcError(INTERNAL_ERROR, 'the hub ended the answer stream without a response')));
    if (answers.length > 0) this.emit(answers);
  }

  /**
   * A line that is no JSON-RPC message (not JSON, a message of the wrong shape, a malformed answer
   * to a question): sent to the hub as it is, which answers and records it as `switchyard stdio`
   * does (an `(invalid)` row, or the request's own under its id and method; a malformed answer
   * fails the question it answers at once, or is dropped, never answered). Answered here, it had
   * no row, and a malformed answer got an error JSON-RPC never gives. The hub out of reach: the
   * line's own error, as before (an answer: nothing).
   */
  private async forwardInvalid(c: Extract<Classified, { kind: 'invalid' }>, body: string): Promise<void> {
    // Harmless twice: the hub refuses it either way.
    let why = '';
    const a = await this.http.post(body, { headers: this.legacyHeaders(), replay: true }).catch((err: Error) => {
      why = redactLogText(err.message);
      return undefined;
    });
    // A notification (one whose params came by position) is owed no answer, as `stdio` gives it
    // none: over HTTP the hub's refusal is the 400 it must send, no message for the client.
    if (!a) {
      if (this.closed) return;
      this.missed = why;
      if (!c.response && !c.notification) this.emit(errorResponse(c.error.code === PARSE_ERROR ? undefined : c.id, c.error));
      return;
    }
    this.reached = true;
    if (a.status < 300 || c.response || c.notification) return;
    this.forwardHttpError(c.id, a);
  }

  /**
   * A notification or a response of the local client, to its legacy session.
   */
  private async notify(body: string, headers: Record<string, string>): Promise<void> {
    // A notification or an answer: harmless twice.
    const a = await this.http.post(body, { headers, replay: true }).catch((err: Error) => {
      this.opts.log.warn({ err: err.message }, 'bridge: could not deliver a notification or response');
      return undefined;
    });
    if (a) this.reached = true;
    if (a && a.status >= 300) this.opts.log.warn({ status: a.status, body: a.body?.slice(0, 200) }, 'bridge: the hub refused a notification or response');
  }

  /** After a -32020 about Mcp-Param-*: list the tools to learn their x-mcp-header arguments. */
  private async learnParamHeaders(version: string, refused: HttpAnswer): Promise<boolean> {
    if (!refused.body?.includes('Mcp-Param-')) return false;
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const params: Record<string, unknown> = { _meta: { [META_PROTOCOL_VERSION]: version, [META_CLIENT_CAPABILITIES]: {} } };
      if (cursor) params.cursor = cursor;
      let next: string | undefined;
      const a = await this.http
        .post(JSON.stringify({ jsonrpc: '2.0', id: `bridge-tools-${page}`, method: 'tools/list', params }), {
          headers: { 'mcp-protocol-version': version, 'mcp-method': 'tools/list' },
          onMessage: (m) => {
            if (m.kind !== 'response' || !('result' in m.msg)) return;
            this.params.learn(m.msg.result);
            if (typeof m.msg.result.nextCursor === 'string') next = m.msg.result.nextCursor;
          },
        })
        .catch(() => undefined);
      if (!a || a.status >= 300) return page > 0;
      if (!next) return true;
      cursor = next;
    }
    return true;
  }

  /**
   * A non-2xx answer: pass on its JSON-RPC error (with the request's id), or describe the
   * status; either way with what to do about a 401 or a 404 (the bridge is where they are fixed).
   */
  private forwardHttpError(id: Id | undefined, a: HttpAnswer): void {
    const hint =
      a.status === 401
        ? ' (pass --key, or set SWITCHYARD_API_KEY)'
        : a.status === 404 && !MCP_PATH.test(new URL(this.opts.url).pathname)
          ? ` (is --url the hub's MCP endpoint? it ends in /mcp, or /mcp/<group>: ${redactLogText(new URL('/mcp', this.opts.url).href)})`
          : '';
    const c = a.body ? parseFrame(a.body) : undefined;
    if (a.status === 401) this.keyRefused = c?.kind === 'response' && 'error' in c.msg ? c.msg.error.message : 'HTTP 401';
    if (c?.kind === 'response' && 'error' in c.msg) {
      this.emit(errorResponse(id, hint ? { ...c.msg.error, message: `${c.msg.error.message}${hint}` } : c.msg.error));
      return;
    }
    this.fail(id, `the hub answered HTTP ${a.status}${hint}`);
  }

  /**
   * A new session in place of `lost`, opened with the client's own initialize (its answer is
   * not passed on: the client has it already), then `notifications/initialized`. Several
   * requests that find the session gone share one renewal; false when the hub refused it.
   */
  private renewSession(lost: string): Promise<boolean> {
    if (this.sessionId !== lost) return Promise.resolve(this.sessionId !== undefined); // renewed meanwhile
    if (!this.initBody) return Promise.resolve(false);
    this.renewing ??= this.openNewSession(this.initBody).finally(() => (this.renewing = undefined));
    return this.renewing;
  }

  private async openNewSession(initBody: string): Promise<boolean> {
    const init = { ...(JSON.parse(initBody) as Record<string, unknown>), id: `switchyard-bridge-renew-${++this.renewals}` };
    let version: string | undefined;
    const a = await this.http
      .post(JSON.stringify(init), {
        headers: {},
        replay: true,
        onMessage: (m) => {
          const v = m.kind === 'response' && 'result' in m.msg ? m.msg.result.protocolVersion : undefined;
          if (typeof v === 'string') version = v;
        },
      })
      .catch(() => undefined);
    if (!a || a.status >= 300 || !a.headers['mcp-session-id']) return false;
    this.initialized(a, version);
    await this.http.post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), { headers: this.legacyHeaders(), replay: true }).catch(() => undefined);
    this.opts.log.info('bridge: the hub no longer knew our session (it restarted?); a new one is open');
    return true;
  }

  private fail(id: Id | undefined, message: string, code = INTERNAL_ERROR): void {
    this.emit(errorResponse(id, new RpcError(code, message)));
  }

  /** Whether the hub honours idempotency keys, as its answer to a handshake says (keysKept). */
  private learnKeys(a: HttpAnswer): void {
    this.keysKept = a.headers[KEYS_KEPT_HEADER] === 'kept';
    const max = Number(a.headers[MAX_BODY_HEADER]);
    if (Number.isSafeInteger(max) && max > 0) this.opts.onMaxBody?.(max);
    const drain = Number(a.headers[DRAIN_MS_HEADER]);
    if (Number.isSafeInteger(drain) && drain >= 0) this.hubDrainMs = drain;
  }

  private initialized(a: HttpAnswer, version: string | undefined): void {
    this.learnKeys(a);
    const oldHeaders = this.legacyHeaders();
    // The negotiated version goes on every later request (digest §6.2).
    this.legacyVersion = version ?? LEGACY;
    const sessionId = firstHeaderValue(a.headers['mcp-session-id']);
    if (!sessionId) return;
    if (this.sessionId && this.sessionId !== sessionId) {
      // Re-initialize (the client starting over, or a renewal): a new session. The old one is
      // ended, as at EOF; it was left open on the daemon until it idled out (an hour).
      this.getStream?.abort();
      void this.http.delete({ headers: oldHeaders }).catch((err) => this.opts.log.debug({ err: String(err) }, 'bridge: DELETE of the old session failed'));
    }
    this.sessionId = sessionId;
    void this.openGetStream(sessionId);
  }

  /**
   * The legacy standalone stream for notifications that belong to no request, held open for as
   * long as the session is ours: a daemon that is down (restarting, or stopped for a while) is
   * tried again every few seconds, however long it takes, and a session it no longer knows (404)
   * is renewed, which opens the new session's stream. It gave up after four failed attempts
   * (4 s), so a client whose daemon was away longer never heard of a tool list change or a
   * resource update again, though its calls went on working.
   */
  private async openGetStream(sessionId: string): Promise<void> {
    const ac = new AbortController();
    this.getStream = ac;
    for (let attempt = 0; !this.closed && !ac.signal.aborted && this.sessionId === sessionId; attempt++) {
      const a = await this.http
        .get({ headers: this.legacyHeaders(), signal: ac.signal, onMessage: (m) => m.kind !== 'invalid' && this.heard(m) })
        .catch((err: Error) => {
          this.opts.log.debug({ err: err.message }, 'bridge: GET stream ended');
          return undefined;
        });
      if (this.closed || ac.signal.aborted || this.sessionId !== sessionId) return;
      // 405: the hub offers no stream; 409: another stream holds it. Neither gets better by retrying.
      if (a && (a.status === 405 || a.status === 409)) return;
      // 401/403: the bridge's key is refused (revoked, say): it stays refused for this process's
      // life, so the stream is given up, said once, rather than asked for every few seconds.
      if (a && (a.status === 401 || a.status === 403)) {
        this.opts.log.warn({ status: a.status }, "bridge: the hub refused this bridge's credential for its notification stream; no notifications until the bridge is started again with a valid key");
        return;
      }
      // 404: the hub no longer knows the session; a renewed one opens its own stream.
      if (a?.status === 404) return void this.renewSession(sessionId);
      if (a && a.status < 300) attempt = -1; // a stream that worked and ended: start counting again
      const wait = GET_RETRY_MS[Math.min(Math.max(attempt, 0), GET_RETRY_MS.length - 1)]!;
      await new Promise((r) => setTimeout(r, Math.min(wait, this.opts.streamRetryMaxMs ?? wait)).unref());
    }
  }
}

/** Whether the hub's non-2xx answer is a JSON-RPC error of `code`. */
function refusedAs(a: HttpAnswer, code: number): boolean {
  const c = a.body ? parseFrame(a.body) : undefined;
  return c?.kind === 'response' && 'error' in c.msg && c.msg.error.code === code;
}

/** A request id as a map key that keeps its type: the string "7" and the number 7 are two ids. */
function inflightKey(id: unknown): string {
  return typeof id === 'number' ? `n:${id}` : `s:${String(id)}`;
}
