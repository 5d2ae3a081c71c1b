/**
 * `switchyard ledger export | head -1`: once the reader has what it wanted it closes the pipe,
 * and the next write fails with EPIPE. Node reports that as an 'error' event on stdout, which
 * with no listener is an uncaught exception (a stack trace, exit 1) for what is no failure.
 * Most Unix tools end silently there (SIGPIPE); Node ignores SIGPIPE, so this does it by hand.
 */

/** Commands that serve a client on stdout and end their own way when it goes (draining calls, ledger rows). */
const OWN_STDOUT = new Set(['stdio', 'connect']);

/**
 * For `command`: a reader gone from stdout ends the process at once, quietly, with the exit code
 * the command had set so far (0 unless it had already found a failure, as doctor may have);
 * nothing more is written. Any other stdout error is said in one line, exit 1.
 */
export function endQuietlyWhenReaderGoes(command: string | undefined): void {
  // stderr's reader gone (`switchyard … 2>&1 | head -1`) is the same event: without a listener
  // its EPIPE was an uncaught exception, exit 1, once a command wrote a note after head left. A
  // serving process (the daemon, stdio, connect) logs through a destination of its own
  // (src/log.ts) and must not end for it, so there it is only kept from crashing.
  process.stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (command === 'start' || (command !== undefined && OWN_STDOUT.has(command))) return;
    process.exit(err.code === 'EPIPE' ? undefined : 1);
  });
  if (command !== undefined && OWN_STDOUT.has(command)) return;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit();
    process.stderr.write(`switchyard: cannot write the output: ${err.message}\n`);
    process.exit(1);
  });
}
