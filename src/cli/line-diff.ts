/**
 * A line diff for `switchyard tools diff`: the longest common subsequence of two short texts
 * (tool definitions, pretty-printed), shown as unchanged / removed / added lines with a few
 * lines of context around each change.
 */

export type DiffLine = { op: ' ' | '-' | '+'; text: string };

/** Texts this long or longer are compared line by line without the LCS table (too big). */
const MAX_CELLS = 4_000_000;

export function diffLines(a: string[], b: string[]): DiffLine[] {
  if (a.length * b.length > MAX_CELLS) return [...a.map((text) => ({ op: '-' as const, text })), ...b.map((text) => ({ op: '+' as const, text }))];
  // lcs[i][j] = length of the LCS of a[i..] and b[j..]
  const lcs: Uint32Array[] = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] });
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: '-', text: a[i++] });
    else out.push({ op: '+', text: b[j++] });
  }
  while (i < a.length) out.push({ op: '-', text: a[i++] });
  while (j < b.length) out.push({ op: '+', text: b[j++] });
  return out;
}

/** The changed lines with `context` unchanged lines around each; "…" marks what is left out. */
export function formatDiff(lines: DiffLine[], context = 3): string {
  const keep = new Array<boolean>(lines.length).fill(false);
  lines.forEach((l, k) => {
    if (l.op === ' ') return;
    for (let x = Math.max(0, k - context); x <= Math.min(lines.length - 1, k + context); x++) keep[x] = true;
  });
  const out: string[] = [];
  let skipped = false;
  lines.forEach((l, k) => {
    if (!keep[k]) {
      if (!skipped) out.push('  …');
      skipped = true;
      return;
    }
    skipped = false;
    out.push(`${l.op} ${l.text}`);
  });
  return out.join('\n') + '\n';
}
