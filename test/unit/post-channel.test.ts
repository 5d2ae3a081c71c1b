import { describe, expect, it } from 'vitest';
import { PostChannel } from '../../src/downstream/sse.js';
import type { EdgeResponse } from '../../src/transport/http1/types.js';

/** A response whose unread bytes the test sets: what the channel writes is kept. */
function response(): { res: EdgeResponse; written: string[]; unread: { bytes: number } } {
  const written: string[] = [];
  const unread = { bytes: 0 };
  const res = {
    destroyed: false,
    writableEnded: false,
    get writableLength() {
      return unread.bytes;
    },
    writeHead() {
      return res;
    },
    write(s: string) {
      written.push(s);
      return true;
    },
    end() {},
    on() {
      return res;
    },
  } as unknown as EdgeResponse;
  return { res, written, unread };
}

describe("a call's answer channel to a client that does not read", () => {
  it('leaves out progress and log lines past the bound, never a withdrawal, a completion or a request', () => {
    const { res, written, unread } = response();
    const ch = new PostChannel(res, {}, true, {}, 1000);
    ch.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } });
    unread.bytes = 2000;
    ch.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 2 } });
    ch.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } });
    ch.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'sy-1' } });
    ch.send({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId: 'e' } });
    ch.send({ jsonrpc: '2.0', id: 'sy-2', method: 'elicitation/create', params: {} });
    const methods = written.map((w) => JSON.parse(w.slice(w.indexOf('data: ') + 6)).method);
    expect(methods).toEqual(['notifications/progress', 'notifications/cancelled', 'notifications/elicitation/complete', 'elicitation/create']);
    expect(ch.dropped).toBe(2);
  });
});
