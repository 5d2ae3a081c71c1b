import { describe, expect, it, vi } from 'vitest';
import { MAX_UNREAD_BYTES, PostChannel } from '../../src/downstream/sse.js';
import { REPLAY_KEEP_MS, REPLAY_MAX_EVENTS, ReplayBudget, SessionStreams } from '../../src/downstream/resumable.js';
import { monotonicNow } from '../../src/monotonic.js';
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
    flushHeaders() {},
    destroy() {
      (res as { destroyed: boolean }).destroyed = true;
    },
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

describe("a legacy session's resumable answer stream, resumed by a client that does not read", () => {
  it('leaves progress past the bound out of what it writes to the new connection, keeps it for a replay, and still writes requests and the answer', () => {
    const post = response();
    const ch = new PostChannel(post.res, {}, true);
    ch.resumeIn = new SessionStreams(true, 'sid', new ReplayBudget());
    const progress = (n: number) => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: n } });
    ch.send(progress(1));
    const [priming, first] = post.written;
    expect(priming).toMatch(/^id: [\w-]+\.1\.0\nretry: 1000\ndata:\n\n$/);
    const id = /^id: (\S+)/.exec(first!)![1]!;
    // The POST's connection is cut; the client comes back on a GET and stops reading.
    const get = response();
    const found = ch.resumeIn.find(id);
    if ('problem' in found) throw new Error(found.problem);
    found.stream.resume(get.res, {}, found.after, {});
    get.unread.bytes = MAX_UNREAD_BYTES + 1;
    ch.send(progress(2));
    ch.send({ jsonrpc: '2.0', id: 'sy-2', method: 'elicitation/create', params: {} });
    ch.end({ jsonrpc: '2.0', id: 7, result: {} });
    const sent = (w: string[]) => w.map((t) => JSON.parse(t.slice(t.indexOf('data: ') + 6)) as { method?: string; id?: unknown });
    expect(sent(get.written)).toEqual([expect.objectContaining({ method: 'elicitation/create' }), expect.objectContaining({ id: 7 })]);
    // All of it is kept: a client that reads comes back for it.
    const again = response();
    found.stream.resume(again.res, {}, found.after, {});
    expect(sent(again.written.join('').split(/(?<=\n\n)/)).map((m) => m.method ?? m.id)).toEqual(['notifications/progress', 'elicitation/create', 7]);
  });
});

describe("a legacy session's resumable answer stream flooded with log lines", () => {
  it('keeps the question to the client and the answer for a replay, letting the oldest log lines go instead', () => {
    const streams = new SessionStreams(true, 'sid', new ReplayBudget());
    const post = response();
    const s = streams.open(post.res, {}, false);
    s.send({ jsonrpc: '2.0', id: 'sy-1', method: 'elicitation/create', params: {} });
    for (let i = 0; i < REPLAY_MAX_EVENTS + 50; i++) s.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `line ${i}` } });
    s.finish({ jsonrpc: '2.0', id: 7, result: {} });
    // The client lost the connection before reading any of it, and comes back.
    const again = response();
    s.resume(again.res, {}, 0, {});
    const events = again.written.join('').split(/(?<=\n\n)/).filter((t) => t.includes('data: {'));
    const sent = events.map((t) => JSON.parse(t.slice(t.indexOf('data: ') + 6)) as { method?: string; id?: unknown; params?: { data?: string } });
    expect(sent).toHaveLength(REPLAY_MAX_EVENTS);
    expect(sent[0]).toMatchObject({ method: 'elicitation/create' });
    expect(sent.at(-1)).toMatchObject({ id: 7 });
    // The newest log lines (all but the question's and the answer's room), in order.
    expect(sent[1]!.params?.data).toBe(`line ${REPLAY_MAX_EVENTS + 50 - (REPLAY_MAX_EVENTS - 2)}`);
    expect(sent.at(-2)!.params?.data).toBe(`line ${REPLAY_MAX_EVENTS + 49}`);
    // A client that had the question resumes after it, without it.
    const qid = /^id: (\S+)/.exec(events[0]!)![1]!;
    const found = streams.find(qid);
    if ('problem' in found) throw new Error(found.problem);
    const later = response();
    s.resume(later.res, {}, found.after, {});
    expect(later.written.join('')).not.toContain('elicitation/create');
    expect(later.written.join('')).toContain(`line ${REPLAY_MAX_EVENTS + 49}`);
  });
});

describe('what the hub keeps for replays, all sessions together', () => {
  it('past its budget lets go of the streams that finished longest ago first, then keeps only the newest event of the one being written', () => {
    const budget = new ReplayBudget(4000);
    const a = new SessionStreams(true, 'a', budget);
    const b = new SessionStreams(true, 'b', budget);
    const big = (n: number) => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `${n}`.padEnd(1000, 'x') } });
    const idOf = (w: string[]) => /^id: (\S+)/.exec(w.at(-1)!)![1]!;
    const ra = response();
    const sa = a.open(ra.res, {}, false);
    sa.send(big(1));
    sa.finish({ jsonrpc: '2.0', id: 1, result: {} });
    const older = idOf(ra.written);
    const ra2 = response();
    const sa2 = a.open(ra2.res, {}, false);
    sa2.send(big(2));
    sa2.finish({ jsonrpc: '2.0', id: 2, result: {} });
    const newer = idOf(ra2.written);
    expect(budget.bytes).toBeGreaterThan(2000);
    expect(budget.bytes).toBeLessThan(4000);
    // Another session's stream takes the hub over its budget: a's oldest finished stream goes, not its newer one.
    const rb = response();
    const sb = b.open(rb.res, {}, false);
    sb.send(big(3));
    sb.send(big(4));
    expect(a.find(older)).toMatchObject({ problem: expect.stringMatching(/no longer kept/) });
    expect(a.find(newer)).toMatchObject({ stream: sa2 });
    expect(budget.bytes).toBeLessThanOrEqual(4000);
    // With no finished stream left to let go, the stream being written keeps only its newest events.
    for (let i = 5; i < 12; i++) sb.send(big(i));
    expect(a.find(newer)).toMatchObject({ problem: expect.stringMatching(/no longer kept/) });
    expect(budget.bytes).toBeLessThanOrEqual(4000);
    const again = response();
    sb.resume(again.res, {}, 0, {});
    expect(again.written.join('')).toContain('11xxx');
    expect(again.written.join('')).not.toContain('5xxx');
    // A session that ends gives its bytes back.
    b.clear();
    expect(budget.bytes).toBe(0);
  });
});

describe('a stream kept for a replay, when the wall clock is stepped (NTP, a laptop resumed)', () => {
  it('goes REPLAY_KEEP_MS after it finished on the monotonic clock: an hour back keeps it no longer, an hour ahead lets it go no sooner', () => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    // The faked performance.now() starts at 0, which a stream's `since` reserves for "neither".
    vi.advanceTimersByTime(1000);
    try {
      const streams = new SessionStreams(true, 'sid', new ReplayBudget());
      const finished = () => {
        const r = response();
        const s = streams.open(r.res, {}, false);
        s.finish({ jsonrpc: '2.0', id: 1, result: {} });
        (r.res as { writableEnded: boolean }).writableEnded = true;
        return s;
      };
      const back = finished();
      vi.setSystemTime(Date.now() - 3_600_000);
      vi.advanceTimersByTime(REPLAY_KEEP_MS + 1);
      // The hub's sweep passes the monotonic clock (SessionTable.endIdleSessions). Before, a stream
      // finished before the step was kept an hour longer.
      streams.sweep(monotonicNow());
      expect(back.closed).toBe(true);
      const ahead = finished();
      vi.setSystemTime(Date.now() + 3_600_000);
      vi.advanceTimersByTime(1000);
      streams.sweep(monotonicNow());
      expect(ahead.closed).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
