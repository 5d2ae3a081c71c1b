import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { LedgerReader } from '../../ledger/reader.js';
import { counted } from '../../counted.js';
import { ledgerWriterText, linkedLedger } from '../ledger-lock.js';
import { UsageError } from '../usage-error.js';
import type { LedgerCliIo } from './io.js';
import { type CommonArgs, ledgerOff, resolveLedgerPath, sqliteSaysOf } from './ledger-file.js';
import { leftBehind } from './left-behind.js';
import { runningDaemonLedger } from './running-ledger.js';

/**
 * A subcommand's handler made of its two halves: `usage` reads its options (pure, throwing
 * UsageError), `body` does the work on the opened ledger with what `usage` made of them.
 */
export type SubcommandRunner = <A extends CommonArgs, U>(
  sub: string,
  writable: boolean,
  usage: (args: A) => U,
  body: (reader: LedgerReader, args: A, opts: U) => Promise<void> | void,
) => (args: A) => Promise<void>;

/**
 * Runs a subcommand: errors become one line on stderr and an exit code, never a stack.
 * `usage` reads the options first (throwing UsageError), so a bad option is exit 2 whatever
 * the state of the ledger file, and nothing is opened for it.
 */
export function subcommandRunner(io: LedgerCliIo): SubcommandRunner {
  return (sub, writable, usage, body) => async (args) => {
    let reader: LedgerReader | null = null;
    let path: string | undefined;
    try {
      const opts = usage(args);
      path = resolveLedgerPath(args);
      // A writer (prune) under another name of the file would write beside the hub's -wal (ledger-lock.ts).
      const linked = writable ? linkedLedger(path) : undefined;
      if (linked) throw linked;
      // The config's ledger (not a --db named on purpose) not made yet: a first run, before any
      // `start`, or an edited ledger.path, which its running daemon applies at its restart only:
      // read (never pruned) where that daemon writes, saying so.
      if (!args.db && !existsSync(path)) {
        const running = runningDaemonLedger(path, resolve(args.config ?? 'hub.config.json'));
        const edited = running && `ledger.path names ${path}, which its running daemon (pid ${running.pid}) applies at its next restart: it writes ${running.ledger}`;
        if (!running || writable) throw new Error(edited ? `${edited}; give that one with --db` : `no ledger database at ${path} (ledger.path): ${ledgerOff(args) ? 'the config has ledger.enabled false, so its hub keeps none' : 'the hub makes it when it starts'}, or give one with --db`);
        io.err(`switchyard ledger ${sub}: note: ${edited}, which is read\n`);
        path = running.ledger;
      }
      // A writer beside a running hub of an older Switchyard must not upgrade its ledger.
      reader = LedgerReader.open({ path, writable, heldBy: writable ? ledgerWriterText(path) : undefined });
      const left = leftBehind(path, reader);
      if (left.calls) {
        const calls = counted(left.calls, 'call');
        io.err(`switchyard ledger ${sub}: note: ${calls} (begun or finished) that a hub wrote before it stopped ${left.calls === 1 ? 'is' : 'are'} in ${left.files.join(' and ')}, not yet in the database; the hub's next start applies them\n`);
      }
      await body(reader, args, opts);
    } catch (err) {
      io.err(`switchyard ledger ${sub}: ${sqliteSaysOf(path, err).message}\n`);
      io.setExitCode(err instanceof UsageError ? 2 : 1);
    } finally {
      reader?.close();
    }
  };
}
