/** `--request-id="1"`: the quotes are the id's (yargs strips those of a value written after `=`). */
import { describe, expect, it } from 'vitest';
import { keepQuotedValues } from '../../src/cli/quoted-values.js';

describe('keepQuotedValues', () => {
  it('gives a quoted --request-id= value as the next word, yargs then keeping its quotes; nothing else', () => {
    expect(keepQuotedValues(['ledger', 'query', '--request-id="1"'])).toEqual(['ledger', 'query', '--request-id', '"1"']);
    expect(keepQuotedValues(['--requestId="1"'])).toEqual(['--requestId', '"1"']);
    expect(keepQuotedValues(["--request-id='a'"])).toEqual(['--request-id', "'a'"]);
    // A value starting with a dash keeps its `=` (as the next word it would read as an option); so does one with no quote.
    expect(keepQuotedValues(['--request-id=-1', '--request-id=abc', '--tool="x"'])).toEqual(['--request-id=-1', '--request-id=abc', '--tool="x"']);
    // After `--`, a positional word.
    expect(keepQuotedValues(['--', '--request-id="1"'])).toEqual(['--', '--request-id="1"']);
  });
});
