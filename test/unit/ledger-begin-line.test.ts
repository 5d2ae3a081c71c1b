/**
 * A begin's line as the ledger writes it (RowValues.beginOpen, a route's columns' JSON kept):
 * the same text as JSON.stringify of the begin's values, which the ingest thread, a restarted
 * hub (parseLine, the line digest) and the finish line read.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SERVER_AT } from '../../src/ledger/audit-apply.js';
import { beginLine, finishedLine, jsonText, RowValues, tsText } from '../../src/ledger/row-values.js';
import { dropConfigSecrets, useConfigSecrets } from '../../src/policy/config-secrets.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';

/** A few of each, so routes repeat, and more routes than RowValues keeps. */
const word = (...pool: string[]) => fc.oneof(fc.constantFrom(...pool), fc.string({ unit: 'binary', maxLength: 12 }), fc.constant(undefined));
const anyText = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.constant(undefined), fc.integer(), fc.constant(null));
const begin: fc.Arbitrary<AuditBegin> = fc.record(
  {
    ts: fc.oneof(fc.integer({ min: 0, max: 2 ** 45 }), fc.double()),
    requestId: fc.oneof(fc.string({ unit: 'binary', maxLength: 20 }), fc.constantFrom('7', 'w0000n0000000001', 'a"b', 'x\\y', '\u0001', '\ud800')),
    principal: word('anonymous', 'alice', 'bob "b"'),
    group: fc.option(fc.constantFrom('ops', 'dev'), { nil: undefined }),
    clientAddress: word('127.0.0.1', '::1'),
    clientEra: fc.constantFrom('2026-07-28', '2025-11-25'),
    clientInfo: fc.option(fc.record({ name: word('bench', 'cli'), version: word('1.0.0') }), { nil: undefined }),
    method: fc.constantFrom('tools/call', 'prompts/get', 'resources/read'),
    hubName: word('echo__echo', 'a__b', 'x__tok_ghp_0123456789abcdef0123456789abcdef0123'),
    server: word('echo', 'a'),
    upstreamName: word('echo', 'b'),
    upstreamEra: fc.option(fc.constantFrom('2025-11-25', '2026-07-28'), { nil: undefined }),
    idempotencyKey: fc.option(fc.string({ maxLength: 10 }), { nil: undefined }),
    argsHash: fc.option(fc.stringMatching(/^[0-9a-f]{64}$/), { nil: undefined }),
    requestBytes: fc.option(fc.oneof(fc.nat(), fc.double()), { nil: undefined }),
    traceId: fc.option(fc.stringMatching(/^[0-9a-f]{32}$/), { nil: undefined }),
    spanId: fc.option(fc.stringMatching(/^[0-9a-f]{16}$/), { nil: undefined }),
    parentSpanId: fc.option(fc.stringMatching(/^[0-9a-f]{16}$/), { nil: undefined }),
  },
  { requiredKeys: ['ts', 'requestId', 'principal', 'clientEra', 'method'] },
) as fc.Arbitrary<AuditBegin>;
const end: fc.Arbitrary<AuditEnd> = fc.record(
  {
    outcome: fc.constantFrom('ok', 'error', 'tool_error'),
    latencyMs: fc.double({ min: 0, max: 1e4, noNaN: true }),
    server: fc.option(anyText, { nil: undefined }),
    upstreamName: fc.option(anyText, { nil: undefined }),
    upstreamEra: fc.option(anyText, { nil: undefined }),
  },
  { requiredKeys: ['outcome', 'latencyMs'] },
) as fc.Arbitrary<AuditEnd>;

/** The finish as it was made from the begin's values. */
function finishBefore(values: RowValues, start: unknown[], e: AuditEnd): unknown[] {
  const fin = values.finish({ server: null, upstreamName: null, upstreamEra: null } as never, e);
  fin[7] = fin[7] ?? start[SERVER_AT];
  fin[8] = fin[8] ?? start[SERVER_AT + 1];
  fin[9] = fin[9] ?? start[SERVER_AT + 2];
  return fin;
}

describe("a begin's line", () => {
  it('is JSON.stringify of its values, and so is the finished line, call after call on one RowValues (routes kept, reused and replaced)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(begin, end), { minLength: 1, maxLength: 60 }), (calls) => {
        const values = new RowValues({});
        let id = 1;
        for (const [b, e] of calls) {
          const route = values.route(b);
          const start = values.begin(id, b);
          const open = values.beginOpen(id, b, route);
          expect(beginLine(open)).toBe(JSON.stringify(start));
          const fin = values.finish(route, e);
          expect(fin).toEqual(finishBefore(values, start, e));
          expect(finishedLine(open, fin)).toBe(JSON.stringify([...start, ...fin]));
          id += 7;
        }
      }),
      { numRuns: 300 },
    );
  });

  it("follows the config's secrets: a kept route's names are redacted once a secret in them is the config's", () => {
    const values = new RowValues({});
    const b: AuditBegin = { ts: 1, requestId: '1', principal: 'p', clientEra: '2026-07-28', method: 'tools/call', hubName: 'a__zq9-secret-value-77', server: 'a', upstreamName: 'zq9-secret-value-77' };
    const before = beginLine(values.beginOpen(1, b, values.route(b)));
    expect(before).toContain('zq9-secret-value-77');
    const owner = {};
    useConfigSecrets(owner, ['zq9-secret-value-77']);
    try {
      const route = values.route(b);
      const line = beginLine(values.beginOpen(1, b, route));
      expect(line).toBe(JSON.stringify(values.begin(1, b)));
      expect(line).not.toContain('zq9-secret-value-77');
      expect(route.upstreamName).not.toContain('zq9-secret-value-77');
    } finally {
      dropConfigSecrets(owner);
    }
    expect(beginLine(values.beginOpen(1, b, values.route(b)))).toBe(before);
  });

  it('does not keep a route whose values are not text: an object changed under the same reference is written as it is now', () => {
    const values = new RowValues({});
    const name = { n: 1 };
    const b = { ts: 1, requestId: '1', principal: 'p', clientEra: '2026-07-28', clientInfo: { name }, method: 'tools/call' } as unknown as AuditBegin;
    expect(beginLine(values.beginOpen(1, b, values.route(b)))).toBe(JSON.stringify(values.begin(1, b)));
    name.n = 2;
    const line = beginLine(values.beginOpen(1, b, values.route(b)));
    expect(line).toBe(JSON.stringify(values.begin(1, b)));
    expect(line).toContain('{\\"n\\":2}');
  });

  it("quotes a string as JSON.stringify does (jsonText), lone surrogates and control characters too", () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }), (s, t) => {
        expect(jsonText(s)).toBe(JSON.stringify(s));
        expect(jsonText(t)).toBe(JSON.stringify(t));
      }),
      { numRuns: 2000 },
    );
  });

  it("writes a ts as JSON.stringify does (tsText): a second's text kept across calls, leading zeros of the milliseconds, the edges", () => {
    const edges = [0, 1, 999_999, 1_000_000, 1_000_001, 1_000_999, 1_001_000, 1_765_000_000_000, 1_765_000_999_999, 1_765_001_000_000, 2 ** 31, 1_765_000_000_000.5, 1234.25, 2 ** 53 - 1, 2 ** 53, 2 ** 60, 1e21, -1, -1_765_000_000_000, NaN, Infinity, -Infinity];
    for (const ts of edges) expect(tsText(ts)).toBe(JSON.stringify(ts));
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.integer({ min: 1_700_000_000_000, max: 1_700_000_005_000 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })), { maxLength: 20 }), (tss) => {
        for (const ts of tss) expect(tsText(ts)).toBe(JSON.stringify(ts));
      }),
      { numRuns: 2000 },
    );
  });
});
