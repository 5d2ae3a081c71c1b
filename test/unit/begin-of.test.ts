/**
 * A row's begin as the router builds it (src/router/forwarding.ts beginOf): the context's fields
 * and the target's, in one literal with every field, so every begin has the one shape (it spread
 * the target over the context's fields, ~2.2k instructions of every tools/call).
 */
import { describe, expect, it } from 'vitest';
import { beginOf } from '../../src/router/forwarding.js';
import type { CallContext } from '../../src/router/context.js';
import { Canceller } from '../../src/cancel.js';

const ctx: CallContext = {
  requestId: 7,
  principal: 'alice',
  group: 'ops',
  clientAddress: '127.0.0.1',
  clientEra: '2026-07-28',
  clientInfo: { name: 'c', version: '1' },
  clientCapabilities: {},
  signal: new Canceller().signal,
  idempotencyKey: 'k1',
  requestBytes: 321,
  span: { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), parentSpanId: 'c'.repeat(16), flags: '01' },
};

describe('beginOf', () => {
  it("holds the context's fields and the target's", () => {
    const target = { hubName: 'echo__echo', server: 'echo', upstreamName: 'echo', upstreamEra: '2025-11-25', argsHash: 'f'.repeat(64), args: { text: 'hi' } };
    const b = beginOf('tools/call', ctx, target);
    expect(b.ts).toBeGreaterThan(0);
    expect({ ...b, ts: 0 }).toStrictEqual({
      ts: 0,
      requestId: '7',
      principal: 'alice',
      group: 'ops',
      clientAddress: '127.0.0.1',
      clientEra: '2026-07-28',
      clientInfo: { name: 'c', version: '1' },
      method: 'tools/call',
      idempotencyKey: 'k1',
      requestBytes: 321,
      traceId: 'a'.repeat(32),
      spanId: 'b'.repeat(16),
      parentSpanId: 'c'.repeat(16),
      ...target,
    });
    // A target that names less leaves the rest undefined, as the spread left them absent.
    expect(beginOf('prompts/get', ctx, { hubName: 'p' })).toEqual({ ...beginOf('prompts/get', ctx), hubName: 'p', ts: expect.any(Number) });
  });

  it('gives every begin the same fields in the same order, with a target or without', () => {
    const keys = Object.keys(beginOf('tools/list', { ...ctx, span: undefined, group: undefined }));
    expect(Object.keys(beginOf('tools/call', ctx, { hubName: 'x', argsHash: 'h', args: {} }))).toEqual(keys);
    expect(Object.keys(beginOf('resources/read', ctx, { hubName: 'file:///x', server: 's' }))).toEqual(keys);
  });
});
