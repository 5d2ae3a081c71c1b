import { BodyEnds } from './body-ends.js';

/**
 * Newline-delimited framing for stdio (digest §6.1), bounded: a line longer than `maxBytes` is
 * never buffered whole; it is skipped up to its newline and reported once, with its two ends
 * (what they say of it: the id of a request its client waits on, the question an answer answers).
 */
export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  /** The ends of the line being skipped; undefined while none is. */
  private skipping: BodyEnds | undefined;

  constructor(
    /** Changed while reading (`connect` learning the hub's limit), it holds from the next line part read. */
    public maxBytes: number,
    private readonly onLine: (line: Buffer) => void,
    private readonly onTooLong: (ends: BodyEnds) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start <= chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl < 0 ? chunk.length : nl;
      if (this.skipping) {
        if (end > start) this.skipping.add(chunk.subarray(start, end));
      } else if (end > start) {
        if (this.size + (end - start) > this.maxBytes) {
          const ends = (this.skipping = new BodyEnds());
          for (const part of this.parts) ends.add(part);
          ends.add(chunk.subarray(start, end));
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
    return this.skipping !== undefined || this.size > 0;
  }

  /** The input ended: a last line without its newline still counts. */
  end(): void {
    if (this.skipping !== undefined || this.size > 0) this.endLine();
  }

  private endLine(): void {
    const skipped = this.skipping;
    if (skipped !== undefined) {
      this.skipping = undefined;
      this.onTooLong(skipped);
      return;
    }
    const line = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.onLine(line);
  }
}
