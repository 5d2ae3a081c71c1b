/**
 * ServeSignals in process (signals emitted on `process`, its exit stubbed): whether a second stop
 * signal is the same request (within SAME_REQUEST_MS) is measured on the monotonic clock.
 */
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SAME_REQUEST_MS, ServeSignals } from '../../src/cli/serve-signals.js';
import type { Logger } from '../../src/log.js';

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
const before = new Map(SIGNALS.map((s) => [s, process.listeners(s)]));

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  // Only the handlers this test's ServeSignals added.
  for (const s of SIGNALS) for (const l of process.listeners(s)) if (!before.get(s)!.includes(l)) process.off(s, l);
});

describe('ServeSignals, the wall clock stepped back between two stop signals', () => {
  it('a second SIGTERM past SAME_REQUEST_MS exits at once, however far back the wall clock went', () => {
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    const signals = new ServeSignals(pino({ level: 'silent' }) as unknown as Logger);
    const stops: string[] = [];
    signals.onStop((s) => void stops.push(s));
    process.emit('SIGTERM');
    expect(stops).toEqual(['SIGTERM']);
    vi.setSystemTime(Date.now() - 3_600_000);
    vi.advanceTimersByTime(SAME_REQUEST_MS + 100);
    process.emit('SIGTERM');
    // Before, on the wall clock, it was taken as the same request for an hour: ignored.
    expect(exit).toHaveBeenCalledWith(1);
  });
});
