/**
 * What tools/call hands the upstream and when it answers (src/router/call-tool.ts). The call's
 * options are built in one object (callOptions, with the tool's retry rule), as a policy object
 * spread over the context's and a copy with the retry used to be. And a call whose row has
 * nothing to wait for (the ledger off) answers without waiting for its finish, which
 * still runs; with the ledger on it answers only once its row is finished.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Canceller } from '../../src/cancel.js';
import type { Catalog, ServerHandle } from '../../src/catalog/catalog.js';
import type { AuditSink } from '../../src/ledger/sink.js';
import type { AuditEnd } from '../../src/ledger/types.js';
import { callOptions } from '../../src/router/forwarding.js';
import { ToolCall } from '../../src/router/call-tool.js';
import type { CallContext } from '../../src/router/context.js';
import { Mrtr } from '../../src/router/mrtr.js';
import { RequestStateSealer } from '../../src/router/request-state.js';
import type { CallOptions } from '../../src/upstream/types.js';
import { MODERN } from '../../src/protocol/era.js';

const log = { debug() {}, info() {}, warn() {}, error() {}, child() { return log; } };

function context(over: Partial<CallContext> = {}): CallContext {
  return {
    requestId: 1,
    principal: 'alice',
    clientAddress: '127.0.0.1',
    clientEra: MODERN,
    clientCapabilities: {},
    signal: new Canceller().signal,
    ...over,
  } as CallContext;
}

/** The echo's server, modern (a call runs straight through, never parked), answering `answer` to every tools/call. */
function echoServer(sent: CallOptions[]): ServerHandle {
  return {
    id: 'echo',
    config: { trust: 'trusted', timeoutMs: 1000, maxTotalTimeoutMs: 5000, retry: { maxAttempts: 3, budgetMs: 700 }, tools: { byName: {} } },
    upstream: {
      era: MODERN,
      state: 'ready',
      request: async (_method: string, params: Record<string, unknown>, opts: CallOptions) => {
        sent.push(opts);
        return { content: [{ type: 'text', text: String((params.arguments as { text: string }).text) }] };
      },
    },
  } as unknown as ServerHandle;
}

/** A sink whose rows finish only when the test says: `ends` holds each finish, `release` settles them. */
function heldSink(enabled: boolean) {
  const ends: AuditEnd[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const sink = {
    enabled,
    idempotency: { claim: () => ({ kind: 'new' }), complete() {}, abandon() {}, markUnknown() {} },
    begin: () => ({ rowId: 1, written: undefined, finish: (e: AuditEnd) => (ends.push(e), held) }),
    record: () => Promise.resolve(),
    whenCommitted: () => Promise.resolve(),
    close: () => Promise.resolve(),
  } as unknown as AuditSink;
  return { sink, ends, release };
}

function toolCall(ledger: AuditSink, server: ServerHandle, stopBegun?: Canceller['signal']): ToolCall {
  // Idempotent by its trusted server's word: sent again on a failure that may have run (toolRetry).
  const item = { name: 'echo', inputSchema: { type: 'object' }, annotations: { idempotentHint: true } };
  const catalog = {
    readyTool: () => ({ server, upstreamName: 'echo', item }),
    groups: { version: 0 },
    links: { note() {} },
  } as unknown as Catalog;
  const mrtr = new Mrtr(new RequestStateSealer(randomBytes(32)), 1000);
  return new ToolCall({ catalog, ledger, mrtr, log: log as never, opts: { startupGrace: () => undefined, stopBegun } });
}

/** Whether `p` has settled once the microtasks queued now have run (and a turn more). */
async function settledSoon(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('tools/call', () => {
  it("gives the upstream the call's options in one object: the server's limits, the context's fields, the tool's retry rule", async () => {
    const sent: CallOptions[] = [];
    const server = echoServer(sent);
    const stop = new Canceller().signal;
    const meta = { 'dev.switchyard/timeoutMs': 300, traceparent: 't' };
    const ctx = context({ meta, sessionKey: 's1', logLevel: 'info' });
    // The server's (timeoutMs 1000, maxTotalTimeoutMs 5000, retry 3 × 700 ms), the caller's total under them.
    const policy = { timeoutMs: 300, maxTotalTimeoutMs: 300, meta: { traceparent: 't' }, askProgress: true, retry: { maxAttempts: 3, budgetMs: 700, idempotent: false } };
    const expected = {
      signal: ctx.signal,
      stop,
      onProgress: undefined,
      onLog: undefined,
      logScope: 's1',
      principal: 'alice',
      onServerRequest: undefined,
      // A trusted server's questions are its own (input-results.ts askerOf).
      asker: undefined,
      // A modern client's questions have no _meta to say the asker in (input-results.ts ASKER_META).
      askerInMeta: false,
      onElicitationComplete: undefined,
      exclusive: false,
      clientCapabilities: {},
      logLevel: 'info',
      ...policy,
    };
    // Without a rule of its own, the server's: never sent again once it may have run.
    expect(callOptions(ctx, server, stop)).toStrictEqual(expected);
    const retry = { maxAttempts: 3, budgetMs: 700, idempotent: true };
    expect(callOptions(ctx, server, stop, retry)).toStrictEqual({ ...expected, retry });

    const { sink, release } = heldSink(false);
    release();
    await toolCall(sink, server, stop).call({ name: 'echo__echo', arguments: { text: 'hi' } }, ctx);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toStrictEqual({ ...expected, retry });
  });

  it('answers without waiting for its finished row when the ledger is off; the row is still finished', async () => {
    const { sink, ends, release } = heldSink(false);
    const call = toolCall(sink, echoServer([])).call({ name: 'echo__echo', arguments: { text: 'hi' } }, context());
    expect(await settledSoon(call)).toBe(true);
    await expect(call).resolves.toEqual({ content: [{ type: 'text', text: 'hi' }] });
    expect(ends).toEqual([expect.objectContaining({ outcome: 'ok', errorKind: null, latencyMs: expect.any(Number) })]);
    release();
  });

  it('answers only once its row is finished when the ledger is on', async () => {
    const { sink, ends, release } = heldSink(true);
    const call = toolCall(sink, echoServer([])).call({ name: 'echo__echo', arguments: { text: 'hi' } }, context());
    expect(await settledSoon(call)).toBe(false);
    expect(ends).toEqual([expect.objectContaining({ outcome: 'ok', latencyMs: expect.any(Number) })]);
    release();
    await expect(call).resolves.toEqual({ content: [{ type: 'text', text: 'hi' }] });
  });
});
