import { itemText } from '../catalog/snapshot.js';

/**
 * Most bytes of items one page of an aggregated list holds, whatever `pageSize` allows. The
 * official SDKs' stdio clients (v1 and v2) drop the connection at a message over 10 MiB
 * (ReadBuffer), and a page of 1,000 tools of 12 KB each is one. Half the largest message a hub
 * takes from an upstream by default (maxFrameBytes, 4 MiB), so that a hub chained behind
 * another takes its every page, envelope and all.
 */
export const PAGE_BYTE_LIMIT = 2 * 1024 * 1024;

/** Each item's size as UTF-8 JSON, for as long as the item lives (items are never changed in place). */
const sizes = new WeakMap<object, number>();

function sizeOf(it: Record<string, unknown>): number {
  let n = sizes.get(it);
  if (n === undefined) {
    n = Buffer.byteLength(itemText(it));
    sizes.set(it, n);
  }
  return n;
}

/**
 * Where the page that starts at `offset` of a list of `length` ends: after at most `count`
 * places and `limit` bytes of items, and never before its first item (one item larger than the
 * limit is a page of its own, so every page moves on). `itemAt` gives what a place shows: none
 * for a place whose item is gone (a kept list's name the current list no longer has).
 */
export function pageEnd(length: number, offset: number, count: number, itemAt: (i: number) => Record<string, unknown> | undefined, limit = PAGE_BYTE_LIMIT): number {
  const max = Math.min(length, offset + count);
  let bytes = 0;
  let shown = 0;
  for (let i = offset; i < max; i++) {
    const it = itemAt(i);
    if (!it) continue;
    bytes += sizeOf(it) + 1; // and its comma
    if (bytes > limit && shown > 0) return i;
    shown++;
  }
  return max;
}
