import type { Database, Statement } from 'better-sqlite3';
import { NameMap, type NameKind, type NameStore, type Resolved } from '../catalog/names.js';
import type { Logger } from '../log.js';
import type { GroupCommit } from './group-commit.js';
import { KeptTable } from './kept-table.js';

/**
 * Hub-name assignments kept in the ledger file, so a tool keeps its hub name across restarts
 * and config changes. The NameAssigner reads synchronously while it builds a list, so every
 * row is loaded into memory at open; a put updates the map at once.
 */
export class LedgerNameStore extends KeptTable implements NameStore {
  private readonly map = new NameMap();
  private readonly upsert: Statement;

  constructor(db: Database, gc: GroupCommit, now: () => number, log: Logger) {
    super(gc, now, log);
    this.upsert = db.prepare(`INSERT INTO names (server, kind, upstream_name, hub_name, assigned_ms)
      VALUES (@server, @kind, @upstreamName, @hubName, @assigned)
      ON CONFLICT (server, kind, upstream_name) DO UPDATE SET hub_name = excluded.hub_name, assigned_ms = excluded.assigned_ms`);
    const rows = db.prepare('SELECT server, kind, upstream_name, hub_name FROM names').all() as {
      server: string;
      kind: NameKind;
      upstream_name: string;
      hub_name: string;
    }[];
    for (const r of rows) this.map.put(r.server, r.kind, r.upstream_name, r.hub_name);
  }

  get size(): number {
    return this.map.size;
  }

  get(server: string, kind: NameKind, upstreamName: string): string | undefined {
    return this.map.get(server, kind, upstreamName);
  }

  held(server: string, kind: NameKind): string[] {
    return this.map.held(server, kind);
  }

  owners(kind: NameKind, hubName: string): Resolved[] {
    return this.map.owners(kind, hubName);
  }

  put(server: string, kind: NameKind, upstreamName: string, hubName: string): void {
    if (!this.map.put(server, kind, upstreamName, hubName)) return;
    this.writeLater(this.upsert, { server, kind, upstreamName, hubName, assigned: this.now() }, 'a hub name', { server, kind });
  }
}
