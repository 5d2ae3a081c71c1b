/** What is counted of a connection: its automatic restarts so far, and how many of them followed a hang. */
interface Counted {
  readonly restarts: number;
  /** Of those, restarts after it was taken down as hung (Lifecycle.hungRestarts); none when absent. */
  readonly hungRestarts?: number;
}

/** Restarts counted: all of them, and those after a hang. */
interface Sums {
  all: number;
  hung: number;
}

const sumsOf = (c: Counted): Sums => ({ all: c.restarts, hung: c.hungRestarts ?? 0 });
const plus = (a: Sums, b: Sums): Sums => ({ all: a.all + b.all, hung: a.hung + b.hung });
const NONE: Sums = { all: 0, hung: 0 };

/**
 * Automatic restarts of each server id since the hub started, over every connection it had (a
 * restart on request, a reload, a removal and a return each make a new one). A connection done
 * counting (replaced, or its server removed) leaves its count here, not itself: a removed
 * server's connection, kept as the last one counted, held the whole stopped upstream (its
 * buffers, logger and listeners) for as long as the hub ran, one per server id a reload removed.
 */
export class RestartTotals {
  private readonly totals = new Map<string, { earlier: Sums; last?: Counted }>();

  /** `upstream` is the server's connection from now on; the one it replaces is done counting. */
  connected(id: string, upstream: Counted): void {
    const t = this.totals.get(id);
    if (!t) this.totals.set(id, { earlier: NONE, last: upstream });
    else if (t.last !== upstream) this.totals.set(id, { earlier: t.last ? plus(t.earlier, sumsOf(t.last)) : t.earlier, last: upstream });
  }

  /** The servers still running: the connections of the others are done counting (their totals stay, should they return). */
  retain(running: ReadonlySet<string>): void {
    for (const [id, t] of this.totals) if (t.last && !running.has(id)) this.totals.set(id, { earlier: plus(t.earlier, sumsOf(t.last)) });
  }

  /** Restarts under this id since the start, `upstream` being its connection now. */
  of(id: string, upstream: Counted): number {
    return this.sums(id, upstream).all;
  }

  /** Of those, the restarts after a hang. */
  hungOf(id: string, upstream: Counted): number {
    return this.sums(id, upstream).hung;
  }

  private sums(id: string, upstream: Counted): Sums {
    const t = this.totals.get(id);
    return t && t.last === upstream ? plus(t.earlier, sumsOf(upstream)) : sumsOf(upstream);
  }
}

/**
 * Automatic restarts of principals' own connections to each server id (processPerPrincipal
 * processes, per-principal HTTP connections) since the hub started, summed over principals: the
 * metric is labelled by server (and reason), not principal, as principal names are unbounded. A connection closed (idle,
 * evicted, its server restarted or removed) leaves its count here, not itself.
 */
export class PrincipalRestartTotals {
  private readonly totals = new Map<string, { earlier: Sums; live: Set<Counted> }>();

  /** A principal's connection to server `id`, counted from now until closed(). */
  opened(id: string, upstream: Counted): void {
    const t = this.totals.get(id) ?? { earlier: NONE, live: new Set<Counted>() };
    t.live.add(upstream);
    this.totals.set(id, t);
  }

  /** It is done counting: its restarts so far join the total. */
  closed(id: string, upstream: Counted): void {
    const t = this.totals.get(id);
    if (t?.live.delete(upstream)) t.earlier = plus(t.earlier, sumsOf(upstream));
  }

  of(id: string): number {
    return this.sums(id).all;
  }

  /** Of those, the restarts after a hang. */
  hungOf(id: string): number {
    return this.sums(id).hung;
  }

  private sums(id: string): Sums {
    const t = this.totals.get(id);
    if (!t) return NONE;
    let n = t.earlier;
    for (const u of t.live) n = plus(n, sumsOf(u));
    return n;
  }
}
