/** Running the real built `switchyard` CLI as a child process, as an operator would. */
import { spawn } from 'node:child_process';
import { BIN, ROOT } from './hub-process.js';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `switchyard …args` with warn-level logs; `env` is added to this process's environment.
 * `wrap`: a command that execs the CLI's (e.g. `setpriv …`).
 */
export function runCli(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; wrap?: string[] } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const [file, ...rest] = [...(opts.wrap ?? []), process.execPath, BIN, ...args];
    const p = spawn(file!, rest, { cwd: opts.cwd ?? ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn', ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
