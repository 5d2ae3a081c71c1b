/**
 * Newline-delimited framing for stdio (digest §6.1), bounded: a line longer than `maxBytes` is
 * never buffered whole; it is skipped up to its newline and reported once.
 */
export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  private skipping = false;

  constructor(
    private readonly maxBytes: number,
    private readonly onLine: (line: Buffer) => void,
    private readonly onTooLong: () => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start <= chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl < 0 ? chunk.length : nl;
      if (!this.skipping && end > start) {
        if (this.size + (end - start) > this.maxBytes) {
          this.skipping = true;
          this.parts = [];
          this.size = 0;
        } else {
          this.parts.push(chunk.subarray(start, end));
          this.size += end - start;
        }
      }
      if (nl < 0) return;
      this.endLine();
      start = nl + 1;
    }
  }

  /** Part of a line is read (or being skipped), its end not yet. */
  get midLine(): boolean {
    return this.skipping || this.size > 0;
  }

  /** The input ended: a last line without its newline still counts. */
  end(): void {
    if (this.skipping || this.size > 0) this.endLine();
  }

  private endLine(): void {
    if (this.skipping) {
      this.skipping = false;
      this.onTooLong();
      return;
    }
    const line = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.onLine(line);
  }
}
