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

  it('decodes again what decoding revealed, and keys a very long URI as it is (bounded work)', () => {
    expect(uriKey('x://dir/%%373ecret')).toBe(uriKey('x://dir/secret'));
    expect(uriKey('x://a/%%341')).toBe('x://a/A');
    expect(uriKey('x://a/%2573')).toBe('x://a/%2573'); // an escaped "%" stays: that is another URI
    const long = `x://a/${'%2f'.repeat(1_000_000)}`;
    const t0 = performance.now();
    expect(uriKey(long)).toBe(long);
    expect(performance.now() - t0).toBeLessThan(1_000); // keyed, it took ~0.6 s here (and its key is not itself)
  });

  it('decodes exactly the unreserved characters, at every edge of their ranges, in either hex case', () => {
    const decoded: [string, string][] = [['30', '0'], ['39', '9'], ['41', 'A'], ['5A', 'Z'], ['61', 'a'], ['7a', 'z'], ['2D', '-'], ['2e', '.'], ['5F', '_'], ['7E', '~'], ['4f', 'O'], ['4A', 'J']];
    for (const [hex, ch] of decoded) expect(uriKey(`x://h/a%${hex}b`), hex).toBe(uriKey(`x://h/a${ch}b`));
    // Just outside: reserved or other characters stay escaped, their hex in upper case.
    for (const hex of ['2F', '2c', '40', '5b', '60', '7b', '2f', 'af']) expect(uriKey(`x://h/a%${hex}b`), hex).toBe(`x://h/a%${hex.toUpperCase()}b`);
    expect(uriKey('x://h/a%0ab')).toBe('x://h/a%0Ab'); // a zero digit is hex too
    // Not escapes at all: left as they are.
    for (const s of ['%4g', '%g4', '%4', '%']) expect(uriKey(`x://h/a${s}`), s).toBe(`x://h/a${s}`);
  });

  it('keys a URI of up to 8,192 characters, and takes a longer one as it is', () => {
    const at = (n: number) => `x://h/%73${'a'.repeat(n - 'x://h/%73'.length)}`;
    expect(uriKey(at(8192))).toBe(`x://h/s${'a'.repeat(8192 - 'x://h/%73'.length)}`);
    expect(uriKey(at(8193))).toBe(at(8193));
  });

  it('decodes what decoding revealed for eight passes, and no more (bounded work)', () => {
    // Each wrap makes the escape need one more pass: %41 → %%341 → %%%3341 → …
    const wrap = (s: string): string => s.replace(/^(%+)(.)/, (_m, pct: string, d: string) => `${pct}%3${d}`);
    let e = '%41';
    for (let passes = 1; passes < 8; passes++) e = wrap(e);
    expect(uriKey(`x://a/${e}`)).toBe('x://a/A'); // eight passes
    expect(uriKey(`x://a/${wrap(e)}`)).not.toBe('x://a/A'); // nine
  });

  it('leaves a string that is no URI as it is, escapes aside', () => {
    expect(uriKey('not a uri')).toBe('not a uri');
    expect(uriKey('notes%2Dtxt')).toBe('notes-txt');
  });

  it('is a fixed point: the key of a key is itself', () => {
    fc.assert(
      fc.property(fc.oneof(fc.webUrl(), fc.string(), fc.constantFrom('x://a/%2e%2E/b', 'urn:x:%41', 'mut://doc/./.././a', 'x://a/%%341', 'x://a/%%%34341')), (u) => uriKey(uriKey(u)) === uriKey(u)),
      { numRuns: 500 },
    );
  });
});
