import { STATUS_CODES, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { EdgeResponse } from './types.js';

/** The connection a response belongs to. */
export interface ResponseOwner {
  /** The socket, for writes that are not a whole answer; anything held for it is written first. */
  writer(): Socket;
  /** Writes a whole answer, now or at the end of the turn (TurnWrites). */
  send(text: string, encoding: BufferEncoding): void;
  /** Whether this response must end the connection (the client asked, or the edge is closing). */
  closesAfter(res: Http1Response): boolean;
  /** Seconds an idle connection is kept (`Keep-Alive: timeout=…`). */
  readonly keepAliveSeconds: number;
  /** The response is complete on the wire. */
  finished(res: Http1Response): void;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// As node:http: a header value with a control character (CR, LF…) would split the response.
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const NON_ASCII = /[\x80-\xff]/;
const LAST_CHUNK = '0\r\n\r\n';

let dateSecond = 0;
let dateText = '';
/** The Date header, formatted once per second as node:http does. */
function httpDate(): string {
  const now = Date.now();
  const s = Math.floor(now / 1000);
  if (s !== dateSecond) {
    dateSecond = s;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

/** Thrown for a header that cannot be sent (as node:http's ERR_INVALID_CHAR / ERR_INVALID_HTTP_TOKEN). */
export class InvalidHeaderError extends Error {
  constructor(name: string) {
    super(`invalid response header ${JSON.stringify(name)}`);
    this.name = 'InvalidHeaderError';
  }
}

/**
 * One response of the fast path, written straight to the socket: the head and a JSON body leave
 * in one write. A response without a Content-Length (an SSE stream) is sent chunked.
 */
export class Http1Response implements EdgeResponse {
  headersSent = false;
  destroyed = false;
  writableEnded = false;
  writableFinished = false;
  private status = 200;
  /** The caller's header lines, checked and joined by writeHead. */
  private lines = '';
  private hasLength = false;
  /** No header value outside ASCII: the head can share a UTF-8 write with the body. */
  private asciiHead = true;
  private headWritten = false;
  private chunked = false;
  private closeListeners: (() => void)[] | undefined;
  private closed = false;
  /** Header lines set before the head (setHeader), and whether they are all ASCII. */
  private preset = '';
  private presetAscii = true;

  constructor(private readonly owner: ResponseOwner) {}

  writeHead(status: number, headers?: OutgoingHttpHeaders): this {
    if (this.headersSent) throw new Error('writeHead after the head was sent');
    // Checked here, as node:http checks in writeHead, so a bad header fails before anything is sent.
    let lines = '';
    let length = false;
    let ascii = true;
    if (headers)
      for (const name in headers) {
        const v = headers[name];
        if (v === undefined) continue;
        if (!TOKEN.test(name)) throw new InvalidHeaderError(name);
        const lower = name.toLowerCase();
        if (lower === 'content-length') length = true;
        else if (lower === 'transfer-encoding' || lower === 'connection' || lower === 'date' || lower === 'keep-alive') continue; // the edge frames the message
        for (const one of Array.isArray(v) ? v : [v]) {
          const text = String(one);
          if (BAD_VALUE.test(text)) throw new InvalidHeaderError(name);
          if (ascii && NON_ASCII.test(text)) ascii = false;
          lines += `${name}: ${text}\r\n`;
        }
      }
    this.status = status;
    this.lines = this.preset + lines;
    this.hasLength = length;
    this.asciiHead = ascii && this.presetAscii;
    this.headersSent = true;
    return this;
  }

  setHeader(name: string, value: string): this {
    if (this.headersSent) throw new Error('setHeader after the head was sent');
    if (!TOKEN.test(name)) throw new InvalidHeaderError(name);
    if (BAD_VALUE.test(value)) throw new InvalidHeaderError(name);
    if (NON_ASCII.test(value)) this.presetAscii = this.asciiHead = false;
    this.preset += `${name}: ${value}\r\n`;
    this.lines += `${name}: ${value}\r\n`; // a head written without writeHead has them too
    return this;
  }

  flushHeaders(): void {
    if (this.headWritten || this.destroyed) return;
    this.owner.writer().write(this.head(undefined), 'latin1');
  }

  write(chunk: string | Buffer): boolean {
    if (this.writableEnded || this.destroyed) return false;
    const size = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    const socket = this.owner.writer();
    socket.cork();
    if (!this.headWritten) socket.write(this.head(undefined), 'latin1');
    if (size > 0) {
      if (this.chunked) socket.write(`${size.toString(16)}\r\n`, 'latin1');
      socket.write(chunk);
      if (this.chunked) socket.write('\r\n', 'latin1');
    }
    socket.uncork();
    return !socket.writableNeedDrain;
  }

  end(chunk?: string | Buffer): this {
    if (this.writableEnded) return this;
    this.writableEnded = true;
    if (this.destroyed) return this;
    const size = chunk === undefined ? 0 : typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (!this.headWritten && (size === 0 || (typeof chunk === 'string' && this.asciiHead))) {
      // The common case, a whole JSON answer: one string, one write, one syscall. (cork() and a
      // writev cost more than the copy.)
      const head = this.head(size);
      this.owner.send(size === 0 ? head : head + chunk, size === 0 ? 'latin1' : 'utf8');
    } else {
      const socket = this.owner.writer();
      socket.cork();
      if (!this.headWritten) socket.write(this.head(size), 'latin1');
      if (this.chunked) {
        if (size > 0) socket.write(`${size.toString(16)}\r\n`, 'latin1');
        if (size > 0) socket.write(chunk!);
        socket.write(size > 0 ? `\r\n${LAST_CHUNK}` : LAST_CHUNK, 'latin1');
      } else if (size > 0) socket.write(chunk!);
      socket.uncork();
    }
    this.writableFinished = true;
    this.owner.finished(this);
    this.emitClose();
    return this;
  }

  on(event: 'close', listener: () => void): this {
    if (event === 'close') (this.closeListeners ??= []).push(listener);
    return this;
  }

  get writableLength(): number {
    return this.destroyed || this.writableFinished ? 0 : this.owner.writer().writableLength;
  }

  destroy(): void {
    if (this.destroyed || this.writableFinished) return;
    this.owner.writer().destroy();
    this.abort();
  }

  /** The connection went away before the response was complete. */
  abort(): void {
    if (this.writableFinished) return;
    this.destroyed = true;
    this.emitClose();
  }

  private emitClose(): void {
    if (this.closed) return;
    this.closed = true;
    const fns = this.closeListeners;
    this.closeListeners = undefined;
    if (fns) for (const fn of fns) fn();
  }

  /** The status line and headers; `bodySize` known: Content-Length, unknown: chunked. */
  private head(bodySize: number | undefined): string {
    this.headWritten = true;
    this.headersSent = true;
    let s = `HTTP/1.1 ${this.status} ${STATUS_CODES[this.status] ?? 'unknown'}\r\n${this.lines}`;
    s += `Date: ${httpDate()}\r\n`;
    s += this.owner.closesAfter(this) ? 'Connection: close\r\n' : `Connection: keep-alive\r\nKeep-Alive: timeout=${this.owner.keepAliveSeconds}\r\n`;
    if (!this.hasLength) {
      if (bodySize !== undefined) s += `Content-Length: ${bodySize}\r\n`;
      else {
        this.chunked = true;
        s += 'Transfer-Encoding: chunked\r\n';
      }
    }
    return `${s}\r\n`;
  }
}
