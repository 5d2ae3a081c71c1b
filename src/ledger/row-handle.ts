import { WRITTEN } from './pending-log.js';
import type { Route } from './row-values.js';
import type { AuditEnd, AuditHandle } from './types.js';

/** Who finishes a row (the ledger); an interface so this module does not import the ledger back. */
export interface RowFinisher {
  finishRow(h: RowHandle, e: AuditEnd): Promise<void>;
}

const RESOLVED = Promise.resolve();

/** A begun row, as begin() hands it to the caller and keeps it while its begin is not handed over. */
export class RowHandle implements AuditHandle {
  private finished: Promise<void> | null = null;
  written: Promise<void> = RESOLVED;

  get writtenNow(): boolean {
    return this.written === WRITTEN;
  }

  constructor(
    private readonly ledger: RowFinisher,
    readonly rowId: number,
    /** The begin's route (the columns a finish falls back to), and its line less the closing bracket (RowValues.beginOpen). */
    readonly route: Route,
    readonly startOpen: string,
    /** Its begin's place in the ledger's lines while it has not been handed over. */
    public at: number,
    /** performance.now() at begin. */
    readonly since: number,
  ) {}

  /** The first call wins; later calls return the same promise. */
  finish(end: AuditEnd): Promise<void> {
    this.finished ??= this.ledger.finishRow(this, end);
    return this.finished;
  }
}
