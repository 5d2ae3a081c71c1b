import type { View } from '../catalog/types.js';
import { NAME_FIELD, type ListKind } from '../catalog/lists.js';

/** How long a list a client is paging through is kept after its last page was served. */
export const PAGED_LIST_KEEP_MS = 5 * 60_000;
/** Lists kept at once; the least recently served goes first. */
export const MAX_KEPT = 256;
/**
 * Lists kept for one principal: past it, that principal's least recently served goes, so that
 * one client paging through a list that reorders at every fetch (each first page a new
 * snapshot) cannot push everyone else's lists out and bring their cursors' -32602 back.
 */
export const MAX_KEPT_PER_PRINCIPAL = 32;

/** What is kept of a list a cursor names: the order of its items, and the scope its pages carry. */
export interface KeptList {
  /** Each item's name (its hub name, URI or template), in the list's order. */
  names: readonly unknown[];
  /** The cacheScope of its first page: every page of one list carries the same (digest §3.2). */
  scope: 'public' | 'private';
}

interface Kept extends KeptList {
  principal: string;
  until: number;
}

/**
 * The lists clients are paging through, by view and snapshot: a cursor names the list it came
 * from, and its next page is served from that list even when the aggregate was rebuilt since
 * with the same items in another order (an upstream with ttlMs 0 that shuffles its list would
 * otherwise make every cursor stale, and nobody could page past the first page) or changed.
 * Bound to the view (principal and group) that was served the first page: a cursor handed to
 * someone else never shows them another principal's private list.
 *
 * Only names are kept: a page shows the items as the hub has them now (the router maps the
 * names), so the items themselves are not needed, and holding them would hold every old
 * aggregate (5,000 tools of 2 KB kept 32 times: most of a gigabyte) for as long as its cursor lives.
 */
export class PagedLists {
  private readonly kept = new Map<string, Kept>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Keeps (or keeps longer, as the most recently served) the list `snapshot` names; `items` and
   * `scope` are read only when it is new (a kept list keeps the scope of its first page).
   */
  remember(view: View, kind: ListKind, snapshot: string, items: readonly Record<string, unknown>[], scope: 'public' | 'private'): void {
    const k = keyOf(view, kind, snapshot);
    const principal = view.principal ?? '';
    // The same snapshot is the same list: its names need not be taken again at every first page.
    const had = this.kept.get(k);
    const names = had?.names ?? items.map((it) => it[NAME_FIELD[kind]]);
    this.kept.delete(k); // re-inserted: Map order is least recently served first
    this.kept.set(k, { principal, names, scope: had?.scope ?? scope, until: this.now() + PAGED_LIST_KEEP_MS });
    let oldest: string | undefined;
    let mine = 0;
    for (const [key, e] of this.kept) if (e.principal === principal && mine++ === 0) oldest = key;
    if (mine > MAX_KEPT_PER_PRINCIPAL) this.kept.delete(oldest!);
    else if (this.kept.size > MAX_KEPT) this.kept.delete(this.kept.keys().next().value!);
  }

  recall(view: View, kind: ListKind, snapshot: string): KeptList | undefined {
    const k = keyOf(view, kind, snapshot);
    const e = this.kept.get(k);
    if (!e) return undefined;
    if (e.until <= this.now()) {
      this.kept.delete(k);
      return undefined;
    }
    e.until = this.now() + PAGED_LIST_KEEP_MS;
    return e;
  }
}

function keyOf(view: View, kind: string, snapshot: string): string {
  return JSON.stringify([view.principal ?? '', view.group ?? '', kind, snapshot]);
}
