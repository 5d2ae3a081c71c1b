import { screenJson } from '../../ledger/format.js';
import type { LedgerReader } from '../../ledger/reader.js';
import type { AuditFilter } from '../../ledger/rows.js';
import type { LedgerCliIo } from './io.js';
import { type FilterArgs, requestIdOption } from './options.js';

/** The notes on stderr that keep what stdout shows from being misread. */
export interface LedgerNotes {
  /**
   * A table with only its header reads as output cut short, or as a filter that was not
   * applied: said in words, on stderr (stdout stays the table). JSON lines stay silent: no
   * line is the answer there.
   */
  noRows(sub: string, json: boolean, what: string): void;
  /**
   * `--request-id 1` selects the number 1; rows of the string "1" (another request) are not
   * listed, but said to be there, with the option that lists them (and the other way round).
   * An id longer than a row keeps is matched by the start kept: said, as other ids with that
   * start are listed too.
   */
  requestIdNotes(sub: string, reader: LedgerReader, a: FilterArgs, filter: AuditFilter): void;
}

export function ledgerNotes(io: LedgerCliIo): LedgerNotes {
  return {
    noRows: (sub, json, what) => {
      if (!json) io.err(`switchyard ledger ${sub}: note: no ${what} match\n`);
    },
    requestIdNotes: (sub, reader, a, filter) => {
      const q = requestIdOption(a.requestId);
      if (q?.cut !== undefined) {
        io.err(screenJson(`switchyard ledger ${sub}: note: request id ${q.what} is longer than a ledger row keeps: rows hold its first ${q.cut} characters, and the rows of every id that starts with them are listed (requestIdCut in --json)\n`));
      }
      if (!q?.other || !reader.queryIds({ ...filter, requestId: q.other.stored, limit: 1 }).length) return;
      io.err(screenJson(`switchyard ledger ${sub}: note: request id ${q.what} only; ${q.other.what}, a different request id, has rows too: --request-id ${q.other.option} lists them\n`));
    },
  };
}
