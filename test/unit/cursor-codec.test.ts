import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../src/catalog/cursor.js';

const key = randomBytes(32);
const offset = fc.oneof(fc.nat(10_000), fc.constant(Number.MAX_SAFE_INTEGER));
const snapshot = fc.string({ unit: 'grapheme', maxLength: 40 });
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

describe('hub cursors', () => {
  it('round-trip offset and snapshot, with the default key and with a given one', () => {
    fc.assert(
      fc.property(offset, snapshot, (o, s) => {
        expect(decodeCursor(encodeCursor({ offset: o, snapshot: s }))).toEqual({ offset: o, snapshot: s });
        const c = encodeCursor({ offset: o, snapshot: s }, key);
        expect(c).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(decodeCursor(c, key)).toEqual({ offset: o, snapshot: s });
      }),
    );
    expect(decodeCursor(encodeCursor({ offset: 3, snapshot: 'a:b:c' }, 'k'), 'k')).toEqual({ offset: 3, snapshot: 'a:b:c' });
  });

  it('is opaque: the offset is not readable as text', () => {
    const c = encodeCursor({ offset: 12345, snapshot: 'snap' }, key);
    expect(c).not.toContain('12345');
    expect(c).not.toContain('snap');
  });

  it('rejects any single-character change', () => {
    fc.assert(
      fc.property(offset, snapshot, fc.nat(), fc.constantFrom(...B64URL), (o, s, pos, ch) => {
        const c = encodeCursor({ offset: o, snapshot: s }, key);
        const i = pos % c.length;
        fc.pre(c[i] !== ch);
        expect(decodeCursor(c.slice(0, i) + ch + c.slice(i + 1), key)).toBeNull();
      }),
      { numRuns: 1000 },
    );
  });

  it('rejects a forged cursor: the same payload under another key, truncation, extension', () => {
    const c = encodeCursor({ offset: 10, snapshot: 's' }, key);
    expect(decodeCursor(c, randomBytes(32))).toBeNull();
    expect(decodeCursor(c)).toBeNull(); // the per-process key is not `key`
    expect(decodeCursor(c.slice(0, -1), key)).toBeNull();
    expect(decodeCursor(`${c}A`, key)).toBeNull();
    expect(decodeCursor(Buffer.from('999:s').toString('base64url'), key)).toBeNull();
  });

  it('rejects garbage, the empty string and non-strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 600 }), (s) => {
        expect(decodeCursor(s, key)).toBeNull();
      }),
    );
    for (const bad of ['', '=', 'AAAA', '!!!!', 'a'.repeat(10_000), null, undefined, 42, {}, ['x']]) {
      expect(decodeCursor(bad, key)).toBeNull();
    }
  });

  it('carries the longest payload there is (the largest offset, a 256-byte snapshot), and no longer one', () => {
    const longest = { offset: Number.MAX_SAFE_INTEGER, snapshot: 's'.repeat(256) };
    const c = encodeCursor(longest);
    expect(decodeCursor(c)).toEqual(longest);
    expect(() => encodeCursor({ offset: Number.MAX_SAFE_INTEGER, snapshot: 's'.repeat(257) })).toThrow(RangeError);
    expect(decodeCursor(`${c}A`)).toBeNull(); // one character past the longest is refused unread
  });

  it('refuses to encode an offset that is not a non-negative safe integer', () => {
    for (const o of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => encodeCursor({ offset: o, snapshot: 's' }, key)).toThrow(RangeError);
    }
    expect(() => encodeCursor({ offset: 0, snapshot: 'x'.repeat(300) }, key)).toThrow(RangeError);
  });
});
