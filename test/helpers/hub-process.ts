import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePortInRange } from './port-range.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const BIN = join(ROOT, 'dist/src/cli/main.js');

export interface HubProcess {
  url: string;
  port: number;
  dir: string;
  configFile: string;
  proc: ChildProcess;
  /** Every stderr line so far (JSON log lines and anything else). */
  logs: string[];
  /** Everything the hub wrote to stdout so far (the daemon should write nothing there). */
  stdout(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Start the real built `switchyard start` with a config written to a fresh temp folder
 * (ledger inside it unless the config says otherwise), on a free port; resolves once it
 * logs that it is listening.
 */
export async function startHub(
  config: Record<string, unknown>,
  /** `wrap`: a command that execs the hub's (e.g. `taskset -c 0`). */
  opts: { dir?: string; env?: NodeJS.ProcessEnv; args?: string[]; nodeArgs?: string[]; port?: number; wrap?: string[] } = {},
): Promise<HubProcess> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'switchyard-'));
  const configFile = join(dir, 'hub.config.json');
  const full = { ledger: { path: join(dir, 'ledger.db') }, ...config };
  writeFileSync(configFile, JSON.stringify(full, null, 2));
  const command = [process.execPath, ...(opts.nodeArgs ?? []), BIN, 'start', '--config', configFile, '--port', String(opts.port ?? 0), ...(opts.args ?? [])];
  const [file, ...args] = [...(opts.wrap ?? []), ...command];
  const proc = spawn(file!, args, {
    cwd: ROOT,
    env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'debug', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  let stdout = '';
  proc.stdout!.on('data', (d) => (stdout += d));
  const url = await new Promise<string>((resolveUrl, reject) => {
    let buf = '';
    // Generous for a loaded machine (several hubs starting at once); a hub that does not start
    // in time is killed, so no test leaves it running.
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`hub did not start in 30 s:\n${logs.join('\n')}`));
    }, 30_000);
    proc.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        logs.push(line);
        if (line.includes('switchyard listening')) {
          clearTimeout(timer);
          resolveUrl(JSON.parse(line).url);
        }
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`hub exited with ${code}:\n${logs.join('\n')}`));
    });
  });
  return {
    url,
    port: Number(new URL(url).port),
    dir,
    configFile,
    proc,
    logs,
    stdout: () => stdout,
    stop: (signal = 'SIGTERM') =>
      new Promise((res) => {
        // Gone already (by its exit or a signal): 'exit' will not come again.
        if (proc.exitCode !== null || proc.signalCode !== null) return res(proc.exitCode);
        proc.once('exit', (code) => {
          if (stdout) logs.push(`STDOUT WAS WRITTEN: ${stdout}`);
          res(code);
        });
        proc.kill(signal);
      }),
  };
}

/** Node for fixture servers: `node <file> ...args`. */
export function nodeServer(file: string, args: string[] = [], env: Record<string, string> = {}): Record<string, unknown> {
  return { command: process.execPath, args: [join(ROOT, file), ...args], env };
}

/**
 * startHub on a port free a moment ago, kept for its restarts: another process (a test beside
 * this one, a connection's own port) can take it between the look and the hub's listen, which
 * failed a CI run with EADDRINUSE. Then a new port is taken. Outside the ephemeral range
 * (TEST_PORTS), so that none takes it while the hub is down between its restarts either (not
 * retried there).
 */
export async function startHubOnFreePort(config: Record<string, unknown>, opts: { dir?: string } = {}): Promise<{ hub: HubProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePortInRange();
    try {
      return { hub: await startHub(config, { ...opts, port }), port };
    } catch (err) {
      if (attempt >= 3 || !/address is in use/.test(String(err))) throw err;
    }
  }
}
