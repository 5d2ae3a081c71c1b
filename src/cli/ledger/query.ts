import type { Argv, CommandModule } from 'yargs';
import { clockOf, type LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { ledgerNotes } from './notes.js';
import { type FilterArgs, filterOf, filterOptions, wholeNumber } from './options.js';
import { rowsOut } from './rows-out.js';
import { subcommandRunner } from './run.js';

type QueryArgs = FilterArgs & { limit: number; json: boolean };

/** `ledger query`: the newest matching rows, printed oldest first. */
export function queryCommand(io: LedgerCliIo): CommandModule<CommonArgs, QueryArgs> {
  const now = clockOf(io);
  const { writeRows } = rowsOut(io);
  const { noRows, requestIdNotes } = ledgerNotes(io);
  return {
    command: 'query',
    describe: 'List audit rows (newest N, printed oldest first)',
    builder: (y) =>
      filterOptions(y)
        .option('limit', { type: 'number', default: 50, describe: 'At most this many rows' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<QueryArgs>,
    handler: subcommandRunner(io)(
      'query',
      false,
      (a: QueryArgs) => ({ ...filterOf(a, now()), limit: wholeNumber('--limit', a.limit, 1) }),
      async (reader, a, filter) => {
        const ids = reader.keepQueryIds(filter);
        try {
          const { shown } = await writeRows(() => reader.rowsOf(ids, 'ts'), a.json);
          requestIdNotes('query', reader, a, filter);
          if (!shown) noRows('query', a.json, 'rows');
          // A table cut at the limit reads as every match: said on stderr (the newest rows are the ones shown).
          else if (!a.json && ids.length === filter.limit) io.err(`switchyard ledger query: note: the newest ${shown === 1 ? 'matching row' : `${shown} matching rows`}; more may match (--limit N shows more)\n`);
        } finally {
          ids.close();
        }
      },
    ),
  };
}
