/** A request id's stored text (audit.request_id): one text per id, the number 1 and the string "1" apart. */
import { describe, expect, it } from 'vitest';
import { requestIdOf, requestIdQuery, requestIdText } from '../../src/ledger/request-id.js';

describe('request ids in the ledger', () => {
  it('stores a number as its digits, a string as itself unless it would read as a number or starts with a quote', () => {
    expect([1, 1.5, '1', '-2e3', 'abc', '"q', ''].map(requestIdText)).toEqual(['1', '1.5', '"1"', '"-2e3"', 'abc', '"\\"q"', '']);
    for (const id of [1, 1.5, '1', '-2e3', 'abc', '"q', 'x"']) {
      expect(requestIdOf(requestIdText(id)), String(id)).toEqual({ type: typeof id, text: String(id) });
    }
  });

  it('reads --request-id as the JSON form of the id when it is one, else as a string', () => {
    expect(requestIdQuery('1')).toMatchObject({ stored: '1', other: { stored: '"1"', option: `'"1"'` } });
    expect(requestIdQuery('1.0')).toMatchObject({ stored: '1', what: 'the number 1' });
    expect(requestIdQuery('"1"')).toMatchObject({ stored: '"1"', other: { stored: '1', option: '1' } });
    expect(requestIdQuery('"abc"')).toEqual({ stored: 'abc', what: 'the string "abc"' });
    expect(requestIdQuery('abc')).toEqual({ stored: 'abc', what: 'the string "abc"' });
    expect(requestIdQuery('"q')).toEqual({ stored: '"\\"q"', what: 'the string "\\"q"' });
  });
});
