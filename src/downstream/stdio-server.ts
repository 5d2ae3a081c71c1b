import { wireText } from '../protocol/serialized.js';
import type { Readable } from 'node:stream';
import type { Logger } from '../log.js';
import { CancelledError, HubStoppingError, INTERNAL_ERROR, INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { arrayOf, batchOf, BATCH_VERSION, classify, errorResponse, idKey, memberBytes, parseFrame, type Classified, type Id, type Params, type Request } from '../protocol/jsonrpc.js';
import { LineReader } from '../transport/line-reader.js';
import { readLeft } from '../transport/read-left.js';
import { cancelledLater, lineText, tooLargeLine, unservedLine } from './stdio-lines.js';
import type { MessageSink } from './core.js';
import type { Endpoint } from './endpoint.js';
import type { Exchange } from './exchange.js';
import { SessionEndedError, type LegacySession, type StdioSessionSlot } from './legacy-session.js';
import { Canceller, clientReason } from '../cancel.js';
import { classifyEra } from './classify.js';
import type { EdgeGate } from '../policy/gate.js';
import { LOCAL } from '../auth/principals.js';
import { FarBehind } from './far-behind.js';
import { monotonicNow } from '../monotonic.js';

export interface StdioServerOptions {
  /** Largest line accepted (bytes, without the newline); a longer one is skipped with an error. */
  maxLineBytes: number;
  /** At stdin EOF (and by default in drain()), how long answers still being computed may take before the server stops anyway (listen.drainTimeoutMs). */
  drainMs?: number;
  /** The principal of everything arriving on this pipe (whoever spawned the process). */
  principal?: string;
  /** The tool group this pipe shows (`switchyard stdio --group`), as `/mcp/<group>` does over HTTP. */
  group?: string;
  /**
   * The hub ends its open listen streams gracefully (ListenHub.closeAll: each listen request
   * answered, digest §4.1): called as this server stops, before its exchanges are cut.
   */
  endListens?: () => void;
  /** A legacy session ended (EOF, re-initialize): release what it held in the core. */
  onSessionClosed?: (sessionKey: string) => void;
  /** `policy.rateLimit`, as the HTTP edge holds its requests to it (the pipe's principal's buckets). */
  gate?: Pick<EdgeGate, 'limiting' | 'admitLocal'>;
}

/** Why what was running ended when stdout broke. */
const CLIENT_GONE = 'the client went away: its end of stdout was closed while the request was in flight';

/** Why a request read but never served (held behind an initialize, or read once stopped) got no answer when stdout broke. */
const UNSERVED_CLIENT_GONE = 'the client went away: its end of stdout was closed before the request was served';

/** What a question put to the client is withdrawn with once stdin ends. */
const INPUT_ENDED = 'the client closed its input (stdin)';

/** Why a request of a session that an initialize again replaced is answered with an error. */
const SESSION_REPLACED = 'the client session ended while the request was in flight: the client sent initialize again on this pipe, which starts a new session';

/** One open exchange: an answer still owed, or a modern listen stream still open. */
interface Open {
  closed: Canceller;
  streaming: boolean;
  /** Its request's id, and its exchange's reply (sessionReplaced). */
  id: Id | undefined;
  reply: Exchange['reply'] | undefined;
}

/**
 * The hub's endpoint over its own stdin/stdout (digest §6.1): one JSON-RPC message per line
 * each way, both eras. A line that is not JSON gets a -32700 error without an id; an over-long
 * line is skipped (never buffered) and answered with an error; nothing here throws on input.
 * stdout carries protocol only; logs go to stderr.
 */
export class StdioServer {
  /** The legacy session of this pipe, if the client sent initialize. */
  readonly session: StdioSessionSlot = { replaced: (old, by) => this.sessionReplaced(old, by.reply) };
  /**
   * Open exchanges by era and id (exchangeKey): the first with a key keeps it; a second one with
   * the same key (refused by the endpoint as a duplicate, or a ping) is only in `live`.
   */
  private readonly open = new Map<string, Open>();
  /** Every open exchange, whatever its key: what stop() ends. */
  private readonly live = new Set<Open>();
  private readonly pending = new Set<Promise<void>>();
  private readonly reader: LineReader;
  private outClosed = false;
  private stopped = false;
  /** stdin is paused because stdout's buffer is full (the client is not reading): resumed on 'drain'. */
  private throttled = false;
  /** What is left out or held back while the client is far behind (see write); said and sent at 'drain'. */
  private readonly behind = new FarBehind('stdout');
  /** The drain under way (stdin EOF, or a stop signal), which ends in stop(). */
  private draining: Promise<void> | undefined;
  private finish: (() => void) | undefined;
  private readonly done: Promise<void>;
  private readonly out: MessageSink;

  constructor(
    private readonly endpoint: Endpoint,
    private readonly input: Readable,
    /** write() returning false and 'drain' are its back-pressure (a Writable's); writableLength how far the client is behind. */
    private readonly output: Pick<NodeJS.WriteStream, 'write' | 'on' | 'writableLength'>,
    private readonly log: Logger,
    private readonly opts: StdioServerOptions,
  ) {
    this.done = new Promise((resolve) => (this.finish = resolve));
    this.reader = new LineReader(
      opts.maxLineBytes,
      (line) => this.line(line),
      // Through the endpoint like any refused message: answered, and given its ledger row.
      (ends) => void this.serve(tooLargeLine(ends, opts.maxLineBytes, this.session.current?.openQuestions), opts.maxLineBytes),
    );
    const self = this;
    this.out = {
      send: (msg) => this.write(msg),
      get closed() {
        return self.outClosed;
      },
    };
  }

  /** Serve until stdin ends (then drain, bounded) or stdout breaks. */
  run(): Promise<void> {
    this.output.on('error', (err) => {
      // The reader went away (EPIPE): nobody can hear us any more.
      this.log.debug({ err: String(err) }, 'stdout closed');
      this.outClosed = true;
      void this.stop();
    });
    // The client read what was waiting: read its input again.
    this.output.on('drain', () => {
      for (const msg of this.behind.drained(this.log)) this.write(msg);
      if (!this.throttled) return;
      this.throttled = false;
      // Stopped too: stdin is read until the exit (stop()), each request answered refused.
      this.readAgain();
    });
    this.input.on('data', (chunk: Buffer | string) => this.onData(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    this.input.on('end', () => void this.onEnd());
    this.input.on('error', (err) => {
      this.log.warn({ err: String(err) }, 'stdin failed');
      void this.onEnd();
    });
    return this.done;
  }

  /**
   * Stop at once: listen streams end, the session closes, and the requests still running are
   * ended (HubStoppingError), each answered -32603 `the hub is shutting down` with its row
   * (`unavailable`): a client whose stdin is open waits for those answers (a stop signal, or
   * the drain time after one running out); after stdin EOF one may be gone, and a line to a
   * stdout nobody reads is harmless (write drops what a closed one cannot take). stdin is still
   * read until the ledger closes (the hub closing its upstreams may take seconds; stopReading):
   * each request that comes is answered as refused (line) and recorded. stdout broken
   * (the client gone), they are ended cancelled instead.
   */
  async stop(): Promise<void> {
    if (this.stopped) return this.done;
    // While stdout still takes lines: a stream cut without its response reads as a dropped
    // connection, which the client may reconnect to (digest §4.1).
    this.opts.endListens?.();
    this.stopped = true;
    // stdout closed (EPIPE): the client is gone, and nobody is told anything: what was running
    // is recorded cancelled, as the client went away, not as the hub shutting down on it.
    const stopping = this.outClosed ? new CancelledError(CLIENT_GONE) : new HubStoppingError();
    for (const o of this.live) o.closed.abort(stopping);
    this.live.clear();
    this.open.clear();
    this.refuseHeld();
    // stdin is read until the exit, each request answered refused.
    if (this.heldFull) this.readAgain();
    const s = this.session.current;
    this.session.current = undefined;
    if (s) {
      s.close(stopping);
      this.opts.onSessionClosed?.(s.id);
    }
    this.finish?.();
    return this.done;
  }

  private onData(chunk: Buffer): void {
    if (this.deaf) return;
    this.reader.push(chunk);
  }

  /** stdin is read no further (stopReading): what it still holds is left unread at the exit. */
  private deaf = false;

  /**
   * The last moments of a stop, as the ledger is about to close: what stdin holds now is read
   * (readLeft), then it is read no further, and this resolves once the lines read are answered and
   * recorded. Each line read has its row; one read after the close had its answer only ('audit
   * row not written'). The last read: stdin left unread while stdout was full (or its last chunk
   * not yet taken) held requests the client had written, which the exit left with no answer at
   * all. What the client sends from now on is not read, as by a process that exited: it reached
   * nothing (the ledger's close and stdout's last flush are all that is left).
   */
  async stopReading(): Promise<void> {
    if (!this.deaf && !this.inputEnded)
      readLeft(this.input, (chunk) => this.onData(chunk), () => {
        this.inputEnded = true;
        this.reader.end();
      });
    this.deaf = true;
    this.input.pause();
    // Bounded, as the hub's own wait for the calls its stop failed is: a refusal is one row.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.pending]), new Promise<void>((r) => (timer = setTimeout(r, 1_000)))]);
    clearTimeout(timer);
  }

  /**
   * Lines read while an initialize is being answered, in order. A legacy client should wait
   * for that answer, but one that does not must still find its session: what it sent behind
   * the initialize is served once the session exists, as if it had waited.
   */
  private held: Buffer[] | null = null;
  /** The bytes of the lines held. */
  private heldBytes = 0;
  /**
   * stdin is paused because the lines held passed heldMax: a client that writes on behind an
   * initialize waiting for slow servers' starts is read no further until it is answered (every
   * line was held, in memory without bound: 75 MB written in 8 s took the process past 600 MB).
   */
  private heldFull = false;

  private get heldMax(): number {
    return Math.max(this.opts.maxLineBytes, 1024 * 1024);
  }

  private line(buf: Buffer): void {
    if (this.stopped) return this.refuse(buf);
    if (this.held) {
      this.held.push(buf);
      this.heldBytes += buf.length;
      if (this.heldBytes > this.heldMax && !this.heldFull) {
        this.heldFull = true;
        this.input.pause();
      }
      return;
    }
    const text = lineText(buf);
    if (text === undefined) return;
    const members = batchOf(text);
    const batch = this.session.current?.protocolVersion === BATCH_VERSION ? members : undefined;
    let c: Classified | undefined;
    if (batch) {
      const refused = this.endpoint.batchRefusal(batch, undefined);
      if (!refused) return this.batchLine(batch, buf.length);
      c = { kind: 'invalid', error: refused, members: batch };
    }
    c ??= parseFrame(text);
    // A batch refused whole (one this session's revision has not, too) has a row per request, as over HTTP.
    if (members && c.kind === 'invalid' && c.members === undefined) c = { ...c, members };
    const p = this.serve(c, buf.length);
    if (c.kind === 'request' && c.msg.method === 'initialize') {
      this.held = [];
      void p.then(() => this.release());
    }
  }

  /**
   * A JSON-RPC batch from a client whose session is at 2025-03-26, the one revision with
   * batches (Endpoint.batchRefusal has passed it): each member is served as a line of its own
   * would be, and the answers go out together, as one line holding their array, once every
   * member has answered (none for a batch of notifications).
   */
  private batchLine(members: unknown[], lineBytes: number): void {
    const answers: object[] = [];
    let left = members.length;
    const deliver = (msg: object | undefined): void => {
      if (msg) answers.push(msg);
      if (--left === 0 && answers.length > 0) this.write(arrayOf(answers));
    };
    for (const member of members) this.serve(classify(member), memberBytes(member, lineBytes), deliver);
  }

  /** One message to the endpoint, tracked until answered (`deliver`: see exchange). */
  private serve(c: Classified, bytes: number, deliver?: (msg: object | undefined) => void): Promise<void> {
    if (c.kind === 'notification' && c.msg.method === 'notifications/cancelled') this.cancel(c.msg.params?.requestId, c.msg.params);
    const id: Id | undefined = c.kind === 'request' ? c.msg.id : undefined;
    const ex = this.exchange(id, c.kind === 'request' ? this.exchangeKey(id!, c.msg.params) : undefined, bytes, deliver);
    // Rate limits as on HTTP: a request (or a message that is not JSON-RPC) over them is answered
    // with the refusal and its audit row, and goes no further. Without limits, no await here.
    const gate = this.opts.gate;
    const admitted =
      gate?.limiting && (c.kind === 'request' || (c.kind === 'invalid' && !c.response))
        ? gate.admitLocal(ex.principal, c.kind === 'request' ? c.msg : undefined, { requestBytes: bytes, group: this.opts.group, malformed: c.kind === 'invalid' ? c : undefined }).then((refused) => {
            if (!refused) return this.endpoint.message(c, ex, this.session);
            // Under the id it came with, a malformed message's too, as its own answer would be.
            ex.reply(errorResponse(c.kind === 'invalid' ? c.id : id, new RpcError(INVALID_REQUEST, refused.message)));
          })
        : this.endpoint.message(c, ex, this.session);
    const p: Promise<void> = admitted
      .catch((err) => {
        this.log.error({ err }, 'stdio message handler failed');
        ex.reply(id === undefined ? undefined : errorResponse(id, new RpcError(INTERNAL_ERROR, 'internal error')));
      })
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
    return p;
  }

  /**
   * Stopped with lines still held behind an initialize: each request among them is answered
   * (while stdout takes lines) and recorded, as one refused while the hub drains; release()
   * would drop them unanswered once stopped.
   */
  private refuseHeld(): void {
    const lines = (this.held ?? []).map((buf) => {
      const text = lineText(buf);
      return text === undefined ? undefined : { buf, ...unservedLine(text) };
    });
    this.held = null;
    this.heldBytes = 0;
    // A request its client cancelled behind it (the last cancellation of its id: in a later line,
    // or later in the same batch), as if served and then cancelled: recorded cancelled with the
    // client's reason, not answered.
    const cancelledAt = new Map<string, { line: number; at: number; params: Params }>();
    lines.forEach((l, line) =>
      l?.cancels.forEach(({ params, at }) => {
        if (typeof params.requestId === 'string' || typeof params.requestId === 'number') cancelledAt.set(idKey(params.requestId), { line, at, params });
      }),
    );
    lines.forEach((l, i) => {
      if (!l) return;
      this.refuseLine(l.buf, l, (id, at) => {
        const c = cancelledAt.get(idKey(id));
        return c && (c.line > i || (c.line === i && c.at > at)) ? (clientReason(c.params) ?? 'request cancelled') : undefined;
      });
    });
  }

  /**
   * A line read once stopped (or held when it stopped): a request in it is answered and recorded
   * as refused (unavailable); so is each request of a batch, their answers together in one array.
   * A malformed message (no JSON, params no object: a request with its id) is answered with its
   * error, as before the stop: its client may be waiting on that id (unservedLine, which
   * `switchyard stdio` exiting before it could serve reads lines with too).
   */
  private refuse(buf: Buffer): void {
    const text = lineText(buf);
    if (text === undefined) return;
    const l = unservedLine(text);
    // A batch member its client cancels later in the same batch: not answered, recorded
    // cancelled (the client's reason), as refuseHeld has it and as serving would have cancelled it.
    this.refuseLine(buf, l, (id, at) => {
      const c = cancelledLater(l.cancels, id, at);
      return c ? (clientReason(c) ?? 'request cancelled') : undefined;
    });
  }

  /** refuse() of a line read already; `cancelled`: the client's reason, for a request it cancelled after. */
  private refuseLine(buf: Buffer, { batch, owed }: ReturnType<typeof unservedLine>, cancelled?: (id: Id, at: number) => string | undefined): void {
    let deliver: ((msg: object | undefined) => void) | undefined;
    if (batch) {
      const answers: object[] = [];
      let left = owed.length;
      deliver = (msg) => {
        if (msg) answers.push(msg);
        if (--left === 0 && answers.length > 0) this.write(arrayOf(answers));
      };
    }
    for (const { c, member, at } of owed) {
      const bytes = batch ? memberBytes(member, buf.length) : buf.length;
      if (c.kind === 'request') this.refuseRequest(c.msg, bytes, deliver, cancelled?.(c.msg.id, at));
      else void this.serve(c, bytes, deliver);
    }
  }

  /**
   * stdout closed (EPIPE): nobody can be told, so it is recorded as the client's leaving
   * (cancelled), as what was running then is; so is one the client `cancelled` (its reason).
   */
  private refuseRequest(msg: Request, bytes: number, deliver?: (msg: object | undefined) => void, cancelled?: string): void {
    const ex = this.exchange(msg.id, undefined, bytes, deliver);
    // Tracked: stopReading() waits for its row before the ledger closes.
    const p: Promise<void> = this.endpoint
      .refuseUnserved(msg, ex, this.outClosed ? UNSERVED_CLIENT_GONE : cancelled, () => this.unheard())
      .catch((err: unknown) => this.log.error({ err }, 'stdio refusal failed'))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /**
   * Whether the answer just written met a closed stdout: a write to a pipe whose reader is gone
   * fails at once (EPIPE), its 'error' on the next tick (run() sets outClosed). A refusal that was
   * the first write since the client closed stdout is recorded as its leaving, not as told.
   */
  private unheard(): Promise<string | undefined> {
    return new Promise((resolve) => setImmediate(() => resolve(this.outClosed ? UNSERVED_CLIENT_GONE : undefined)));
  }

  /** The initialize is answered: the lines held behind it go in order (another initialize holds the rest again). */
  private release(): void {
    const lines = this.held ?? [];
    this.held = null;
    this.heldBytes = 0;
    for (let i = 0; i < lines.length; i++) {
      if (this.stopped) return;
      this.line(lines[i]!);
      if (this.held) {
        const rest = lines.slice(i + 1);
        (this.held as Buffer[]).push(...rest);
        this.heldBytes += rest.reduce((n, b) => n + b.length, 0);
        // Still past heldMax: stdin stays paused until this initialize is answered too.
        if (this.heldBytes > this.heldMax) return;
        break;
      }
    }
    if (this.heldFull) this.readAgain();
  }

  /** stdin read again, unless stdout is full (throttled) or held lines are still past heldMax. */
  private readAgain(): void {
    if (this.deaf || (this.heldFull && this.held !== null && this.heldBytes > this.heldMax)) return;
    this.heldFull = false;
    if (!this.throttled) this.input.resume();
  }

  /**
   * Which exchange an id names: one id may be in flight in each era on one pipe (a modern call
   * and a legacy one), and a legacy id only in its session. `params`: the request's; its
   * `_meta` says its era, as the endpoint reads it.
   */
  private exchangeKey(id: unknown, params: Record<string, unknown> | undefined): string {
    return isModern(params) ? modernKey(id) : this.legacyKey(id);
  }

  private legacyKey(id: unknown): string {
    return `legacy ${this.session.current?.id ?? '-'} ${idKey(id)}`;
  }

  /**
   * A client cancellation: the listen stream or call with that id ends; nothing more is sent for
   * it. One with a modern claim in `_meta` names a modern exchange only. One without (a legacy
   * client's; a modern client need not put `_meta` on a notification) names the legacy exchange
   * of the session with that id, or else the modern one: with the same id in flight in both eras,
   * the other era's call goes on.
   */
  private cancel(requestId: unknown, params: Record<string, unknown> | undefined): void {
    if (typeof requestId !== 'string' && typeof requestId !== 'number') return;
    const keys = isModern(params) ? [modernKey(requestId)] : [this.legacyKey(requestId), modernKey(requestId)];
    const key = keys.find((k) => this.open.has(k));
    if (key === undefined) return;
    const o = this.open.get(key)!;
    this.open.delete(key);
    this.live.delete(o);
    o.closed.abort(clientReason(params));
  }

  /** `deliver`: where the answer goes instead of a line of its own (a batch's member; called once, undefined for none). */
  private exchange(id: Id | undefined, key: string | undefined, bytes: number, deliver?: (msg: object | undefined) => void): Exchange {
    const closed = new Canceller();
    const entry: Open = { closed, streaming: false, id, reply: undefined };
    // A reused id never takes the key from the exchange holding it: a cancellation names that
    // one (the endpoint refuses the newcomer as a duplicate, or answers it at once: a ping).
    if (key !== undefined && !this.open.has(key)) this.open.set(key, entry);
    this.live.add(entry);
    let answered = false;
    const settle = () => {
      this.live.delete(entry);
      if (key !== undefined && this.open.get(key) === entry) this.open.delete(key);
    };
    const out = this.out;
    const ex: Exchange = {
      transport: 'stdio',
      header: () => undefined,
      principal: this.opts.principal ?? LOCAL,
      group: this.opts.group,
      requestBytes: bytes,
      sink: out,
      closed: closed.signal,
      inputEnded: this.inputGone.signal,
      reply: (msg) => {
        if (answered) return;
        answered = true;
        if (!entry.streaming) settle();
        // Ended by the client (a cancellation): nothing more is sent for it. Ended by the hub's
        // stop (HubStoppingError): the client still waits for its answer, which says so; a path
        // that has none to give (the endpoint answers each it knows) is given that one.
        const reason = closed.signal.reason;
        const stopped = reason instanceof HubStoppingError;
        if (stopped && !msg && id !== undefined) msg = errorResponse(id, new RpcError(INTERNAL_ERROR, reason.message));
        const sent = msg && (!closed.signal.aborted || stopped) ? msg : undefined;
        if (deliver) deliver(sent);
        else if (sent) this.write(sent);
      },
      stream: () => {
        entry.streaming = true;
        answered = true;
        return {
          get closed() {
            return closed.signal.aborted || out.closed;
          },
          send: (msg: object) => {
            if (!closed.signal.aborted) out.send(msg);
          },
          end: () => {
            // Its graceful end, the listen request's response, was sent before (ListenHub.finish);
            // a cancelled one gets nothing.
            if (closed.signal.aborted || id === undefined) return;
            settle();
            closed.abort();
          },
        };
      },
    };
    entry.reply = ex.reply;
    return ex;
  }

  /**
   * An initialize again replaced session `old`: each request of it still owed an answer is
   * answered now with an error saying so, and ends (cancelled, its row says why), before the new
   * session's initialize is answered. Its answers were dropped: the client waited for them until
   * its own timeout, and on one pipe an answer after the new initialize's could be taken for one
   * to the new session's request of the same id. Before it, one can only be the old session's.
   */
  private sessionReplaced(old: LegacySession, initializing: unknown): void {
    const prefix = `legacy ${old.id} `;
    for (const [key, o] of this.open) {
      if (!key.startsWith(prefix) || o.streaming || o.id === undefined || o.reply === initializing) continue;
      o.reply?.(errorResponse(o.id, new RpcError(INTERNAL_ERROR, SESSION_REPLACED)));
      // Also one still waiting to be let in (policy.rateLimit): it is not served in the new session.
      o.closed.abort(new SessionEndedError());
    }
  }

  /**
   * One message on stdout. When stdout's buffer is full (write() says so: the client is not
   * reading), stdin is paused until it drains: no new work is read whose answers would pile up
   * in memory. What is already running still answers into the buffer (bounded by what was read).
   * Not so what an upstream sends while it runs: a flood of notifications is left out or held
   * back while the client is far behind (far-behind.ts).
   */
  private write(msg: object): void {
    if (this.outClosed) return;
    if (this.behind.takes(msg, this.output.writableLength, this.log)) return;
    let line: string;
    try {
      line = wireText(msg);
    } catch (err) {
      this.log.error({ err }, 'unserialisable message dropped');
      return;
    }
    if (!this.output.write(line + '\n') && !this.throttled && !this.stopped) {
      this.throttled = true;
      this.input.pause();
      this.log.debug('stdout is full (the client is not reading it): stdin paused until it drains');
    }
  }

  /** stdin ended (EOF, or it failed): the client asked the hub to stop. */
  inputEnded = false;

  /** Fires as stdin ends: a question put to the client then can never be answered (Exchange.inputEnded). */
  private readonly inputGone = new Canceller();

  /** stdout broke (EPIPE): the client went away, which stopped the server. */
  get outputClosed(): boolean {
    return this.outClosed;
  }

  /** stdin ended: let answers in progress finish (bounded), then stop. */
  private async onEnd(): Promise<void> {
    this.inputEnded = true;
    // Once reading stopped (stopReading), a line begun before is no request read: its end at
    // EOF made it one, answered as the ledger closed or had closed, its row lost.
    if (!this.deaf) this.reader.end();
    // After the last line (one without its newline may be an answer): questions still open now
    // can never be answered.
    this.inputGone.abort(INPUT_ENDED);
    if (this.stopped) return;
    if (this.pending.size > 0) this.log.info({ inFlight: this.pending.size, drainMs: this.opts.drainMs }, 'stdin closed: what is in flight may answer before the hub stops');
    await this.drain();
  }

  /**
   * Let answers in progress finish for up to `ms` (default: drainMs), then stop(). Input is still
   * read meanwhile (a client's answer to a question, a cancellation); whoever calls this refuses
   * new work itself (the hub's draining). A drain already under way keeps its own deadline.
   */
  drain(ms = this.opts.drainMs ?? 5_000): Promise<void> {
    if (this.stopped) return this.done;
    this.draining ??= (async () => {
      // On the monotonic clock: a wall clock stepped back an hour during the drain made it wait
      // that hour (the stop of `switchyard stdio` hung), and one stepped ahead cut it short.
      const deadline = monotonicNow() + ms;
      // Until nothing is left: an answer can let more work start (lines held behind an initialize).
      while (this.pending.size > 0 && !this.stopped) {
        const left = deadline - monotonicNow();
        if (left <= 0) break;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...this.pending]), new Promise<void>((r) => (timer = setTimeout(r, left)))]);
        clearTimeout(timer);
      }
      await this.stop();
    })();
    return this.draining;
  }
}

/** Whether a message's params claim the modern era (Endpoint's classification, without headers on stdio). */
const isModern = (params: Record<string, unknown> | undefined): boolean => classifyEra(undefined, params, undefined).era === 'modern';
const modernKey = (id: unknown): string => `modern ${idKey(id)}`;
