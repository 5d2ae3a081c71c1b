import type { Upstream } from '../upstream/types.js';
import { MODERN } from '../protocol/era.js';
import { cacheTtl } from '../protocol/ttl.js';
import type { ListEntry } from './list-cache.js';
import { LIST_METHOD, NAME_FIELD, declaresListChanged, type ListKind } from './lists.js';
import { monotonicNow } from '../monotonic.js';
import { clippedValue } from '../protocol/shown-value.js';
import { redactErrorText } from '../policy/secret-text.js';
import { METHOD_NOT_FOUND, RpcError } from '../protocol/errors.js';

/** Legacy upstreams without listChanged get this freshness unless `cacheTtlMs` says otherwise. */
export const DEFAULT_LEGACY_TTL_MS = 30_000;
/**
 * Upstream pages per list. A server whose cursors never end (a new one on every page) fails its
 * list, as one past the item or byte limit does: what the hub fetched of it is not its list, and
 * taken as the whole, its later items were "unknown tool" with no list error to say why.
 */
export const LIST_PAGE_LIMIT = 1000;
/**
 * Pages in a row that bring no item the walk had not had (empty, or items it was given already)
 * while their cursor goes on: a server going round under new cursors each time, or paging on
 * with nothing, fails its list here rather than at LIST_PAGE_LIMIT, a thousand round trips that
 * every client's list waits for (the aggregate waits for each part).
 */
export const LIST_STALL_PAGES = 10;
/**
 * Items of one upstream list, and their size as JSON (characters). A real server lists tens to a
 * few thousand; one that pages on without end (each page up to maxFrameBytes) would have the
 * hub hold gigabytes, and build, judge and snapshot all of it at every refresh.
 */
export const LIST_ITEM_LIMIT = 10_000;
export const LIST_BYTE_LIMIT = 32 * 1024 * 1024;

/**
 * How much of a value an upstream wrote (a resultType, a nextCursor) a list's error quotes. The
 * error is the server's listError (/healthz, the admin API, `switchyard doctor`) and a log line:
 * a server chose the value's length, up to its frame limit, and anything in it (a token it was
 * given), so it is cut (the cut marked) and redacted as other upstream text on an error path.
 */
export const MAX_QUOTED_TEXT = 64;

/** `v` as a list's error quotes it: JSON, within MAX_QUOTED_TEXT, redacted (error path only). */
function quoted(v: unknown): string {
  return redactErrorText(clippedValue(typeof v === 'string' ? JSON.stringify(v) : v, MAX_QUOTED_TEXT));
}

/**
 * The first page of a server's resource templates, or none when it has no such method. The
 * `resources` capability stands for both lists, and a server may serve only resources/list:
 * SDK v1's low-level Server answers -32601 for a method it has no handler for. Taken as a failed
 * list, that was a listError on /healthz for good, a warning at every few lists, and a modern
 * client's templates list fresh for 5 s at most (LACKING_TTL_MS), as if the server were down.
 * Only the first page's: a -32601 to a cursor is a list that broke.
 */
async function templatesOrNone(upstream: Upstream): Promise<Record<string, unknown>> {
  try {
    return await upstream.request(LIST_METHOD.resourceTemplates, {});
  } catch (err) {
    if (!(err instanceof RpcError) || err.code !== METHOD_NOT_FOUND) throw err;
    // No templates is no user's data: as public as a list can be, and fresh by the era's rules
    // (a modern server's absent ttlMs is 0; a legacy one's until list_changed, else 30 s).
    return upstream.era === MODERN ? { resourceTemplates: [], cacheScope: 'public' } : { resourceTemplates: [] };
  }
}

/**
 * One upstream's whole list of a kind (every page) with its freshness, counted from `now()`
 * when it returns: a modern upstream's pages each stay fresh for their `ttlMs` (absent or
 * negative = 0) from when that page arrived, the list until the first of them goes stale; its
 * scope is private if any page is not `public`. A legacy one's until `list_changed` when
 * declared and the server has a way to say it, else 30 s, always private; `cacheTtlMs` (config) instead of either when set.
 */
export async function fetchList(upstream: Upstream, kind: ListKind, cacheTtlMs: number | undefined, now: () => number = monotonicNow): Promise<Omit<ListEntry, 'receivedAt' | 'version'>> {
  const items: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  /** When the first page to go stale does. */
  let staleAt = Infinity;
  let scope: 'public' | 'private' = 'public';
  const modern = upstream.era === MODERN;
  let bytes = 0;
  const given = new Set<string>();
  const names = new Set<unknown>();
  let stalled = 0;
  for (let page = 0; ; page++) {
    if (page === LIST_PAGE_LIMIT)
      throw new Error(`${LIST_METHOD[kind]} did not end: its server gave a next cursor on each of ${LIST_PAGE_LIMIT} pages, as many as the hub takes`);
    const res = page === 0 && kind === 'resourceTemplates' ? await templatesOrNone(upstream) : await upstream.request(LIST_METHOD[kind], cursor === undefined ? {} : { cursor });
    const arr = res[kind];
    // A page that is no list fails the walk, as a transport error would (the stale list is
    // served): read as an empty one, it would hide every item of the server from every client.
    // A list has no input_required or task turn, and an unknown resultType is invalid (digest §2.2).
    // A modern server's only: resultType is a field of the 2026-07-28 era, and a legacy server's
    // results come without it (upstream/legacy-result.ts leaves out one it writes of its own).
    if (modern && res.resultType !== undefined && res.resultType !== 'complete')
      throw new Error(`${LIST_METHOD[kind]} answered with resultType ${quoted(res.resultType)}, which a list cannot have`);
    if (!Array.isArray(arr)) throw new Error(`${LIST_METHOD[kind]} answered without its ${kind} array (page ${page + 1})`);
    // A cursor is a string (both eras' schemas; null is taken as none): read as the end, any
    // other value would hide the rest of the list with no error to say so.
    if (res.nextCursor !== undefined && res.nextCursor !== null && typeof res.nextCursor !== 'string')
      throw new Error(`${LIST_METHOD[kind]} answered with a nextCursor that is no string (page ${page + 1}): ${quoted(res.nextCursor)}`);
    let fresh = false;
    for (const it of arr)
      if (it && typeof it === 'object' && !Array.isArray(it)) {
        items.push(it as Record<string, unknown>);
        const name = (it as Record<string, unknown>)[NAME_FIELD[kind]];
        if (!names.has(name)) {
          names.add(name);
          fresh = true;
        }
      }
    stalled = fresh ? 0 : stalled + 1;
    bytes += JSON.stringify(arr).length;
    // The whole list fails: a part of one is not the server's list (a cached one is served stale).
    if (items.length > LIST_ITEM_LIMIT || bytes > LIST_BYTE_LIMIT)
      throw new Error(`${LIST_METHOD[kind]} is larger than the hub takes (more than ${LIST_ITEM_LIMIT} items or ${LIST_BYTE_LIMIT / 1024 / 1024} MiB); stopped after ${page + 1} pages`);
    if (modern) {
      // Each page counts from when it arrived (digest §3.2): a slow later page does not stretch an earlier one's.
      staleAt = Math.min(staleAt, now() + cacheTtl(res.ttlMs));
      // No scope means an older server: the safe reading is private.
      if (res.cacheScope !== 'public') scope = 'private';
    }
    // "" is a cursor like any other (digest §3.2), but a cursor this walk was given before would
    // only bring the same pages again, up to LIST_PAGE_LIMIT round trips at every list.
    if (typeof res.nextCursor !== 'string' || given.has(res.nextCursor)) break;
    if (stalled === LIST_STALL_PAGES)
      throw new Error(`${LIST_METHOD[kind]} did not end: ${LIST_STALL_PAGES} pages in a row brought nothing new, and its server gave a next cursor still`);
    cursor = res.nextCursor;
    given.add(cursor);
  }
  let ttl = Math.max(0, staleAt - now());
  if (!modern) {
    // "Until list_changed" only if a list_changed can come: not from a server without a stream for it.
    ttl = declaresListChanged(upstream.capabilities, kind) && upstream.hearsNotifications !== false ? Infinity : DEFAULT_LEGACY_TTL_MS;
    scope = 'private';
  }
  if (cacheTtlMs !== undefined) ttl = cacheTtlMs;
  return { items, ttlMs: ttl, scope };
}
