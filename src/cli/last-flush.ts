import type { Logger } from '../log.js';
import { envMs } from '../env-ms.js';

/**
 * How long the last answers may wait for a client that is not reading stdout before the process
 * exits anyway: SWITCHYARD_STDOUT_FLUSH_MS, default 3 s (a supervisor whose kill timeout is
 * short may want less; a client slow to read its last lines, more).
 */
export const STDOUT_FLUSH_ENV = 'SWITCHYARD_STDOUT_FLUSH_MS';
const DEFAULT_STDOUT_FLUSH_MS = 3_000;

/**
 * Resolves once what was written to `out` has gone to the client, or after SWITCHYARD_STDOUT_FLUSH_MS
 * when the client stopped reading it (a write's callback would wait for good): `stdio` and
 * `connect` exit after it either way.
 */
export function lastFlush(out: { write(chunk: string, done: () => void): unknown }, log: Logger, what = 'stdout'): Promise<void> {
  const waitMs = envMs(STDOUT_FLUSH_ENV, DEFAULT_STDOUT_FLUSH_MS);
  return new Promise<void>((r) => {
    const timer = setTimeout(() => {
      log.warn({ waitedMs: waitMs }, `${what} not read by the client: exiting with answers unsent`);
      log.flush();
      r();
    }, waitMs);
    out.write('', () => {
      clearTimeout(timer);
      r();
    });
  });
}
