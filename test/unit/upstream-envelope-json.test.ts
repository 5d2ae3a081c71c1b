import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HUB_CLIENT_INFO, modernMeta, modernParamsJson, withMeta, type EnvelopeInput } from '../../src/upstream/envelope.js';
import { META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_IDEMPOTENCY_KEY, META_LOG_LEVEL, META_PROTOCOL_VERSION } from '../../src/protocol/meta.js';
import type { ClientCapabilities, Implementation, LoggingLevel } from '../../src/protocol/types.js';

/** An object as JSON.parse makes it from these members (a "__proto__" key is a field; a repeated key keeps its first place). */
function parsed(entries: [string, unknown][]): Record<string, unknown> {
  return JSON.parse(`{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`) as Record<string, unknown>;
}

const key = fc.oneof(
  fc.constantFrom('name', 'arguments', 'text', 'traceparent', '__proto__', 'toJSON', '0', '12', 'a"b', 'é', '\ud800'),
  fc.constantFrom(META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_IDEMPOTENCY_KEY, 'progressToken'),
  fc.string({ maxLength: 6 }),
);
const members = fc.array(fc.tuple(key, fc.jsonValue({ maxDepth: 2 })), { maxLength: 5 });

describe("a forwarded modern request's params with the hub's _meta, written as JSON by hand (modernParamsJson)", () => {
  it('is JSON.stringify of withMeta(params, modernMeta(e)) wherever it gives a text', () => {
    let made = 0;
    fc.assert(
      fc.property(
        members,
        fc.boolean(),
        fc.oneof(fc.constant(undefined), members.map(parsed), fc.jsonValue({ maxDepth: 1 })),
        fc.oneof(fc.constant(undefined), fc.constant({ roots: { listChanged: true }, sampling: {} }), members.map(parsed)),
        fc.oneof(fc.constant(HUB_CLIENT_INFO), fc.constant({ name: 'x', version: '1' }), fc.constant(Object.freeze({ name: 'y"', version: '2', icons: [] }))),
        fc.oneof(fc.constant(undefined), fc.constantFrom('debug', 'info', 'a"b')),
        fc.oneof(fc.constant(undefined), fc.string({ maxLength: 5 }), fc.integer()),
        (params, metaUndefined, meta, caps, clientInfo, logLevel, progressToken) => {
          const p = parsed(params);
          // As forwardedParams leaves it: the client's _meta undefined rather than deleted.
          if (metaUndefined) p._meta = undefined;
          const e: EnvelopeInput = {
            paramsMeta: p._meta,
            meta: meta as Record<string, unknown> | undefined,
            progressToken: progressToken as string | undefined,
            clientCapabilities: caps as ClientCapabilities | undefined,
            logLevel: logLevel as LoggingLevel | undefined,
            clientInfo: clientInfo as Implementation,
          };
          const got = modernParamsJson(p, e);
          const want = JSON.stringify(withMeta(p, modernMeta(e)));
          if (got !== undefined) {
            made++;
            expect(got).toBe(want);
          }
        },
      ),
      { numRuns: 3000 },
    );
    // The usual shapes take the hand-made text: the test says something about it.
    expect(made).toBeGreaterThan(1000);
  });

  it('leaves to withMeta what it cannot write alike', () => {
    const e: EnvelopeInput = { clientInfo: HUB_CLIENT_INFO };
    expect(modernParamsJson({ name: 't', _meta: { a: 1 } }, { ...e, paramsMeta: { a: 1 } })).toBeUndefined();
    expect(modernParamsJson({ name: 't' }, { ...e, meta: { '7': 1, a: 2 } })).toBeUndefined();
    expect(modernParamsJson({ name: 't' }, { ...e, meta: { d: new Date(0) } })).toBeUndefined();
    expect(modernParamsJson(Object.create({ inherited: 1 }) as Record<string, unknown>, e)).toBeUndefined();
    const info = JSON.stringify(HUB_CLIENT_INFO);
    expect(modernParamsJson({ name: 't' }, { ...e, meta: { traceparent: '00-ab' }, progressToken: 'p1' })).toBe(
      `{"name":"t","_meta":{"traceparent":"00-ab","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":${info},"progressToken":"p1"}}`,
    );
    expect(modernParamsJson({}, e)).toBe(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":${info}}}`);
  });
});
