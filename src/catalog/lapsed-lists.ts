/**
 * Which principals' own lists of a server the catalog may forget. A principal's own connection
 * (per-principal credentials, or authentication on and a legacy HTTP server) closes when idle
 * or evicted from the pool (auth/upstream-pool.ts), and its lists stay so that the next
 * connection's first fetch can tell that principal's clients whether they changed. Kept for
 * every principal that ever connected, though, they grew with each new user (an OAuth `sub`)
 * for as long as the daemon ran, each a whole tool list: so only the last `max` partitions whose
 * connections all closed are kept, and the oldest one's lists are dropped past that. A partition
 * with a connection open is never dropped.
 */

/** Partitions with no connection open that keep their lists (as many as the pool has connections). */
export const MAX_LAPSED = 256;

export class LapsedLists {
  /** Connections open per partition (a reload's new one may open before the old one closes). */
  private readonly open = new Map<string, number>();
  /** Partitions with none open, least recently closed first. */
  private readonly lapsed = new Map<string, { serverId: string; principal: string }>();

  constructor(
    private readonly drop: (serverId: string, principal: string) => void,
    private readonly max = MAX_LAPSED,
  ) {}

  opened(serverId: string, principal: string): void {
    const k = key(serverId, principal);
    this.open.set(k, (this.open.get(k) ?? 0) + 1);
    this.lapsed.delete(k);
  }

  /** One connection of the partition closed for good (each opened one closes once). */
  closed(serverId: string, principal: string): void {
    const k = key(serverId, principal);
    const n = (this.open.get(k) ?? 1) - 1;
    if (n > 0) {
      this.open.set(k, n);
      return;
    }
    this.open.delete(k);
    this.lapsed.delete(k);
    this.lapsed.set(k, { serverId, principal });
    for (const [oldest, p] of this.lapsed) {
      if (this.lapsed.size <= this.max) break;
      this.lapsed.delete(oldest);
      this.drop(p.serverId, p.principal);
    }
  }

  get size(): number {
    return this.lapsed.size;
  }
}

function key(serverId: string, principal: string): string {
  return JSON.stringify([serverId, principal]);
}
