import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { uriKey } from '../../src/catalog/uri-key.js';

describe('uriKey: one key for the spellings RFC 3986 calls equivalent', () => {
  it('decodes escaped unreserved characters, resolves dot segments, lower-cases the scheme', () => {
    const key = uriKey('x://dir/secret');
    for (const u of ['x://dir/%73ecret', 'x://dir/%73%65cret', 'x://dir/./secret', 'x://dir/a/../secret', 'X://dir/secret', 'x://dir/%2E/secret'])
      expect(uriKey(u), u).toBe(key);
    expect(uriKey('file:///home/u/../u/notes.md')).toBe(uriKey('file:///home/u/notes.md'));
  });

  it('keeps apart what differs: reserved escapes, other paths, case in the path', () => {
    expect(uriKey('x://dir/a%2Fb')).not.toBe(uriKey('x://dir/a/b'));
    expect(uriKey('x://dir/a%2fb')).toBe(uriKey('x://dir/a%2Fb')); // the escape's hex case is not a difference
    expect(uriKey('x://dir/Secret')).not.toBe(uriKey('x://dir/secret'));
    expect(uriKey('x://dir/secret2')).not.toBe(uriKey('x://dir/secret'));
  });

  it('leaves a string that is no URI as it is, escapes aside', () => {
    expect(uriKey('not a uri')).toBe('not a uri');
    expect(uriKey('notes%2Dtxt')).toBe('notes-txt');
  });

  it('is a fixed point: the key of a key is itself', () => {
    fc.assert(
      fc.property(fc.oneof(fc.webUrl(), fc.string(), fc.constantFrom('x://a/%2e%2E/b', 'urn:x:%41', 'mut://doc/./.././a')), (u) => uriKey(uriKey(u)) === uriKey(u)),
      { numRuns: 500 },
    );
  });
});
