import { randomBytes } from 'node:crypto';
import type { EdgeResponse } from '../transport/http1/types.js';
import type { MessageSink } from './core.js';
import { wireText } from '../protocol/serialized.js';
import { droppable, KEEP_ALIVE_MS, MAX_UNREAD_BYTES, SSE_HEADERS } from './sse.js';
import { monotonicNow } from '../monotonic.js';

/**
 * Resumable SSE streams of a legacy (2025-11-25) HTTP session (digest §6.2): every event carries
 * an id naming its session's streams, its stream and its place in it; the stream's events are
 * kept, within bounds, so that a client whose connection was cut (a proxy's idle timeout, a
 * laptop's Wi-Fi) reconnects with GET + Last-Event-ID and gets the rest of that stream, the
 * answer included. A disconnect is no cancellation in this era: the call went on meanwhile.
 */

/** The `retry:` of the priming event: how long a client waits before it reconnects (ms). */
export const RETRY_MS = 1_000;
/**
 * Events kept per stream for a replay; the oldest progress and log notifications go first, then
 * the oldest of the rest (the newest, the answer, always stays).
 */
export const REPLAY_MAX_EVENTS = 256;
/** Bytes of events kept per stream, as for REPLAY_MAX_EVENTS. */
export const REPLAY_MAX_BYTES = 1024 * 1024;
/**
 * How long a stream is kept for a reconnection: a finished one from its answer (unless its
 * delivery was acknowledged first), a cut one from the cut. Long enough for a laptop to find
 * its network again; a client later than that starts anew (the ledger has the call's row).
 */
export const REPLAY_KEEP_MS = 5 * 60_000;
/** Finished streams a session keeps at most (beyond: the oldest go); the live ones are its calls in flight. */
export const REPLAY_MAX_FINISHED = 16;

/**
 * Bytes kept for replays across the hub, every session's streams together. Without it the
 * per-stream and per-session bounds still let one principal's hundred sessions, each with
 * sixteen finished streams of 1 MiB, hold 1.6 GB for five minutes.
 */
export const REPLAY_MAX_TOTAL_BYTES = 64 * 1024 * 1024;

/**
 * What the hub keeps for replays, all sessions together: past `max` bytes the streams that
 * finished longest ago are let go first; with none left, the stream being written drops its
 * oldest events until the budget holds (its newest always stays). One per Endpoint.
 */
export class ReplayBudget {
  bytes = 0;
  /** Finished streams that keep events, in the order they finished. */
  readonly finished = new Set<ResumableStream>();

  constructor(readonly max = REPLAY_MAX_TOTAL_BYTES) {}

  /** Over the budget: the oldest finished streams go until it is not. */
  settle(): void {
    for (const s of this.finished) {
      if (this.bytes <= this.max) return;
      s.letGo();
    }
  }
}

/**
 * Why a Last-Event-ID cannot be resumed: not one this session gave, or its stream is no longer
 * kept. `standalone`: it has the form of a standalone GET stream's id (of any session, or of an
 * earlier hub process): the client gets a new stream rather than none (HttpServer.getStream).
 */
export type Unresumable = { problem: string; standalone: boolean };

/** `<tag>.<stream>.<seq>`, the stream number marked `g` for a standalone GET stream. */
const EVENT_ID = /^([\w-]{1,64})\.(g?)([1-9]\d{0,9})\.(0|[1-9]\d{0,15})$/;
const NOT_OURS = 'Last-Event-ID does not name an event of this session';

/** A Last-Event-ID sent to a session that has no streams (none yet, or taken back by a restarted hub). */
export function notOurs(lastEventId: string): Unresumable {
  return { problem: NOT_OURS, standalone: EVENT_ID.exec(lastEventId)?.[2] === 'g' };
}

/**
 * The resumable streams of one session. Its ids are `<tag>.<stream>.<seq>` (the standalone
 * GET stream's number marked `g`, so an id of it is known for one later): the random tag
 * tells this session's ids from another's (or an earlier hub process's), so a foreign id finds
 * nothing; a session looks only in its own streams, so no id can reach another's events.
 */
export class SessionStreams {
  private readonly tag = randomBytes(6).toString('base64url');
  private last = 0;
  private readonly streams = new Map<number, ResumableStream>();
  /** The standalone GET stream, while kept. */
  standalone: ResumableStream | undefined;

  /** `prime`: the session's version takes a priming event (2025-11-25: an event with an id and empty data). */
  constructor(
    readonly prime: boolean,
    private readonly sessionId: string,
    readonly budget: ReplayBudget,
  ) {}

  /** A new stream on `res`, whose SSE head is written (by the caller for a POST, here for a GET). */
  open(res: EdgeResponse, connection: object, standalone: boolean): ResumableStream {
    const s = new ResumableStream(this, ++this.last, `${this.tag}.${standalone ? 'g' : ''}${this.last}.`, standalone);
    this.streams.set(s.no, s);
    if (standalone) {
      // A new GET stream (no Last-Event-ID) starts afresh: the old one's events are not its.
      if (this.standalone) this.drop(this.standalone);
      this.standalone = s;
      res.writeHead(200, { ...SSE_HEADERS, 'mcp-session-id': this.sessionId });
      res.flushHeaders();
    }
    s.attach(res, connection, this.prime);
    this.trim();
    return s;
  }

  /** The stream and place a Last-Event-ID names, or why it cannot be resumed. */
  find(lastEventId: string): { stream: ResumableStream; after: number } | Unresumable {
    const m = EVENT_ID.exec(lastEventId);
    if (!m) return { problem: NOT_OURS, standalone: false };
    const standalone = m[2] === 'g';
    const no = Number(m[3]);
    const after = Number(m[4]);
    if (m[1] !== this.tag || no > this.last) return { problem: NOT_OURS, standalone };
    const stream = this.streams.get(no);
    if (stream === undefined)
      return {
        problem: `the events of that stream are no longer kept (a stream is kept ${REPLAY_KEEP_MS / 1000} s after its answer or its cut, and until its client's next request on the connection that delivered its answer)`,
        standalone,
      };
    if (stream.standalone !== standalone || after > stream.lastSeq) return { problem: NOT_OURS, standalone };
    return { stream, after };
  }

  /**
   * A new request of the session on `connection`: a stream delivered in full on that connection
   * is let go. An HTTP/1.1 client sends its next request on a connection only once it has read
   * the answer before it to the end, so that answer reached it. A request on another connection
   * proves nothing (the bytes the hub wrote may still be lost with their connection).
   */
  acknowledge(connection: object): void {
    for (const s of this.streams.values()) if (s.deliveredOn !== undefined && s.deliveredOn.deref() === connection) this.drop(s);
  }

  /** The sweeper: streams past REPLAY_KEEP_MS go. */
  sweep(now: number): void {
    for (const s of this.streams.values()) if (s.expired(now)) this.drop(s);
  }

  /** The session ended: nothing of it is kept. */
  clear(): void {
    for (const s of this.streams.values()) s.forget();
    this.streams.clear();
    this.standalone = undefined;
  }

  get size(): number {
    return this.streams.size;
  }

  drop(s: ResumableStream): void {
    if (this.streams.get(s.no) !== s) return;
    this.streams.delete(s.no);
    s.forget();
    if (this.standalone === s) this.standalone = undefined;
  }

  /** At most REPLAY_MAX_FINISHED finished streams (the oldest go first; the Map keeps their order). */
  private trim(): void {
    let finished = 0;
    for (const s of this.streams.values()) if (s.finished) finished++;
    for (const s of this.streams.values()) {
      if (finished <= REPLAY_MAX_FINISHED) break;
      if (s.finished) {
        this.drop(s);
        finished--;
      }
    }
  }

  /** A stream finished: the per-session bound applies. */
  finishedOne(): void {
    this.trim();
  }
}

/**
 * One SSE stream of a session (a POST's answer stream, or the standalone GET stream), which
 * outlives its connections: its events are kept within REPLAY_MAX_EVENTS and REPLAY_MAX_BYTES,
 * and a reconnection takes the stream over from where its client says it is.
 */
export class ResumableStream implements MessageSink {
  private seq = 0;
  /** The kept events, oldest first: `kept[i]` is event `seqs[i]`, `light[i]` if it is a progress or log notification. */
  private kept: string[] = [];
  private sizes: number[] = [];
  private seqs: number[] = [];
  private light: boolean[] = [];
  private bytes = 0;
  private conn: EdgeResponse | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  /** Its last event (a POST's answer) was written; nothing more comes. */
  finished = false;
  /**
   * The connection its last event went out on, in full (the response ended cleanly); weakly:
   * a socket closed since is not held for it.
   */
  deliveredOn: WeakRef<object> | undefined;
  /** When it finished, or its connection was cut (monotonicNow(); 0: neither); REPLAY_KEEP_MS counts from there. */
  private since = 0;
  /** Progress and log notifications not written to a connection more than MAX_UNREAD_BYTES behind (still kept). */
  dropped = 0;
  /** Let go by its session: nothing more is kept (a live connection still gets what comes). */
  private forgotten = false;
  /** Who hears its cuts and reconnections (a question waiting on it: LegacySession.ask). */
  private watchers: Set<(connected: boolean) => void> | undefined;

  constructor(
    private readonly owner: SessionStreams,
    readonly no: number,
    private readonly prefix: string,
    readonly standalone: boolean,
  ) {}

  get lastSeq(): number {
    return this.seq;
  }

  /**
   * Let go (its session ended, it expired, or a new GET stream replaced it): nothing more is
   * kept or heard of it. A cut stream is not closed: what is sent to it is kept for its client.
   */
  get closed(): boolean {
    return this.forgotten;
  }

  /** A connection carries it now. */
  get connected(): boolean {
    const c = this.conn;
    return c !== undefined && !c.destroyed && !c.writableEnded;
  }

  /**
   * A connection (`res`, on the socket `connection`) carries it; `prime`: the priming event (an
   * id, the retry, empty data) goes first.
   */
  attach(res: EdgeResponse, connection: object, prime: boolean): void {
    this.conn = res;
    this.since = 0;
    this.tell(true);
    if (prime) res.write(`id: ${this.prefix}0\nretry: ${RETRY_MS}\ndata:\n\n`);
    this.keepAlive = setInterval(() => this.connected && this.conn!.write(': keep-alive\n\n'), KEEP_ALIVE_MS).unref();
    res.on('close', () => {
      if (this.conn !== res) return; // taken over by a reconnection
      clearInterval(this.keepAlive);
      this.conn = undefined;
      if (this.finished && res.writableFinished) this.deliveredOn = new WeakRef(connection);
      else if (!this.finished) {
        this.since = monotonicNow();
        this.tell(false);
      }
    });
  }

  watchConnection(cb: (connected: boolean) => void): () => void {
    (this.watchers ??= new Set()).add(cb);
    return () => void this.watchers?.delete(cb);
  }

  private tell(connected: boolean): void {
    if (this.watchers !== undefined) for (const cb of [...this.watchers]) cb(connected);
  }

  /** An event, kept and written to the connection if there is one. */
  send(msg: object): void {
    const text = `id: ${this.prefix}${++this.seq}\nevent: message\ndata: ${wireText(msg)}\n\n`;
    if (!this.forgotten) this.keep(text, this.seq, droppable(msg));
    const c = this.conn;
    if (c === undefined || c.destroyed || c.writableEnded) return;
    if (c.writableLength > MAX_UNREAD_BYTES) {
      // The standalone stream of a client this far behind is cut: it reconnects and is replayed
      // what is kept. A call's stream leaves out progress and logs, as PostChannel does.
      if (this.standalone) return void c.destroy();
      if (droppable(msg)) return void this.dropped++;
    }
    c.write(text);
  }

  /** The last event (a POST's answer, if any); the connection, if any, ends after it. */
  finish(msg: object | undefined): void {
    if (this.finished) return;
    if (msg) this.send(msg);
    this.finished = true;
    this.since = monotonicNow();
    if (!this.forgotten) this.owner.budget.finished.add(this);
    clearInterval(this.keepAlive);
    const c = this.conn;
    if (c !== undefined && !c.writableEnded) c.end();
    this.owner.finishedOne();
  }

  /** The standalone stream ends (its session did, or its credential expired). */
  end(): void {
    clearInterval(this.keepAlive);
    const c = this.conn;
    if (c !== undefined && !c.writableEnded) c.end();
    this.owner.drop(this);
  }

  /**
   * A reconnection (GET + Last-Event-ID): the events after `after` that are kept, then what
   * comes, on `res`; a finished stream's connection ends after them. A connection still open
   * (a half-open socket the hub has not seen die) is dropped: the client is on the new one.
   */
  resume(res: EdgeResponse, connection: object, after: number, headers: Record<string, string>): void {
    const old = this.conn;
    this.conn = undefined;
    clearInterval(this.keepAlive);
    if (old !== undefined && !old.writableEnded) old.destroy();
    res.writeHead(200, { ...SSE_HEADERS, ...headers });
    let from = 0;
    while (from < this.seqs.length && this.seqs[from]! <= after) from++;
    // One write for the lot: the replay of a long stream is not a thousand syscalls.
    if (from < this.kept.length) res.write(from === 0 ? this.kept.join('') : this.kept.slice(from).join(''));
    else res.flushHeaders();
    this.deliveredOn = undefined;
    if (this.finished) {
      this.conn = res;
      res.on('close', () => {
        if (this.conn === res && res.writableFinished) this.deliveredOn = new WeakRef(connection);
      });
      res.end();
      return;
    }
    this.attach(res, connection, false);
  }

  /** Past REPLAY_KEEP_MS since it finished or was cut, with no connection now. */
  expired(now: number): boolean {
    return this.since !== 0 && !this.connected && now - this.since > REPLAY_KEEP_MS;
  }

  forget(): void {
    this.forgotten = true;
    const budget = this.owner.budget;
    budget.bytes -= this.bytes;
    budget.finished.delete(this);
    this.kept = [];
    this.sizes = [];
    this.seqs = [];
    this.light = [];
    this.bytes = 0;
  }

  /** The hub's budget needs its room: its session lets it go. */
  letGo(): void {
    this.owner.drop(this);
  }

  /**
   * A flood of progress or log lines pushes those out, not a question to the client or a
   * withdrawal before them: a client that reconnects is replayed what it must answer or know.
   */
  private keep(text: string, seq: number, light: boolean): void {
    const n = Buffer.byteLength(text);
    const budget = this.owner.budget;
    this.kept.push(text);
    this.sizes.push(n);
    this.seqs.push(seq);
    this.light.push(light);
    this.bytes += n;
    budget.bytes += n;
    if (budget.bytes > budget.max) budget.settle();
    while (this.kept.length > 1 && (this.kept.length > REPLAY_MAX_EVENTS || this.bytes > REPLAY_MAX_BYTES || budget.bytes > budget.max)) {
      let i = this.light.indexOf(true);
      if (i < 0 || i === this.kept.length - 1) i = 0;
      this.kept.splice(i, 1);
      this.seqs.splice(i, 1);
      this.light.splice(i, 1);
      const m = this.sizes.splice(i, 1)[0]!;
      this.bytes -= m;
      budget.bytes -= m;
    }
  }
}

/**
 * Whether a session's streams start with a priming event (an id and empty data): 2025-11-25's
 * rule; an older client (2025-03-26, 2025-06-18) may take an event without data for an error.
 */
export function primes(protocolVersion: string): boolean {
  return protocolVersion >= '2025-11-25';
}
