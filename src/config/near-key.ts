/**
 * The known key an unknown one was most likely meant to be: the same but for case, or at most
 * one edit away (two for keys of more than four characters; a swap of two neighbours is one).
 * "timeoutMS", "comand", "prot" are typos of a key the user knows; the full list is then noise.
 */
export function nearKey(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameCase = known.find((k) => k.toLowerCase() === lower);
  if (sameCase) return sameCase;
  const most = key.length > 4 ? 2 : 1;
  let best: string | undefined;
  let bestD = most + 1;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase(), most);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best;
}

/** Optimal string alignment distance, or more than `most` once it cannot be within it. */
function editDistance(a: string, b: string, most: number): number {
  if (Math.abs(a.length - b.length) > most) return most + 1;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}
