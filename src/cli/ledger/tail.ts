import type { Argv, CommandModule } from 'yargs';
import { clockOf, type LedgerCliIo } from './io.js';
import type { CommonArgs } from './ledger-file.js';
import { ledgerNotes } from './notes.js';
import { type FilterArgs, filterOf, filterOptions, wholeNumber } from './options.js';
import { rowsOut } from './rows-out.js';
import { subcommandRunner } from './run.js';

type TailArgs = FilterArgs & { n: number; follow: boolean; json: boolean };

/** Rows `tail -f` reads at a time. */
const TAIL_PAGE = 1000;

/** `ledger tail [-f]`: the last finished calls, then (with -f) each call as it finishes. */
export function tailCommand(io: LedgerCliIo): CommandModule<CommonArgs, TailArgs> {
  const now = clockOf(io);
  const { writeRows, printRows } = rowsOut(io);
  const { noRows, requestIdNotes } = ledgerNotes(io);
  return {
    command: 'tail',
    describe: 'The last finished calls; with -f keep printing calls as they finish',
    builder: (y) =>
      filterOptions(y)
        .option('n', { type: 'number', default: 10, describe: 'How many rows to show first' })
        .option('follow', { alias: 'f', type: 'boolean', default: false, describe: 'Keep polling for new rows' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<TailArgs>,
    handler: subcommandRunner(io)(
      'tail',
      false,
      (a: TailArgs) => ({ n: wholeNumber('-n', a.n, 0), filter: filterOf(a, now()) }),
      async (reader, a, { n, filter }) => {
        // Follows the chain position, i.e. rows in the order they finish, so every call is
        // printed once, with its outcome (a row appears by id while still in flight). The
        // position moves to the head (so rows a filter skips are not scanned again) only as read
        // in the same snapshot as the rows: a head read after them may hold rows committed in
        // between, never printed.
        requestIdNotes('tail', reader, a, filter);
        const start = reader.snapshot(() => ({ ...reader.lastFinishedIds(filter, n), head: reader.headSeq() }));
        const { shown, widths } = await writeRows(() => reader.rowsOf(start.ids, 'seq'), a.json);
        if (!shown && n > 0 && !a.follow) noRows('tail', a.json, 'finished calls');
        if (!a.follow) return;
        let last = Math.max(start.lastSeq, start.head);
        const pollMs = io.pollMs ?? 500;
        while (!io.signal?.aborted) {
          await sleep(pollMs, io.signal);
          for (;;) {
            const page = reader.snapshot(() => ({ ...reader.idsAfterSeq(filter, last, TAIL_PAGE), head: reader.headSeq() }));
            // Waited for, as export does: a reader slower than the hub writes must not make this
            // grow. Their rows a page at a time (rowsOf: bounded in bytes of bodies too).
            for (const rows of reader.rowsOf(page.ids, 'seq')) await printRows(rows, a.json, widths);
            // A full page: more may follow in this snapshot, from its last row on. A short one
            // held every matching row up to the snapshot's head.
            if (page.ids.length === TAIL_PAGE) last = page.lastSeq;
            else {
              last = Math.max(last, page.head);
              break;
            }
          }
        }
      },
    ),
  };
}

/** The poll interval, cut short when `tail -f` is ended (a test's signal) so it ends at once. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((res) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      res();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
