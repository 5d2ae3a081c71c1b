/**
 * The values of every line of one header field, from node:http's `rawHeaders` (which keeps
 * repeats that `headers` folds or drops); undefined when the request has no `rawHeaders` (the
 * edge's fast path, which refuses repeats itself). `name`: lower case.
 */
export function fieldLines(rawHeaders: readonly string[] | undefined, name: string): string[] | undefined {
  if (rawHeaders === undefined) return undefined;
  const lines: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const n = rawHeaders[i]!;
    if (n.length === name.length && n.toLowerCase() === name) lines.push(rawHeaders[i + 1]!);
  }
  return lines;
}
