import type { ServerHandle } from '../catalog/catalog.js';
import { hasPrincipalCredentials } from '../catalog/principal-conn.js';
import type { PrincipalCredentials } from '../config/types.js';
import type { Logger } from '../log.js';
import { MODERN } from '../protocol/era.js';
import type { Upstream, UpstreamSpec } from '../upstream/types.js';
import { ANONYMOUS } from './principals.js';
import { drained } from '../upstream/drained.js';
import { monotonicNow } from '../monotonic.js';

/** A principal's own connection to a server that is down, and why (PrincipalUpstreams.down). */
export interface OwnDown {
  principal: string;
  state: string;
  lastError: string;
  /** What its process's stderr said last that reads like why (stdio), as ServerView.stderr. */
  stderr: string | null;
}

export interface PoolOptions {
  /** A pooled connection unused this long is closed. */
  idleMs?: number;
  /** Most pooled connections at once; past it the least recently used one is closed, if one is idle (held() says which are not). */
  max?: number;
  /** Each principal's own connection as it is made, so its notifications are heard (Catalog.watchConnection). */
  onConnection?: (h: ServerHandle, upstream: Upstream, principal: string) => void;
  /** Whether a connection holds something of its own (resource subscriptions): idle or not, it is kept. */
  inUse?: (serverId: string, principal: string) => boolean;
  /**
   * The server's handle in use now (undefined: no such server any more). A call routed to a
   * handle a reload or `servers restart` has replaced since gets no connection of its own (see
   * PrincipalUpstreams.own); without it, every handle is taken for the one in use.
   */
  handleOf?: (serverId: string) => ServerHandle | undefined;
  /**
   * The clock idleMs is measured on (tests); default monotonicNow(). Not the wall clock: stepped
   * an hour ahead (NTP, a laptop resuming) it closed every idle connection at the next sweep (a
   * processPerPrincipal process and what it held), and stepped back it kept them an hour longer.
   */
  now?: () => number;
}

interface Pooled {
  upstream: Upstream;
  /** On the pool's clock (monotonic): never a time of day. */
  lastUsed: number;
  started: Promise<void>;
}

/**
 * Per-principal connections to upstreams, made on first use, so that no upstream session (nor
 * upstream credential, nor process) is shared across users. To an HTTP server a principal gets
 * its own connection when the server has `credentials.<principal>`, or when the hub
 * authenticates its clients and the upstream is not known to be stateless (modern): a legacy
 * session is per user. A stdio server with `processPerPrincipal` gets a process per
 * authenticated principal. Everyone else shares the server's main connection. The downstream
 * token is never among the headers: they come from the config only.
 */
export class PrincipalUpstreams {
  private readonly pool = new Map<string, Pooled>();
  private readonly idleMs: number;
  private readonly max: number;
  private readonly sweeper: NodeJS.Timeout;
  private readonly onConnection: PoolOptions['onConnection'];
  private readonly inUse: PoolOptions['inUse'];
  private readonly handleOf: PoolOptions['handleOf'];
  private readonly now: () => number;
  /** closeAll() has run (the hub's stop): nothing is opened any more (own). */
  private closed = false;

  constructor(
    private readonly make: (spec: UpstreamSpec, log: Logger) => Upstream,
    private readonly specOf: (h: ServerHandle) => UpstreamSpec,
    private readonly authRequired: boolean,
    private readonly log: Logger,
    opts: PoolOptions = {},
  ) {
    this.idleMs = opts.idleMs ?? 10 * 60_000;
    this.max = opts.max ?? 256;
    this.onConnection = opts.onConnection;
    this.inUse = opts.inUse;
    this.handleOf = opts.handleOf;
    this.now = opts.now ?? monotonicNow;
    this.sweeper = setInterval(() => this.sweep(), Math.min(this.idleMs, 60_000));
    this.sweeper.unref();
  }

  /** Whether `principal`'s calls to `h` need a connection of their own. */
  isolated(h: ServerHandle, principal: string): boolean {
    // One stdio process serves every principal unless the config asks for one each.
    if (!h.config.url) return h.config.processPerPrincipal === true && this.authRequired && principal !== ANONYMOUS;
    if (ownCredentials(h, principal) !== undefined) return true;
    return this.authRequired && principal !== ANONYMOUS && h.upstream.era !== MODERN;
  }

  /**
   * Whether isolated() tells for `principal` without the server's own connection being ready: a
   * url server's, short of the principal's own credentials, turns on the era that connection
   * learns at its handshake (unknown before it, and a restart may learn another).
   */
  knownBeforeReady(h: ServerHandle, principal: string): boolean {
    return !h.config.url || ownCredentials(h, principal) !== undefined;
  }

  /**
   * Whether some principal may get a connection of its own to `h`: then the list of its main
   * connection is not what every client is shown (and not the version to pin first).
   */
  splits(h: ServerHandle): boolean {
    if (!h.config.url) return h.config.processPerPrincipal === true && this.authRequired;
    if (hasPrincipalCredentials(h)) return true;
    return this.authRequired && h.upstream.era !== MODERN;
  }

  /** The connection to use for `principal`'s call to `h` (started, or failed: the caller checks state). */
  for(h: ServerHandle, principal: string): Upstream | Promise<Upstream> {
    return this.isolated(h, principal) ? this.own(h, principal) : h.upstream;
  }

  /** The principal's own connection to h if it has one open now (none is made). */
  existing(h: ServerHandle, principal: string): Upstream | undefined {
    return this.pool.get(poolKey(h.id, principal))?.upstream;
  }

  /** The principal's own connection to h, started on first use. */
  private async own(h: ServerHandle, principal: string): Promise<Upstream> {
    const key = poolKey(h.id, principal);
    let p = this.pool.get(key);
    // The handle in use now: the one a call was routed to, or one a reload put in its place with
    // the same connection (only its limits changed), whose config is the one to follow.
    const now = this.handleOf ? this.handleOf(h.id) : h;
    if (now === undefined || now.upstream !== h.upstream || (!p && this.closed)) {
      // The hub's stop closed the pool: a call that reaches here after that (in flight at the
      // drain deadline, past a slow plugin) started a process (or session) nothing would close,
      // left to the exit watchdog. So did a call routed before a reload (or `servers restart`)
      // replaced or removed its server, which had the pool forget its connections: a process of
      // the old config, kept under the server's name, which the principal's next calls, on the
      // new config, went to. Either gets a connection that is closed, never started: its caller
      // finds it not ready and answers so, as for any server the stop or the reload closed (a
      // call sent nowhere, safe to send again).
      const closed = this.make(this.specOf(h), this.log.child({ principal }));
      await closed.close();
      return closed;
    }
    if (!p) {
      if (this.pool.size >= this.max) this.evictOldest();
      const base = this.specOf(now);
      const headers = ownCredentials(now, principal)?.headers ?? base.headers;
      // Its calls take their slots from the server's own connection: maxConcurrent and maxQueue
      // bound the server, whoever calls (each connection had its own, so N principals had N times
      // maxConcurrent calls in flight to it).
      // A url server's: no health check of its own (healthCheckMs): the server's main connection's
      // tells /healthz whether it can be reached, and N principals' connections would ask it N
      // times as often. A principal's own process (processPerPrincipal) keeps its own: it may hang
      // alone, and nothing else would find it (its calls would time out, for good).
      const healthCheckMs = now.config.url ? 0 : base.healthCheckMs;
      const upstream = this.make({ ...base, headers, limiter: now.upstream.limiter, healthCheckMs }, this.log.child({ principal }));
      this.onConnection?.(now, upstream, principal);
      const started = upstream.start().catch((err: unknown) => {
        this.log.warn({ server: h.id, principal, err: (err as Error)?.message }, 'per-principal upstream connection failed to start');
      });
      p = { upstream, lastUsed: this.now(), started };
      this.pool.set(key, p);
    }
    p.lastUsed = this.now();
    await p.started;
    return p.upstream;
  }

  get size(): number {
    return this.pool.size;
  }

  /**
   * The principals' own connections to a server that are down now (restarting, or failed at
   * the crash-loop limit), with why: the server's own connection, all that /admin/servers
   * showed, may be ready meanwhile, while a principal's calls are refused `server "x" is
   * failed: …` for a minute at a time. For operators only (admin views), as lastStderr is.
   */
  down(serverId: string): OwnDown[] {
    const out: OwnDown[] = [];
    for (const [k, p] of this.pool) {
      const u = p.upstream;
      if (u.state === 'ready' || u.lastError === undefined) continue;
      const [server, principal] = JSON.parse(k) as [string, string];
      if (server === serverId) out.push({ principal, state: u.state, lastError: u.lastError, stderr: u.lastStderr ?? null });
    }
    return out;
  }

  /** One server's time limits changed (a reload): its pooled connections take them too. */
  retime(serverId: string, limits: { timeoutMs: number; maxTotalTimeoutMs?: number; healthCheckMs?: number }): void {
    for (const [k, p] of this.pool) if ((JSON.parse(k) as string[])[0] === serverId) p.upstream.retime(limits);
  }

  /**
   * Take one server's pooled connections out of use (server removed or reconfigured): the next
   * call of each principal makes a new one, and each old one is closed once its calls in flight
   * are done, waiting `drainMs` at most, as the server's main connection is (hub/reload.ts).
   * Closed at once, they cut every principal's calls in flight.
   */
  async forget(serverId: string, drainMs = 0): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const [k, p] of this.pool)
      if ((JSON.parse(k) as string[])[0] === serverId) {
        this.pool.delete(k);
        closing.push(drained(p.upstream, drainMs).then(() => p.upstream.close()));
      }
    await Promise.allSettled(closing);
  }

  async closeAll(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const all = [...this.pool.values()];
    this.pool.clear();
    await Promise.allSettled(all.map((p) => p.upstream.close()));
  }

  /**
   * A connection holding subscriptions is in use however long since its last call: closing it
   * would end them unseen. So is one with a call still running: closed, that principal's call
   * failed ("server was closed"), whether its call outlasted idleMs or other principals' first
   * calls filled the pool.
   */
  private held(key: string, p: Pooled): boolean {
    if (p.upstream.busy === true) return true;
    if (!this.inUse) return false;
    const [server, principal] = JSON.parse(key) as [string, string];
    return this.inUse(server, principal);
  }

  private sweep(): void {
    const now = this.now();
    const cutoff = now - this.idleMs;
    for (const [k, p] of this.pool) {
      if (p.lastUsed >= cutoff) continue;
      if (p.upstream.busy === true) p.lastUsed = now; // idle from when it was last seen busy, not from when its call began
      else if (!this.held(k, p)) {
        this.pool.delete(k);
        void p.upstream.close();
      }
    }
  }

  private evictOldest(): void {
    let oldest: [string, Pooled] | undefined;
    for (const e of this.pool) if ((!oldest || e[1].lastUsed < oldest[1].lastUsed) && !this.held(e[0], e[1])) oldest = e;
    if (oldest) {
      this.pool.delete(oldest[0]);
      void oldest[1].upstream.close();
    }
  }
}

/**
 * `credentials.<principal>` of the config, its own entries only: a principal is a token's `sub`
 * (any string), and `toString`, `constructor` or `__proto__` read through a plain object are
 * the prototype's, which made such a principal isolated, with the server's shared headers.
 */
function ownCredentials(h: ServerHandle, principal: string): PrincipalCredentials | undefined {
  const c = h.config.credentials;
  return c !== undefined && Object.hasOwn(c, principal) ? c[principal] : undefined;
}

/** A pooled connection's key: the server and the principal, neither able to pass for the other. */
function poolKey(serverId: string, principal: string): string {
  return JSON.stringify([serverId, principal]);
}
