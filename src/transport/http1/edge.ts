import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { parseHead, type RequestHead } from './head.js';
import type { ConnectionCap } from '../connection-cap.js';
import { Http1Response, type ResponseOwner } from './response.js';
import { TurnWrites, type Holder } from './turn-writes.js';
import { HOLD_FROM } from '../../turn-end.js';
import { monotonicNow } from '../../monotonic.js';

/** A request of the fast path: its head, its whole body and the socket it came on. */
export class Http1Request {
  readonly method: 'POST';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  // Fields copied into a class of its own, not `{ ...head, body }`: a spread object made
  // every later property read slow (measured: ~10 µs of CPU per request).
  constructor(
    head: RequestHead,
    readonly body: Buffer,
    readonly socket: Socket,
  ) {
    this.method = head.method;
    this.url = head.url;
    this.headers = head.headers;
  }
}

export interface Http1EdgeOptions {
  /** The paths the fast path serves; any other request goes to node:http. */
  wants(path: string): boolean;
  /** A larger body goes to node:http, which reads and refuses it. */
  maxBodyBytes: number;
  /** As node:http's `maxHeaderSize`. */
  maxHeadBytes?: number;
  /** Idle time between requests before a connection is closed (node:http's `keepAliveTimeout`). */
  keepAliveMs: number;
  /** Time allowed for a request's head and body to arrive (node:http's `headersTimeout`). */
  requestTimeoutMs: number;
  /** The cap on open connections (listen.maxConnections); none: no cap. */
  cap?: ConnectionCap;
}

/** Bytes a connection may hold unread while its response is pending (pipelined requests). */
const MAX_QUEUED_BYTES = 1 << 20;
const SWEEP_MS = 30_000;

/**
 * How often a request timeout of `limitMs` is checked (the edge's sweep, node:http's
 * connectionsCheckingInterval): a tenth of it, so a trickled request is cut within 10 % of the
 * limit. Checked every min(30 s, limit), the default 66 s held a connection up to 96 s.
 */
export function timeoutCheckMs(limitMs: number): number {
  return Math.min(SWEEP_MS, Math.max(50, Math.ceil(limitMs / 10)));
}

/**
 * The HTTP listener. node:http costs about 30 µs of CPU per request on this kind of machine
 * before any of the hub's work (docs/BENCHMARKS.md, "The edge"), most of it in objects and
 * stream machinery a JSON-RPC POST does not need. So the listener is a plain TCP server: a POST
 * to an MCP path in the strict subset `parseHead` accepts is answered here; at the first
 * request that is anything else (GET streams, admin pages, WebSocket upgrades, chunked bodies,
 * malformed input) the connection is handed, with the bytes not yet consumed, to the node:http
 * server, which keeps it from then on. Both paths call the same handler.
 */
export class Http1Edge {
  readonly listener: Server;
  private readonly conns = new Set<Http1Connection>();
  /** Runs while the edge holds connections: an idle hub is not woken for an empty set. */
  private sweep: NodeJS.Timeout | undefined;
  private accepting = true;
  /** Answers held for the end of the turn (see TurnWrites). */
  readonly turn = new TurnWrites();
  /** Requests of the fast path being served, on all connections. */
  serving = 0;
  /** The request read last: answered before another was read, its answer was quick. */
  lastServed: Http1Response | null = null;

  constructor(
    /** Serves every connection the fast path hands over; never listens itself. */
    readonly fallback: HttpServer,
    private readonly handle: (req: Http1Request, res: Http1Response) => void,
    readonly opts: Http1EdgeOptions,
  ) {
    // As node:http's own listener: half-open sockets (an answer may follow the client's FIN), no Nagle.
    this.listener = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => this.accept(socket));
  }

  listen(host: string, port: number): Promise<AddressInfo> {
    return this.listenOn({ host, port }) as Promise<AddressInfo>;
  }

  /** Listen on a TCP address or (`path`) a unix socket; the address, or the socket's path. */
  listenOn(at: { host: string; port: number } | { path: string }): Promise<AddressInfo | string> {
    return new Promise((resolve, reject) => {
      this.listener.once('error', reject);
      this.listener.listen(at, () => {
        this.listener.off('error', reject);
        // node:http tracks its connections (idle closing, header and request timeouts) from 'listening'.
        this.fallback.emit('listening');
        resolve(this.listener.address() as AddressInfo | string);
      });
    });
  }

  /** Stop taking connections; idle ones close now, busy ones after their response. */
  stopAccepting(): void {
    this.accepting = false;
    this.listener.close();
    for (const c of this.conns) c.closeWhenIdle();
    this.fallback.closeIdleConnections();
  }

  /** Close everything, busy or not. */
  close(): Promise<void> {
    this.stopAccepting();
    clearInterval(this.sweep);
    this.sweep = undefined;
    for (const c of this.conns) c.socket.destroy();
    this.fallback.closeAllConnections();
    return new Promise((resolve) => this.fallback.close(() => resolve()));
  }

  get closing(): boolean {
    return !this.accepting;
  }

  serve(req: Http1Request, res: Http1Response): void {
    this.handle(req, res);
  }

  forget(c: Http1Connection): void {
    this.conns.delete(c);
    if (this.conns.size > 0 || !this.sweep) return;
    clearInterval(this.sweep);
    this.sweep = undefined;
  }

  private accept(socket: Socket): void {
    if (!this.accepting) return void socket.destroy();
    if (this.opts.cap && !this.opts.cap.admit(socket)) return;
    this.conns.add(new Http1Connection(socket, this));
    this.sweep ??= setInterval(() => this.expire(), timeoutCheckMs(this.opts.requestTimeoutMs)).unref();
  }

  private expire(): void {
    const now = monotonicNow();
    for (const c of this.conns) c.expireIfSlow(now, this.opts.requestTimeoutMs);
  }
}

/** One client connection while it is on the fast path. */
class Http1Connection implements ResponseOwner, Holder {
  /** Bytes received and not yet consumed, as they came (joined only when they are read). */
  private chunks: Buffer[] = [];
  private size = 0;
  /** How many bytes the request being received needs in all; nothing is parsed before. */
  private needed = 0;
  private current: Http1Response | null = null;
  /** When the request being received began (monotonicNow(), never 0 once the hub listens; 0: none); for the request timeout. */
  private since = 0;
  /** The response after which the connection ends: its request carried `Connection: close`, or it said so while the edge stopped. */
  private closingResponse: Http1Response | null = null;
  /** A request was read on this connection (or it went to node:http): until then it is one the client has just opened. */
  private served = false;
  private paused = false;
  /** The client reads its answers slower than it sends requests: the next waits for 'drain'. */
  private waiting = false;
  /** Bytes of the answers held for the end of the turn. */
  private heldBytes = 0;
  private readonly onDrain = () => this.drained();
  /** Whole answers waiting for the end of the turn, with their encodings, in order. */
  private held: (string | BufferEncoding)[] | null = null;
  readonly keepAliveSeconds: number;
  private readonly onData = (c: Buffer) => this.data(c);
  private readonly onEnd = () => this.ended();
  private readonly onClose = () => this.closed();
  private readonly onTimeout = () => this.idle();
  private readonly onError = () => undefined; // 'close' follows

  constructor(
    readonly socket: Socket,
    private readonly edge: Http1Edge,
  ) {
    this.keepAliveSeconds = Math.floor(edge.opts.keepAliveMs / 1000);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', this.onError);
    socket.on('timeout', this.onTimeout); // not setTimeout's callback: that one fires once
    socket.setTimeout(edge.opts.keepAliveMs);
  }

  closesAfter(res: Http1Response): boolean {
    if (res === this.closingResponse) return true;
    // Stopping: a request pipelined behind this one is answered too, then the connection ends.
    if (!this.edge.closing || this.size > 0) return false;
    // Said in its head: the connection ends after it, whatever arrives meanwhile.
    this.closingResponse = res;
    return true;
  }

  // The first answer of a turn leaves at once, later ones at the turn's end (TurnWrites), with
  // one exception: a call that waited (another request was read since it began) while few are
  // in flight is answered at once. Such answers come in bursts already (many per read of an
  // upstream's pipe), and holding them with few calls in flight left the upstream idle:
  // measured at concurrency 8 in front of stdio, 15 % fewer calls per second. An answer that
  // ends the connection may be held too: finished() writes it before the end.
  send(text: string, encoding: BufferEncoding): void {
    if (this.held !== null) {
      this.held.push(text, encoding);
      this.heldBytes += text.length;
    } else if ((this.current !== this.edge.lastServed && this.edge.serving < HOLD_FROM) || this.edge.turn.first()) this.socket.write(text, encoding);
    else {
      this.held = [text, encoding];
      this.heldBytes = text.length;
      this.edge.turn.hold(this);
    }
  }

  release(): void {
    const held = this.held;
    if (held === null) return;
    this.held = null;
    this.heldBytes = 0;
    if (this.socket.destroyed) return;
    for (let i = 0; i < held.length; i += 2) this.socket.write(held[i]!, held[i + 1] as BufferEncoding);
    if (this.waiting) this.awaitDrain();
  }

  writer(): Socket {
    this.release();
    return this.socket;
  }

  finished(res: Http1Response): void {
    if (res !== this.current) return;
    this.done();
    if (this.closesAfter(res)) {
      this.end();
      return;
    }
    // As node:http: answers the client has not read stop the next pipelined request (and, once
    // the queue is full, the reading), or a client that pipelines and never reads would have
    // every answer kept in the hub's memory.
    if (this.socket.writableLength + this.heldBytes > this.socket.writableHighWaterMark) {
      this.waiting = true;
      // Held answers reach the socket at the turn's end (release); then it is the socket's drain.
      if (this.held === null) this.awaitDrain();
      return;
    }
    this.flow();
    // A pipelined request waits for the answer before it; it runs on the next tick, not inside end().
    if (this.size > 0) process.nextTick(() => this.next());
  }

  private awaitDrain(): void {
    if (this.socket.writableNeedDrain) this.socket.once('drain', this.onDrain);
    else process.nextTick(this.onDrain);
  }

  private drained(): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.flow();
    this.next();
  }

  /** Reads on once the queue is within its bound again. */
  private flow(): void {
    if (this.paused && this.size <= MAX_QUEUED_BYTES + this.edge.opts.maxBodyBytes) {
      this.paused = false;
      this.socket.resume();
    }
  }

  /** Stops reading a client whose unconsumed bytes are over the bound. */
  private limitQueue(): void {
    if (this.size > MAX_QUEUED_BYTES + this.edge.opts.maxBodyBytes && !this.paused) {
      this.paused = true;
      this.socket.pause();
    }
  }

  /**
   * At the edge's stop. A connection with a request under way (being served, received in part,
   * or pipelined) or just opened (its first request on its way) is left to answer it: the
   * draining hub refuses new work with an answer and a ledger row, and the answer ends the
   * connection (closesAfter). Ended at the stop's start, they were cut unanswered. An idle
   * keep-alive connection ends now, as node:http's closeIdleConnections does.
   */
  closeWhenIdle(): void {
    if (this.current || this.size > 0 || !this.served) return;
    this.end();
  }

  /** The request being served is answered or abandoned. */
  private done(): void {
    if (this.current === null) return;
    if (this.edge.lastServed === this.current) this.edge.lastServed = null; // nor keep it alive
    this.current = null;
    this.edge.serving--;
  }

  /** Ends the connection after what it holds. */
  private end(): void {
    this.release();
    this.socket.end();
  }

  expireIfSlow(now: number, limitMs: number): void {
    if (this.since !== 0 && now - this.since > limitMs) this.socket.destroy();
  }

  private data(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.current || this.waiting) return this.limitQueue();
    // A large body arrives in many chunks: they are joined once it is all here, not once per
    // chunk (that would copy a 4 MiB body some sixty times).
    if (this.size < this.needed) return;
    this.next();
    // Served from this read: what is left waits for its answer, within the bound.
    this.limitQueue();
  }

  /**
   * The first `want` bytes not consumed (all of them, if fewer are here) at the front of the
   * queue as one buffer: only the chunks they span are joined. Joining the whole queue for each
   * request copied up to 5 MiB per pipelined request of a few hundred bytes: one client
   * pipelining as fast as it could held the hub's CPU (others' calls took 27 times as long).
   */
  private front(want: number): Buffer | null {
    if (this.size === 0) return null;
    const first = this.chunks[0]!;
    if (first.length >= want || this.chunks.length === 1) return first;
    let n = 0;
    let bytes = 0;
    while (n < this.chunks.length && bytes < want) bytes += this.chunks[n++]!.length;
    const buf = Buffer.concat(this.chunks.slice(0, n), bytes);
    this.chunks.splice(0, n, buf);
    return buf;
  }

  /** Drop the first `bytes` of the queue, which front(bytes) made one buffer. */
  private consume(bytes: number): void {
    const first = this.chunks[0]!;
    if (first.length > bytes) this.chunks[0] = first.subarray(bytes);
    else this.chunks.shift();
    this.size -= bytes;
    this.needed = 0;
  }

  private next(): void {
    // Nor once the connection is ending (stop, Connection: close): a request read then would run with nobody to answer.
    if (this.current || this.waiting || this.socket.destroyed || this.socket.writableEnded) return;
    const maxHead = this.edge.opts.maxHeadBytes ?? 16_384;
    // Enough for any head the fast path takes: with fewer bytes than the queue holds, a head
    // that does not end within them is too long anyway (parseHead says 'other').
    let buf = this.front(maxHead + 4);
    if (!buf) return;
    if (this.since === 0) this.since = monotonicNow();
    const head = parseHead(buf, maxHead, this.edge.opts.wants);
    if (head === 'incomplete') return;
    if (head === 'other' || head.contentLength > this.edge.opts.maxBodyBytes) return this.handOver();
    const size = head.headBytes + head.contentLength;
    if (this.size < size) {
      this.needed = size;
      return;
    }
    buf = this.front(size)!;
    this.consume(size);
    this.since = 0;
    const res = new Http1Response(this);
    this.current = res;
    this.served = true;
    this.edge.serving++;
    this.edge.lastServed = res;
    if (head.close) this.closingResponse = res;
    this.edge.serve(new Http1Request(head, buf.subarray(head.headBytes, size), this.socket), res);
  }

  /** From here on node:http reads this connection, starting with the bytes not yet consumed. */
  private handOver(): void {
    this.release(); // node:http's answer comes after the ones before it
    const socket = this.socket;
    socket.off('data', this.onData);
    socket.off('end', this.onEnd);
    socket.off('close', this.onClose);
    socket.off('error', this.onError);
    socket.off('timeout', this.onTimeout);
    socket.setTimeout(0);
    this.edge.forget(this);
    const rest = this.front(this.size); // everything not consumed, as one buffer
    this.chunks = [];
    this.size = 0;
    if (rest) socket.unshift(rest);
    if (this.paused) socket.resume();
    this.edge.fallback.emit('connection', socket);
  }

  private ended(): void {
    // The client closed its side. As node:http (without httpAllowHalfOpen): the pending request is
    // abandoned, which for a modern client is its cancellation, and the connection closes.
    const res = this.current;
    this.done();
    this.chunks = [];
    this.size = 0;
    res?.abort();
    this.end();
  }

  private closed(): void {
    this.edge.forget(this);
    this.held = null;
    const res = this.current;
    this.done();
    this.chunks = [];
    this.size = 0;
    res?.abort();
  }

  private idle(): void {
    // A long call keeps its connection silent: only a connection with nothing pending is idle.
    if (this.current || this.since !== 0) return;
    // Answers still unwritten after the keep-alive time without a byte taken: a client that does
    // not read. end() would wait for it for ever (its connection, and the answers, kept).
    if (this.socket.writableLength > 0 || this.held !== null) return void this.socket.destroy();
    // Half-open (allowHalfOpen, as node:http's listener) the socket would then wait for the
    // client's own end, which a client that reads nothing never sends: the descriptor is let go
    // once the end is written, as node:http destroys a connection at its keep-alive timeout.
    this.socket.once('finish', () => this.socket.destroy());
    this.end();
  }
}
