import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { listResponse, sharedArrayJson, wireText } from '../../src/protocol/serialized.js';

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
