import type { Database } from 'better-sqlite3';
import type { Logger } from '../log.js';
import { formatWitness, readChainState } from './chain.js';

/**
 * The chain's head goes to the log this often (when it moved), and at open and close: logs
 * usually leave the machine, and a head kept elsewhere is what shows a rewritten chain
 * (`ledger verify --witness`; see Witness in chain.ts).
 */
export const HEAD_LOG_EVERY_MS = 60 * 60 * 1000;

/** The chain's head in the log, as HEAD_LOG_EVERY_MS says (`everyMs`). */
export class ChainHeadLog {
  private readonly timer: NodeJS.Timeout;
  /** The last head logged. */
  private logged: string | null = null;

  /** Logs the head now, then every `everyMs`. */
  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    everyMs: number,
  ) {
    this.write();
    this.timer = setInterval(() => this.write(), everyMs);
    this.timer.unref();
  }

  /** No more by the clock: a close is under way (it calls close() once the last rows are in). */
  stop(): void {
    clearInterval(this.timer);
  }

  /** Logs the head a last time (unless logged already) and stops: before the database closes. */
  close(): void {
    this.stop();
    this.write();
  }

  /** Logs the chain's head as `ledger verify --witness` reads it, unless it is the one logged last. */
  private write(): void {
    let head: string;
    try {
      const state = readChainState(this.db);
      head = formatWitness({ seq: state.head_seq, hash: state.head_hash });
    } catch (err) {
      this.log.warn({ err }, 'ledger: cannot read the chain head');
      return;
    }
    if (head === this.logged) return;
    this.logged = head;
    this.log.info({ chainHead: head }, 'ledger: chain head (kept elsewhere, `switchyard ledger verify --witness` checks the chain still holds it)');
  }
}
