import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/**
 * What the downstream HTTP code needs of a request and a response. node:http's
 * IncomingMessage/ServerResponse satisfy it, and so does the edge's own fast path
 * (`Http1Response`), so one handler serves both.
 */
export interface EdgeRequest {
  readonly method?: string;
  readonly url?: string;
  readonly headers: IncomingHttpHeaders | Readonly<Record<string, string>>;
  /** node:http's name/value list, repeats kept (the fast path has none: it refuses repeats). */
  readonly rawHeaders?: readonly string[];
  readonly socket: { readonly remoteAddress?: string };
}

export interface EdgeResponse {
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  writeHead(status: number, headers?: OutgoingHttpHeaders): this;
  /** A header for whatever head is written later (as node:http's setHeader). */
  setHeader(name: string, value: string): unknown;
  /** Send the head now (an SSE stream that has nothing to say yet). */
  flushHeaders(): void;
  write(chunk: string | Buffer): boolean;
  /** Bytes written and not yet taken by the client (the socket's send buffer included). */
  readonly writableLength: number;
  /** Drop the connection now (a client that does not read what it is sent). */
  destroy(): void;
  end(chunk?: string | Buffer): this;
  /** 'close': the response is finished, or the connection went away before it was. */
  on(event: 'close', listener: () => void): this;
}
