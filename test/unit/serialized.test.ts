import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { listResponse, resultAnswer, resultJson, Serialized, sharedArrayJson, wireText } from '../../src/protocol/serialized.js';
import { toLegacyResult, toModernResult } from '../../src/downstream/results.js';

describe('pre-serialised list answers', () => {
  it('are byte-for-byte what JSON.stringify of the same message gives', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string(), fc.integer()),
        fc.array(fc.jsonValue(), { maxLength: 20 }),
        // (Integer-like keys would be ordered first by JS objects; result keys are names.)
        fc.dictionary(fc.string().filter((k) => k !== 'tools' && !/^\d+$/.test(k)), fc.jsonValue(), { maxKeys: 5 }),
        (id, items, rest) => {
          const expected = JSON.stringify({ jsonrpc: '2.0', id, result: { tools: items, ...rest } });
          expect(JSON.parse(wireText(listResponse(id, 'tools', items, rest)))).toEqual(JSON.parse(expected));
          expect(wireText(listResponse(id, 'tools', items, rest))).toBe(expected);
        },
      ),
    );
  });

  it('serialise a shared page once', () => {
    const items = [{ name: 'a' }];
    const first = sharedArrayJson(items);
    items.push({ name: 'b' }); // pages are never mutated; this proves the cache is used
    expect(sharedArrayJson(items)).toBe(first);
    expect(sharedArrayJson([...items])).toBe('[{"name":"a"},{"name":"b"}]');
  });

  it('leave other messages to JSON.stringify', () => {
    expect(wireText({ jsonrpc: '2.0', id: 1, result: {} })).toBe('{"jsonrpc":"2.0","id":1,"result":{}}');
  });
});

describe('a forwarded result, serialised once where the ledger measures it', () => {
  const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
  const hub = { name: 'switchyard', version: '0.1.0' };
  // The hub's own is frozen, and the JSON of a _meta holding it alone is kept; another frozen one takes its place.
  const frozenHubs = [Object.freeze({ name: 'switchyard', version: '0.1.0' }), Object.freeze({ name: 'other "hub"', version: '2', title: 'a\\b' })];
  // The fields the era forms change, and others, in any order; `undefined` values as a plugin's result may hold.
  const value = fc.oneof(fc.jsonValue(), fc.constant(undefined));
  const meta = fc.oneof(
    fc.constant(undefined),
    fc.constant(null),
    // (No other primitive: toLegacyResult looks into _meta with `in`, which throws on one.)
    fc.array(fc.jsonValue(), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom(SERVER_INFO, 'a', 'progressToken', '__proto__'), value, { maxKeys: 3 }),
  );
  const field = fc.oneof(
    fc.tuple(fc.constantFrom('resultType'), fc.oneof(fc.constantFrom('complete', 'input_required', undefined), fc.jsonValue())),
    fc.tuple(fc.constant('_meta'), meta),
    fc.tuple(fc.constantFrom('ttlMs', 'cacheScope', 'structuredContent', 'content', 'isError', 'contents', 'messages', 'completion', '__proto__', 'x'), value),
  );
  const result = fc.uniqueArray(field, { maxLength: 7, selector: ([k]) => k }).map((entries) => {
    const r: Record<string, unknown> = {};
    // As JSON.parse makes it: a "__proto__" key is a field.
    for (const [k, v] of entries) Object.defineProperty(r, k, { value: v, enumerable: true, writable: true, configurable: true });
    return r;
  });
  const method = fc.constantFrom('tools/call', 'prompts/get', 'resources/read', 'completion/complete');

  it("is answered byte-for-byte as JSON.stringify of the client's era's form would be", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.integer()), result, method, fc.nat(1), (id, r, m, h) => {
        for (const out of [toModernResult(m, r, hub), toModernResult(m, r, frozenHubs[h]!), toLegacyResult(m, r)]) {
          expect(resultJson(r)).toBe(JSON.stringify(r));
          expect(wireText(resultAnswer(id, r, out))).toBe(JSON.stringify({ jsonrpc: '2.0', id, result: out }));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('spliced, not stringified again, in the usual shapes of either era (legacy and modern upstreams)', () => {
    const legacyUp = { content: [{ type: 'text', text: 'x'.repeat(100) }], structuredContent: { n: 1 } };
    const modernUp = { ...legacyUp, resultType: 'complete', _meta: { [SERVER_INFO]: { name: 'up', version: '1' } } };
    for (const r of [legacyUp, modernUp]) {
      for (const out of [toModernResult('tools/call', r, hub), ...frozenHubs.map((h) => toModernResult('tools/call', r, h)), toLegacyResult('tools/call', r)]) {
        resultJson(r);
        const answer = resultAnswer(7, r, out);
        expect(answer).toBeInstanceOf(Serialized);
        expect(wireText(answer)).toBe(JSON.stringify({ jsonrpc: '2.0', id: 7, result: out }));
      }
    }
    // A result never measured (no ledger) is the object, stringified by the writer as before;
    // so is one answered a second time (its text is not kept past its answer).
    const unmeasured = { content: [] };
    expect(resultAnswer(1, unmeasured, toLegacyResult('tools/call', unmeasured))).not.toBeInstanceOf(Serialized);
    expect(resultAnswer(7, modernUp, toLegacyResult('tools/call', modernUp))).not.toBeInstanceOf(Serialized);
  });

  it('leaves what cannot be JSON unmeasured, for the writer to fail on as before', () => {
    expect(resultJson({ n: 10n })).toBeUndefined();
    const r = { n: 10n };
    expect(resultAnswer(1, r, toLegacyResult('tools/call', r))).not.toBeInstanceOf(Serialized);
  });
});
