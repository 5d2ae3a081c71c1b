import { envMs } from '../env-ms.js';
import type { EdgeResponse } from '../transport/http1/types.js';
import type { MessageSink } from './core.js';
import { Serialized, wireText } from '../protocol/serialized.js';
import { META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import type { ResumableStream, SessionStreams } from './resumable.js';
import type { QuietAnswer, QuietAnswers } from './quiet-answers.js';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

/**
 * How far a client may fall behind a stream before the hub stops writing to it. A client that
 * does not read would otherwise have every event of a long-lived stream held in the hub's
 * memory, for as long as its connection lasts.
 */
export const MAX_UNREAD_BYTES = 8 * 1024 * 1024;

/**
 * How often an open stream with nothing to say sends a comment. Proxies and load balancers cut
 * a response that is quiet for long (nginx and AWS ALB after 60 s by default); a comment is
 * nothing to an SSE reader. SWITCHYARD_KEEPALIVE_MS sets it, for a proxy that cuts sooner
 * (whole milliseconds, 100 or more).
 */
export const KEEP_ALIVE_MS = envMs('SWITCHYARD_KEEPALIVE_MS', 15_000, 100);

/** A comment on `res` every `ms` while it is open; stopped when it closes (or by clearInterval). */
function keepAlive(res: EdgeResponse, ms: number, closed: () => boolean): NodeJS.Timeout {
  const timer = setInterval(() => !closed() && res.write(': keep-alive\n\n'), ms).unref();
  res.on('close', () => clearInterval(timer));
  return timer;
}

/** Write one SSE event carrying a JSON-RPC message. */
export function writeEvent(res: EdgeResponse, msg: object, id?: string): void {
  res.write(`${id ? `id: ${id}\n` : ''}event: message\ndata: ${wireText(msg)}\n\n`);
}

/** A long-lived SSE stream (legacy GET stream, modern listen stream) with keep-alive comments. */
export class SseStream implements MessageSink {
  private readonly timer: NodeJS.Timeout;
  private ended = false;

  constructor(
    private readonly res: EdgeResponse,
    extraHeaders: Record<string, string> = {},
    keepAliveMs = KEEP_ALIVE_MS,
    private readonly maxUnreadBytes = MAX_UNREAD_BYTES,
  ) {
    res.writeHead(200, { ...SSE_HEADERS, ...extraHeaders });
    res.flushHeaders();
    this.timer = keepAlive(res, keepAliveMs, () => this.closed);
    res.on('close', () => (this.ended = true));
  }

  get closed(): boolean {
    return this.ended || this.res.destroyed || this.res.writableEnded;
  }

  /** A client this far behind is dropped (the digest allows ending a stream abnormally; it reconnects). */
  send(msg: object): void {
    if (this.closed) return;
    if (this.res.writableLength > this.maxUnreadBytes) {
      this.ended = true;
      clearInterval(this.timer);
      this.res.destroy();
      return;
    }
    writeEvent(this.res, msg);
  }

  end(): void {
    clearInterval(this.timer);
    if (!this.res.writableEnded) this.res.end();
    this.ended = true;
  }
}

/**
 * The answer channel of one POST. It stays a plain JSON response unless something has to be
 * sent before the final answer (progress, logs, a server → client request); then it becomes an
 * SSE stream. Most calls therefore cost one small JSON write.
 */
export class PostChannel implements MessageSink, QuietAnswer {
  private sse = false;
  /** Watching this answer's silence (a tools/call's): see quiet-answers.ts. */
  private quiet: QuietAnswers | undefined;
  /** Its number there. */
  private quietId = 0;
  /**
   * Comments while the stream waits (a question for the user, a long call between progress
   * reports): a proxy that cuts a quiet response would cut the answer off (a session's
   * stream has its own, in ResumableStream; outside one the hub cannot resume it).
   */
  private keepAlive: NodeJS.Timeout | undefined;
  /** Notifications left out because the client fell MAX_UNREAD_BYTES behind. */
  dropped = 0;
  /**
   * The legacy HTTP session whose streams this answer joins once it streams (resumable.ts);
   * set by the endpoint for a request of a session. A plain JSON answer never uses it.
   */
  resumeIn: SessionStreams | undefined;
  /** This answer's resumable stream, once it streams in a session. */
  private stream: ResumableStream | undefined;

  constructor(
    private readonly res: EdgeResponse,
    /** The connection it answers on (the request's socket): see SessionStreams.acknowledge. */
    private readonly connection: object,
    readonly canStream: boolean,
    private readonly headers: Record<string, string> = {},
    private readonly maxUnreadBytes = MAX_UNREAD_BYTES,
    private readonly keepAliveMs = KEEP_ALIVE_MS,
  ) {}

  /** Nothing sent now reaches its client: its connection is gone and, if it has one, its resumable stream finished or let go. */
  get closed(): boolean {
    const s = this.stream;
    if (s !== undefined) return s.finished || s.closed;
    return this.res.destroyed || this.res.writableEnded;
  }

  get streaming(): boolean {
    return this.sse;
  }

  /** Its stream is resumable: a cut connection does not lose what is sent after it. */
  get resumable(): boolean {
    return this.resumeIn !== undefined && this.canStream;
  }

  /**
   * A message before the final answer. Dropped when the client cannot take a stream; a
   * progress or log notification is also dropped while the client is more than
   * MAX_UNREAD_BYTES behind, or an upstream's flood would be held in the hub's memory for a
   * client that does not read. Requests to the client and the final answer are always written.
   */
  send(msg: object): void {
    // A resumable stream goes on (kept for its client) after a cut, and bounds what it writes itself.
    if (this.stream !== undefined) return this.stream.send(msg);
    if (this.closed || !this.canStream) return;
    if (!this.sse) {
      const stream = this.open();
      if (stream !== undefined) return stream.send(msg);
    } else if (this.res.writableLength > this.maxUnreadBytes && droppable(msg)) {
      this.dropped++;
      return;
    }
    writeEvent(this.res, msg);
  }

  watchConnection(cb: (connected: boolean) => void): (() => void) | undefined {
    return this.stream?.watchConnection(cb);
  }

  /** A connection carries it now (always, until a cut of a resumable stream). */
  get connected(): boolean {
    return this.stream === undefined ? !this.closed : this.stream.connected;
  }

  /** Turn a still quiet answer into a stream (its keep-alive comments reach the client). */
  watchQuiet(quiet: QuietAnswers): void {
    if (!this.canStream) return;
    this.quiet = quiet;
    this.quietId = quiet.watch(this);
  }

  beginStream(): void {
    if (this.sse || this.closed || !this.canStream) return;
    this.open();
    this.res.flushHeaders();
  }

  /** The SSE head, and the resumable stream (its own keep-alive and priming event) in a session. */
  private open(): ResumableStream | undefined {
    this.sse = true;
    this.quiet?.unwatch(this.quietId);
    this.res.writeHead(200, { ...SSE_HEADERS, ...this.headers });
    if (this.resumeIn !== undefined) return (this.stream = this.resumeIn.open(this.res, this.connection, false));
    this.keepAlive = keepAlive(this.res, this.keepAliveMs, () => this.closed);
    return undefined;
  }

  /** The final answer; `status` only matters while nothing has been streamed. */
  end(msg: object | undefined, status = 200, extra?: Record<string, string>): void {
    this.quiet?.unwatch(this.quietId);
    if (this.stream !== undefined) return this.stream.finish(msg);
    if (this.closed) return;
    if (this.sse) {
      clearInterval(this.keepAlive);
      if (msg) writeEvent(this.res, msg);
      this.res.end();
      return;
    }
    if (!msg) {
      this.res.writeHead(status === 200 ? 202 : status, extra ? Object.assign({}, this.headers, extra) : this.headers).end();
      return;
    }
    // A string, not a Buffer: the fast path sends head and body in one UTF-8 write.
    const body = wireText(msg);
    const h: Record<string, string | number> = Object.assign({}, this.headers, extra);
    h['content-type'] = 'application/json';
    h['content-length'] = Buffer.byteLength(body);
    this.res.writeHead(status, h);
    this.res.end(body);
  }
}

/**
 * What may be left out for a client that does not read: progress and log lines, which the
 * answer makes stale anyway. Not the withdrawal of a question the client was asked
 * (notifications/cancelled) or a URL elicitation's completion, which it would wait for.
 */
const DROPPABLE = new Set(['notifications/progress', 'notifications/message']);

export function droppable(msg: object): boolean {
  return !(msg instanceof Serialized) && !('id' in msg) && DROPPABLE.has((msg as { method?: unknown }).method as string);
}

const CHANGED = new Set(['notifications/resources/updated', 'notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed']);

/**
 * What a change notification is about (its kind, URI and listen stream), or undefined for any
 * other message: of several with one key, the latest tells a client all the others did (that
 * something changed), so a writer to a client far behind may keep that one alone.
 */
export function changeKey(msg: object): string | undefined {
  const m = msg as { id?: unknown; method?: unknown; params?: { uri?: unknown; _meta?: Record<string, unknown> } };
  if (msg instanceof Serialized || m.id !== undefined || typeof m.method !== 'string' || !CHANGED.has(m.method)) return undefined;
  return JSON.stringify([m.method, m.params?.uri ?? null, m.params?._meta?.[META_SUBSCRIPTION_ID] ?? null]);
}
