import { describe, expect, it } from 'vitest';
import { copyOf, setField } from '../../src/protocol/copy.js';
import { toModernResult } from '../../src/downstream/results.js';

const info = { name: 'switchyard', version: '1.0.0' };

describe('copies of JSON objects from the wire', () => {
  it('copyOf: the same own fields in a new object, the source untouched', () => {
    const src = { a: 1, b: { c: [2] } };
    const copy = copyOf(src);
    expect(copy).toEqual(src);
    expect(copy).not.toBe(src);
    expect(copy.b).toBe(src.b); // shallow
    (copy as Record<string, unknown>).d = 3;
    expect(src).not.toHaveProperty('d');
  });

  it('copyOf and setField keep a "__proto__" key as a field, never as the prototype', () => {
    const src = JSON.parse('{"a":1,"__proto__":{"polluted":true}}') as Record<string, unknown>;
    const copy = copyOf(src);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, '__proto__')).toBe(true);
    expect(JSON.stringify(copy)).toBe(JSON.stringify(src));
    expect((copy as Record<string, unknown>).polluted).toBeUndefined();
    const out: Record<string, unknown> = {};
    setField(out, '__proto__', { polluted: true });
    setField(out, 'b', 2);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"polluted":true},"b":2}');
  });

  it('toModernResult passes an upstream\'s "__proto__" fields on, in the result and in its _meta', () => {
    const r = JSON.parse('{"content":[],"__proto__":{"x":1},"_meta":{"__proto__":{"y":2},"vendor/k":3}}') as Record<string, unknown>;
    const m = toModernResult('tools/call', r, info);
    expect(JSON.parse(JSON.stringify(m))).toEqual(
      JSON.parse('{"content":[],"__proto__":{"x":1},"resultType":"complete","_meta":{"__proto__":{"y":2},"vendor/k":3,"io.modelcontextprotocol/serverInfo":{"name":"switchyard","version":"1.0.0"}}}'),
    );
    expect(Object.getPrototypeOf(m)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(m._meta)).toBe(Object.prototype);
    expect(r).not.toHaveProperty('resultType'); // the upstream's object is not changed
  });
});
