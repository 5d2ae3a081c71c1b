/** A request id's stored text (audit.request_id): one text per id, the number 1 and the string "1" apart. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { requestIdOf, requestIdQuery, requestIdText } from '../../src/ledger/request-id.js';
import { referenceRequestIdText } from '../helpers/request-id-reference.js';

describe('request ids in the ledger', () => {
  it('stores a number as its digits, a string as itself unless it would read as a number, starts with a quote or is empty', () => {
    expect([1, 1.5, '1', '-2e3', 'abc', '"q', '', undefined].map(requestIdText)).toEqual(['1', '1.5', '"1"', '"-2e3"', 'abc', '"\\"q"', '""', '']);
    // A lone surrogate is kept, escaped: stored bare it became U+FFFD, another id's text.
    expect(requestIdText('a\ud800')).toBe('"a\\ud800"');
    for (const id of [1, 1.5, '1', '-2e3', 'abc', '"q', 'x"', '', 'a\ud800', '\udc00b']) {
      expect(requestIdOf(requestIdText(id)), String(id)).toEqual({ type: typeof id, text: String(id), cut: false });
    }
  });

  it('keeps an id longer than a row holds cut, in a form no whole id has: a string still, its start, marked cut', () => {
    for (const id of ['x'.repeat(5000), '7'.repeat(4095), '"'.repeat(3000), 'a\u0001'.repeat(2500), '🚀'.repeat(3000)]) {
      const stored = requestIdText(id);
      expect(stored.length, id.slice(0, 4)).toBeLessThanOrEqual(4096);
      expect(stored.length, id.slice(0, 4)).toBeGreaterThan(4090);
      const of = requestIdOf(stored);
      expect(of.type).toBe('string');
      expect(of.cut).toBe(true);
      expect(id.startsWith(of.text) && of.text.length < id.length).toBe(true);
      expect(of.text.isWellFormed(), 'cut between whole characters').toBe(true);
    }
    // Rows of a hub before: the JSON form cut by the column (4096), with no closing quote, half an escape perhaps.
    for (const id of ['5'.repeat(5000), `"${'q'.repeat(4100)}`, `"${'\u0001'.repeat(700)}`]) {
      const old = JSON.stringify(id).slice(0, 4096);
      const of = requestIdOf(old);
      expect(of.cut && of.type === 'string' && id.startsWith(of.text) && of.text.length > 600, id.slice(0, 4)).toBe(true);
    }
    // A whole id as long as a row holds is kept whole; so is a string that merely ends the way a cut one does.
    expect(requestIdOf(requestIdText('y'.repeat(4096)))).toEqual({ type: 'string', text: 'y'.repeat(4096), cut: false });
    expect(requestIdOf(requestIdText('"a"…'))).toEqual({ type: 'string', text: '"a"…', cut: false });
    expect(requestIdOf(requestIdText('a"…'))).toEqual({ type: 'string', text: 'a"…', cut: false });
  });

  it('reads --request-id as the JSON form of the id when it is one, else as a string', () => {
    expect(requestIdQuery('1')).toMatchObject({ stored: '1', other: { stored: '"1"', option: `'"1"'` } });
    expect(requestIdQuery('-1')).toMatchObject({ stored: '-1', what: 'the number -1' });
    expect(requestIdQuery('1.0')).toMatchObject({ stored: '1', what: 'the number 1' });
    expect(requestIdQuery('"1"')).toMatchObject({ stored: '"1"', other: { stored: '1', option: '1' } });
    expect(requestIdQuery('"abc"')).toEqual({ stored: 'abc', what: 'the string "abc"' });
    expect(requestIdQuery('abc')).toEqual({ stored: 'abc', what: 'the string "abc"' });
    expect(requestIdQuery('"q')).toEqual({ stored: '"\\"q"', what: 'the string "\\"q"' });
    // The empty string is an id: not the rows with none.
    expect(requestIdQuery('')).toEqual({ stored: '""', what: 'the string ""' });
    expect(requestIdQuery('""')).toEqual({ stored: '""', what: 'the string ""' });
    // An id longer than a row keeps: stored as the row has it, and how much of it is compared.
    const long = 'z'.repeat(5000);
    expect(requestIdQuery(long)).toEqual({ stored: requestIdText(long), what: 'the string "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"… (5000 characters)', cut: 4093 });
    expect(requestIdQuery(`"${'8'.repeat(5000)}"`)).toMatchObject({ stored: requestIdText('8'.repeat(5000)), cut: 4093 });
    // A number no JSON number keeps exactly: read as a double it was another id.
    expect(() => requestIdQuery('9007199254740993')).toThrow(/request id 9007199254740993 is no number a request id can be .*in quotes \('"9007199254740993"'\) it is the string/);
    expect(() => requestIdQuery('1e400')).toThrow(RangeError);
    expect(requestIdQuery('9007199254740991')).toMatchObject({ stored: '9007199254740991' });
  });
});

describe('requestIdText against the form it had with a regular expression', () => {
  // The scan that replaced JSON_NUMBER.test must read every text as the expression did.
  const numberish = fc.array(fc.constantFrom('0', '1', '7', '9', '-', '+', '.', 'e', 'E', '"', 'x', ' ', '\n', '٣'), { maxLength: 12 }).map((a) => a.join(''));
  const id = fc.oneof(
    { arbitrary: numberish, weight: 8 },
    { arbitrary: fc.string(), weight: 4 },
    { arbitrary: fc.string({ unit: 'binary' }), weight: 2 }, // lone surrogates among them
    { arbitrary: fc.noShrink(fc.string({ unit: 'grapheme', minLength: 4090, maxLength: 4100 })), weight: 1 },
    { arbitrary: fc.integer(), weight: 1 },
    { arbitrary: fc.double(), weight: 1 },
    { arbitrary: fc.constantFrom(undefined, null, true, '', '-', '0', '-0', '00', '1.', '.5', '1e', '1e+', '1E-7', '"', 'w0000n0000000001'), weight: 2 },
  );

  it('stores every id as the reference does', () => {
    fc.assert(
      fc.property(id, (v) => {
        expect(requestIdText(v)).toBe(referenceRequestIdText(v));
      }),
      { numRuns: 10_000 },
    );
  });
});
