/**
 * The real logger (built module, own process) when stderr stops taking lines: the process still
 * exits. pino flushes its buffer synchronously at exit, and sonic-boom 4 retries a failed write
 * there forever (EPIPE included); a hub whose log reader went away hung at exit that way. Here
 * stderr is a FIFO whose reader is closed (EPIPE) or never reads (a full pipe).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync } from 'node:fs';
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
});
