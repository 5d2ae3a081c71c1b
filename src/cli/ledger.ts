/**
 * `switchyard ledger`: the parent command, its options (which ledger), and its subcommands,
 * each in src/cli/ledger/ (query, tail, stats, verify, export, keys, prune). The options they
 * share are read in ledger/options.ts, the ledger file found in ledger/ledger-file.ts, and each
 * handler run (ledger opened, errors to one stderr line and an exit code) by ledger/run.ts.
 */
import type { CommandModule } from 'yargs';
import { commandNeeded } from './command-needed.js';
import { processIo, type LedgerCliIo } from './ledger/io.js';
import { queryCommand } from './ledger/query.js';
import { tailCommand } from './ledger/tail.js';
import { statsCommand } from './ledger/stats.js';
import { verifyCommand } from './ledger/verify.js';
import { exportCommand } from './ledger/export.js';
import { keysCommand } from './ledger/keys.js';
import { pruneCommand } from './ledger/prune.js';

export type { LedgerCliIo } from './ledger/io.js';

/** Builds `ledger <sub>`; `ledgerCommand` is the one main.ts mounts. */
export function makeLedgerCommand(io: LedgerCliIo = processIo): CommandModule {
  return {
    command: 'ledger',
    describe: 'Read the audit ledger: query, tail, stats, verify, export, keys, prune',
    builder: (y) =>
      y
        .option('db', { type: 'string', describe: 'Ledger file (default: ledger.path from the config)' })
        .option('config', { alias: 'c', type: 'string', describe: 'Config file to read ledger.path from (default hub.config.json)' })
        // In this order in the help.
        .command(queryCommand(io) as unknown as CommandModule)
        .command(tailCommand(io) as unknown as CommandModule)
        .command(statsCommand(io) as unknown as CommandModule)
        .command(verifyCommand(io) as unknown as CommandModule)
        .command(exportCommand(io) as unknown as CommandModule)
        .command(keysCommand(io) as unknown as CommandModule)
        .command(pruneCommand(io) as unknown as CommandModule)
        .check(commandNeeded(2, 'Give a ledger subcommand; see --help.')),
    handler: () => undefined,
  };
}

export const ledgerCommand: CommandModule = makeLedgerCommand();
