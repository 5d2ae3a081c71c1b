import { existsSync } from 'node:fs';
import type { Argv, CommandModule } from 'yargs';
import { csvRow, CSV_COLUMNS, csvLine, inFlightNote, KEY_HEADER, keyCells, keyJson, ROW_HEADER, rowCells, rowJson, screenJson, screenText, STATS_HEADER, statsCells, table, tableCells } from '../ledger/format.js';
import { alignedLine, widen } from '../text-columns.js';
import { LineChunks } from './line-chunks.js';
import { recordRow, type PendingRecord } from '../ledger/audit-apply.js';
import { PendingFiles } from '../ledger/pending-files.js';
import { PendingLog } from '../ledger/pending-log.js';
import { LedgerReader, type KeyRow } from '../ledger/reader.js';
import { formatWitness, parseWitness } from '../ledger/chain.js';
import type { AuditFilter, AuditRow } from '../ledger/rows.js';
import { ledgerWriter, ledgerWriterText, linkedLedger } from './ledger-lock.js';
import { realLedgerPath } from '../ledger/real-path.js';
import { hasTable } from '../ledger/migrate.js';
import { counted } from '../counted.js';
import { commandNeeded } from './command-needed.js';
import { UsageError } from './usage-error.js';
import { type CommonArgs, ledgerOff, resolveKeyTtlMs, resolveLedgerPath, sqliteSaysOf } from './ledger/ledger-file.js';
import { type FilterArgs, filterOf, filterOptions, nameFilter, oneText, requestIdOption, timeOption, wholeNumber } from './ledger/options.js';

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

const processIo: LedgerCliIo = {
  // A pipe's reader slower than the ledger is read (gzip, ssh, a pager) would otherwise leave
  // every row not yet taken queued in this process: an export of the whole ledger in memory.
  // A reader that goes ends the process (broken-pipe.ts), so no wait is left hanging.
  out: (t) => (process.stdout.write(t) ? undefined : new Promise((res) => process.stdout.once('drain', res))),
  err: (t) => void process.stderr.write(t),
  setExitCode: (c) => {
    process.exitCode = c;
  },
};

/** Rows of JSON lines written at a time. */
const JSON_CHUNK = 500;

/** Rows `tail -f` reads at a time. */
const TAIL_PAGE = 1000;

/** Builds `ledger <sub>`; `ledgerCommand` is the one main.ts mounts. */
export function makeLedgerCommand(io: LedgerCliIo = processIo): CommandModule {
  const now = (): number => (io.now ?? Date.now)();

  /**
   * Runs a subcommand: errors become one line on stderr and an exit code, never a stack.
   * `usage` reads the options first (throwing UsageError), so a bad option is exit 2 whatever
   * the state of the ledger file, and nothing is opened for it.
   */
  const run =
    <A extends CommonArgs, U>(sub: string, writable: boolean, usage: (args: A) => U, body: (reader: LedgerReader, args: A, opts: U) => Promise<void> | void) =>
    async (args: A): Promise<void> => {
      let reader: LedgerReader | null = null;
      let path: string | undefined;
      try {
        const opts = usage(args);
        path = resolveLedgerPath(args);
        // A writer (prune) under another name of the file would write beside the hub's -wal (ledger-lock.ts).
        const linked = writable ? linkedLedger(path) : undefined;
        if (linked) throw linked;
        // The config's ledger (not a --db named on purpose) not made yet: a first run, before any `start`.
        if (!args.db && !existsSync(path)) throw new Error(`no ledger database at ${path} (ledger.path): ${ledgerOff(args) ? 'the config has ledger.enabled false, so its hub keeps none' : 'the hub makes it when it starts'}, or give one with --db`);
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

  /** A table row's line in the table's columns, widened first to it if it is wider (never narrowed). */
  const tableLine = (r: AuditRow, widths: number[]): string => lineOf(tableCells(rowCells(r)), widths);
  const lineOf = (cells: string[], widths: number[]): string => {
    widen(widths, cells);
    return alignedLine(cells, widths);
  };

  /**
   * A page of `tail -f`'s new rows, in the columns of the lines before (`widths`, the table's so
   * far): aligned among themselves only, each page had columns of its own, narrower than the
   * header's or wider, jumping from one page to the next. A column is widened for a wider cell
   * (the rows to come are unknown) and kept so: never narrowed again.
   */
  const printRows = async (rows: AuditRow[], json: boolean, widths: number[]): Promise<void> => {
    // JSON lines a chunk at a time, each waited for: a page as one string, its lines and the
    // bytes written were three copies of it at once.
    if (json) {
      for (let i = 0; i < rows.length; i += JSON_CHUNK) {
        await io.out(rows.slice(i, i + JSON_CHUNK).map((r) => screenJson(JSON.stringify(rowJson(r))) + '\n').join(''));
      }
    } else if (rows.length) return io.out(rows.map((r) => tableLine(r, widths) + '\n').join(''));
  };

  /**
   * Rows with their header, written as read, a page at a time, each write waited for (query,
   * tail's first rows): up to 100,000 rows with their bodies were held at once before the first
   * line. The caller holds only the ids (tail's, 8 bytes a row; query's in SQLite's temporary
   * database, see MatchedIds); a table's columns are measured over every row first, in a pass of
   * its own, so it reads as table() writes it (a row that finished between the passes, its cells
   * wider now, widens its columns from there on). How many were written, and the table's column
   * widths (`tail -f` goes on in them).
   */
  const writeRows = (pages: () => Iterable<AuditRow[]>, json: boolean): Promise<{ shown: number; widths: number[] }> =>
    writePaged(pages, json ? rowJson : undefined, ROW_HEADER, rowCells);

  /** writeRows for any rows: as JSON lines (`json` their object) or a table of `header` and `cells`. */
  const writePaged = async <R>(pages: () => Iterable<R[]>, json: ((r: R) => unknown) | undefined, header: string[], cells: (r: R) => string[]): Promise<{ shown: number; widths: number[] }> => {
    const widths: number[] = [];
    if (!json) {
      widen(widths, header);
      for (const page of pages()) for (const r of page) widen(widths, tableCells(cells(r)));
      await io.out(alignedLine(header, widths) + '\n');
    }
    let shown = 0;
    for (const page of pages()) {
      shown += page.length;
      await io.out(page.map((r) => (json ? screenJson(JSON.stringify(json(r))) : lineOf(tableCells(cells(r)), widths)) + '\n').join(''));
    }
    return { shown, widths };
  };

  /**
   * A table with only its header reads as output cut short, or as a filter that was not
   * applied: said in words, on stderr (stdout stays the table). JSON lines stay silent: no
   * line is the answer there.
   */
  const noRows = (sub: string, json: boolean, what: string): void => {
    if (!json) io.err(`switchyard ledger ${sub}: note: no ${what} match\n`);
  };

  /**
   * `--request-id 1` selects the number 1; rows of the string "1" (another request) are not
   * listed, but said to be there, with the option that lists them (and the other way round).
   * An id longer than a row keeps is matched by the start kept: said, as other ids with that
   * start are listed too.
   */
  const requestIdNotes = (sub: string, reader: LedgerReader, a: FilterArgs, filter: AuditFilter): void => {
    const q = requestIdOption(a.requestId);
    if (q?.cut !== undefined) {
      io.err(screenJson(`switchyard ledger ${sub}: note: request id ${q.what} is longer than a ledger row keeps: rows hold its first ${q.cut} characters, and the rows of every id that starts with them are listed (requestIdCut in --json)\n`));
    }
    if (!q?.other || !reader.queryIds({ ...filter, requestId: q.other.stored, limit: 1 }).length) return;
    io.err(screenJson(`switchyard ledger ${sub}: note: request id ${q.what} only; ${q.other.what}, a different request id, has rows too: --request-id ${q.other.option} lists them\n`));
  };

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

/**
 * Calls a stopped hub left in its pending files (see src/ledger/pending-files.ts) that its next
 * start would change the database for: a row not there (and not pruned, see audit_pruned), or
 * one still in flight there whose finish is in a file. The files also hold lines of rows
 * already committed (a file is emptied only after its batch commits): those are not counted.
 * While a hub runs, the files hold only the last moments of calls, on their way in: no note.
 */
function leftBehind(dbPath: string, reader: LedgerReader): { calls: number; files: string[] } {
  const left = { calls: 0, files: [] as string[] };
  if (ledgerWriter(dbPath)) return left;
  const outcome = reader.db.prepare('SELECT outcome FROM audit WHERE id = ?').pluck();
  // An older Switchyard's ledger (read as it is) may have no audit_pruned yet: nothing pruned is listed.
  const pruned = hasTable(reader.db, 'audit_pruned') ? reader.db.prepare('SELECT 1 FROM audit_pruned WHERE id = ?').pluck() : { get: (_id: number): unknown => undefined };
  const counted = new Set<number>();
  for (const file of PendingFiles.paths(realLedgerPath(dbPath))) {
    const before = counted.size;
    for (const r of PendingLog.read(file) as PendingRecord[]) {
      const row = recordRow(r);
      if (!row || counted.has(row.id)) continue;
      const now = outcome.get(row.id);
      if (now === undefined ? pruned.get(row.id) === undefined : now === 'in_flight' && row.done) counted.add(row.id);
    }
    if (counted.size > before) left.files.push(file);
  }
  left.calls = counted.size;
  return left;
}

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
