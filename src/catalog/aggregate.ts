/**
 * A catalog aggregate: every server's list of a kind (its parts) made into one, under the names
 * clients are shown, with what routes calls and reads by them; and what one group shows of it.
 */
import type { Logger } from '../log.js';
import type { Connection, Routed, ServerHandle } from './types.js';
import type { Groups } from './filters.js';
import type { ListEntry } from './list-cache.js';
import { NAME_FIELD, type ListKind } from './lists.js';
import { MAX_TEMPLATE_LENGTH, templateMatcher, type TemplateMatcher } from './uri-template.js';
import type { NameAssigner } from './names.js';
import type { PartRecord } from './part.js';
import { uriKey } from './uri-key.js';

export interface Part {
  h: ServerHandle;
  conn: Connection;
  e: ListEntry;
  /** The cache key of `e` (a principal's connection may have been given the shared public list). */
  key: string;
  records: PartRecord[];
  /** The pin generation its records were judged under (not the catalog's now: it may have moved meanwhile). */
  pinGen: number;
}

export interface GroupView {
  items: Record<string, unknown>[];
  byHubName: Map<string, Routed>;
  /** contentSnapshot of the items, worked out the first time a page needs it. */
  snapshot?: string;
}

export interface Built extends GroupView {
  key: string;
  /** Each part's server and cache scope: a page's cacheScope is part of what a snapshot is. */
  scopes: string;
  /** Every named record, hidden ones included (for `switchyard tools`). */
  all: { hubName: string; h: ServerHandle; record: PartRecord }[];
  templates: { matcher: TemplateMatcher; routed: Routed }[];
  /** Resource URIs some server lists but the hub hides (policy, poisoning): never routed by a template either. */
  hidden?: Set<string>;
  /**
   * Templates the hub hides (a plugin's hide, pinning, poisoning), by server: a URI one matches
   * is not read from that server through a link its tool gave either (Catalog.routeUri).
   */
  hiddenTemplates?: { matcher: TemplateMatcher; server: string }[];
  /**
   * Resources (templates) a server listed first in the config took the URI of: a group without
   * that server shows the first of these it has instead.
   */
  shadowed?: { item: Record<string, unknown>; routed: Routed }[];
  parts: Part[];
  /** Ready servers whose list failed with none to serve instead: left out, and asked again at the next list. */
  failed: readonly string[];
  views: Map<string, GroupView>;
  /**
   * The Groups.version `views` were worked out under: a reload's groups are never shown, nor
   * routed by, from a view of the old ones (a caller may hold an aggregate across setGroups).
   */
  viewsAt?: number;
  /** ListChanges.epoch (changes.ts) when the lists it was built from were asked for (see readyTool). */
  epoch: number;
}

/** The aggregate of the parts (each server's list, in config order): hub names assigned, and what routes by them. */
export function assemble(
  names: NameAssigner,
  servers: () => readonly ServerHandle[],
  log: Logger,
  kind: ListKind,
  parts: Part[],
  failed: readonly string[],
  key: string,
  epoch: number,
): Built {
  const scopes = parts.map((p) => `${p.h.id}${p.e.scope === 'private' || p.conn.credential !== '' ? ':private' : ''}`).join('|');
  const byHubName = new Map<string, Routed>();
  const items: Record<string, unknown>[] = [];
  const all: Built['all'] = [];
  const templates: Built['templates'] = [];
  let hidden: Set<string> | undefined;
  let hiddenTemplates: Built['hiddenTemplates'];
  let shadowed: Built['shadowed'];
  if (kind === 'tools' || kind === 'prompts') {
    const nameKind = kind === 'tools' ? 'tool' : 'prompt';
    const assigned = names.assign(
      nameKind,
      parts.map((p) => ({ id: p.h.id, prefix: p.h.config.prefix, names: p.records.filter((r) => !r.denied).map((r) => r.upstreamName) })),
      servers().map((h) => ({ id: h.id, prefix: h.config.prefix })),
    );
    for (const r of assigned.renamed) log.debug(r, `${nameKind} renamed for clients`);
    for (const { h, conn, records } of parts) {
      const map = assigned.names.get(h.id);
      const own = conn.credential !== '';
      for (const r of records) {
        if (r.denied) continue;
        const hubName = map?.get(r.upstreamName) ?? r.upstreamName;
        all.push({ hubName, h, record: r });
        if (r.hidden) continue;
        byHubName.set(hubName, { server: h, upstreamName: r.upstreamName, item: r.upstream, annotations: r.annotations, hubName, own });
        items.push(hubName === r.item.name ? r.item : { ...r.item, name: hubName });
      }
    }
  } else {
    // Resources keep their URIs; the first server in config order wins a collision.
    for (const { h, records } of parts) {
      for (const r of records) {
        if (r.denied) continue;
        all.push({ hubName: r.upstreamName, h, record: r });
        if (r.hidden) {
          if (kind === 'resources') (hidden ??= new Set()).add(uriKey(r.upstreamName));
          else {
            // One not routed (malformed, too long) was warned of when shown; hidden, it routes nothing anyway.
            const matcher = templateMatcher(r.upstreamName, () => undefined);
            if (matcher) (hiddenTemplates ??= []).push({ matcher, server: h.id });
          }
          continue;
        }
        const uri = r.upstreamName;
        const routed: Routed = { server: h, upstreamName: uri, item: r.upstream, hubName: uri };
        // A shadowed template still routes in config order: the first matching one a view shows.
        if (kind === 'resourceTemplates') {
          const where = { server: h.id, uriTemplate: uri.slice(0, 200) };
          const matcher = templateMatcher(uri, () => log.warn(where, 'resource template no longer routed: matching it needs more than a matcher keeps'));
          if (matcher) templates.push({ matcher, routed });
          else log.warn(where, `resource template not routed: malformed, or longer than ${MAX_TEMPLATE_LENGTH} characters`);
        }
        if (byHubName.has(uri)) {
          log.warn({ server: h.id, uri, owner: byHubName.get(uri)!.server.id }, 'duplicate resource URI: the first server in the config serves it (groups without that one: the next)');
          (shadowed ??= []).push({ item: r.item, routed });
          continue;
        }
        byHubName.set(uri, routed);
        items.push(r.item);
      }
    }
  }
  return { key, scopes, items, byHubName, all, templates, hidden, hiddenTemplates, shadowed, parts, failed, views: new Map(), epoch };
}

/** What one group shows of an aggregate (memoised with it). */
export function groupView(groups: Groups, kind: ListKind, b: Built, group: string | undefined): GroupView {
  if (group === undefined) return b;
  if (b.viewsAt !== groups.version) {
    b.views.clear();
    b.viewsAt = groups.version;
  }
  let v = b.views.get(group);
  if (v) return v;
  const items: Record<string, unknown>[] = [];
  const byHubName = new Map<string, Routed>();
  const nameField = NAME_FIELD[kind];
  for (const it of b.items) {
    const hubName = String(it[nameField]);
    const r = b.byHubName.get(hubName);
    if (!r || !groups.includes(group, kind, r.server.id, hubName, r.upstreamName, r.server.config.prefix)) continue;
    items.push(it);
    byHubName.set(hubName, r);
  }
  for (const s of b.shadowed ?? []) {
    if (byHubName.has(s.routed.hubName) || !groups.includes(group, kind, s.routed.server.id, s.routed.hubName)) continue;
    items.push(s.item);
    byHubName.set(s.routed.hubName, s.routed);
  }
  v = { items, byHubName };
  b.views.set(group, v);
  return v;
}
