import type { Database, Statement } from 'better-sqlite3';
import type { Logger } from '../log.js';
import type { SpentStateStore } from '../router/request-state.js';
import type { GroupCommit } from './group-commit.js';
import { KeptTable } from './kept-table.js';

/**
 * The hub's requestStates spent here, by nonce, until they expire (src/router/request-state.ts).
 * Read once at open, the expired ones dropped first; a write goes by the group commit, which a
 * call waits for before it is forwarded (call-tool.ts, router.ts): a state whose call may have
 * reached its upstream is on disk as spent.
 */
export class LedgerSpentStates extends KeptTable implements SpentStateStore {
  /** What open found, until the sealer has taken it. */
  private rows: [string, number][];
  private readonly insert: Statement;
  private readonly remove: Statement;
  private readonly expired: Statement;

  constructor(
    db: Database,
    gc: GroupCommit,
    now: () => number,
    log: Logger,
    /** The ledger file's own id (ledger_meta). */
    readonly home: string,
  ) {
    super(gc, now, log);
    this.insert = db.prepare('INSERT OR REPLACE INTO spent_request_states (nonce, expires_ms) VALUES (@nonce, @expires)');
    this.remove = db.prepare('DELETE FROM spent_request_states WHERE nonce = @nonce');
    this.expired = db.prepare('DELETE FROM spent_request_states WHERE expires_ms <= @now');
    this.expired.run({ now: now() });
    const rows = db.prepare('SELECT nonce, expires_ms FROM spent_request_states').all() as { nonce: string; expires_ms: number }[];
    this.rows = rows.map((r) => [r.nonce, r.expires_ms]);
  }

  spent(): Iterable<[string, number]> {
    const rows = this.rows;
    this.rows = [];
    return rows;
  }

  add(nonce: string, expires: number): void {
    this.writeLater(this.insert, { nonce, expires }, 'a spent requestState', {});
  }

  delete(nonce: string): void {
    this.writeLater(this.remove, { nonce }, 'a requestState given back', {});
  }

  prune(now: number): void {
    this.writeLater(this.expired, { now }, 'the expiry of spent requestStates', {});
  }
}
