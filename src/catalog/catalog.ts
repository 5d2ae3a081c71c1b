import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import type { ServerConfig } from '../config/types.js';
import type { Upstream } from '../upstream/types.js';
import { ListCache, type ListEntry } from './list-cache.js';
import { CHANGED_NOTIFICATION, LIST_KINDS, LIST_METHOD, declaresListChanged, offers, type ListKind } from './lists.js';
import { templateMatcher } from './uri-template.js';
import type { NameAssigner } from './names.js';
import { MODERN } from '../protocol/era.js';

/** One configured upstream as the catalog sees it. */
export interface ServerHandle {
  readonly id: string;
  readonly config: ServerConfig;
  readonly upstream: Upstream;
}

/** The hub's view of one list family across every upstream. */
export interface Aggregate {
  items: Record<string, unknown>[];
  /** Smallest remaining freshness of the parts (ms). */
  ttlMs: number;
  scope: 'public' | 'private';
  /** Identifies this version of the aggregate, for cursors. */
  snapshot: string;
}

export interface Routed<T = Record<string, unknown>> {
  server: ServerHandle;
  upstreamName: string;
  item: T;
}

interface Built extends Aggregate {
  key: string;
  byHubName: Map<string, Routed>;
}

/** Legacy upstreams without listChanged get this freshness unless `cacheTtlMs` says otherwise. */
export const DEFAULT_LEGACY_TTL_MS = 30_000;
const PAGE_LIMIT = 1000; // upstream pages per list; a server that never ends its cursor chain is cut off

/**
 * Aggregates the lists of every upstream, names tools and prompts collision-free, and routes
 * hub names and resource URIs back to their upstream. Emits 'changed' (kind) when a list of a
 * family may have changed (list_changed, an upstream coming or going).
 */
export class Catalog extends EventEmitter {
  readonly cache: ListCache;
  private readonly built = new Map<ListKind, Built>();

  constructor(
    private readonly servers: () => readonly ServerHandle[],
    private readonly names: NameAssigner,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    super();
    this.cache = new ListCache(now, (key, err) =>
      log.warn({ key, err: String((err as Error)?.message ?? err) }, 'list refresh failed; serving the stale entry'),
    );
  }

  /** Wire an upstream's notifications into invalidation. */
  watch(h: ServerHandle): void {
    h.upstream.on('notification', (n: { method: string; params?: Record<string, unknown> }) => {
      const kinds = CHANGED_NOTIFICATION[n.method];
      if (kinds) this.invalidate(h.id, kinds);
    });
    h.upstream.on('state', () => this.invalidate(h.id, LIST_KINDS));
  }

  invalidate(serverId: string, kinds: readonly ListKind[] = LIST_KINDS): void {
    for (const k of kinds) this.cache.invalidate(`${serverId}\0${k}`);
    for (const k of kinds) this.emit('changed', k);
  }

  /** Forget a removed server entirely. */
  forget(serverId: string): void {
    this.cache.drop(`${serverId}\0`);
    for (const k of LIST_KINDS) this.emit('changed', k);
  }

  async aggregate(kind: ListKind): Promise<Aggregate> {
    return this.build(kind);
  }

  async resolveTool(hubName: string): Promise<Routed | undefined> {
    return (await this.build('tools')).byHubName.get(hubName);
  }

  async resolvePrompt(hubName: string): Promise<Routed | undefined> {
    return (await this.build('prompts')).byHubName.get(hubName);
  }

  /**
   * The upstream that serves a URI: an exact match in some resources list first, then the first
   * matching template; ties go to the server listed first in the config (documented).
   */
  async routeUri(uri: string): Promise<ServerHandle | undefined> {
    const resources = await this.build('resources');
    const exact = resources.byHubName.get(uri);
    if (exact) return exact.server;
    const templates = await this.build('resourceTemplates');
    for (const r of templates.byHubName.values()) {
      const m = (r.item as { __matcher?: RegExp | null }).__matcher;
      if (m && m.test(uri)) return r.server;
    }
    return undefined;
  }

  /** The server owning a resource template, by its exact uriTemplate (completion refs name templates). */
  async templateOwner(uriTemplate: string): Promise<ServerHandle | undefined> {
    return (await this.build('resourceTemplates')).byHubName.get(uriTemplate)?.server;
  }

  private ready(kind: ListKind): ServerHandle[] {
    return this.servers().filter((h) => h.upstream.state === 'ready' && offers(h.upstream.capabilities, kind));
  }

  private entryFor(h: ServerHandle, kind: ListKind): Promise<ListEntry> {
    return this.cache.get(`${h.id}\0${kind}`, async () => {
      const items: Record<string, unknown>[] = [];
      let cursor: string | undefined;
      let ttl = Infinity;
      let scope: 'public' | 'private' = 'public';
      const modern = h.upstream.era === MODERN;
      for (let page = 0; page < PAGE_LIMIT; page++) {
        const res = await h.upstream.request(LIST_METHOD[kind], cursor === undefined ? {} : { cursor });
        const arr = res[kind];
        if (Array.isArray(arr)) for (const it of arr) if (it && typeof it === 'object') items.push(it as Record<string, unknown>);
        if (modern) {
          const t = typeof res.ttlMs === 'number' && res.ttlMs > 0 ? res.ttlMs : 0;
          ttl = Math.min(ttl, t);
          // No scope means an older server: the safe reading is private.
          if (res.cacheScope !== 'public') scope = 'private';
        }
        if (typeof res.nextCursor !== 'string') break;
        cursor = res.nextCursor;
      }
      if (!modern) {
        // Legacy upstreams give no hints: trust list_changed when declared, else a configured TTL.
        ttl = declaresListChanged(h.upstream.capabilities, kind)
          ? Infinity
          : (h.config.cacheTtlMs ?? DEFAULT_LEGACY_TTL_MS);
        scope = 'private';
      }
      return { items, ttlMs: ttl, scope };
    });
  }

  private async build(kind: ListKind): Promise<Built> {
    const handles = this.ready(kind);
    const settled = await Promise.allSettled(handles.map((h) => this.entryFor(h, kind)));
    const parts: { h: ServerHandle; e: ListEntry }[] = [];
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') parts.push({ h: handles[i], e: s.value });
      else this.log.warn({ server: handles[i].id, kind, err: String(s.reason?.message ?? s.reason) }, 'list failed');
    });
    const key = parts.map((p) => `${p.h.id}:${p.e.version}`).join('|');
    const prev = this.built.get(kind);
    let ttlMs = Infinity;
    let scope: 'public' | 'private' = 'public';
    for (const p of parts) {
      ttlMs = Math.min(ttlMs, this.cache.remainingMs(p.e));
      if (p.e.scope === 'private') scope = 'private';
    }
    if (!Number.isFinite(ttlMs)) ttlMs = 0; // nothing revalidates the hub's own downstream caches but a notification
    if (prev && prev.key === key) return { ...prev, ttlMs, scope };
    const built = this.assemble(kind, parts, key);
    built.ttlMs = ttlMs;
    built.scope = scope;
    this.built.set(kind, built);
    return built;
  }

  private assemble(kind: ListKind, parts: { h: ServerHandle; e: ListEntry }[], key: string): Built {
    const byHubName = new Map<string, Routed>();
    const items: Record<string, unknown>[] = [];
    if (kind === 'tools' || kind === 'prompts') {
      const nameKind = kind === 'tools' ? 'tool' : 'prompt';
      const assigned = this.names.assign(
        nameKind,
        parts.map((p) => ({
          id: p.h.id,
          prefix: p.h.config.prefix,
          names: p.e.items.map((i) => String(i.name)),
        })),
      );
      for (const r of assigned.renamed) this.log.info(r, `${nameKind} renamed for clients`);
      for (const { h, e } of parts) {
        const map = assigned.names.get(h.id);
        for (const it of e.items) {
          const upstreamName = String(it.name);
          const hubName = map?.get(upstreamName) ?? upstreamName;
          const out = hubName === upstreamName ? it : { ...it, name: hubName };
          byHubName.set(hubName, { server: h, upstreamName, item: it });
          items.push(out);
        }
      }
    } else {
      // Resources keep their URIs; the first server in config order wins a collision.
      const uriField = kind === 'resources' ? 'uri' : 'uriTemplate';
      for (const { h, e } of parts) {
        for (const it of e.items) {
          const uri = String(it[uriField]);
          if (byHubName.has(uri)) {
            this.log.warn({ server: h.id, uri, owner: byHubName.get(uri)!.server.id }, 'duplicate resource URI hidden');
            continue;
          }
          const routed: Routed = { server: h, upstreamName: uri, item: it };
          if (kind === 'resourceTemplates') (routed.item as { __matcher?: RegExp | null }) = { ...it, __matcher: templateMatcher(uri) };
          byHubName.set(uri, routed);
          items.push(it);
        }
      }
    }
    return { key, items, byHubName, ttlMs: 0, scope: 'public', snapshot: shortHash(key) };
  }
}

function shortHash(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(36);
}
