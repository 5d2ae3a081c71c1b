/**
 * The real logger (built module, own process) when stderr stops taking lines: the process still
 * exits. pino flushes its buffer synchronously at exit, and sonic-boom 4 retries a failed write
 * there forever (EPIPE included); a hub whose log reader went away hung at exit that way. Here
 * stderr is a FIFO whose reader is closed (EPIPE) or never reads (a full pipe).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/hub-process.js';

/** Logs `lines` lines of `size` bytes, then exits at once (pino's exit handler flushes what is left). */
const script = (lines: number, size: number, nonBlocking: boolean) => `
${nonBlocking ? 'process.stderr;' : ''}
const { createLogger } = await import(${JSON.stringify(join(ROOT, 'dist/src/log.js'))});
const log = createLogger('info');
for (let i = 0; i < ${lines}; i++) log.info({ i, pad: 'x'.repeat(${size}) }, 'line');
process.stdout.write('logged\\n');
process.exit(0);
`;

/** Runs the script with stderr on a FIFO; `reader` decides what becomes of the read end. Resolves with the exit code and the time it took. */
async function runWithFifoStderr(code: string, reader: 'closed' | 'never-reads'): Promise<{ status: number | null; ms: number; stdout: string }> {
  const fifo = join(mkdtempSync(join(tmpdir(), 'sy-fifo-')), 'stderr');
  expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
  const rfd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const wfd = openSync(fifo, constants.O_WRONLY);
  if (reader === 'closed') closeSync(rfd);
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', wfd] });
  closeSync(wfd);
  let stdout = '';
  child.stdout!.on('data', (d) => (stdout += d)); // stdio[1] is 'pipe'
  const status = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve(-1);
    }, 15_000);
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  if (reader === 'never-reads') closeSync(rfd);
  return { status, ms: performance.now() - t0, stdout };
}

/**
 * As runWithFifoStderr, with a reader that starts reading `lateMs` after the start and reads
 * until the writer is gone; resolves with what it read too.
 */
async function runWithLateReader(code: string, lateMs: number): Promise<{ status: number | null; read: string }> {
  const fifo = join(mkdtempSync(join(tmpdir(), 'sy-fifo-')), 'stderr');
  expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
  const rfd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const wfd = openSync(fifo, constants.O_WRONLY);
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'ignore', wfd] });
  closeSync(wfd);
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await new Promise((r) => setTimeout(r, lateMs));
  const buf = Buffer.alloc(1 << 16);
  let read = '';
  for (;;) {
    let n: number;
    try {
      n = readSync(rfd, buf);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    if (n === 0) break; // the writer closed it: the child is gone
    read += buf.toString('utf8', 0, n);
  }
  closeSync(rfd);
  const status = await exited;
  clearTimeout(killer);
  return { status, read };
}

describe('logger whose stderr stops taking lines', () => {
  it('exits when the reader is gone (EPIPE), dropping what it cannot write', async () => {
    const r = await runWithFifoStderr(script(50, 200, false), 'closed');
    expect(r.stdout).toBe('logged\n');
    expect(r.status).toBe(0);
  }, 20_000);

  it('exits within a bound when the reader never reads (the pipe full, EAGAIN)', async () => {
    const r = await runWithFifoStderr(script(2_000, 200, true), 'never-reads');
    expect(r.stdout).toBe('logged\n');
    expect(r.status).toBe(0);
    expect(r.ms).toBeLessThan(10_000);
  }, 20_000);
  it('gives a full pipe its time at exit however the wall clock steps (NTP, a resume)', async () => {
    // Each read of the wall clock in the child is an hour past the one before: a deadline on it
    // passed at the first retry, and the lines a reader 0.5 s late would have read were dropped.
    const stepping = 'let wall = Date.now(); Date.now = () => (wall += 3_600_000);';
    const r = await runWithLateReader(stepping + script(2_000, 200, true), 500);
    expect(r.status).toBe(0);
    expect(r.read.split('\n').filter((l) => l.includes('"msg":"line"'))).toHaveLength(2_000);
  }, 20_000);
});
