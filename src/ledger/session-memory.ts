import { randomBytes } from 'node:crypto';
import type { Database, Statement } from 'better-sqlite3';
import type { Kept, SessionMemoryStore } from '../downstream/session-memory.js';
import type { Logger } from '../log.js';
import type { LoggingLevel } from '../protocol/types.js';
import type { GroupCommit } from './group-commit.js';
import { jsonStrings, KeptTable } from './kept-table.js';

/** Rows of sessions that never came back (a hub stopped for good, a client gone) go after this. */
export const SESSION_MEMORY_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/** The legacy sessions open at the hub, with their subscriptions and log levels (src/downstream/session-memory.ts). */
export class LedgerSessionMemoryStore extends KeptTable implements SessionMemoryStore {
  readonly home: string;
  private readonly map = new Map<string, Kept>();
  private readonly upsert: Statement;
  private readonly remove: Statement;

  constructor(db: Database, gc: GroupCommit, now: () => number, log: Logger) {
    super(gc, now, log);
    this.upsert = db.prepare(`INSERT INTO session_memory (session, subscriptions, log_level, opener, updated_ms) VALUES (@session, @subscriptions, @logLevel, @opener, @updated)
      ON CONFLICT (session) DO UPDATE SET subscriptions = excluded.subscriptions, log_level = excluded.log_level, opener = excluded.opener, updated_ms = excluded.updated_ms`);
    this.remove = db.prepare('DELETE FROM session_memory WHERE session = @session');
    const id = db.prepare(`SELECT value FROM ledger_meta WHERE name = 'id'`).get() as { value: string } | undefined;
    this.home = id?.value ?? randomBytes(16).toString('hex');
    // Deleted by hand: a new id (the sessions the old one issued come back as another hub's would).
    if (!id) db.prepare(`INSERT INTO ledger_meta (name, value) VALUES ('id', ?)`).run(this.home);
    db.prepare('DELETE FROM session_memory WHERE updated_ms < ?').run(now() - SESSION_MEMORY_TTL_MS);
    const rows = db.prepare('SELECT session, subscriptions, log_level, opener FROM session_memory').all() as { session: string; subscriptions: string; log_level: string | null; opener: string | null }[];
    for (const r of rows) {
      const kept: Kept = { uris: jsonStrings(r.subscriptions) };
      if (r.log_level !== null) kept.logLevel = r.log_level as LoggingLevel;
      if (r.opener !== null) kept.opener = r.opener;
      this.map.set(r.session, kept);
    }
  }

  get(key: string): Kept | undefined {
    return this.map.get(key);
  }

  entries(): IterableIterator<[string, Kept]> {
    return this.map.entries();
  }

  put(key: string, kept: Kept): void {
    this.map.set(key, kept);
    const row = { session: key, subscriptions: JSON.stringify(kept.uris), logLevel: kept.logLevel ?? null, opener: kept.opener ?? null, updated: this.now() };
    this.writeLater(this.upsert, row, "a session's subscriptions", {});
  }

  delete(key: string): void {
    this.map.delete(key);
    this.writeLater(this.remove, { session: key }, "the end of a session's subscriptions", {});
  }
}
