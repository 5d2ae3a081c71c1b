/**
 * Each server's list of a kind, per authorization context, fetched through the list cache and
 * judged (pins, poisoning, plugins: part.ts) into the part an aggregate is built of; memoised by
 * the list's version, the pin generation and the server's config, and the names each
 * partition's lists have had (renames). Also why a server's own list failed last.
 */
import type { PluginRunner } from '../plugins/runner.js';
import type { Part } from './aggregate.js';
import { ListPendingError, type ListCache, type ListEntry } from './list-cache.js';
import type { ListChanges } from './changes.js';
import type { Connection, ServerHandle } from './types.js';
import { fetchList } from './fetch-list.js';
import { LIST_KINDS, LIST_METHOD, type ListKind } from './lists.js';
import { buildPart, type CatalogEvent, type PartPolicy, type PartRecord } from './part.js';
import type { PinStore } from './pins.js';
import { isRouteKind, MAX_STORED_ROUTES, routesOf, type ResourceRouteStore } from './resource-routes.js';
import { partKey, recordKey } from './keys.js';
import { principalConn, principalOfConn } from './principal-conn.js';
import { MAX_LISTED_NAMES, refreshed } from './listed-names.js';
import { replacedConnection } from './replaced-connection.js';
import { uriKey } from './uri-key.js';

/** A list's records as judged last, and what they were judged under. */
export interface Judged {
  version: number;
  pinGen: number;
  config: ServerHandle['config'];
  records: Promise<PartRecord[]>;
  /** The records once judged (for what must be told without awaiting: lastListed). */
  settled?: PartRecord[];
}

/**
 * How a part's list is had: 'bounded', a refresh waited for up to STALE_WAIT_MS while a stale
 * entry can stand in (a client's list request alone: Catalog.aggregate); 'whole', however long
 * it takes (a request's route, which must not go by a list from before a change said since, and
 * the hub's own fetch at a server's ready or change); 'held', the entry of the server's own
 * connection held now, fresh or not, never fetched (the shared aggregate /healthz counts by:
 * AggregateBuilds.refreshShared).
 */
export type ListWait = 'bounded' | 'whole' | 'held';

/** Principals' own lists kept as failed at most (principals that never list again are forgotten past it). */
const MAX_OWN_FAILED = 10_000;

export interface PartStoreOptions {
  cache: ListCache;
  changes: ListChanges;
  servers: () => readonly ServerHandle[];
  /** Wall-clock time, for what is stored (pins). */
  now: () => number;
  /** For how long lists stay fresh. */
  cacheNow: () => number;
  pinsOf: (kind: ListKind) => PinStore;
  policy: () => PartPolicy;
  plugins?: PluginRunner;
  report?: (e: CatalogEvent) => void;
  resourceRoutes?: ResourceRouteStore;
  listAtReady?: (h: ServerHandle) => boolean;
  /**
   * A list listed again after it failed with none to serve instead (clients are to hear it): of
   * the server's own connection, or of `principal`'s own (its clients alone).
   */
  changed: (kind: ListKind, serverId: string, principal?: string) => void;
}

export class PartStore {
  /**
   * Each list's records as judged last: by the list's version, the pin generation and the
   * server's config they were judged under (a reload that changes allow/deny or trust puts a new
   * config in place; a list fetched across it is judged again by the new one). By partKey.
   */
  readonly judged = new Map<string, Judged>();
  /**
   * Of each partition whose renames are judged by its own lists (not onePartition), every name
   * its lists have had in this process: a tool gone from one list and back under a new name in a
   * later one is a rename, as it is across a restart where the pins judge.
   */
  readonly listedNames = new Map<string, Set<string>>();
  /** The shared tools list each principal's connection last learned from (entryFor). */
  private readonly taught = new WeakMap<object, readonly unknown[]>();
  /**
   * `server\0kind` → why that list last failed on the server's own connection, until it next
   * succeeds: otherwise a ready server whose list is refused (too large, an error) shows 0 tools
   * and no error anywhere but the log.
   */
  private readonly listFailed = new Map<string, string>();
  /**
   * The lists of principals' own connections (partKey) that failed with none to serve instead,
   * until they next succeed: that principal's clients were shown none of the server's items, and
   * are told when they are back, as for the server's own (a legacy client, which keeps its list
   * until told, otherwise lacked them for good). Their errors are theirs, not the server's listError.
   */
  private readonly ownFailed = new Set<string>();
  private gen = 0;

  constructor(private readonly o: PartStoreOptions) {}

  /** The pin generation: bumped when pins, policy or plugins change, every list is judged again. */
  get pinGen(): number {
    return this.gen;
  }

  /** Every list held goes through the checks and hooks again at its next part. */
  judgeAgain(): void {
    this.gen++;
  }

  /** `wait`: how the list is had (ListWait). */
  async partFor(kind: ListKind, h: ServerHandle, conn: Connection, wait: ListWait = 'whole'): Promise<Part> {
    if (conn.credential !== '') return this.ownPartFor(kind, h, conn, wait);
    const key = `${h.id}\0${kind}`;
    try {
      const part = await this.partOf(kind, h, conn, wait);
      // It failed with no list to serve instead: clients that listed meanwhile were shown none
      // of its items, and nothing else tells them (no entry changed; a legacy client has no TTL),
      // unless the cache told it already, as a first list they were answered without.
      if (this.listFailed.size !== 0 && this.inUse(h, conn) && this.listFailed.delete(key) && !part.e.landingTold) this.o.changed(kind, h.id);
      return part;
    } catch (err) {
      // A connection a reload or `servers restart` replaced since (closed under its fetch): its
      // failure says nothing of the one in use, which showed it as its own list error. None held
      // ('held' fetches nothing) says nothing of the server either.
      // A first list still on its way (ListPendingError) has not failed: it is told when it lands.
      if (wait === 'held' || err instanceof ListPendingError || !this.inUse(h, conn)) throw err;
      // Upstream errors come redacted (upstream/upstream-error.ts); the hub's own say no secrets.
      const msg = String((err as Error)?.message ?? err).slice(0, 1000);
      this.listFailed.set(key, msg.startsWith(LIST_METHOD[kind]) ? msg : `${LIST_METHOD[kind]} failed: ${msg}`);
      throw err;
    }
  }

  /**
   * Whether the list of the server's own connection judged last (in this process) has this
   * upstream name, not left out by allow/deny: a name nobody's own connection alone may have shown.
   */
  lastListed(serverId: string, kind: ListKind, upstreamName: string): boolean {
    return this.judged.get(partKey(serverId, '', kind))?.settled?.some((r) => r.upstreamName === upstreamName && !r.denied) === true;
  }

  /** partFor over a principal's own connection. */
  private async ownPartFor(kind: ListKind, h: ServerHandle, conn: Connection, wait: ListWait): Promise<Part> {
    const pk = partKey(h.id, conn.credential, kind);
    let part: Part;
    try {
      part = await this.partOf(kind, h, conn, wait);
    } catch (err) {
      if (err instanceof ListPendingError) throw err; // told when it lands (list-cache.ts)
      this.ownFailed.delete(pk); // re-inserted: the oldest go first past the bound
      this.ownFailed.add(pk);
      if (this.ownFailed.size > MAX_OWN_FAILED) this.ownFailed.delete(this.ownFailed.values().next().value!);
      throw err;
    }
    // Unless the cache told it as its own first list landing (not the server's shared list a
    // principal may be given, whose tell is for the shared partition's clients alone).
    if (this.ownFailed.size !== 0 && this.ownFailed.delete(pk) && !(part.e.landingTold && part.key !== `${h.id}\0${kind}`)) this.o.changed(kind, h.id, principalOfConn(conn.credential));
    return part;
  }

  /** Why a list of the server's own connection failed last (none since it succeeded). */
  listError(serverId: string): string | undefined {
    if (this.listFailed.size === 0) return undefined;
    for (const kind of LIST_KINDS) {
      const why = this.listFailed.get(`${serverId}\0${kind}`);
      if (why !== undefined) return why;
    }
    return undefined;
  }

  /** The list of a kind held on the server's own connection, fresh or not (none fetched). */
  heldEntry(serverId: string, kind: ListKind): ListEntry | undefined {
    return this.o.cache.peek(`${serverId}\0${kind}`);
  }

  /** The shared entry under `shared` when a principal's own connection is given it: public and fresh. */
  sharedFor(shared: string): ListEntry | undefined {
    const e = this.o.cache.peek(shared);
    return e && e.scope === 'public' && this.o.cache.isFresh(e) ? e : undefined;
  }

  /**
   * A resource of this server that every list of it the hub holds hides (principals' own lists
   * may differ: one that shows it keeps its updates flowing).
   */
  async hiddenEverywhere(serverId: string, uri: string): Promise<boolean> {
    const lists: PartRecord[][] = [];
    for (const [pk, m] of this.judged) {
      if (!pk.startsWith(`${serverId}\0`) || !pk.endsWith('\0resources')) continue;
      const records = await m.records.catch(() => undefined);
      if (records) lists.push(records);
    }
    // Another spelling names it too (see uriKey): worth keying only if some list hides something.
    const key = lists.some((l) => l.some((x) => x.hidden)) ? uriKey(uri) : undefined;
    let hidden = false;
    for (const records of lists) {
      const r =
        records.find((x) => x.upstreamName === uri) ??
        (key === undefined ? undefined : (records.find((x) => !x.hidden && recordKey(x) === key) ?? records.find((x) => recordKey(x) === key)));
      if (!r) continue;
      if (!r.hidden) return false;
      hidden = true;
    }
    return hidden;
  }

  /** A principal's own lists of a server, gone: its next connection's lists are its first. */
  dropOwn(serverId: string, principal: string): void {
    const credential = principalConn(principal);
    for (const k of LIST_KINDS) {
      this.o.cache.drop(`${serverId}\0${k}\0${credential}`);
      this.judged.delete(partKey(serverId, credential, k));
      this.listedNames.delete(partKey(serverId, credential, k));
      this.ownFailed.delete(partKey(serverId, credential, k));
    }
  }

  /**
   * A server forgotten (Catalog.forget): why its lists failed goes; `removed`, its lists (every
   * principal's) and the names they had go with it, not kept for a server that may never come
   * back (a reload that renames servers, over months).
   */
  forget(serverId: string, removed: boolean): void {
    if (removed) {
      for (const pk of [...this.judged.keys()]) if (pk.startsWith(`${serverId}\0`)) this.judged.delete(pk);
      for (const pk of [...this.listedNames.keys()]) if (pk.startsWith(`${serverId}\0`)) this.listedNames.delete(pk);
    }
    for (const k of LIST_KINDS) this.listFailed.delete(`${serverId}\0${k}`);
    // Its principals' connections are closed with it: their next lists are of new ones.
    for (const pk of this.ownFailed) if (pk.startsWith(`${serverId}\0`)) this.ownFailed.delete(pk);
  }

  /** Whether `conn` (the server's own connection) is the one h's id is served by now. */
  private inUse(h: ServerHandle, conn: Connection): boolean {
    return !replacedConnection(this.o.servers(), undefined, h, conn.upstream, undefined);
  }

  /**
   * The list entry for a server, kind and authorization context, and its cache key; public
   * entries of the server's own context are shared.
   */
  private entryFor(h: ServerHandle, kind: ListKind, conn: Connection, wait: ListWait): { key: string; entry: Promise<ListEntry> } {
    const shared = `${h.id}\0${kind}`;
    if (wait === 'held' && conn.credential === '') {
      const e = this.o.cache.peek(shared);
      return { key: shared, entry: e ? Promise.resolve(e) : Promise.reject(new Error(`${LIST_METHOD[kind]}: no list held`)) };
    }
    if (conn.credential !== '') {
      const e = this.sharedFor(shared);
      if (e) {
        // Calls by this list go over the principal's own connection, which never saw it: it
        // needs the tools' x-mcp-header declarations (once per list it is given).
        if (kind === 'tools' && conn.upstream.learnTools && this.taught.get(conn.upstream) !== e.items) {
          this.taught.set(conn.upstream, e.items);
          conn.upstream.learnTools(e.items);
        }
        return { key: shared, entry: Promise.resolve(e) };
      }
    }
    const key = conn.credential === '' ? shared : `${shared}\0${conn.credential}`;
    return {
      key,
      entry: this.o.cache.get(key, () => {
        const askedAt = this.o.changes.epoch;
        return fetchList(conn.upstream, kind, h.config.cacheTtlMs, this.o.cacheNow).then((l) => Object.assign(l, { askedAt }));
      }, wait !== 'bounded'),
    };
  }

  private async partOf(kind: ListKind, h: ServerHandle, conn: Connection, wait: ListWait): Promise<Part> {
    const { key, entry } = this.entryFor(h, kind, conn, wait);
    const e = await entry;
    const pk = partKey(h.id, conn.credential, kind);
    let memo = this.judged.get(pk);
    if (!memo || memo.version !== e.version || memo.pinGen !== this.gen || memo.config !== h.config) {
      const old = memo;
      const records = (async () => {
        // Renames are judged by the pins alone where they all came from lists like this one. A
        // server whose clients may have connections of their own (listAtReady false) keeps the
        // pins of every principal's list in one store, and a tool of alice's private list is not
        // gone from carol's: there, as for a principal's own list, renames are judged against
        // the names this partition's lists had before (none: a first list has no renames). Not
        // only the last list's: a tool removed in one list and back renamed in the next is one.
        if (old) await old.records.catch(() => undefined);
        const one = this.onePartition(h, conn);
        const previous = one ? undefined : new Set(this.listedNames.get(pk));
        const built = await buildPart(kind, { id: h.id, config: h.config, era: conn.upstream.era }, e.items, {
          previous,
          ownList: conn.credential !== '',
          pins: this.o.pinsOf(kind),
          plugins: this.o.plugins,
          policy: this.o.policy(),
          now: this.o.now,
          report: (ev) => this.o.report?.(ev),
        });
        if (conn.credential === '' && isRouteKind(kind)) this.o.resourceRoutes?.put(h.id, kind, routesOf(built, kind, MAX_STORED_ROUTES));
        if (!one && (kind === 'tools' || kind === 'prompts')) {
          const names = this.listedNames.get(pk) ?? new Set<string>();
          // Refreshed, so a name still listed is the newest; the oldest go past the bound (a
          // server that makes up names would otherwise grow the set for as long as the hub runs).
          this.listedNames.set(pk, refreshed(names, built.map((r) => r.upstreamName), MAX_LISTED_NAMES));
        }
        return built;
      })();
      const m: Judged = { version: e.version, pinGen: this.gen, config: h.config, records };
      memo = m;
      this.judged.set(pk, m);
      records.then(
        (r) => void (m.settled = r),
        () => {
          if (this.judged.get(pk) === m) this.judged.delete(pk);
        },
      );
    }
    const m = memo;
    return { h, conn, e, key, records: await m.records, pinGen: m.pinGen };
  }

  /**
   * Whether every pin of h came from lists of this connection's partition: the server's own
   * connection, of a server no principal may have a connection of its own to (listAtReady).
   */
  private onePartition(h: ServerHandle, conn: Connection): boolean {
    return conn.credential === '' && this.o.listAtReady?.(h) !== false;
  }
}
