/** What is counted of a connection: its automatic restarts so far. */
interface Counted {
  readonly restarts: number;
}

/**
 * Automatic restarts of each server id since the hub started, over every connection it had (a
 * restart on request, a reload, a removal and a return each make a new one). A connection done
 * counting (replaced, or its server removed) leaves its count here, not itself: a removed
 * server's connection, kept as the last one counted, held the whole stopped upstream (its
 * buffers, logger and listeners) for as long as the hub ran, one per server id a reload removed.
 */
export class RestartTotals {
  private readonly totals = new Map<string, { earlier: number; last?: Counted }>();

  /** `upstream` is the server's connection from now on; the one it replaces is done counting. */
  connected(id: string, upstream: Counted): void {
    const t = this.totals.get(id);
    if (!t) this.totals.set(id, { earlier: 0, last: upstream });
    else if (t.last !== upstream) this.totals.set(id, { earlier: t.earlier + (t.last?.restarts ?? 0), last: upstream });
  }

  /** The servers still running: the connections of the others are done counting (their totals stay, should they return). */
  retain(running: ReadonlySet<string>): void {
    for (const [id, t] of this.totals) if (t.last && !running.has(id)) this.totals.set(id, { earlier: t.earlier + t.last.restarts });
  }

  /** Restarts under this id since the start, `upstream` being its connection now. */
  of(id: string, upstream: Counted): number {
    const t = this.totals.get(id);
    return t && t.last === upstream ? t.earlier + upstream.restarts : upstream.restarts;
  }
}

/**
 * Automatic restarts of principals' own connections to each server id (processPerPrincipal
 * processes, per-principal HTTP connections) since the hub started, summed over principals: the
 * metric is labelled by server only, as principal names are unbounded. A connection closed (idle,
 * evicted, its server restarted or removed) leaves its count here, not itself.
 */
export class PrincipalRestartTotals {
  private readonly totals = new Map<string, { earlier: number; live: Set<Counted> }>();

  /** A principal's connection to server `id`, counted from now until closed(). */
  opened(id: string, upstream: Counted): void {
    const t = this.totals.get(id) ?? { earlier: 0, live: new Set<Counted>() };
    t.live.add(upstream);
    this.totals.set(id, t);
  }

  /** It is done counting: its restarts so far join the total. */
  closed(id: string, upstream: Counted): void {
    const t = this.totals.get(id);
    if (t?.live.delete(upstream)) t.earlier += upstream.restarts;
  }

  of(id: string): number {
    const t = this.totals.get(id);
    if (!t) return 0;
    let n = t.earlier;
    for (const u of t.live) n += u.restarts;
    return n;
  }
}
