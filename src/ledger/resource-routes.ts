import type { Database, Statement } from 'better-sqlite3';
import type { ResourceRoutes, ResourceRouteStore, RouteKind } from '../catalog/resource-routes.js';
import type { Logger } from '../log.js';
import type { GroupCommit } from './group-commit.js';
import { jsonStrings, KeptTable } from './kept-table.js';

/**
 * The resource routes of each server (src/catalog/resource-routes.ts) in the ledger file. Read
 * once at open; a put that changes them is written by the group commit, off the list path.
 */
export class LedgerResourceRouteStore extends KeptTable implements ResourceRouteStore {
  private readonly map = new Map<string, { routes: ResourceRoutes; json: string }>();
  private readonly upsert: Statement;
  private readonly remove: Statement;

  constructor(db: Database, gc: GroupCommit, now: () => number, log: Logger) {
    super(gc, now, log);
    this.upsert = db.prepare(`INSERT INTO resource_routes (server, kind, shown, hidden, seen_ms) VALUES (@server, @kind, @shown, @hidden, @seen)
      ON CONFLICT (server, kind) DO UPDATE SET shown = excluded.shown, hidden = excluded.hidden, seen_ms = excluded.seen_ms`);
    this.remove = db.prepare('DELETE FROM resource_routes WHERE server = @server');
    const rows = db.prepare('SELECT server, kind, shown, hidden FROM resource_routes').all() as { server: string; kind: RouteKind; shown: string; hidden: string }[];
    for (const r of rows) {
      const routes = { shown: jsonStrings(r.shown), hidden: jsonStrings(r.hidden) };
      this.map.set(`${r.server}\0${r.kind}`, { routes, json: JSON.stringify(routes) });
    }
  }

  get(server: string, kind: RouteKind): ResourceRoutes | undefined {
    return this.map.get(`${server}\0${kind}`)?.routes;
  }

  put(server: string, kind: RouteKind, routes: ResourceRoutes): void {
    const key = `${server}\0${kind}`;
    const json = JSON.stringify(routes);
    if (this.map.get(key)?.json === json) return;
    this.map.set(key, { routes, json });
    const row = { server, kind, shown: JSON.stringify(routes.shown), hidden: JSON.stringify(routes.hidden), seen: this.now() };
    this.writeLater(this.upsert, row, "a server's resource routes", { server, kind });
  }

  retain(servers: ReadonlySet<string>): void {
    const gone = new Set<string>();
    for (const key of this.map.keys()) {
      const server = key.slice(0, key.indexOf('\0'));
      if (servers.has(server)) continue;
      this.map.delete(key);
      gone.add(server);
    }
    for (const server of gone) this.writeLater(this.remove, { server }, "a removed server's resource routes", { server });
  }
}
