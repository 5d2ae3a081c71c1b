/**
 * Text in fixed-width columns for a terminal (the CLI's tables: ledger rows and stats, servers,
 * tools). A cell is padded by the columns it takes on screen, not by its UTF-16 length: a CJK
 * name takes two columns a character (one in `.length`), an emoji two (two in `.length`, as a
 * surrogate pair), a combining accent none, and the columns after such a cell were shifted.
 */

/** Zero-width: combining marks, zero-width space and joiners, variation selectors. */
const ZERO_WIDTH = /^[\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u20d0-\u20ff\ufe00-\ufe0f\ufe20-\ufe2f]$/u;

/** East Asian Wide and Fullwidth (Unicode's EastAsianWidth W/F) and the emoji blocks, as terminals draw them. */
function wide(cp: number): boolean {
  return (
    (cp >= 0x1100 && cp <= 0x115f) || // Hangul Jamo
    (cp >= 0x2e80 && cp <= 0x303e) || // CJK radicals, Kangxi, CJK symbols and punctuation
    (cp >= 0x3041 && cp <= 0x33ff) || // Hiragana, Katakana, Bopomofo, CJK compatibility
    (cp >= 0x3400 && cp <= 0x4dbf) || // CJK extension A
    (cp >= 0x4e00 && cp <= 0x9fff) || // CJK unified ideographs
    (cp >= 0xa000 && cp <= 0xa4cf) || // Yi
    (cp >= 0xac00 && cp <= 0xd7a3) || // Hangul syllables
    (cp >= 0xf900 && cp <= 0xfaff) || // CJK compatibility ideographs
    (cp >= 0xfe30 && cp <= 0xfe4f) || // CJK compatibility forms
    (cp >= 0xff00 && cp <= 0xff60) || // fullwidth forms
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) || // pictographs, emoticons
    (cp >= 0x1f900 && cp <= 0x1f9ff) ||
    (cp >= 0x20000 && cp <= 0x3fffd) // CJK extensions B and later
  );
}

/** Emoji drawn two columns wide on their own (Unicode's Emoji_Presentation: 🚀 ✅ ⚡ 🫠 and the flags' letters). */
const EMOJI = /^\p{Emoji_Presentation}$/u;
/** A pictograph made an emoji by the variation selector after it (❤️). */
const AS_EMOJI = /^\p{Extended_Pictographic}\ufe0f/u;

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * The columns `s` takes on a terminal. A character as the user sees it (a grapheme: a base and
 * what joins it) takes the columns of its base: a skin tone, the rest of a ZWJ family, a flag's
 * second letter or a combining mark adds none (each counted as an emoji of its own put 2 to 4
 * columns of padding too few after 👍🏽, and emoji outside two blocks, 🚀 or ✅, counted one).
 */
export function displayWidth(s: string): number {
  // Plain ASCII (nearly every cell) is its length.
  if (/^[\x20-\x7e]*$/.test(s)) return s.length;
  let w = 0;
  for (const { segment } of graphemes.segment(s)) {
    const base = String.fromCodePoint(segment.codePointAt(0)!);
    if (ZERO_WIDTH.test(base)) continue;
    w += wide(base.codePointAt(0)!) || EMOJI.test(base) || AS_EMOJI.test(segment) ? 2 : 1;
  }
  return w;
}

/** Rows of cells, each column padded to its widest cell and two spaces apart; the last column is free text. */
export function alignColumns(rows: string[][]): string {
  const widths: number[] = [];
  for (const r of rows) widen(widths, r);
  return rows.map((r) => alignedLine(r, widths)).join('\n') + '\n';
}

/** Widens `widths` to a row's cells (all but the last, free, column): a table written a part at a time measures every row first. */
export function widen(widths: number[], cells: string[]): void {
  for (let i = 0; i < cells.length - 1; i++) widths[i] = Math.max(widths[i] ?? 0, displayWidth(cells[i]!));
}

/** One row of alignColumns' output, without its newline, with the widths of every row. */
export function alignedLine(cells: string[], widths: readonly number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(Math.max(0, (widths[i] ?? 0) - displayWidth(c)))))
    .join('  ')
    .trimEnd();
}
