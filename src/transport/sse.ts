/**
 * Reading a `text/event-stream` body (digest §6.2, §6.3) with eventsource-parser. Only the
 * default `message` event carries JSON-RPC; an empty `data` is a priming event; comments are
 * keep-alives. An event larger than the bound stops the stream.
 */
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';

/** An event past the stream's bound (maxEventBytes). */
export class SseOverflowError extends Error {}

export interface SseEvent {
  data: string;
  id?: string;
}

export interface SseReadResult {
  /** The last event id seen (for a legacy resumption with Last-Event-ID). */
  lastEventId?: string;
  /** The last `retry:` the server asked for, in ms. */
  retryMs?: number;
}

/**
 * An event-stream body fed chunk by chunk, as bytes arrive. `feed` throws when an event grows
 * past `maxEventBytes`; the caller then stops reading. `result` holds what the stream said
 * about resumption so far.
 */
export class SseFeed {
  readonly result: SseReadResult = {};
  private readonly decoder = new StringDecoder('utf8');
  private readonly parser;
  private overflow: Error | undefined;
  /** No text of the stream decoded yet: a byte order mark may still open it. */
  private first = true;
  /** The text fed last ended in a CR, which eventsource-parser holds until it sees whether an LF follows. */
  private endsInCr = false;

  constructor(maxEventBytes: number, onEvent: (e: SseEvent) => void) {
    this.parser = createParser({
      // Characters, not bytes: close enough as a guard against unbounded buffering. The parser
      // checks it only between the chunks it is fed, so an event that comes whole within one
      // (a socket read: up to 64 KiB; its `data:` lines, however many) is measured here, in
      // bytes, as a JSON answer is: it passed, past the limit, where a slower server's did not.
      maxBufferSize: maxEventBytes,
      onEvent: (ev) => {
        // Past an event too large, the rest of its chunk is not delivered either: the stream is over.
        if (this.overflow) return;
        const n = ev.data.length;
        if (n > maxEventBytes || (n * 3 > maxEventBytes && Buffer.byteLength(ev.data) > maxEventBytes)) {
          this.overflow = new SseOverflowError(`SSE event larger than ${maxEventBytes} bytes`);
          return;
        }
        if (ev.id !== undefined) this.result.lastEventId = ev.id;
        if (ev.data === '' || (ev.event !== undefined && ev.event !== 'message')) return;
        onEvent(ev.id === undefined ? { data: ev.data } : { data: ev.data, id: ev.id });
      },
      onRetry: (ms) => (this.result.retryMs = ms),
      onError: (err) => {
        if (err.type === 'max-buffer-size-exceeded') this.overflow ??= new SseOverflowError(`SSE event larger than ${maxEventBytes} bytes`);
      },
    });
  }

  /** Bytes (split anywhere, even inside a UTF-8 sequence) or text. */
  feed(chunk: Buffer | string): void {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    // The SSE format ignores one leading U+FEFF; eventsource-parser looks for it only as the
    // undecoded bytes EF BB BF of its first chunk, and the decoder holds those back when they
    // arrive split, so it is dropped here, from the first text the stream decodes to.
    if (this.first && text.length > 0) {
      this.first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (text.length > 0) this.endsInCr = text.charCodeAt(text.length - 1) === 13;
    this.parser.feed(text);
    if (this.overflow) throw this.overflow;
  }

  /**
   * The stream ended. A line may end in a CR alone (the SSE format allows CR, LF or CRLF): the
   * parser holds a last CR, waiting to see whether an LF follows, so an event a stream's final
   * bare CRs ended (the response, on a call's stream) was never dispatched. An LF completes that
   * CR as one line end, which dispatches the event only if it was complete.
   */
  end(): void {
    if (!this.endsInCr) return;
    this.endsInCr = false;
    this.parser.feed('\n');
  }
}
