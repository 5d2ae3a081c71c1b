import { ROW_HEADER, rowCells, rowJson, screenJson, tableCells } from '../../ledger/format.js';
import type { AuditRow } from '../../ledger/rows.js';
import { alignedLine, widen } from '../../text-columns.js';
import type { LedgerCliIo } from './io.js';

/** Rows of JSON lines written at a time. */
const JSON_CHUNK = 500;

/** How many rows were written, and the table's column widths (`tail -f` goes on in them). */
export interface Written {
  shown: number;
  widths: number[];
}

/** Writing rows to stdout as a table or JSON lines, each write waited for. */
export interface RowsOut {
  /**
   * Rows with their header, written as read, a page at a time, each write waited for (query,
   * tail's first rows): up to 100,000 rows with their bodies were held at once before the first
   * line. The caller holds only the ids (tail's, 8 bytes a row; query's in SQLite's temporary
   * database, see MatchedIds); a table's columns are measured over every row first, in a pass of
   * its own, so it reads as table() writes it (a row that finished between the passes, its cells
   * wider now, widens its columns from there on).
   */
  writeRows(pages: () => Iterable<AuditRow[]>, json: boolean): Promise<Written>;
  /** writeRows for any rows: as JSON lines (`json` their object) or a table of `header` and `cells`. */
  writePaged<R>(pages: () => Iterable<R[]>, json: ((r: R) => unknown) | undefined, header: string[], cells: (r: R) => string[]): Promise<Written>;
  /**
   * A page of `tail -f`'s new rows, in the columns of the lines before (`widths`, the table's so
   * far): aligned among themselves only, each page had columns of its own, narrower than the
   * header's or wider, jumping from one page to the next. A column is widened for a wider cell
   * (the rows to come are unknown) and kept so: never narrowed again.
   */
  printRows(rows: AuditRow[], json: boolean, widths: number[]): Promise<void>;
}

/** A table row's line in the table's columns, widened first to it if it is wider (never narrowed). */
function lineOf(cells: string[], widths: number[]): string {
  widen(widths, cells);
  return alignedLine(cells, widths);
}

function tableLine(r: AuditRow, widths: number[]): string {
  return lineOf(tableCells(rowCells(r)), widths);
}

export function rowsOut(io: LedgerCliIo): RowsOut {
  const writePaged = async <R>(pages: () => Iterable<R[]>, json: ((r: R) => unknown) | undefined, header: string[], cells: (r: R) => string[]): Promise<Written> => {
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
  return {
    writePaged,
    writeRows: (pages, json) => writePaged(pages, json ? rowJson : undefined, ROW_HEADER, rowCells),
    printRows: async (rows, json, widths) => {
      // JSON lines a chunk at a time, each waited for: a page as one string, its lines and the
      // bytes written were three copies of it at once.
      if (json) {
        for (let i = 0; i < rows.length; i += JSON_CHUNK) {
          await io.out(rows.slice(i, i + JSON_CHUNK).map((r) => screenJson(JSON.stringify(rowJson(r))) + '\n').join(''));
        }
      } else if (rows.length) return io.out(rows.map((r) => tableLine(r, widths) + '\n').join(''));
    },
  };
}
