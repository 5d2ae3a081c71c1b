/**
 * refuseRead (`switchyard stdio` exiting before it could serve), in process, when the wall clock
 * is stepped: its quiet time and its bound are on the monotonic clock.
 */
import { PassThrough, Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { refuseRead } from '../../src/cli/refuse-read.js';
import type { ProtocolOut } from '../../src/log.js';

afterEach(() => void vi.useRealTimers());

describe('refuseRead, the wall clock stepped back an hour', () => {
  it('ends once stdin has been quiet its 100 ms, having answered what came: not an hour later', async () => {
    const input = new PassThrough();
    const written: string[] = [];
    const out = new Writable({
      write(chunk: Buffer, _enc, done) {
        written.push(chunk.toString());
        done();
      },
    });
    // Only Date: its timers are real.
    vi.useFakeTimers({ toFake: ['Date'] });
    const refusing = refuseRead(input, out as unknown as ProtocolOut, 'config invalid', 1 << 20);
    input.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) + '\n');
    vi.setSystemTime(Date.now() - 3_600_000);
    const t0 = performance.now();
    // Before, the quiet time and the 3 s bound were on the wall clock: it waited for the hour back.
    await expect(Promise.race([refusing, new Promise((r) => setTimeout(() => r('still reading'), 2_500))])).resolves.toEqual({ answered: 1, unsent: 0 });
    expect(performance.now() - t0).toBeLessThan(2_500);
    expect(written.join('')).toContain('config invalid');
  });
});
