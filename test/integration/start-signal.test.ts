/**
 * Signals at every phase of a serving command's life before it serves. A supervisor may stop
 * the hub as soon as it reads that the hub listens (a health check that passed, a test harness,
 * `systemctl stop` right after start), or while it starts (a config tool's SIGHUP, a stop
 * while it waits for the ledger's lock). Until Node has a handler for a signal, its default
 * action kills the process outright: no drain, no "stopped", exit by signal. The handlers are
 * installed first thing (src/cli/serve-signals.ts). The preloads open each window every time:
 * one holds the main thread just after the listening line reaches stderr, the other puts off
 * binding the port while the event loop runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { processStart } from '../../src/process-alive.js';
import { BIN, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

let hub: HubProcess | undefined;
/** Commands spawned by the tests below, killed if a failing test left them running. */
const running = new Set<ChildProcess>();
afterAll(async () => {
  await hub?.stop('SIGKILL');
  for (const p of running) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

describe('switchyard start, stopped as soon as it says it listens', () => {
  it('handles the SIGTERM (drains, logs "stopped", exits 0) instead of dying by it', async () => {
    hub = await startHub({ servers: {} }, { nodeArgs: ['--import', join(ROOT, 'test/fixtures/hold-after-listening.mjs')] });
    const code = await hub.stop('SIGTERM');
    expect({ code, signal: hub.proc.signalCode }, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
    expect(hub.logs.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    hub = undefined;
  });
});

/** A serving command (`start`, `stdio`) spawned by hand: its stderr lines, a wait for one, its end. */
function serve(
  command: 'start' | 'stdio',
  config: Record<string, unknown>,
  opts: { nodeArgs?: string[] } = {},
): { proc: ChildProcess; dir: string; configFile: string; logs: string[]; line(re: RegExp, ms?: number): Promise<string>; ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>; stdout(): string } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-signal-'));
  const configFile = join(dir, 'hub.config.json');
  writeFileSync(configFile, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, ...config }));
  const args = [...(opts.nodeArgs ?? []), BIN, command, '--config', configFile, ...(command === 'start' ? ['--port', '0'] : [])];
  const proc = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'debug' }, stdio: ['pipe', 'pipe', 'pipe'] });
  running.add(proc);
  const logs: string[] = [];
  let out = '';
  let buf = '';
  const waiters: (() => void)[] = [];
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      logs.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
    for (const w of [...waiters]) w();
  });
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  const line = (re: RegExp, ms = 30_000) =>
    new Promise<string>((resolve, reject) => {
      const look = () => {
        const l = logs.find((x) => re.test(x));
        if (l === undefined) return false;
        clearTimeout(timer);
        waiters.splice(waiters.indexOf(look), 1);
        resolve(l);
        return true;
      };
      const timer = setTimeout(() => reject(new Error(`no line ${re} in ${ms} ms:\n${logs.join('\n')}`)), ms);
      waiters.push(look);
      look();
      void ended.then(() => setTimeout(() => look() || reject(new Error(`exited without a line ${re}:\n${logs.join('\n')}`)), 50));
    });
  return { proc, dir, configFile, logs, line, ended, stdout: () => out };
}

/** A server whose start leaves a file behind: whether the hub spawned it at all. */
const marksSpawn = (file: string) => ({ command: process.execPath, args: ['-e', 'require("fs").writeFileSync(process.argv[1], "spawned"); setInterval(() => {}, 1000)', file] });

describe('a serving command signalled while it starts', () => {
  it('stdio: a SIGTERM while it waits for the ledger lock ends it at once, logged, exit 0, nothing on stdout', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-signal-lock-'));
    // The lock names this (live) process: the hub waits up to 10 s for it.
    writeFileSync(join(dir, 'ledger.db.lock'), JSON.stringify({ pid: process.pid, command: 'switchyard start', started: processStart(process.pid) }));
    const spawned = join(dir, 'spawned');
    const hub = serve('stdio', { ledger: { path: join(dir, 'ledger.db') }, servers: { m: marksSpawn(spawned) } });
    await hub.line(/the ledger is in use by pid \d+ \(switchyard start\): waiting up to 10 s/);
    const t0 = Date.now();
    hub.proc.kill('SIGTERM');
    expect(await hub.ended, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(hub.logs.some((l) => l.includes('"msg":"stopped before starting"'))).toBe(true);
    expect(hub.stdout()).toBe('');
    expect(existsSync(spawned)).toBe(false);
  }, 30_000);

  it('start: a SIGTERM while the hub exists but does not listen yet stops it there: exit 0, never listening, no upstream spawned', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-signal-mark-'));
    const spawned = join(dir, 'spawned');
    const hub = serve('start', { servers: { m: marksSpawn(spawned) } }, { nodeArgs: ['--import', join(ROOT, 'test/fixtures/hold-before-listen.mjs')] });
    await hub.line(/HOLDING BEFORE LISTEN/);
    hub.proc.kill('SIGTERM');
    expect(await hub.ended, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
    expect(hub.logs.some((l) => l.includes('"msg":"stopped before serving"'))).toBe(true);
    expect(hub.logs.some((l) => l.includes('switchyard listening'))).toBe(false);
    expect(existsSync(spawned)).toBe(false);
  }, 30_000);

  it('start: a SIGHUP before it listens is not its end: it serves, then reads the config again; a SIGINT that comes twice at once is one stop', async () => {
    const hub = serve('start', { servers: {} }, { nodeArgs: ['--import', join(ROOT, 'test/fixtures/hold-before-listen.mjs')] });
    await hub.line(/HOLDING BEFORE LISTEN/);
    hub.proc.kill('SIGHUP');
    await hub.line(/switchyard listening/);
    await hub.line(/reading the config again for the SIGHUP received while starting/);
    await hub.line(/"msg":"config reloaded"/);
    expect(hub.proc.exitCode).toBeNull();
    expect(hub.proc.signalCode).toBeNull();
    // Ctrl-C under `npm start`: the terminal's SIGINT and the one npm passes on come together.
    hub.proc.kill('SIGINT');
    await hub.line(/shutting down: draining calls in flight/);
    hub.proc.kill('SIGINT');
    expect(await hub.ended, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
    expect(hub.logs.some((l) => l.includes('second stop signal'))).toBe(false);
  }, 30_000);

  // Read before the lock, the ledger and the port; watched only once the hub serves. The watch
  // took the file as it was then for the running config, so an edit made meanwhile (a deploy
  // writing the config right after starting the hub) was never applied, and passed for applied.
  it('start: an edit of the config file while it starts is applied once it serves', async () => {
    const hub = serve('start', { servers: {} }, { nodeArgs: ['--import', join(ROOT, 'test/fixtures/hold-before-listen.mjs')] });
    await hub.line(/HOLDING BEFORE LISTEN/);
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(hub.configFile, JSON.stringify({ ...config, pageSize: 7 }));
    await hub.line(/switchyard listening/);
    expect(await hub.line(/"msg":"config reloaded"/, 10_000)).toContain('"applied":["pageSize"]');
    hub.proc.kill('SIGTERM');
    expect(await hub.ended, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
  }, 30_000);
});
