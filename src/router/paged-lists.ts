import type { View } from '../catalog/types.js';

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

interface Kept {
  principal: string;
  items: readonly Record<string, unknown>[];
  until: number;
}

/**
 * The lists clients are paging through, by view and snapshot: a cursor names the list it came
 * from, and its next page is served from that list even when the aggregate was rebuilt since
 * with the same items in another order (an upstream with ttlMs 0 that shuffles its list would
 * otherwise make every cursor stale, and nobody could page past the first page) or changed.
 * Bound to the view (principal and group) that was served the first page: a cursor handed to
 * someone else never shows them another principal's private list.
 */
export class PagedLists {
  private readonly kept = new Map<string, Kept>();

  constructor(private readonly now: () => number = Date.now) {}

  remember(view: View, kind: string, snapshot: string, items: readonly Record<string, unknown>[]): void {
    const k = keyOf(view, kind, snapshot);
    const principal = view.principal ?? '';
    this.kept.delete(k); // re-inserted: Map order is least recently served first
    this.kept.set(k, { principal, items, until: this.now() + PAGED_LIST_KEEP_MS });
    let oldest: string | undefined;
    let mine = 0;
    for (const [key, e] of this.kept) if (e.principal === principal && mine++ === 0) oldest = key;
    if (mine > MAX_KEPT_PER_PRINCIPAL) this.kept.delete(oldest!);
    else if (this.kept.size > MAX_KEPT) this.kept.delete(this.kept.keys().next().value!);
  }

  recall(view: View, kind: string, snapshot: string): readonly Record<string, unknown>[] | undefined {
    const k = keyOf(view, kind, snapshot);
    const e = this.kept.get(k);
    if (!e) return undefined;
    if (e.until <= this.now()) {
      this.kept.delete(k);
      return undefined;
    }
    e.until = this.now() + PAGED_LIST_KEEP_MS;
    return e.items;
  }
}

function keyOf(view: View, kind: string, snapshot: string): string {
  return JSON.stringify([view.principal ?? '', view.group ?? '', kind, snapshot]);
}
