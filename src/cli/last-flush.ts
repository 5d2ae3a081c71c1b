import type { Logger } from '../log.js';

/** How long the last answers may wait for a client that is not reading stdout before the process exits anyway. */
const STDOUT_FLUSH_MS = 3_000;

/**
 * Resolves once what was written to `out` has gone to the client, or after STDOUT_FLUSH_MS
 * when the client stopped reading it (a write's callback would wait for good): `stdio` and
 * `connect` exit after it either way.
 */
export function lastFlush(out: { write(chunk: string, done: () => void): unknown }, log: Logger, what = 'stdout'): Promise<void> {
  return new Promise<void>((r) => {
    const timer = setTimeout(() => {
      log.warn({ waitedMs: STDOUT_FLUSH_MS }, `${what} not read by the client: exiting with answers unsent`);
      log.flush();
      r();
    }, STDOUT_FLUSH_MS);
    out.write('', () => {
      clearTimeout(timer);
      r();
    });
  });
}
