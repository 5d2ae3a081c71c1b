/**
 * Reading a `text/event-stream` body (digest §6.2, §6.3) with eventsource-parser. Only the
 * default `message` event carries JSON-RPC; an empty `data` is a priming event; comments are
 * keep-alives. An event larger than the bound stops the stream.
 */
import type { Readable } from 'node:stream';
import { createParser } from 'eventsource-parser';

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
 * Feeds `stream` through an SSE parser until it ends. Resolves at the end of the stream;
 * rejects when the stream errors or an event exceeds `maxEventBytes` (the stream is destroyed).
 */
export function readSse(stream: Readable, maxEventBytes: number, onEvent: (e: SseEvent) => void): Promise<SseReadResult> {
  return new Promise((resolve, reject) => {
    const out: SseReadResult = {};
    let failed = false;
    const fail = (err: Error): void => {
      if (failed) return;
      failed = true;
      stream.destroy();
      reject(err);
    };
    const parser = createParser({
      // Characters, not bytes: close enough as a guard against unbounded buffering.
      maxBufferSize: maxEventBytes,
      onEvent: (ev) => {
        if (ev.id !== undefined) out.lastEventId = ev.id;
        if (ev.data === '' || (ev.event !== undefined && ev.event !== 'message')) return;
        onEvent(ev.id === undefined ? { data: ev.data } : { data: ev.data, id: ev.id });
      },
      onRetry: (ms) => (out.retryMs = ms),
      onError: (err) => {
        if (err.type === 'max-buffer-size-exceeded') fail(new Error(`SSE event larger than ${maxEventBytes} bytes`));
      },
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      if (failed) return;
      try {
        parser.feed(chunk);
      } catch (err) {
        fail(err as Error);
      }
    });
    stream.on('end', () => {
      if (!failed) resolve(out);
    });
    stream.on('error', (err) => fail(err));
    stream.on('close', () => {
      // 'close' without 'end' means the connection broke mid-stream.
      if (!failed && !stream.readableEnded) fail(new Error('event stream closed before its end'));
    });
  });
}
