import type { Database, Statement } from 'better-sqlite3';
import type { CapabilityStore } from '../hub/known-capabilities.js';
import type { Logger } from '../log.js';
import type { ServerCapabilities } from '../protocol/types.js';
import type { GroupCommit } from './group-commit.js';
import { KeptTable } from './kept-table.js';

/**
 * Each server's capabilities as it last had them, kept in the ledger file. Read once at open
 * (a handful of rows); a put is written by the group commit.
 */
export class LedgerCapabilityStore extends KeptTable implements CapabilityStore {
  private readonly map = new Map<string, ServerCapabilities>();
  private readonly upsert: Statement;
  private readonly remove: Statement;

  constructor(db: Database, gc: GroupCommit, now: () => number, log: Logger) {
    super(gc, now, log);
    this.upsert = db.prepare(`INSERT INTO server_capabilities (server, capabilities, seen_ms) VALUES (@server, @capabilities, @seen)
      ON CONFLICT (server) DO UPDATE SET capabilities = excluded.capabilities, seen_ms = excluded.seen_ms`);
    this.remove = db.prepare('DELETE FROM server_capabilities WHERE server = @server');
    for (const r of db.prepare('SELECT server, capabilities FROM server_capabilities').all() as { server: string; capabilities: string }[]) {
      try {
        const caps: unknown = JSON.parse(r.capabilities);
        if (caps !== null && typeof caps === 'object' && !Array.isArray(caps)) this.map.set(r.server, caps as ServerCapabilities);
      } catch {
        // A row edited by hand into something else: that server counts as never seen.
      }
    }
  }

  get(server: string): ServerCapabilities | undefined {
    return this.map.get(server);
  }

  put(server: string, capabilities: ServerCapabilities): void {
    this.map.set(server, capabilities);
    const row = { server, capabilities: JSON.stringify(capabilities), seen: this.now() };
    this.writeLater(this.upsert, row, "a server's capabilities", { server });
  }

  retain(servers: ReadonlySet<string>): void {
    for (const server of this.map.keys()) {
      if (servers.has(server)) continue;
      this.map.delete(server);
      this.writeLater(this.remove, { server }, "a removed server's capabilities", { server });
    }
  }
}
