/**
 * The aggregates of each list kind (every ready server's part, assembled: aggregate.ts), built
 * per authorization context and memoised by their parts' versions; which one each principal was
 * given last (what its calls and reads are routed by), and the tools one built in the background
 * after a call routed by its server's list alone.
 */
import type { Logger } from '../log.js';
import type { ListChanges } from './changes.js';
import type { ListWait, PartStore } from './part-store.js';
import type { NameAssigner } from './names.js';
import type { Connection, ServerHandle } from './types.js';
import { offers, type ListKind } from './lists.js';
import { assemble, type Built, type Part } from './aggregate.js';
import { ListPendingError } from './list-cache.js';

const BUILT_MEMO = 64;
/** Builds of one request begun again because a server was replaced under them; past them the last is given, never kept. */
const MAX_BUILDS_AGAIN = 3;

export interface AggregateBuildsOptions {
  servers: () => readonly ServerHandle[];
  names: NameAssigner;
  log: Logger;
  parts: PartStore;
  changes: ListChanges;
  /** CatalogOptions.connection: a principal's connection to a server (none: the server's own). */
  connection?: (h: ServerHandle, principal: string | undefined) => Connection | Promise<Connection>;
  /** CatalogOptions.standsAlone. */
  standsAlone?: (h: ServerHandle, principal: string, ready: boolean) => boolean;
}

/** The servers ready now that offer the kind, in config order: those a build takes a part from. */
export function readyServers(servers: readonly ServerHandle[], kind: ListKind): ServerHandle[] {
  return servers.filter((h) => h.upstream.state === 'ready' && offers(h.upstream.capabilities, kind));
}

export class AggregateBuilds {
  private readonly servers: () => readonly ServerHandle[];
  private readonly built = new Map<string, Built>();
  /** The tools aggregate built last of the shared partition (no principal's own connection in it). */
  private latestShared: Built | undefined;
  /** Principals whose tools aggregate buildSoon is building. */
  private readonly building = new Set<string>();
  /** `kind\0principal` → the memo key of the aggregate built last for that principal. */
  private readonly lastBuilt = new Map<string, string>();
  private forgotten = 0;
  /** refreshShared: a build under way, and whether another was asked for meanwhile. */
  private sharing = false;
  private shareAgain = false;

  constructor(private readonly o: AggregateBuildsOptions) {
    this.servers = o.servers;
  }

  /**
   * Counts the servers forgotten (forget: removed, replaced by a reload or `servers restart`, or
   * reconfigured): a route or aggregate looked up across a change of it may name a handle, and a
   * connection, not in use any more (router/replaced.ts; build).
   */
  get generation(): number {
    return this.forgotten;
  }

  /** A server was forgotten: no aggregate built so far is served or routed by again, nor one under way kept. */
  forget(): void {
    this.forgotten++;
    this.drop();
  }

  /** No aggregate built so far is served or routed by again. */
  drop(): void {
    this.built.clear();
    this.lastBuilt.clear();
    this.latestShared = undefined;
  }

  /**
   * The tools aggregate built last that is nobody's in particular (every part from a server's own
   * connection): what may be told of to anyone, where another principal's may be its private list.
   */
  get latestSharedTools(): Built | undefined {
    return this.latestShared;
  }

  /** The tools aggregate built last for this principal (readyTool: once per call, no allocation but the key). */
  lastTools(principal: string | undefined): Built | undefined {
    const mk = this.lastBuilt.get(`tools\0${principal ?? ''}`);
    return mk === undefined ? undefined : this.built.get(mk);
  }

  /** The memo key of the aggregate of a kind built last for this principal (see build's memo key). */
  lastKey(kind: ListKind, principal: string | undefined): string | undefined {
    return this.lastBuilt.get(`${kind}\0${principal ?? ''}`);
  }

  /** The aggregate memoised under a memo key. */
  memo(mk: string): Built | undefined {
    return this.built.get(mk);
  }

  /** The tools aggregate of this principal built in the background (once at a time), for readyTool. */
  buildSoon(principal: string | undefined): void {
    const k = principal ?? '';
    if (this.building.has(k)) return;
    this.building.add(k);
    void this.build('tools', principal)
      .catch((err: unknown) => this.o.log.debug({ err: String((err as Error)?.message ?? err) }, 'tools list after a call routed by its server alone failed'))
      .finally(() => this.building.delete(k));
  }

  /**
   * Whether any of these handles is not its server's now: a reload or `servers restart` that
   * replaces, reconfigures or removes a server puts a new handle in place, or none (reload.ts).
   * Only once a server was forgotten during a build, never per call.
   */
  private anyReplaced(handles: readonly ServerHandle[]): boolean {
    const now = this.servers();
    return handles.some((h) => !now.includes(h));
  }

  /**
   * Whether the shared tools aggregate built last is not of the lists held now (or none was
   * built), when every ready server offering tools has a list held on its own connection and
   * none is starting (else false: one has not been listed yet, or only a principal's connection
   * lists it, listAtReady; one starting may take names).
   * Its key spelled as build spells it: no allocation but the key, once per /healthz.
   */
  sharedToolsStale(): boolean {
    let key = '';
    const gen = this.o.parts.pinGen;
    const servers = this.servers();
    // One still starting may list a name another lists too: built without it, the other would
    // take (and store) that name before any client's list could give it by config order.
    for (const h of servers) if (h.upstream.state === 'starting') return false;
    for (const h of readyServers(servers, 'tools')) {
      const e = this.o.parts.heldEntry(h.id, 'tools');
      if (!e) return false;
      key += `${h.id}:${e.version}.${gen}${e.scope === 'private' ? 'p' : ''}|`;
    }
    return this.latestShared?.key !== key;
  }

  /**
   * The shared tools aggregate built again, in the background, from the lists held on the
   * servers' own connections, fresh or not: nothing is fetched (what /healthz counts a group key's
   * tools by, which may be polled often). Through build, as a client's list: the names are those
   * a client is given (which of two servers listing one name gets a suffix is decided, and
   * stored, there). Kept as latestShared only: no call is routed by it (build). One at a time;
   * one more after it when asked meanwhile.
   */
  refreshShared(): void {
    if (!this.sharedToolsStale()) return;
    if (this.sharing) {
      this.shareAgain = true;
      return;
    }
    this.sharing = true;
    void this.build('tools', undefined, 0, 'held')
      .catch((err: unknown) => this.o.log.debug({ err: String((err as Error)?.message ?? err) }, 'shared tools list from the lists held failed'))
      .finally(() => {
        this.sharing = false;
        if (this.shareAgain) {
          this.shareAgain = false;
          this.refreshShared();
        }
      });
  }

  /** `wait`: how each part's list is had (PartStore's ListWait); 'held' only for principal undefined. */
  async build(kind: ListKind, principal: string | undefined, again = 0, wait: ListWait = 'whole'): Promise<Built> {
    const epoch = this.o.changes.epoch;
    const generation = this.forgotten;
    const ready = readyServers(this.servers(), kind);
    // A server whose main connection is down, to a principal whose own connection needs none of
    // it (standsAlone): listed from that connection (made now, as for a server that is up) once
    // it is ready and offers the kind.
    const standsAlone = this.o.standsAlone;
    const alone = principal === undefined || !standsAlone ? [] : this.servers().filter((h) => h.upstream.state !== 'ready' && h.upstream.state !== 'stopped' && standsAlone(h, principal, false));
    const handles = alone.length === 0 ? ready : [...ready, ...alone];
    const connection = this.o.connection;
    const settled = await Promise.allSettled(
      handles.map(async (h, i): Promise<Part | undefined> => {
        const conn = connection ? await connection(h, principal) : { credential: '', upstream: h.upstream };
        if (i >= ready.length && (conn.upstream.state !== 'ready' || !offers(conn.upstream.capabilities, kind))) return undefined;
        return this.o.parts.partFor(kind, h, conn, wait);
      }),
    );
    const parts: Part[] = [];
    const failed: string[] = [];
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        if (s.value) parts.push(s.value);
      } else {
        failed.push(handles[i].id);
        if (s.reason instanceof ListPendingError) this.o.log.info({ server: handles[i].id, kind }, 'first list not back yet: left out of this list, clients told when it lands');
        else if (wait !== 'held') this.o.log.warn({ server: handles[i].id, kind, err: String(s.reason?.message ?? s.reason) }, 'list failed');
      }
    });
    // Of the lists held, with one of them gone meanwhile (forgotten, dropped): a build without
    // that server could give its tools' names to another's, which a client's never would.
    if (wait === 'held' && failed.length !== 0) throw new Error(`no list held of ${failed.join(', ')}`);
    // A server replaced or reconfigured while the lists were fetched: its part is of the old
    // connection (its process draining) or config. Built again from the servers as they are now;
    // kept, it was listed, and calls routed by it went to the old process. Only a server this
    // build asked for its list: another one's replacement (a reload restarting a server that
    // does not offer the kind, or was not ready) leaves every part as good as it was, and
    // building again asked each server for its list again (each kept 0 ms), the slowest too.
    if (generation !== this.forgotten && this.anyReplaced(handles)) {
      if (again < MAX_BUILDS_AGAIN) return this.build(kind, principal, again + 1, wait);
      return assemble(this.o.names, this.servers, this.o.log, kind, parts, failed, '', epoch);
    }
    let key = '';
    let creds = '';
    for (const p of parts) {
      // The scope is part of what a snapshot is: every page of one list carries the same one.
      // Each part's own generation: a build that awaited parts judged before an approval must not
      // pass for one after it (the next build would reuse it as current, the tool hidden for good).
      key += `${p.h.id}:${p.e.version}.${p.pinGen}${p.e.scope === 'private' ? 'p' : ''}|`;
      // JSON, so no credential (a principal is free text: an OAuth sub may hold `,` and `=`) spells
      // another's: "alice,w2=principal:alice" was alice's memo key, and its calls were routed by
      // her private list (lastTools: the aggregate last built under that key).
      if (p.conn.credential !== '') creds += JSON.stringify([p.h.id, p.conn.credential]);
    }
    const memoKey = `${kind}\0${creds}`;
    // Of the lists held: for /healthz's counts alone, never what a call is routed by (readyTool).
    // Its lists may predate a change said since (fetched while it was said): dated after it, it
    // had calls routed by them with no fetch and no pin check of the list after the change.
    if (wait === 'held') {
      const prev = this.built.get(memoKey);
      return (this.latestShared = prev && prev.key === key ? prev : assemble(this.o.names, this.servers, this.o.log, kind, parts, failed, key, epoch));
    }
    if (this.lastBuilt.size > 10_000) this.lastBuilt.clear();
    this.lastBuilt.set(`${kind}\0${principal ?? ''}`, memoKey);
    const prev = this.built.get(memoKey);
    if (prev && prev.key === key) {
      prev.parts = parts; // same versions; fresher entries for the TTL hints
      prev.failed = failed;
      prev.epoch = epoch; // and checked again since any change
      if (kind === 'tools' && creds === '') this.latestShared = prev;
      return prev;
    }
    const built = assemble(this.o.names, this.servers, this.o.log, kind, parts, failed, key, epoch);
    if (kind === 'tools' && creds === '') this.latestShared = built;
    this.built.delete(memoKey);
    this.built.set(memoKey, built);
    if (this.built.size > BUILT_MEMO) this.built.delete(this.built.keys().next().value!);
    return built;
  }
}
