import yargs from 'yargs';
import { makeLedgerCommand, type LedgerCliIo } from '../../src/cli/ledger.js';

/** What `ledger …` run in this process printed: its output as text and as the bytes written, and its exit code. */
export interface LedgerRun {
  out: string;
  bytes: Buffer;
  err: string;
  code: number;
}

/**
 * `argv` (`['ledger', …]`) through yargs in this process, with the command the binary mounts
 * (makeLedgerCommand). `io` adds to the captured output what a test needs (a clock, a signal, a
 * poll interval); `onOut` sees all the output so far, and a promise it returns is the output not
 * taking more until it settles. A usage error yargs finds is thrown.
 */
export async function runLedgerCommand(
  argv: string[],
  io: Partial<Pick<LedgerCliIo, 'now' | 'signal' | 'pollMs'>> & { onOut?: (out: string) => void | Promise<void> } = {},
): Promise<LedgerRun> {
  const chunks: Buffer[] = [];
  const r: LedgerRun = { out: '', bytes: Buffer.alloc(0), err: '', code: 0 };
  const { onOut, ...rest } = io;
  const cmd = makeLedgerCommand({
    ...rest,
    out: (s) => {
      // Export writes whole lines as UTF-8 bytes, the other commands text.
      chunks.push(typeof s === 'string' ? Buffer.from(s) : s);
      r.out += s.toString();
      return onOut?.(r.out);
    },
    err: (s) => void (r.err += s),
    setExitCode: (c) => void (r.code = c),
  });
  try {
    await yargs(argv)
      .command(cmd)
      .strict()
      .exitProcess(false)
      .fail((msg, err) => {
        throw err ?? new Error(msg);
      })
      .parseAsync();
  } finally {
    r.bytes = Buffer.concat(chunks);
  }
  return r;
}
