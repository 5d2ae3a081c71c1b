/** The lines of a hand-over to the ingest thread (see Ledger.ingest), as the thread is sent them. */

const CHUNK_CHARS = 32 * 1024;

/**
 * Lines joined by newlines into strings of about CHUNK_CHARS at most (a chunk runs past it by
 * its last line only). V8 puts a string over 128 KB in its large-object space, on pages of its own,
 * fresh from the OS: joining a busy hub's 25 ms of lines (200 KB and more) into one string
 * cost 1.5–2 µs per line against 0.1 µs in chunks of 32 KB (see docs/BENCHMARKS.md).
 */
export function joinChunks(lines: readonly string[], max = CHUNK_CHARS): string[] {
  const out: string[] = [];
  let from = 0;
  let size = 0;
  for (let i = 0; i < lines.length; i++) {
    size += lines[i]!.length + 1;
    if (size < max) continue;
    out.push(lines.slice(from, i + 1).join('\n'));
    from = i + 1;
    size = 0;
  }
  if (from < lines.length) out.push(lines.slice(from).join('\n'));
  return out;
}

/**
 * The lines of chunks joinChunks made, but the empty ones (a begin the hub dropped because its
 * finish follows in the same hand-over).
 */
export function splitChunks(chunks: readonly string[]): string[] {
  const out: string[] = [];
  for (const chunk of chunks) for (const line of chunk.split('\n')) if (line !== '') out.push(line);
  return out;
}

/** Lines that are not '' (a begin whose finish came before the hand-over). */
export function liveLines(lines: readonly string[]): number {
  let n = 0;
  for (const l of lines) if (l !== '') n++;
  return n;
}
