import type { Argv, CommandModule } from 'yargs';
import { csvLine, csvRow, CSV_COLUMNS, rowJson, screenJson } from '../../ledger/format.js';
import { LineChunks } from '../line-chunks.js';
import { clockOf, type LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { ledgerNotes } from './notes.js';
import { type FilterArgs, filterOf, filterOptions } from './options.js';
import { subcommandRunner } from './run.js';

type ExportArgs = FilterArgs & { format: string };

/** `ledger export`: every matching row, oldest first, as JSON lines or CSV (UTF-8 bytes of whole lines). */
export function exportCommand(io: LedgerCliIo): CommandModule<CommonArgs, ExportArgs> {
  const now = clockOf(io);
  const { requestIdNotes } = ledgerNotes(io);
  return {
    command: 'export',
    describe: 'Write all matching rows, oldest first, as JSON lines or CSV',
    builder: (y) =>
      // requiresArg: `--format` with its value left out was the default, JSON lines, without a word.
      filterOptions(y).option('format', { type: 'string', choices: ['jsonl', 'csv'], default: 'jsonl', requiresArg: true, describe: 'Output format' }) as unknown as Argv<ExportArgs>,
    handler: subcommandRunner(io)(
      'export',
      false,
      (a: ExportArgs) => filterOf(a, now()),
      async (reader, a, filter) => {
        requestIdNotes('export', reader, a, filter);
        const csv = a.format === 'csv';
        const lines = new LineChunks((bytes) => io.out(bytes));
        if (csv) lines.add(csvLine(CSV_COLUMNS));
        for (const page of reader.pages(filter)) {
          for (const r of page) {
            const wait = lines.add(csv ? csvRow(r) : screenJson(JSON.stringify(rowJson(r))));
            if (wait) await wait;
          }
        }
        await lines.flush();
      },
    ),
  };
}
