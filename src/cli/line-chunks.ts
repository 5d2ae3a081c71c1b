/** Bytes a chunk holds: the size of the writes export made as text. */
const CHUNK_BYTES = 1 << 16;

/**
 * Lines gathered as UTF-8 into chunks of up to 64 KiB, each handed to `write` as it fills. Text
 * gathered by `+=` and encoded a chunk at a time cost more than building the lines did: one line
 * past Latin-1 (an error message with a '—') made the whole chunk two bytes a character, which
 * V8 then copied flat and encoded slowly. Each line is encoded on its own, and a chunk only ever
 * holds whole lines (whoever reads the writes as text never meets half a character).
 */
export class LineChunks {
  private chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  private used = 0;

  /** `write` may return a promise: the output takes no more until it settles. */
  constructor(private readonly write: (bytes: Buffer | string) => void | Promise<void>) {}

  /** Adds `line` and a newline; a promise, to be waited for, when a full chunk went out first. */
  add(line: string): void | Promise<void> {
    // At most 3 bytes a UTF-16 unit (a surrogate pair is 4 bytes for 2 units).
    if (this.used + 3 * line.length + 1 <= this.chunk.length) return this.put(line);
    return this.addAfterFlush(line);
  }

  /** Writes what is held (nothing: no write). */
  flush(): void | Promise<void> {
    if (!this.used) return;
    const full = this.chunk.subarray(0, this.used);
    // A new chunk, not this one refilled: a write may still hold it (a stream's queue).
    this.chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    this.used = 0;
    return this.write(full);
  }

  private put(line: string): void {
    this.used += this.chunk.write(line, this.used);
    this.chunk[this.used++] = 0x0a;
  }

  private async addAfterFlush(line: string): Promise<void> {
    await this.flush();
    // A line no chunk holds (a row's stored bodies, up to 1 MiB each) goes out as text on its own.
    if (3 * line.length + 1 > this.chunk.length) return this.write(line + '\n');
    this.put(line);
  }
}
