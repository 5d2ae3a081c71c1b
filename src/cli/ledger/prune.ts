import type { Argv, CommandModule } from 'yargs';
import { formatWitness } from '../../ledger/chain.js';
import { counted } from '../../counted.js';
import { UsageError } from '../usage-error.js';
import { clockOf, type LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { timeOption } from './options.js';
import { subcommandRunner } from './run.js';

type PruneArgs = CommonArgs & { before: string; allowFuture: boolean };

/** `--before` as an instant, `at` being now; refused when later than now unless --allow-future. */
export function pruneBefore(a: Pick<PruneArgs, 'before' | 'allowFuture'>, at: number): number {
  const before = timeOption('--before', a.before, at);
  // A date later than now (a year mistyped: 2099, 2062 for 2026) deleted every finished
  // row, the whole audit trail, without a word: only when asked for.
  if (before > at && !a.allowFuture)
    throw new UsageError(`--before ${new Date(before).toISOString()} is later than now: every finished row would be deleted; give --allow-future to mean that`);
  return before;
}

/** `ledger prune`: the one subcommand that writes, so it opens the ledger as a writer. */
export function pruneCommand(io: LedgerCliIo): CommandModule<CommonArgs, PruneArgs> {
  const now = clockOf(io);
  return {
    command: 'prune',
    describe: 'Delete finished rows older than --before, keeping the chain verifiable',
    builder: (y) =>
      y
        .option('before', { type: 'string', demandOption: true, requiresArg: true, describe: 'Duration back (30d) or ISO date' })
        .option('allow-future', { type: 'boolean', default: false, describe: 'Take a --before date later than now: every finished row is deleted' }) as unknown as Argv<PruneArgs>,
    handler: subcommandRunner(io)(
      'prune',
      true,
      (a: PruneArgs) => pruneBefore(a, now()),
      (reader, _a, before) => {
        const n = reader.prune(before);
        io.out(`pruned ${counted(n, 'row')} older than ${new Date(before).toISOString()}\n`);
        // Rows deleted from the chain's start by hand, the anchor moved after them, look like a
        // prune to verify and to every witness recorded after them. The anchor a real prune left,
        // kept elsewhere as a witness, is what fails then ("was pruned"): printed to be kept.
        const anchor = reader.anchor();
        io.out(`anchor: ${formatWitness(anchor)}\n`);
      },
    ),
  };
}
