import type { ChildProcess } from 'node:child_process';

type Json = Record<string, any>;

/**
 * A raw newline-delimited JSON-RPC peer on a child's stdin/stdout, for checking exactly what
 * a stdio process writes (every stdout line must be one JSON-RPC message).
 */
export class LineClient {
  readonly received: Json[] = [];
  /** stdout lines that were not a JSON object with jsonrpc "2.0". */
  readonly nonProtocolLines: string[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  private buf = '';
  private waiters: { pred: (m: Json) => boolean; resolve: (m: Json) => void }[] = [];

  constructor(readonly proc: ChildProcess) {
    proc.stdout!.setEncoding('utf8');
    proc.stdout!.on('data', (d: string) => {
      this.buf += d;
      let i;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.onLine(line);
      }
    });
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (d: string) => (this.stderr += d));
    this.exited = new Promise((r) => proc.once('exit', (code) => r(code)));
  }

  private onLine(line: string): void {
    let m: unknown;
    try {
      m = JSON.parse(line);
    } catch {
      this.nonProtocolLines.push(line);
      return;
    }
    if (typeof m !== 'object' || m === null || (m as Json).jsonrpc !== '2.0') {
      this.nonProtocolLines.push(line);
      return;
    }
    this.received.push(m as Json);
    for (const w of [...this.waiters]) {
      if (w.pred(m as Json)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(m as Json);
      }
    }
  }

  send(line: string): void {
    this.proc.stdin!.write(line + '\n');
  }

  /** The first message (already received or future) matching `pred`. */
  next(pred: (m: Json) => boolean, timeoutMs = 15_000): Promise<Json> {
    const found = this.received.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(this.received).slice(-2000)}\nstderr: ${this.stderr.slice(-2000)}`)), timeoutMs);
      this.waiters.push({
        pred,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  request(msg: Json, timeoutMs?: number): Promise<Json> {
    const p = this.next((m) => m.id === msg.id && ('result' in m || 'error' in m), timeoutMs);
    this.send(JSON.stringify(msg));
    return p;
  }

  endInput(): void {
    this.proc.stdin!.end();
  }

  kill(): void {
    if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
  }
}
