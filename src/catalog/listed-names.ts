/** Names kept per partition for its renames (listedNames): a list holds at most 10,000 items. */
export const MAX_LISTED_NAMES = 20_000;

/**
 * `names` with `listed` as its newest, and its oldest dropped past `max` (a server that makes up
 * names would otherwise grow it for as long as the hub runs).
 */
export function refreshed(names: Set<string>, listed: readonly string[], max: number): Set<string> {
  for (const n of listed) {
    names.delete(n);
    names.add(n);
  }
  for (const n of names) {
    if (names.size <= max) break;
    names.delete(n);
  }
  return names;
}
