import type { Argv, CommandModule } from 'yargs';
import { screenJson, STATS_HEADER, statsCells, table } from '../../ledger/format.js';
import type { StatsRow } from '../../ledger/reader.js';
import { counted } from '../../counted.js';
import { clockOf, type LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { ledgerNotes } from './notes.js';
import { type FilterArgs, filterOf, filterOptions } from './options.js';
import { subcommandRunner } from './run.js';

type StatsArgs = FilterArgs & { json: boolean };

/** The stats as stdout shows them: one JSON object a line, or a table. */
export function statsText(rows: StatsRow[], json: boolean): string {
  return json ? rows.map((r) => screenJson(JSON.stringify(r)) + '\n').join('') : table(STATS_HEADER, rows.map(statsCells));
}

/** `ledger stats`: calls, errors and latency per server and tool. */
export function statsCommand(io: LedgerCliIo): CommandModule<CommonArgs, StatsArgs> {
  const now = clockOf(io);
  const { noRows, requestIdNotes } = ledgerNotes(io);
  return {
    command: 'stats',
    describe: 'Calls, error rate and p50/p95 latency per server and tool',
    builder: (y) => filterOptions(y).option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<StatsArgs>,
    handler: subcommandRunner(io)(
      'stats',
      false,
      (a: StatsArgs) => filterOf(a, now()),
      (reader, a, filter) => {
        requestIdNotes('stats', reader, a, filter);
        const { rows, hubEvents } = reader.callStats(filter);
        io.out(statsText(rows, a.json));
        if (!rows.length) noRows('stats', a.json, 'finished calls');
        // Not calls (/metrics counts none of them either), but not hidden: said where to find them.
        if (hubEvents && !a.json) {
          const n = `${counted(hubEvents, 'row')} of the hub's own events`;
          io.err(`switchyard ledger stats: note: ${n} (catalog quarantines and drops, plugin failures) not counted as calls: \`ledger query --principal hub\` lists them, \`ledger stats --principal hub\` counts them\n`);
        }
      },
    ),
  };
}
