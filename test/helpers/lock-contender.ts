/**
 * A lock contender process (test/fixtures/ledger/lock-contender.mjs,
 * test/fixtures/oauth/token-lock-contender.mjs): it says `ready`, then at each `go` line asks for
 * its lock at the instant given and prints what it got. Real processes, so that each holds its
 * own OS locks and can die holding them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface Contender {
  pid: number;
  /** The next line it prints. */
  next(): Promise<string>;
  /** Asks for the lock at `at` (epoch ms, fractional) plus its index × stepUs µs. */
  go(at: number, stepUs: number): void;
  /** Closes its stdin (it lets its lock go by exiting; killed if it does not) and waits for it to end. */
  end(): Promise<void>;
  /** Kills it (SIGKILL) and waits for it to end. */
  kill(): Promise<void>;
}

/** Runs `script` with `args` (node), its stderr the test's. */
export function spawnContender(script: string, args: string[]): Contender {
  const proc: ChildProcess = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const heard: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => (waiting.length ? waiting.shift()!(line) : heard.push(line)));
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  return {
    pid: proc.pid!,
    next: () => (heard.length ? Promise.resolve(heard.shift()!) : new Promise((res) => waiting.push(res))),
    go: (at, stepUs) => proc.stdin!.write(`go ${Math.floor(at)} ${stepUs}\n`),
    end: () => {
      proc.stdin!.end();
      // One stuck in its lock (a failing test) does not read its stdin any more.
      const stuck = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      return exited.finally(() => clearTimeout(stuck));
    },
    kill: () => {
      proc.kill('SIGKILL');
      return exited;
    },
  };
}
