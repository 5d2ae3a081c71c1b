/**
 * The client side of Streamable HTTP (digest §6.2, §6.3): one POST per JSON-RPC message, an
 * answer that is JSON, an SSE stream, or 202; the legacy GET stream and DELETE. It knows
 * nothing of eras: callers pass the headers. node:http with a keep-alive agent, because it is
 * markedly cheaper per request than fetch for many small exchanges.
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Logger } from '../log.js';
import { CancelledError, TransportError } from '../protocol/errors.js';
import { parseFrame, type Classified } from '../protocol/jsonrpc.js';
import { readSse } from './sse.js';

export interface HttpClientOptions {
  url: string;
  /** Sent on every request (e.g. Authorization); never logged. */
  headers?: Record<string, string>;
  maxFrameBytes: number;
  log: Logger;
}

/**
 * Cuts one exchange short: the hub's per-call alternative to an AbortSignal, which costs an
 * AbortController, an EventTarget and a listener inside http.request on every call.
 */
export class ExchangeAbort {
  aborted = false;
  private req: http.ClientRequest | undefined;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.req?.destroy();
  }

  /** @internal the exchange's request, destroyed at once if abort() came first. */
  attach(req: http.ClientRequest): void {
    this.req = req;
    if (this.aborted) req.destroy();
  }
}

export interface HttpExchangeOptions {
  headers?: Record<string, string>;
  signal?: AbortSignal;
  abort?: ExchangeAbort;
  /** Each JSON-RPC message of a 2xx answer (the JSON body, or each SSE event), in order. */
  onMessage?: (c: Classified) => void;
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
}

const ERROR_BODY_LIMIT = 64 * 1024;
const POST_ACCEPT = 'application/json, text/event-stream';
/** Connect-phase failures: the request surely never reached the server. */
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ERR_INVALID_URL']);

export class HttpClient {
  private readonly url: URL;
  private readonly agent: http.Agent;
  private readonly mod: typeof http | typeof https;
  private readonly base: Record<string, string>;
  private readonly maxFrameBytes: number;
  private readonly log: Logger;

  constructor(opts: HttpClientOptions) {
    this.url = new URL(opts.url);
    const tls = this.url.protocol === 'https:';
    this.mod = tls ? https : http;
    this.agent = tls ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.base = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) this.base[k.toLowerCase()] = v;
    this.maxFrameBytes = opts.maxFrameBytes;
    this.log = opts.log;
  }

  /** POST one serialised JSON-RPC message. */
  post(body: string, o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('POST', body, POST_ACCEPT, o);
  }

  /** The legacy standalone stream; resolves when it ends. */
  get(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('GET', undefined, 'text/event-stream', o);
  }

  delete(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.exchange('DELETE', undefined, POST_ACCEPT, o);
  }

  /** Drops idle keep-alive sockets. */
  close(): void {
    this.agent.destroy();
  }

  private exchange(method: string, body: string | undefined, accept: string, o: HttpExchangeOptions): Promise<HttpAnswer> {
    return new Promise<HttpAnswer>((resolve, reject) => {
      if (o.signal?.aborted || o.abort?.aborted) return reject(new CancelledError());
      const headers: Record<string, string | number> = { ...this.base, accept };
      if (o.headers) for (const k in o.headers) headers[k] = o.headers[k];
      if (body !== undefined) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = Buffer.byteLength(body);
      }
      let settled = false;
      const fail = (err: Error, phase: 'connect' | 'answer'): void => {
        if (settled) return;
        settled = true;
        if (o.signal?.aborted || o.abort?.aborted) return reject(new CancelledError());
        if (err instanceof TransportError) return reject(err);
        const code = (err as NodeJS.ErrnoException).code ?? '';
        const notDelivered = phase === 'connect' && NOT_DELIVERED.has(code);
        reject(new TransportError(`HTTP ${method} failed: ${code || err.message}`, undefined, notDelivered));
      };
      const done = (a: HttpAnswer): void => {
        if (settled) return;
        settled = true;
        resolve(a);
      };

      let req: http.ClientRequest;
      try {
        req = this.mod.request(this.url, o.signal ? { method, headers, agent: this.agent, signal: o.signal } : { method, headers, agent: this.agent });
      } catch (err) {
        return fail(err as Error, 'connect');
      }
      o.abort?.attach(req);
      req.on('error', (err) => fail(err, 'connect'));
      req.on('response', (res) => {
        req.removeAllListeners('error');
        req.on('error', (err) => fail(err, 'answer'));
        this.answer(res, o).then(done, (err: Error) => fail(err, 'answer'));
      });
      req.end(body);
    });
  }

  private async answer(res: IncomingMessage, o: HttpExchangeOptions): Promise<HttpAnswer> {
    const status = res.statusCode ?? 0;
    const a: HttpAnswer = { status, headers: res.headers, messages: 0 };
    const ct = (res.headers['content-type'] ?? '').toLowerCase();
    if (status < 200 || status >= 300) {
      a.body = await readBody(res, ERROR_BODY_LIMIT, true);
      return a;
    }
    const deliver = (text: string): void => {
      const c = parseFrame(text);
      if (c.kind === 'invalid') {
        this.log.warn({ reason: c.error.message, snippet: text.slice(0, 200) }, 'skipped an HTTP answer that is not JSON-RPC');
        return;
      }
      a.messages++;
      o.onMessage?.(c);
    };
    if (ct.startsWith('text/event-stream')) {
      const r = await readSse(res, this.maxFrameBytes, (e) => deliver(e.data)).catch((err: Error) => {
        throw new TransportError(`event stream failed: ${err.message}`, status);
      });
      if (r.lastEventId !== undefined) a.lastEventId = r.lastEventId;
      return a;
    }
    const text = await readBody(res, this.maxFrameBytes, false);
    if (ct.startsWith('application/json') && text.length > 0) deliver(text);
    else if (text.length > 0) a.body = text.slice(0, ERROR_BODY_LIMIT);
    return a;
  }
}

/** Reads a body up to `limit` bytes: truncating, or failing when `truncate` is false. */
function readBody(res: IncomingMessage, limit: number, truncate: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let over = false;
    res.on('data', (c: Buffer) => {
      if (over) return;
      if (size + c.length > limit) {
        over = true;
        if (truncate) {
          parts.push(c.subarray(0, limit - size));
          size = limit;
          res.resume();
          return;
        }
        res.destroy();
        return reject(new TransportError(`HTTP answer larger than ${limit} bytes`, res.statusCode));
      }
      parts.push(c);
      size += c.length;
    });
    res.on('end', () => resolve(Buffer.concat(parts, size).toString('utf8')));
    res.on('error', (err) => reject(err));
    res.on('close', () => {
      if (!res.complete && !over) reject(new Error('connection closed before the answer ended'));
    });
  });
}
