import type { Argv, CommandModule } from 'yargs';
import { csvRow, CSV_COLUMNS, csvLine, inFlightNote, KEY_HEADER, keyCells, keyJson, rowJson, screenJson, screenText, STATS_HEADER, statsCells, table } from '../ledger/format.js';
import { LineChunks } from './line-chunks.js';
import type { KeyRow } from '../ledger/reader.js';
import { formatWitness, parseWitness } from '../ledger/chain.js';
import { counted } from '../counted.js';
import { commandNeeded } from './command-needed.js';
import { UsageError } from './usage-error.js';
import { type CommonArgs, resolveKeyTtlMs } from './ledger/ledger-file.js';
import { clockOf, processIo, type LedgerCliIo } from './ledger/io.js';
import { ledgerNotes } from './ledger/notes.js';
import { rowsOut } from './ledger/rows-out.js';
import { subcommandRunner } from './ledger/run.js';
import { type FilterArgs, filterOf, filterOptions, nameFilter, oneText, timeOption, wholeNumber } from './ledger/options.js';

export type { LedgerCliIo } from './ledger/io.js';

/** Rows `tail -f` reads at a time. */
const TAIL_PAGE = 1000;

/** Builds `ledger <sub>`; `ledgerCommand` is the one main.ts mounts. */
export function makeLedgerCommand(io: LedgerCliIo = processIo): CommandModule {
  const now = clockOf(io);
  const run = subcommandRunner(io);
  const { writeRows, writePaged, printRows } = rowsOut(io);
  const { noRows, requestIdNotes } = ledgerNotes(io);

  const query: CommandModule<CommonArgs, FilterArgs & { limit: number; json: boolean }> = {
    command: 'query',
    describe: 'List audit rows (newest N, printed oldest first)',
    builder: (y) =>
      filterOptions(y)
        .option('limit', { type: 'number', default: 50, describe: 'At most this many rows' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<FilterArgs & { limit: number; json: boolean }>,
    handler: run(
      'query',
      false,
      (a) => ({ ...filterOf(a, now()), limit: wholeNumber('--limit', a.limit, 1) }),
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

  const tail: CommandModule<CommonArgs, FilterArgs & { n: number; follow: boolean; json: boolean }> = {
    command: 'tail',
    describe: 'The last finished calls; with -f keep printing calls as they finish',
    builder: (y) =>
      filterOptions(y)
        .option('n', { type: 'number', default: 10, describe: 'How many rows to show first' })
        .option('follow', { alias: 'f', type: 'boolean', default: false, describe: 'Keep polling for new rows' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<FilterArgs & { n: number; follow: boolean; json: boolean }>,
    handler: run(
      'tail',
      false,
      (a) => ({ n: wholeNumber('-n', a.n, 0), filter: filterOf(a, now()) }),
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

  const stats: CommandModule<CommonArgs, FilterArgs & { json: boolean }> = {
    command: 'stats',
    describe: 'Calls, error rate and p50/p95 latency per server and tool',
    builder: (y) =>
      filterOptions(y).option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<
        FilterArgs & { json: boolean }
      >,
    handler: run(
      'stats',
      false,
      (a) => filterOf(a, now()),
      (reader, a, filter) => {
        requestIdNotes('stats', reader, a, filter);
        const { rows, hubEvents } = reader.callStats(filter);
        if (a.json) io.out(rows.map((r) => screenJson(JSON.stringify(r)) + '\n').join(''));
        else io.out(table(STATS_HEADER, rows.map(statsCells)));
        if (!rows.length) noRows('stats', a.json, 'finished calls');
        // Not calls (/metrics counts none of them either), but not hidden: said where to find them.
        if (hubEvents && !a.json) {
          const n = `${counted(hubEvents, 'row')} of the hub's own events`;
          io.err(`switchyard ledger stats: note: ${n} (catalog quarantines and drops, plugin failures) not counted as calls: \`ledger query --principal hub\` lists them, \`ledger stats --principal hub\` counts them\n`);
        }
      },
    ),
  };

  const verify: CommandModule<CommonArgs, CommonArgs & { witness?: string[]; json: boolean }> = {
    command: 'verify',
    describe: 'Check the hash chain (and witnesses kept elsewhere); exit 1 naming the first row that does not match',
    builder: (y) =>
      y
        .option('witness', {
          type: 'string',
          array: true,
          // Its value left out (`verify --witness` of a script whose variable is unset), the chain
          // was verified against no witness at all, and passed.
          requiresArg: true,
          describe: 'A head printed by an earlier verify (<seq>:<hash>), kept outside this file: its row must still hold that hash',
        })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object' }) as unknown as Argv<
        CommonArgs & { witness?: string[]; json: boolean }
      >,
    handler: run(
      'verify',
      false,
      (a) =>
        (a.witness ?? []).map((text) => {
          const w = parseWitness(text);
          if (!w) throw new UsageError(`--witness ${JSON.stringify(text)} is not <seq>:<64 hex digits>, as verify prints the head`);
          return w;
        }),
      (reader, a, witnesses) => {
        const r = reader.verify(witnesses);
        if (a.json) {
          const body = r.ok ? { ...r, head: formatWitness({ seq: r.headSeq, hash: r.headHash }) } : r;
          io.out(screenJson(JSON.stringify(body)) + '\n');
        } else if (r.ok) {
          const held = r.witnesses ? `, ${counted(r.witnesses, 'witness', 'witnesses')} held` : '';
          io.out(`ok: ${counted(r.rows, 'row')} verified (chain seq ${r.anchorSeq + 1}..${r.headSeq})${held}\n`);
          io.out(`head: ${formatWitness({ seq: r.headSeq, hash: r.headHash })}\n`);
        } else {
          const where = r.rowId === null && r.seq === null ? '' : ` at row ${r.rowId ?? '-'} (seq ${r.seq ?? '-'})`;
          io.out(screenText(`FAILED${where}: ${r.reason}`) + '\n');
        }
        if (r.ok && r.inFlight.rows > 0) io.err(`switchyard ledger verify: note: ${inFlightNote(r.inFlight)}\n`);
        if (!r.ok) io.setExitCode(1);
      },
    ),
  };

  const exportCmd: CommandModule<CommonArgs, FilterArgs & { format: string }> = {
    command: 'export',
    describe: 'Write all matching rows, oldest first, as JSON lines or CSV',
    builder: (y) =>
      // requiresArg: `--format` with its value left out was the default, JSON lines, without a word.
      filterOptions(y).option('format', { type: 'string', choices: ['jsonl', 'csv'], default: 'jsonl', requiresArg: true, describe: 'Output format' }) as unknown as Argv<
        FilterArgs & { format: string }
      >,
    handler: run(
      'export',
      false,
      (a) => filterOf(a, now()),
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

  const keys: CommandModule<CommonArgs, CommonArgs & { principal?: string | string[]; key?: string | string[]; state?: string | string[]; limit: number; json: boolean }> = {
    command: 'keys',
    describe: 'List idempotency keys: their tool, state, and what a retry with each gets (never the kept answer)',
    builder: (y) =>
      y
        .option('principal', { type: 'string', describe: 'Only keys of this principal' })
        .option('key', { type: 'string', describe: 'Only this key' })
        .option('state', { type: 'string', choices: ['in_flight', 'done', 'unknown'], describe: 'Only keys in this state (unknown: the call may have run and left no answer; a retry is refused)' })
        .option('limit', { type: 'number', default: 50, describe: 'At most this many keys, the latest' })
        .option('json', { type: 'boolean', default: false, describe: 'One JSON object per line' }) as unknown as Argv<
        CommonArgs & { principal?: string; key?: string; state?: string; limit: number; json: boolean }
      >,
    handler: run(
      'keys',
      false,
      (a) => ({
        filter: { principal: nameFilter('--principal', a.principal), key: nameFilter('--key', a.key, 'an idempotency key'), state: oneText('--state', a.state) as KeyRow['state'] | undefined },
        limit: wholeNumber('--limit', a.limit, 1),
        // Keys ended before this count as absent to a retry (the hub's lookup), though not yet purged.
        expiredBefore: (io.now ?? Date.now)() - resolveKeyTtlMs(a),
      }),
      async (reader, a, o) => {
        // Written as read, a page at a time, as query's rows are (reader.keyIds).
        const ids = reader.keyIds(o.filter, o.limit);
        if (ids.length === 0) return noRows('keys', a.json, 'idempotency keys');
        const { shown } = await writePaged(
          () => reader.keysOf(ids),
          a.json ? (k) => keyJson(k, o.expiredBefore) : undefined,
          KEY_HEADER,
          (k) => keyCells(k, o.expiredBefore),
        );
        if (!a.json && ids.length === o.limit) io.err(`switchyard ledger keys: note: the latest ${shown === 1 ? 'matching key' : `${shown} matching keys`}; more may match (--limit N shows more)\n`);
      },
    ),
  };

  const prune: CommandModule<CommonArgs, CommonArgs & { before: string; allowFuture: boolean }> = {
    command: 'prune',
    describe: 'Delete finished rows older than --before, keeping the chain verifiable',
    builder: (y) =>
      y
        .option('before', { type: 'string', demandOption: true, requiresArg: true, describe: 'Duration back (30d) or ISO date' })
        .option('allow-future', { type: 'boolean', default: false, describe: 'Take a --before date later than now: every finished row is deleted' }) as unknown as Argv<
        CommonArgs & { before: string; allowFuture: boolean }
      >,
    handler: run(
      'prune',
      true,
      (a) => {
        const at = now();
        const before = timeOption('--before', a.before, at);
        // A date later than now (a year mistyped: 2099, 2062 for 2026) deleted every finished
        // row, the whole audit trail, without a word: only when asked for.
        if (before > at && !a.allowFuture)
          throw new UsageError(`--before ${new Date(before).toISOString()} is later than now: every finished row would be deleted; give --allow-future to mean that`);
        return before;
      },
      (reader, a, before) => {
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

  return {
    command: 'ledger',
    describe: 'Read the audit ledger: query, tail, stats, verify, export, keys, prune',
    builder: (y) =>
      y
        .option('db', { type: 'string', describe: 'Ledger file (default: ledger.path from the config)' })
        .option('config', { alias: 'c', type: 'string', describe: 'Config file to read ledger.path from (default hub.config.json)' })
        .command(query as unknown as CommandModule)
        .command(tail as unknown as CommandModule)
        .command(stats as unknown as CommandModule)
        .command(verify as unknown as CommandModule)
        .command(exportCmd as unknown as CommandModule)
        .command(keys as unknown as CommandModule)
        .command(prune as unknown as CommandModule)
        .check(commandNeeded(2, 'Give a ledger subcommand; see --help.')),
    handler: () => undefined,
  };
}

export const ledgerCommand: CommandModule = makeLedgerCommand();

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
