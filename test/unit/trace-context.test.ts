/**
 * The hub as one span of a W3C trace (src/protocol/trace-context.ts, passThroughMeta): which
 * `traceparent` values name a caller's span, the child span under it (same trace, new span id,
 * flags kept), a new trace without one, and the `_meta` that goes on.
 */
import { describe, expect, it } from 'vitest';
import { childSpan, formatTraceparent, parseTraceparent, randomHex, spanOfMeta, STARTED_FLAGS, type IdSource } from '../../src/protocol/trace-context.js';
import { passThroughMeta } from '../../src/protocol/meta.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const VALID = `00-${TRACE}-${PARENT}-01`;

/** Ids handed out in order, for exact expectations. */
function ids(...list: string[]): IdSource {
  return () => {
    const id = list.shift();
    if (id === undefined) throw new Error('no more ids');
    return id;
  };
}

describe('parseTraceparent', () => {
  it('reads a version-00 value: trace id, parent id, flags as sent', () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: TRACE, parentId: PARENT, flags: '01' });
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-00`)?.flags).toBe('00');
    // Flags beyond sampled (Level 2's random-trace-id bit) are kept: the trace id is kept too.
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-03`)?.flags).toBe('03');
    // The other bits are reserved, and the spec has a vendor set them to zero: not passed on.
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-ff`)?.flags).toBe('03');
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-fc`)?.flags).toBe('00');
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-09`)?.flags).toBe('01');
  });

  it.each([
    ['not a string', 42],
    ['empty', ''],
    ['short', '00-abc-def-01'],
    ['a zero trace id', `00-${'0'.repeat(32)}-${PARENT}-01`],
    ['a zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ['version ff', `ff-${TRACE}-${PARENT}-01`],
    ['a version that is not hex', `0g-${TRACE}-${PARENT}-01`],
    ['version 00 with more after it', `${VALID}-extra`],
    ['version 00 with a trailing space', `${VALID} `],
    ['a leading space', ` ${VALID}`.slice(0, 55)],
    ['flags that are not hex', `00-${TRACE}-${PARENT}-0x`],
    ['a missing dash', `00-${TRACE}_${PARENT}-01`],
    ['a trace id one short', `00-${TRACE.slice(1)}-${PARENT}-01x`],
  ])('refuses %s', (_why, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
  });

  it('reads a later version as the spec says: its first 55 characters, then nothing or a dash; only the sampled flag', () => {
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-03`)).toEqual({ traceId: TRACE, parentId: PARENT, flags: '01' });
    expect(parseTraceparent(`01-${TRACE}-${PARENT}-02-what-comes-next`)).toEqual({ traceId: TRACE, parentId: PARENT, flags: '00' });
    expect(parseTraceparent(`01-${TRACE}-${PARENT}-01x`)).toBeUndefined();
  });
});

describe('the hub’s span', () => {
  it('under a caller: the same trace and flags, a new span id, the caller’s span as its parent', () => {
    const span = childSpan(parseTraceparent(`00-${TRACE}-${PARENT}-00`), ids('b7ad6b7169203331'));
    expect(span).toEqual({ traceId: TRACE, spanId: 'b7ad6b7169203331', parentSpanId: PARENT, flags: '00' });
    expect(formatTraceparent(span)).toBe(`00-${TRACE}-b7ad6b7169203331-00`);
  });

  it('never takes its parent’s span id, nor an id of zeros', () => {
    const span = childSpan(parseTraceparent(VALID), ids('0'.repeat(16), PARENT, 'b7ad6b7169203331'));
    expect(span.spanId).toBe('b7ad6b7169203331');
  });

  it('without a caller’s span: a new trace, sampled, with no parent', () => {
    const span = childSpan(undefined, ids('0'.repeat(32), TRACE, PARENT));
    expect(span).toEqual({ traceId: TRACE, spanId: PARENT, flags: STARTED_FLAGS });
    expect(STARTED_FLAGS).toBe('01');
    // A later version is sent on as version 00.
    expect(formatTraceparent(childSpan(parseTraceparent(`cc-${TRACE}-${PARENT}-01-x`), ids('b7ad6b7169203331')))).toBe(`00-${TRACE}-b7ad6b7169203331-01`);
  });

  it('of a request’s _meta: its traceparent if valid, else a new trace', () => {
    expect(spanOfMeta({ traceparent: VALID }, undefined, ids('b7ad6b7169203331')).parentSpanId).toBe(PARENT);
    expect(spanOfMeta({ traceparent: 'garbage' }, undefined, ids(TRACE, PARENT)).parentSpanId).toBeUndefined();
    expect(spanOfMeta(undefined, undefined, ids(TRACE, PARENT))).toEqual({ traceId: TRACE, spanId: PARENT, flags: '01' });
    expect(spanOfMeta(null, undefined, ids(TRACE, PARENT)).traceId).toBe(TRACE);
  });

  it('draws random lowercase hex ids, all different', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const t = randomHex(16);
      const s = randomHex(8);
      expect(t).toMatch(/^[0-9a-f]{32}$/);
      expect(s).toMatch(/^[0-9a-f]{16}$/);
      seen.add(t).add(s);
    }
    expect(seen.size).toBe(2000);
  });
});

describe('the _meta that goes on (passThroughMeta)', () => {
  const others = { baggage: 'k=v', 'com.example/x': 1, 'io.modelcontextprotocol/clientInfo': { name: 'forged' } };

  it('under a caller’s trace: traceparent names the hub’s span, tracestate and baggage as sent', () => {
    const span = childSpan(parseTraceparent(VALID), ids('b7ad6b7169203331'));
    expect(passThroughMeta({ traceparent: VALID, tracestate: 'congo=t61rcWkgMzE', ...others }, span)).toEqual({
      traceparent: `00-${TRACE}-b7ad6b7169203331-01`,
      tracestate: 'congo=t61rcWkgMzE',
      baggage: 'k=v',
      'com.example/x': 1,
    });
  });

  it('a trace the hub started: its own traceparent, the caller’s tracestate dropped, baggage kept', () => {
    const span = childSpan(parseTraceparent('00-abc-def-01'), ids(TRACE, PARENT));
    expect(passThroughMeta({ traceparent: '00-abc-def-01', tracestate: 'congo=t61rcWkgMzE', ...others }, span)).toEqual({
      traceparent: `00-${TRACE}-${PARENT}-01`,
      baggage: 'k=v',
      'com.example/x': 1,
    });
    expect(passThroughMeta(undefined, span)).toEqual({ traceparent: `00-${TRACE}-${PARENT}-01` });
  });

  it('without a span, what was sent (the pass-through of old)', () => {
    expect(passThroughMeta({ traceparent: 't', ...others })).toEqual({ traceparent: 't', baggage: 'k=v', 'com.example/x': 1 });
    expect(passThroughMeta(undefined)).toBeUndefined();
  });
});
