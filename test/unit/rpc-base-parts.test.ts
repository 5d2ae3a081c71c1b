import { afterEach, describe, expect, it, vi } from 'vitest';
import { IdTable } from '../../src/keyed-table.js';
import { askTarget } from '../../src/upstream/ask-target.js';
import { callTimeout, timeoutReason } from '../../src/upstream/call-timeout.js';
import { HangWatch, PROBATION_LIMITS, UNANSWERED_CALLS } from '../../src/upstream/hang-watch.js';
import { ENDED_LISTENS, EndedListens, isListenId, listenOf } from '../../src/upstream/listen-streams.js';
import { logTargets } from '../../src/upstream/log-targets.js';
import { progressInfo } from '../../src/upstream/progress-info.js';
import type { Pending } from '../../src/upstream/pending-call.js';
import type { CallOptions } from '../../src/upstream/types.js';

// The pure parts split out of UpstreamBase (src/upstream/rpc-base.ts), checked without a server.

const noop = (): void => undefined;

/** A call in flight as UpstreamBase records one; `extra` sets what a case needs. */
function call(id: number, extra: Partial<Pending> & { opts?: CallOptions } = {}): Pending {
  return { id, method: 'tools/call', opts: undefined, timeoutMs: 1000, internal: false, resolve: noop, reject: noop, timer: undefined, token: undefined, waits: 0, onAbort: undefined, holds: 0, gen: 0, answeredAtSend: 0, ...extra };
}

function table(...calls: Pending[]): IdTable<Pending> {
  const t = new IdTable<Pending>();
  for (const p of calls) t.set(p.id, p);
  return t;
}

const asks: CallOptions = { onServerRequest: () => Promise.resolve({}) };
const request = (params?: Record<string, unknown>) => ({ jsonrpc: '2.0' as const, id: 7, method: 'sampling/createMessage', params });

describe('askTarget', () => {
  it("a request on a call's stream is that call's; once the call ended, nobody's", () => {
    const a = call(1, { opts: asks });
    expect(askTarget(table(a), request(), a)).toEqual({ target: a, nobody: undefined });
    expect(askTarget(table(), request(), a)).toEqual({ target: undefined, nobody: 'the call this sampling/createMessage came with has ended' });
  });

  it('a task\'s request goes to the call waiting for its result, the one call in flight otherwise, and several are ambiguous', () => {
    const a = call(1, { opts: asks });
    const b = call(2, { opts: asks });
    const waiting = call(3, { method: 'tasks/result', taskId: 't1', opts: asks });
    const related = request({ _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't1' } } });
    expect(askTarget(table(a, b, waiting), related, undefined).target).toBe(waiting);
    expect(askTarget(table(a, waiting), request(), undefined).target).toBe(a);
    expect(askTarget(table(a, b), request(), undefined)).toEqual({ inFlight: 2 });
    // The hub's own list fetch is no call to ask for.
    expect(askTarget(table(call(4, { method: 'tools/list' })), request(), undefined)).toEqual({ nobody: "no call of the hub's is in flight to ask sampling/createMessage for" });
    // The one call in flight cannot answer: no target, and no 'nobody' (the client lacks the method).
    expect(askTarget(table(call(5)), request(), undefined)).toEqual({ target: undefined });
  });
});

describe('logTargets', () => {
  const logs = (scope?: string): CallOptions => ({ onLog: noop, logScope: scope });

  it("a legacy line goes to one principal's calls, once per session, and to none once several principals were served", () => {
    const a = call(1, { opts: logs('s1') });
    const b = call(2, { opts: logs('s1') });
    const c = call(3, { opts: logs('s2') });
    expect(logTargets(table(a, b, c), undefined, false, 'alice')).toEqual([a, c]);
    expect(logTargets(table(a, b), undefined, false, null)).toEqual([]);
    expect(logTargets(table(a), undefined, false, undefined)).toEqual([a]);
    expect(logTargets(table(a, b), b, false, null)).toEqual([b]);
    expect(logTargets(table(a), b, false, 'alice')).toEqual([]);
  });

  it('a modern line without a stream goes only to calls that asked for logs, a lone one once several principals were served', () => {
    const a = call(1, { opts: { onLog: noop, logLevel: 'info' } });
    const b = call(2, { opts: { onLog: noop } });
    expect(logTargets(table(a, b), undefined, true, null)).toEqual([a]);
    expect(logTargets(table(a, call(3, { opts: { onLog: noop, logLevel: 'info' } })), undefined, true, null)).toEqual([]);
  });
});

describe('progressInfo', () => {
  it('passes the numbers, the message redacted and _meta without the related-task; nothing without a number', () => {
    expect(progressInfo({ progress: 'half' })).toBeUndefined();
    expect(progressInfo({ progress: 1, total: 4 })).toEqual({ progress: 1, total: 4 });
    const info = progressInfo({ progress: 2, message: 'token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB', _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't' }, k: 1 } });
    expect(info?.message).not.toContain('ghp_0123456789abcdefghijklmnopqrstuvwxyzAB');
    expect(info?._meta).toEqual({ k: 1 });
  });
});

describe('callTimeout', () => {
  it("tells the hard cap from the idle timeout, and a caller's own shorter limit from the server's", () => {
    const idle = callTimeout('s', call(1, { timeoutMs: 500 }), undefined, 1000, undefined);
    expect([idle.ms, idle.callers, idle.message]).toEqual([500, true, 'server "s" did not answer within 500 ms']);
    const progress = callTimeout('s', call(1, { timeoutMs: 1000, token: 'sy-1' }), undefined, 1000, undefined);
    expect([progress.callers, progress.message]).toEqual([false, 'server "s" did not answer within 1000 ms (nor report progress)']);
    const hard = callTimeout('s', call(1), 3000, 1000, 3000);
    expect([hard.ms, hard.callers, hard.message]).toEqual([3000, false, 'server "s" did not finish within its limit of 3000 ms (progress does not extend it)']);
    expect(timeoutReason(call(1, { timeoutMs: 500 }), undefined)).toBe('timed out after 500 ms');
    expect(timeoutReason(call(1), 3000)).toBe('exceeded its limit of 3000 ms');
  });
});

describe('HangWatch', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a row of UNANSWERED_CALLS takes the server down, an answer starts it over, and on probation one is enough until an answer', () => {
    let well = 0;
    const w = new HangWatch(
      () => 1000,
      () => well++,
    );
    w.connected();
    for (let i = 1; i < UNANSWERED_CALLS; i++) expect(w.unansweredCall()).toBe(0);
    w.answered();
    for (let i = 1; i < UNANSWERED_CALLS; i++) expect(w.unansweredCall()).toBe(0);
    expect(w.unansweredCall()).toBe(UNANSWERED_CALLS);
    expect(w.probation).toBe(true);
    w.connected();
    expect(w.unansweredCall()).toBe(1);
    w.answered();
    expect([w.probation, well]).toEqual([false, 1]);
    expect(w.answers).toBe(2);
    expect(w.readyCount).toBe(2);
  });

  it('probation and a row lapse PROBATION_LIMITS of the limit later', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const w = new HangWatch(
      () => 1000,
      () => undefined,
    );
    w.connected();
    w.wentHung(true);
    expect(w.onProbation()).toBe(true);
    vi.advanceTimersByTime(PROBATION_LIMITS * 1000);
    expect(w.onProbation()).toBe(false);
    for (let i = 1; i < UNANSWERED_CALLS; i++) expect(w.unansweredCall()).toBe(0);
    vi.advanceTimersByTime(PROBATION_LIMITS * 1000);
    expect(w.unansweredCall()).toBe(0);
  });
});

describe('listen streams', () => {
  it('a message belongs to the stream in flight it came on or names; an ended one is heard by its sink, the last ENDED_LISTENS kept', () => {
    const sink = (): void => undefined;
    const stream = call(4, { method: 'subscriptions/listen', listen: sink });
    const calls = table(stream, call(5));
    expect(listenOf(calls, {}, stream)).toBe(stream);
    expect(listenOf(calls, { _meta: { 'io.modelcontextprotocol/subscriptionId': '4' } }, undefined)).toBe(stream);
    expect(listenOf(calls, { _meta: { 'io.modelcontextprotocol/subscriptionId': 5 } }, undefined)).toBeUndefined();
    expect([isListenId(calls, 4), isListenId(calls, '4'), isListenId(calls, 5), isListenId(calls, null)]).toEqual([true, true, false, false]);
    const ended = new EndedListens();
    for (let id = 1; id <= ENDED_LISTENS + 1; id++) ended.add(id, sink);
    expect(ended.sinkOf({ _meta: { 'io.modelcontextprotocol/subscriptionId': 1 } }, undefined)).toBeUndefined();
    expect(ended.sinkOf({ _meta: { 'io.modelcontextprotocol/subscriptionId': 2 } }, undefined)).toBe(sink);
  });
});
