/** Where the command writes; tests pass their own. */
export interface LedgerCliIo {
  /**
   * A promise when the output takes no more for now: a command with more to write waits for it.
   * Export writes bytes, UTF-8 of whole lines.
   */
  out(text: string | Buffer): void | Promise<void>;
  err(text: string): void;
  setExitCode(code: number): void;
  /** Ends `tail -f` (the real binary just gets SIGINT). */
  signal?: AbortSignal;
  now?: () => number;
  pollMs?: number;
}

export const processIo: LedgerCliIo = {
  // A pipe's reader slower than the ledger is read (gzip, ssh, a pager) would otherwise leave
  // every row not yet taken queued in this process: an export of the whole ledger in memory.
  // A reader that goes ends the process (broken-pipe.ts), so no wait is left hanging.
  out: (t) => (process.stdout.write(t) ? undefined : new Promise((res) => process.stdout.once('drain', res))),
  err: (t) => void process.stderr.write(t),
  setExitCode: (c) => {
    process.exitCode = c;
  },
};

/** The command's clock: the test's when it gives one, so relative times (--since 1h) are fixed. */
export function clockOf(io: LedgerCliIo): () => number {
  return () => (io.now ?? Date.now)();
}
