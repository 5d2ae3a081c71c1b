/** Running the real built `switchyard` CLI as a child process, as an operator would. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
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

export interface CliCase {
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * Several `switchyard` runs in ONE process (test/fixtures/cli-batch.mjs): each case with its own
 * argv, cwd and environment (added to this process's, warn-level logs, as runCli), its own
 * stdout, stderr and exit code; the modules load once, not once per case (~0.5 s of CPU each).
 * For the many cases of one rule; keep a runCli of the real process for each behaviour too.
 * `wrap`: a command that execs the batch's process (e.g. `setpriv …`), as runCli's.
 */
export function runCliBatch(cases: CliCase[], opts: { wrap?: string[] } = {}): Promise<CliRun[]> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' };
    const list = cases.map((c) => ({ args: c.args, cwd: c.cwd ?? ROOT, env: c.env ?? {} }));
    const [file, ...rest] = [...(opts.wrap ?? []), process.execPath, BATCH, BIN, JSON.stringify(list)];
    const p = spawn(file!, rest, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    let outside = '';
    let results = '';
    p.stdout!.on('data', (d) => (outside += d));
    p.stderr!.on('data', (d) => (outside += d));
    p.stdio[3]!.on('data', (d) => (results += d));
    p.on('close', (code) => {
      const runs = results ? (JSON.parse(results) as (CliRun & { error?: string })[]) : [];
      const failed = runs.find((r) => r.error);
      if (code !== 0 || outside || failed || runs.length !== cases.length)
        reject(new Error(`cli-batch: exit ${code}, ${runs.length}/${cases.length} cases${failed ? `, ${failed.error}` : ''}\n${outside}`));
      else resolve(runs);
    });
  });
}

const BATCH = join(ROOT, 'test/fixtures/cli-batch.mjs');
