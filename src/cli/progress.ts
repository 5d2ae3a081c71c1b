/**
 * Progress of a long CLI operation on stderr, only when stderr is a terminal (never in pipes,
 * logs or tests): one line rewritten in place, cleared at the end.
 */
export class Progress {
  private done = 0;
  private readonly tty: boolean;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = stream.isTTY === true && total > 0;
    this.draw('');
  }

  tick(detail = ''): void {
    this.done++;
    this.draw(detail);
  }

  end(): void {
    if (this.tty) this.stream.write('\r\x1b[2K');
  }

  private draw(detail: string): void {
    if (!this.tty) return;
    const width = this.stream.columns || 80;
    const line = `${this.label} ${this.done}/${this.total}${detail ? ` ${detail}` : ''}`;
    this.stream.write(`\r\x1b[2K${line.slice(0, width - 1)}`);
  }
}
