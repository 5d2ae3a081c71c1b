import { describe, expect, it } from 'vitest';
import { clippedValue, MAX_VERSION_TEXT, shownId, shownVersion } from '../../src/protocol/shown-value.js';

describe('clippedValue', () => {
  it('keeps a value that fits, and cuts a longer one to max characters, the cut marked', () => {
    expect(clippedValue('2026-07-28', 10)).toBe('2026-07-28');
    expect(clippedValue('2026-07-28x', 10)).toBe('2026-07-2…');
    expect(clippedValue({ a: 'bcdef' }, 8)).toBe('{"a":"b…');
    expect(shownVersion('v'.repeat(1000))).toHaveLength(MAX_VERSION_TEXT);
  });

  it('never cuts between the halves of a surrogate pair', () => {
    const s = 'a'.repeat(7) + '😀' + 'b'.repeat(5);
    const cut = clippedValue(s, 9);
    expect(cut).toBe(`${'a'.repeat(7)}…`);
    expect(cut.isWellFormed()).toBe(true);
  });

  it('redacts a value it cuts before the cut: no first part of a credential across the cut is left', () => {
    // Cut first, "https://me:hunter2hunt…" kept a password no rule knows without its "@".
    const url = `${'n'.repeat(100)}https://me:hunter2hunter2hunter2@db.example/x`;
    const cut = clippedValue(url, 128);
    expect(cut).not.toContain('hunter');
    expect(cut).toBe(`${'n'.repeat(100)}https://me:[redacted:url-cr…`);
    // A GitHub token whose first 20 characters fit: the shape needs 36 after its prefix.
    const gh = `ghp_${'A1b2C3d4E5'.repeat(4)}`;
    const cut2 = clippedValue(`${'n'.repeat(109)}-${gh} and more text after it`, 128);
    expect(cut2).not.toContain('A1b2');
    expect(cut2).toBe(`${'n'.repeat(109)}-[redacted:github-…`);
    // A value that fits is quoted as sent, redaction is for a cut.
    expect(clippedValue('token=abcdefgh', 128)).toBe('token=abcdefgh');
  });

  it('quotes a request id as a name is cut: a string in quotes, a number as it is', () => {
    expect(shownId('abc')).toBe('"abc"');
    expect(shownId(42)).toBe('42');
    expect(shownId('i'.repeat(5000))).toBe(`"${'i'.repeat(127)}…"`);
  });
});
