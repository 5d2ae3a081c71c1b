import { describe, expect, it } from 'vitest';
import { clippedValue, MAX_VERSION_TEXT, shownVersion } from '../../src/protocol/shown-value.js';

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
});
