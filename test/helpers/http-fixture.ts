import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './hub-process.js';

export interface HttpFixture {
  url: string;
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Run a fixture server with `--http 0` (it binds 127.0.0.1 on a free port and prints
 * `LISTENING <port>` on stdout); resolves with its /mcp URL.
 */
export function startHttpFixture(file: string, env: Record<string, string> = {}): Promise<HttpFixture> {
  const proc = spawn(process.execPath, [join(ROOT, file), '--http', '0'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const stop = () =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`${file} did not print LISTENING:\n${stderr}`));
    }, 15_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      const port = Number(m[1]);
      resolve({ url: `http://127.0.0.1:${port}/mcp`, port, proc, stop });
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited with ${code}:\n${stderr}`));
    });
  });
}
