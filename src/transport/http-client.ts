/**
 * The client side of Streamable HTTP (digest §6.2, §6.3): one POST per JSON-RPC message, an
 * answer that is JSON, an SSE stream, or 202; the legacy GET stream and DELETE. It knows
 * nothing of eras: callers pass the headers.
 *
 * undici's connection pool, driven by a dispatch handler of our own: the answer's bytes are
 * collected (JSON) or fed to the SSE parser (event stream) as they arrive, with no response
 * stream or promise per exchange. Per exchange that costs about half the CPU of node:http's
 * client with a keep-alive agent, and ~50 µs less latency (docs/BENCHMARKS.md).
 *
 * The handler takes undici 7's first set of hooks (onConnect, onHeaders, onData, onComplete,
 * onError), which its HTTP/1.1 client calls directly. Given the newer ones (onRequestStart,
 * onResponseStart…), undici wraps the handler in an adapter that turns every answer's raw
 * header list into an object first: ~10k instructions per answer (2–5 % of a call's event-loop
 * work, less what reading the list here costs), where a call's JSON answer needs two headers. The object
 * is built only when a caller reads `headers` (an error, a session id). undici 8 drops the first
 * set (it needs Node 22): porting back is this class alone (docs/BENCHMARKS.md, sixty-fifth session).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Dispatcher, Pool } from 'undici';
import { redactLogText, type Logger } from '../log.js';
import { redactedExcerpt } from '../policy/secret-text.js';
import { CancelledError, TransportError } from '../protocol/errors.js';
import { batchOf, classify, parseFrame, type Classified } from '../protocol/jsonrpc.js';
import { SseFeed, SseOverflowError } from './sse.js';
import { ACCEPT_ENCODING, codingOf, decodable, decoderFor, type Coding } from './content-coding.js';
import type { Transform } from 'node:stream';
import type { Signal } from '../cancel.js';
import { VERSION } from '../version.js';

export interface HttpClientOptions {
  url: string;
  /** Sent on every request (e.g. Authorization); never logged. */
  headers?: Record<string, string>;
  maxFrameBytes: number;
  log: Logger;
}

/**
 * Cuts one exchange short: the hub's per-call alternative to an AbortSignal, which costs an
 * AbortController, an EventTarget and a listener on every call.
 */
export class ExchangeAbort {
  aborted = false;
  /**
   * The server's answer began (its status line came), or the exchange ended without one. A
   * legacy server dispatches a POSTed request before it answers the POST, so from then on a
   * message about that request (its cancellation) finds it there.
   */
  heard = false;
  /** The request was sent again (attach): when the first went says nothing of it. */
  resent = false;
  private exchange: { cancel(): void; endSoon(ms: number): void; readonly decoding: boolean } | undefined;
  private onHeard: (() => void) | undefined;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.exchange?.cancel();
  }

  /**
   * The answer this exchange was for has come: an event stream the server keeps open past it
   * (it should close it, digest §6.2) is closed by the hub after `ms`, so that its socket is
   * not held for good. A stream that ends by itself meanwhile keeps its connection for reuse.
   */
  answered(ms: number): void {
    this.exchange?.endSoon(ms);
  }

  /** Bytes of the answer were read and are still being decoded (a compressed body: on the thread pool, a turn or more later). */
  get decoding(): boolean {
    return this.exchange?.decoding ?? false;
  }

  /** `fn` once heard (at once if it was): one at a time, the latest. */
  whenHeard(fn: () => void): void {
    if (this.heard) return fn();
    this.onHeard = fn;
  }

  /** The answer's status, once it began (undefined while unheard, or when the exchange ended without one). */
  status: number | undefined;
  private began: HttpAnswer | undefined;

  /** The answer's headers, once it began: what its messages are read with (the session an `initialize` answer opens). */
  get headers(): IncomingHttpHeaders | undefined {
    return this.began?.headers;
  }

  /** @internal the answer began (its `status`, and `answer`), or the exchange ended. */
  hear(status?: number, answer?: HttpAnswer): void {
    if (this.heard) return;
    this.heard = true;
    this.status = status;
    this.began = answer;
    const fn = this.onHeard;
    this.onHeard = undefined;
    // Out of undici's callback: what it does may start exchanges of its own.
    if (fn) queueMicrotask(fn);
  }

  /**
   * @internal the exchange to cut, at once if abort() came first. A second one (the request sent
   * again: OAuthHttp after a 401 or a 403) is unheard until its own answer begins: the answer
   * heard was the refusal, and the server has not taken this one yet.
   */
  attach(exchange: { cancel(): void; endSoon(ms: number): void; readonly decoding: boolean }): void {
    if (this.exchange !== undefined) {
      this.heard = false;
      this.status = undefined;
      this.began = undefined;
      this.resent = true;
    }
    this.exchange = exchange;
    if (this.aborted) exchange.cancel();
  }
}

export interface HttpExchangeOptions {
  headers?: Record<string, string>;
  signal?: Signal;
  abort?: ExchangeAbort;
  /** Each JSON-RPC message of a 2xx answer (the JSON body, or each SSE event), in order. */
  onMessage?: (c: Classified) => void;
  /**
   * A POST that is safe to send twice (see `lostUnanswered`): a request other than a tools/call,
   * a tools/call idempotent by trusted configuration, a notification, an answer to the server.
   * A GET or a DELETE always is (idempotent methods).
   */
  replay?: boolean;
  /**
   * A resumption's Last-Event-ID (a GET): an event the server sends again under that very id,
   * replaying from it rather than after it (digest §6.2), was delivered already, and is skipped.
   */
  resumedFrom?: string;
  /**
   * The body is a JSON-RPC batch (a 2025-03-26 client's, passed on by `connect`): a JSON answer
   * holding an array is its members' answers, each given to onMessage.
   */
  batch?: boolean;
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** How many messages went to onMessage. */
  messages: number;
  /** The body of a non-2xx answer (truncated to 64 KiB), for a JSON-RPC error it may carry. */
  body?: string;
  /** SSE: last event id seen, for a resumption. */
  lastEventId?: string;
  /** SSE: the last `retry:` the server asked for (ms): how long to wait before resuming. */
  retryMs?: number;
}

/**
 * An event stream cut (a network error, not an end) after the server had named an event id:
 * the stream may go on from `lastEventId` (a GET with `Last-Event-ID`, after `retryMs`).
 */
export class StreamCutError extends TransportError {
  constructor(
    message: string,
    status: number,
    readonly lastEventId: string,
    readonly retryMs: number | undefined,
    /** How many messages the stream brought before the cut (a resumption's progress). */
    readonly messages = 0,
  ) {
    super(message, status);
  }
}

const ERROR_BODY_LIMIT = 64 * 1024;
/**
 * The most of an answer's header section read. undici's default is Node's 16 KiB, which a
 * server behind a load balancer or a sign-in proxy passes with its cookies (affinity, session
 * and auth cookies of several KiB each): every answer failed "Headers Overflow Error", the
 * server never started. Browsers read 256 KiB.
 */
const MAX_HEADER_BYTES = 256 * 1024;
const USER_AGENT = `switchyard/${VERSION}`;
const POST_ACCEPT = 'application/json, text/event-stream';
/**
 * Connect-phase failures: the request surely never reached the server. undici's connect timeout
 * (a host gone, or a firewall that drops: no RST) too, as it is written only once connected.
 */
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
/** A connection the other side closed (a FIN: undici's "other side closed"), reset, or that could not be written to. */
const CONNECTION_LOST = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);
/**
 * How many times in a row one exchange is sent again after a kept-alive connection was lost
 * under it before its answer began: each loss closes that connection, so the next attempt goes
 * on another idle one or a new one; a new one that is lost so is not tried again.
 */
const MAX_REPLAYS = 3;
/** Set on an error of a connection that had read something (an earlier answer) before it failed: it was kept alive. */
const KEPT_ALIVE = Symbol('kept-alive');

/**
 * Every new connection (not every exchange): an error on it says whether it had read anything
 * since it connected, that is whether an earlier answer came on it. Registered before undici's
 * own listeners, it marks the error object that then fails the exchange. (Over TLS a session
 * ticket that came after the handshake counts too: a new connection may pass for a reused
 * one, which only lets an exchange that is safe to send again be sent once more.)
 */
function watchReuse(socket: Socket): void {
  const fresh = socket.bytesRead;
  socket.on('error', (err: Error & { [KEPT_ALIVE]?: boolean }) => {
    if (socket.bytesRead > fresh) err[KEPT_ALIVE] = true;
  });
}

/**
 * A kept-alive connection lost before any byte of the answer came: the server closed it as idle
 * (its keep-alive timeout, a load balancer's idle timeout) just as the request went out on it,
 * and most likely never read the request. Not surely (it may have read it and then died), so
 * only an exchange that is safe to send twice is sent again (Go's net/http does the same).
 */
function lostUnanswered(err: Error & { [KEPT_ALIVE]?: boolean }): boolean {
  return err[KEPT_ALIVE] === true && CONNECTION_LOST.has((err as NodeJS.ErrnoException).code ?? '');
}

/**
 * undici, loaded by the first client made: a hub without HTTP upstreams (every `switchyard
 * stdio` an IDE starts for stdio servers) does not pay for loading it (~0.1 s of CPU).
 */
let undici: Promise<typeof import('undici')> | undefined;
/** undici's header helpers, set when it is loaded (before any exchange is dispatched). */
let headerTools: (typeof import('undici'))['util'] | undefined;

type RawHeaders = (Buffer | string | (Buffer | string)[])[];

const latin1 = (x: Buffer | string): string => (typeof x === 'string' ? x : x.toString('latin1'));

/**
 * What undici's parseHeaders would give for `name` (lower case; 12 or 16 characters long) in a
 * raw header list: undefined, its text, or every text when it came more than once. Only names
 * of that length are looked at, so an answer's other headers cost a length check each.
 */
function rawHeader(raw: RawHeaders, name: 'content-type' | 'content-encoding'): string | string[] | undefined {
  let v: string | string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i] as Buffer | string;
    if (k.length !== name.length || headerTools!.headerNameToString(k) !== name) continue;
    const x = raw[i + 1]!;
    if (v === undefined) v = typeof x === 'string' ? x : Array.isArray(x) ? x.map(latin1) : x.toString('latin1');
    else (typeof v === 'string' ? (v = [v]) : v).push(latin1(x as Buffer | string));
  }
  return v;
}

/**
 * An answer's Content-Type as one value: a header sent more than once (a proxy adding its own,
 * a framework and a handler each setting it) counts when every copy names the same media type
 * (parameters aside), as the first; copies that differ name none the hub can take ('').
 */
function oneContentType(ct: string | string[] | undefined): string | undefined {
  if (ct === undefined) return undefined;
  // One line may hold the copies already joined (a proxy that folds repeated fields, RFC 9110
  // §5.3): the same as so many lines. A quoted parameter may hold a comma: such a line is one value.
  if (!Array.isArray(ct)) return ct.indexOf(',') < 0 || ct.indexOf('"') >= 0 ? ct : oneContentType(ct.split(','));
  const type = mediaTypeOf(ct[0]!);
  // Copies that differ: a type, but none the hub takes (not the absent one, whose body may be examined).
  for (let i = 1; i < ct.length; i++) if (mediaTypeOf(ct[i]!) !== type) return '';
  return ct[0]!.trim();
}

function mediaTypeOf(v: string): string {
  return v.split(';', 1)[0]!.trim().toLowerCase();
}

/** An answer whose headers object is made when first read: a call answered 2xx never reads it. */
class Answer implements HttpAnswer {
  messages = 0;
  body: string | undefined = undefined;
  lastEventId: string | undefined = undefined;
  retryMs: number | undefined = undefined;
  private parsed: IncomingHttpHeaders | undefined = undefined;

  constructor(
    readonly status: number,
    /** Dropped once parsed: its Buffers are slices of the socket read they came in on. */
    private raw: RawHeaders | undefined,
  ) {}

  get headers(): IncomingHttpHeaders {
    if (this.parsed === undefined) {
      this.parsed = headerTools!.parseHeaders(this.raw as (Buffer | string)[]) as IncomingHttpHeaders;
      this.raw = undefined;
    }
    return this.parsed;
  }
}

export class HttpClient {
  private readonly url: URL;
  /** The request target of every exchange (the URL's path and query), made once. */
  private readonly path: string;
  /** Set once undici is loaded (at once after the first client's construction); `ready` until then. */
  private pool: Pool | undefined;
  private readonly ready: Promise<void>;
  private closed = false;
  private readonly base: Record<string, string>;
  /** @internal */ readonly maxFrameBytes: number;
  /** @internal */ readonly log: Logger;

  constructor(opts: HttpClientOptions) {
    this.url = new URL(opts.url);
    // The hub times calls itself: undici's own header and body timeouts (300 s) would cut a
    // long tool call or an idle GET stream short. Every exchange is bounded by its caller (a
    // call's timeout, a notice's, the GET stream's abort), which frees its socket. No cap on
    // connections: a long call, a lingering answer stream or the GET stream each hold one, and a
    // cap would queue calls behind them (maxConcurrent already bounds the calls).
    //
    // Kept-alive connections are closed after what the server's `Keep-Alive: timeout=` says, less
    // 2 s, or after 4 s without one (undici's defaults): below the idle timeouts of servers and
    // load balancers in common use. One the server closes all the same as a request goes out on
    // it fails that request before its answer, which is then sent again if it may be (replay).
    this.ready = (undici ??= import('undici')).then((m) => {
      headerTools = m.util;
      const connect = m.buildConnector({});
      this.pool = new m.Pool(this.url.origin, {
        headersTimeout: 0,
        bodyTimeout: 0,
        maxHeaderSize: MAX_HEADER_BYTES,
        connect: (o, cb) =>
          connect(o, (err, socket) => {
            if (socket) watchReuse(socket);
            (cb as (e: Error | null, s: Socket | null) => void)(err, socket);
          }),
      });
      if (this.closed) this.close();
    });
    this.path = this.url.pathname + this.url.search;
    this.base = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) this.base[k.toLowerCase()] = v;
    // RFC 9110 §10.1.5: a client should say what it is. Firewalls in common use in front of
    // remote servers refuse a request without one (AWS WAF's common rules: NoUserAgent_HEADER,
    // a 403 that read as a refused credential). A configured one is kept.
    this.base['user-agent'] ??= USER_AGENT;
    this.maxFrameBytes = opts.maxFrameBytes;
    this.log = opts.log;
  }

  /** POST one serialised JSON-RPC message. */
  post(body: string, o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('POST', body, POST_ACCEPT, o);
  }

  /** The legacy standalone stream, or a stream resumed with `Last-Event-ID`; resolves when it ends. */
  get(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('GET', undefined, 'text/event-stream', o);
  }

  delete(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('DELETE', undefined, POST_ACCEPT, o);
  }

  /** Drops the pool's connections; exchanges still running fail. */
  close(): void {
    this.closed = true;
    this.pool?.destroy().catch(() => undefined);
  }

  private exchange(method: string, body: string | undefined, accept: string, o: HttpExchangeOptions): Promise<HttpAnswer> {
    return new Promise<HttpAnswer>((resolve, reject) => {
      if (o.signal?.aborted || o.abort?.aborted) return reject(new CancelledError());
      const headers: Record<string, string> = Object.assign({}, this.base);
      headers.accept = accept;
      headers['accept-encoding'] ??= ACCEPT_ENCODING;
      if (o.headers) for (const k in o.headers) headers[k] = o.headers[k];
      if (body !== undefined) headers['content-type'] = 'application/json';
      const ex = new Exchange(this, { path: this.path, method, headers, body }, o, resolve, reject);
      o.abort?.attach(ex);
      if (o.signal) ex.follow(o.signal);
      if (this.pool) this.dispatch(this.pool, ex);
      // The first exchanges of a new client, while undici loads (a closed client's pool refuses them).
      else void this.ready.then(() => this.dispatch(this.pool!, ex), (err: unknown) => ex.onError(err as Error));
    });
  }

  private dispatch(pool: Pool, ex: Exchange): void {
    try {
      pool.dispatch(ex.request, ex);
    } catch (err) {
      ex.onError(err as Error);
    }
  }

  /** @internal the exchange's request sent again, after its kept-alive connection was lost (Exchange.onError). */
  resend(ex: Exchange): void {
    this.dispatch(this.pool!, ex);
  }
}

/** One request and its answer, as undici's dispatcher reports them (its first set of hooks: see the top). */
class Exchange implements Dispatcher.DispatchHandler {
  /** undici's abort of this request, once it is on a connection (onConnect). */
  private abortFn: ((err?: Error) => void) | undefined;
  /** undici's resume of an answer paused by onData's false. */
  private resumeFn: (() => void) | undefined;
  private answer: Answer | undefined;
  /** The answer's Content-Type, one value (oneContentType). */
  private contentType: string | undefined;
  /** A 2xx event stream; otherwise the body is collected. */
  private sse: SseFeed | undefined;
  private parts: Buffer[] = [];
  private size = 0;
  /** The body's limit, and whether going past it truncates (error bodies) or fails. */
  private limit = 0;
  private truncate = false;
  private settled = false;
  private unfollow: (() => void) | undefined;
  /** endSoon's timer. */
  private lingering: NodeJS.Timeout | undefined;
  /** A compressed answer's coding, and its decoder once the first bytes came: what it gives out is the body. */
  private coding: Coding | undefined;
  private decoder: Transform | undefined;
  /** Writes to the decoder (its end too) it has not yet taken through: see `decoding`. */
  private inDecoder = 0;
  /** The connection's error, once a compressed event stream was cut: settled with it once its decoder is flushed (onError). */
  private cut: Error | undefined;
  /** Times sent again after a lost kept-alive connection (onError). */
  private replays = 0;

  constructor(
    private readonly client: HttpClient,
    /** @internal */ readonly request: Dispatcher.DispatchOptions,
    private readonly o: HttpExchangeOptions,
    private readonly resolve: (a: HttpAnswer) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  /** Abort with a signal too (timeouts, the GET stream, a bridged request). */
  follow(signal: Signal): void {
    const on = (): void => this.cancel();
    signal.addEventListener('abort', on, { once: true });
    this.unfollow = () => signal.removeEventListener('abort', on);
  }

  /** Bytes read and not yet through the decoder, where the answer (or more of it) may be. */
  get decoding(): boolean {
    return this.inDecoder > 0 && !this.settled;
  }

  cancel(): void {
    if (this.settled) return; // answered already: its connection may be serving another exchange
    const err = new CancelledError();
    this.settle(err);
    this.abortFn?.(err);
  }

  endSoon(ms: number): void {
    if (this.settled || !this.sse || this.lingering) return;
    this.lingering = setTimeout(() => {
      if (this.settled) return;
      this.client.log.debug({ ms }, 'closed an answer stream the upstream kept open after its response');
      this.settle(undefined);
      this.abortFn?.(new CancelledError());
    }, ms);
    this.lingering.unref();
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
    if (this.settled) abort(new CancelledError());
  }

  private abort(err: Error): void {
    this.abortFn?.(err);
  }

  onHeaders(status: number, raw: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 1xx: the answer is still to come
    this.resumeFn = resume;
    this.answer = new Answer(status, raw);
    this.o.abort?.hear(status, this.answer);
    const coding = codingOf(rawHeader(raw, 'content-encoding'));
    if (status >= 300) {
      // An error body in a coding the hub cannot decode is left unread: its status still tells.
      this.limit = coding === undefined || decodable(coding) ? ERROR_BODY_LIMIT : 0;
      this.truncate = true;
    } else {
      if (coding !== undefined && !decodable(coding)) {
        const err = new TransportError(`HTTP ${status} answer in content coding "${coding}", which the hub cannot decode (it asks for Accept-Encoding: ${ACCEPT_ENCODING})`, status);
        this.settle(err);
        this.abort(err);
        return true;
      }
      this.limit = this.client.maxFrameBytes;
      const ct = (this.contentType = oneContentType(rawHeader(raw, 'content-type')));
      if (ct !== undefined && ct.toLowerCase().startsWith('text/event-stream')) {
        const from = this.o.resumedFrom;
        this.sse = new SseFeed(this.client.maxFrameBytes, from === undefined ? (e) => this.deliver(e.data) : (e) => e.id !== from && this.deliver(e.data));
        // A stream may stay open for hours (a listen, a legacy GET): its headers are parsed now,
        // so that it does not keep the socket read its raw header list points into.
        void this.answer.headers;
      }
    }
    if (coding !== undefined && decodable(coding)) this.coding = coding;
    return true;
  }

  /** False pauses the answer (a decoder behind), until resumeFn. */
  onData(chunk: Buffer): boolean {
    if (this.settled) return true;
    if (this.coding !== undefined) return this.decode(chunk);
    this.take(chunk);
    return true;
  }

  /** The answer's body bytes (decoded, if it came compressed): fed to the event stream, or collected. */
  private take(chunk: Buffer): void {
    if (this.settled) return;
    if (this.sse) {
      try {
        this.sse.feed(chunk);
      } catch (err) {
        const e = new TransportError(`event stream failed: ${(err as Error).message}${err instanceof SseOverflowError ? ' (maxFrameBytes)' : ''}`, this.answer?.status);
        if (err instanceof SseOverflowError) e.oversized = true;
        this.settle(e);
        this.abort(err as Error);
      }
      return;
    }
    if (this.size + chunk.length <= this.limit) {
      this.parts.push(chunk);
      this.size += chunk.length;
    } else if (this.truncate) {
      if (this.size < this.limit) this.parts.push(chunk.subarray(0, this.limit - this.size));
      this.size = this.limit;
    } else {
      const err = new TransportError(`HTTP answer larger than ${this.limit} bytes (maxFrameBytes)`, this.answer?.status);
      err.oversized = true;
      this.settle(err);
      this.abort(err);
    }
  }

  /**
   * Compressed bytes go through the decoder, whose output is taken as the body's. Its limits
   * (maxFrameBytes, the error body's) count decoded bytes, so a small bomb is cut as a large
   * body is; the answer waits while the decoder is behind.
   */
  private decode(chunk: Buffer): boolean {
    const d = this.decoder ?? (this.decoder = this.decoderOf(chunk));
    this.inDecoder++;
    if (d.write(chunk, () => this.inDecoder--)) return true;
    d.once('drain', () => this.resumeFn?.());
    return false;
  }

  private decoderOf(first: Buffer): Transform {
    const d = decoderFor(this.coding!, first);
    // Called back by the decoder, not by undici: what throws fails this exchange, not the hub.
    const guarded = (f: () => void): void => {
      try {
        f();
      } catch (err) {
        this.settle(err as Error);
        this.abort(err as Error);
      }
    };
    d.on('data', (out: Buffer) => guarded(() => this.take(out)));
    d.on('end', () => guarded(() => this.finish()));
    d.on('error', (err: Error) => {
      // A broken error body leaves the status to tell; a broken answer fails the exchange.
      if (this.answer!.status >= 300) return this.finish();
      // The flushed stream of a cut connection ends unfinished, as it would: the cut is the error
      // (a JSON body it gave out whole is taken all the same: finish).
      if (this.cut) return this.sse ? this.settleCut(this.cut) : this.finish();
      const e = new TransportError(`the answer's ${this.coding} content coding is broken: ${err.message}`, this.answer!.status);
      this.settle(e);
      this.abort(e);
    });
    return d;
  }

  onComplete(): void {
    if (this.settled || !this.answer) return;
    // A compressed answer ends when its decoder has given out all it holds (then it is settled: no longer decoding).
    if (this.decoder) {
      this.inDecoder++;
      return void this.decoder.end();
    }
    this.finish();
  }

  private finish(): void {
    const a = this.answer;
    if (this.settled || !a) return;
    if (this.sse) {
      try {
        this.sse.end();
      } catch (err) {
        return this.settle(new TransportError(`event stream failed: ${(err as Error).message}`, a.status));
      }
      if (this.cut) return this.settleCut(this.cut);
      if (this.sse.result.lastEventId !== undefined) a.lastEventId = this.sse.result.lastEventId;
      if (this.sse.result.retryMs !== undefined) a.retryMs = this.sse.result.retryMs;
      return this.settle(undefined);
    }
    const decoded = this.size === 0 ? '' : this.parts.length === 1 ? this.parts[0].toString('utf8') : Buffer.concat(this.parts, this.size).toString('utf8');
    this.parts = [];
    // A byte order mark may be ignored (RFC 8259 §8.1), as the event stream's is (SseFeed); some Windows stacks write one.
    const text = decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
    if (this.cut !== undefined) {
      // Cut before its end. A JSON answer whole all the same (the cut took only a compressed
      // body's trailer, or the connection closed short of a Content-Length its body did not
      // need) is taken, as a cut event stream's whole events are; anything else fails, saying so.
      if (a.status >= 300) return this.settleCut(this.cut);
      if ((!this.isJson() && this.contentType !== undefined) || !wholeMessage(text)) return this.settleCut(this.cut, this.size);
      this.client.log.debug({ status: a.status, bytes: this.size, coding: this.coding, err: errText(this.cut) }, 'a JSON answer whose connection broke before its end came whole: taken');
    }
    if (a.status >= 300) {
      if (text.length > 0) a.body = text;
    } else if (text.length > 0) {
      // With no Content-Type at all (a hand-written server: Node's http sets none) the body may
      // be examined for its type (RFC 9110 §8.3): JSON-RPC is taken as the JSON answer it is.
      if (this.isJson() || (this.contentType === undefined && wholeMessage(text))) this.deliver(text);
      else a.body = text.slice(0, ERROR_BODY_LIMIT);
    }
    this.settle(undefined);
  }

  onError(err: Error): void {
    if (this.settled) return;
    if (this.answer) {
      if (err instanceof TransportError) return this.settle(err);
      if (this.cut) return;
      // A compressed answer's last bytes may still be in its decoder (it works on the thread
      // pool, a turn or more behind the socket): the events they complete (the response, say)
      // are delivered before the cut fails the exchange, as an uncompressed stream's are, and a
      // JSON body they complete is taken (finish).
      this.cut = err;
      if (this.decoder) {
        this.inDecoder++;
        return void this.decoder.end();
      }
      return this.sse ? this.settleCut(err) : this.finish();
    }
    const code = (err as NodeJS.ErrnoException).code ?? '';
    const method = this.request.method;
    if (this.replays < MAX_REPLAYS && (this.o.replay === true || method !== 'POST') && lostUnanswered(err)) {
      this.replays++;
      this.abortFn = undefined;
      this.client.log.debug({ method, err: errText(err) }, 'a kept-alive connection was closed before the answer began; sending the request again');
      // Once undici is done with the lost connection.
      return void setImmediate(() => {
        if (!this.settled) this.client.resend(this);
      });
    }
    // Before any answer: a refused or unresolvable connection surely never delivered it.
    this.settle(new TransportError(`HTTP ${method} failed: ${errText(err)}`, undefined, NOT_DELIVERED.has(code)));
  }

  /**
   * Fails an answer whose connection broke after it began: a stream with an event id can be
   * resumed from it. `bytes`: a JSON answer's, as far as it came (decoded), no whole message.
   */
  private settleCut(err: Error, bytes?: number): void {
    const a = this.answer!;
    const cut = bytes === undefined ? '' : ` (its answer, HTTP ${a.status}${this.coding ? ` ${this.coding}-compressed` : ''}, was cut before its end: ${bytes} bytes${this.coding ? ' decoded' : ''}, no whole JSON-RPC message; the request was delivered)`;
    const message = `HTTP ${this.request.method} failed: ${errText(err)}${cut}`;
    const id = this.sse?.result.lastEventId;
    this.settle(id === undefined ? new TransportError(message, a.status) : new StreamCutError(message, a.status, id, this.sse!.result.retryMs, a.messages));
  }

  /** The 2xx answer is JSON (its Content-Type). */
  private isJson(): boolean {
    const ct = this.contentType;
    return ct !== undefined && ct.toLowerCase().startsWith('application/json');
  }

  private deliver(text: string): void {
    const members = this.o.batch ? batchOf(text) : undefined;
    if (members) return this.deliverEach(members);
    const c = parseFrame(text);
    if (c.kind === 'invalid') {
      // A 2025-03-26 server may answer one request with a batch holding its response (that
      // revision allowed batches, digest §1.1), beside notifications or requests of its own:
      // each member is a message. Parsed again only here, off the usual answer's path.
      const batch = batchOf(text);
      if (batch !== undefined && batch.length > 0) return this.deliverEach(batch);
      // A POST that expects no answer (a notification, the hub's response to a server's request:
      // 202 is due, digest §6.2) reads nothing in a 2xx body. Some servers send `200 {}` or
      // `200 null` there, which is no JSON-RPC: a warning of it came at every notification.
      if (this.o.onMessage === undefined) return void this.client.log.debug({ status: this.answer!.status, reason: c.error.message }, 'ignored a body that is not JSON-RPC in a 2xx answer to a POST that expects none');
      this.client.log.warn({ reason: c.error.message, snippet: redactedExcerpt(text, 200, redactLogText) }, 'skipped an HTTP answer that is not JSON-RPC');
      // A response the hub refuses still names its call, which the upstream fails at once.
      if (!(c.response && c.id !== undefined)) return;
    }
    this.answer!.messages++;
    this.o.onMessage?.(c);
  }

  private deliverEach(members: readonly unknown[]): void {
    for (const m of members) {
      this.answer!.messages++;
      this.o.onMessage?.(classify(m));
    }
  }

  /** Ends the exchange once: with the answer (no error), or with an error. */
  private settle(err: Error | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.unfollow?.();
    if (this.lingering) clearTimeout(this.lingering);
    this.decoder?.destroy();
    this.o.abort?.hear();
    if (err === undefined) return this.resolve(this.answer!);
    // Whatever broke, a cancelled exchange is reported as cancelled.
    if (this.o.signal?.aborted || this.o.abort?.aborted) return this.reject(new CancelledError());
    this.reject(err);
  }
}

/** Whether a JSON body that came short of its end is a whole message all the same (or a batch of them). */
function wholeMessage(text: string): boolean {
  if (parseFrame(text).kind !== 'invalid') return true;
  const batch = batchOf(text);
  return batch !== undefined && batch.length > 0;
}

/** A system error by its code (ECONNRESET); undici's own errors by their message ("other side closed"). */
function errText(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'UND_ERR_HEADERS_OVERFLOW') return `the answer's headers are larger than the ${MAX_HEADER_BYTES / 1024} KiB the hub reads`;
  return code && !code.startsWith('UND_ERR') ? code : err.message;
}
