/**
 * Resource subscriptions of downstream sessions, reference-counted per upstream connection and
 * URI so the hub subscribes on a connection once and unsubscribes when its last session leaves.
 * `conn` names the connection: '' the server's own, `principal:<p>` a principal's own (with
 * credentials of its own, or a legacy HTTP server behind authentication): an upstream session
 * is never shared across users (docs/SECURITY.md), and neither is what it subscribed to.
 *
 * A subscriber is counted only with something behind it: the upstream subscription (join), a
 * listen filter, or a connection that is down and is subscribed when it is back (add).
 */
/**
 * The longest URI the hub keeps a subscription to (a request line's usual limit; no URI longer
 * travels in most HTTP requests). A session's subscriptions were bounded in number only: a
 * template matches an id of any length, so one session held up to a thousand URIs of up to a
 * request body (4 MiB) each, in its table here, in the upstream's, and in its ledger row, written
 * whole again at each subscribe (40 one-megabyte URIs made a 40 MB row and a 120 MB ledger).
 */
export const MAX_SUBSCRIBED_URI_LENGTH = 8192;

/**
 * What one principal may put in the listen filter of one connection of a modern server: distinct
 * URIs, and their characters. The hub's listen streams send the filter again (each URI a few
 * times, its base whole now and then: catalog/upstream-listen.ts), and the server's connection
 * is shared. When each change re-sent the whole filter, a principal's ten thousand long URIs
 * made each other user's subscribe wait for megabytes to be sent, parsed and acknowledged (300
 * URIs of 7000 characters took 43 s to make, Bob's one subscribe went from 8 ms to 578 ms
 * meanwhile), with no bound but 100 sessions of 1000. Each principal has a share of its own, so another's subscriptions are
 * never refused for it; a URI held by two principals counts in both shares. An IDE watching a
 * few hundred files (URIs of 100 characters or so) stays well inside both numbers.
 */
export interface ListenShareLimits {
  maxUris: number;
  maxChars: number;
}
export const LISTEN_SHARE: ListenShareLimits = { maxUris: 512, maxChars: 64 * 1024 };

/** A principal's part of one connection's listen filter: each URI, with how many of its subscribers hold it. */
interface Share {
  readonly uris: Map<string, number>;
  chars: number;
}

export class Subscriptions {
  private readonly byUri = new Map<string, Set<string>>(); // `${server}\0${conn}\0${uri}` → subscribers
  /**
   * The URIs held on each connection (`${server}\0${conn}`), as byUri's keys: a re-listen's
   * filter, a restart's renewal and an update's subscribers look at that connection's own, not
   * at every server's (100 sessions of 1000 URIs on one server made each re-listen to another,
   * and each update from it, a walk of 100,000 keys).
   */
  private readonly byConn = new Map<string, Set<string>>();
  /** Upstream subscribes in flight (join), by the same key. */
  private readonly making = new Map<string, Making>();
  /** Upstream unsubscribes in flight (unsubscribing), by the same key: settled once answered. */
  private readonly leaving = new Map<string, Promise<void>>();
  /**
   * The keys each subscriber is counted for: a session's unsubscribe, its end and its count look
   * at its own subscriptions, not at every session's (100 sessions of 1000 made each of those a
   * walk of 100,000 entries).
   */
  private readonly bySubscriber = new Map<string, Set<string>>();
  /**
   * The principal of each counted subscriber (a session or a listen stream is one principal's),
   * as its join or addToFilter said: whom the hub's own subscribe on a new connection is made
   * for (heldFor).
   */
  private readonly principalOf = new Map<string, string>();
  /** Listen-filter shares, by `${server}\0${conn}\0${principal}`. */
  private readonly shares = new Map<string, Share>();
  /** The principal a listen-filter subscriber is charged to, and the keys it is charged for. */
  private readonly charged = new Map<string, { principal: string; keys: Set<string> }>();

  constructor(private readonly limits: ListenShareLimits = LISTEN_SHARE) {}

  /** How many subscriptions `subscriber` is counted for. */
  countOf(subscriber: string): number {
    return this.bySubscriber.get(subscriber)?.size ?? 0;
  }

  /**
   * Counts `subscriber` in the listen filter of connection `conn` of a modern server, charged to
   * `principal` (ListenShareLimits). Undefined when the URI would take the principal past its
   * share: nothing is counted then. Otherwise `first`: the URI's first subscriber on that connection.
   */
  addToFilter(server: string, uri: string, subscriber: string, conn: string, principal: string): { first: boolean } | undefined {
    const k = key(server, conn, uri);
    if (this.byUri.get(k)?.has(subscriber)) return { first: false };
    const sk = `${server}\0${conn}\0${principal}`;
    let share = this.shares.get(sk);
    const held = share?.uris.get(uri);
    if (held === undefined && ((share?.uris.size ?? 0) >= this.limits.maxUris || (share?.chars ?? 0) + uri.length > this.limits.maxChars)) return undefined;
    if (!share) this.shares.set(sk, (share = { uris: new Map(), chars: 0 }));
    share.uris.set(uri, (held ?? 0) + 1);
    if (held === undefined) share.chars += uri.length;
    let mine = this.charged.get(subscriber);
    if (!mine) this.charged.set(subscriber, (mine = { principal, keys: new Set() }));
    mine.keys.add(k);
    return { first: this.count(k, subscriber, principal) };
  }

  /** `subscriber` no longer holds key `k`: its principal's share lets the URI go with its last holder. */
  private uncharge(k: string, subscriber: string): void {
    const mine = this.charged.get(subscriber);
    if (!mine?.keys.delete(k)) return;
    if (mine.keys.size === 0) this.charged.delete(subscriber);
    const { server, conn, uri } = parseKey(k);
    const sk = `${server}\0${conn}\0${mine.principal}`;
    const share = this.shares.get(sk);
    const held = share?.uris.get(uri);
    if (!share || held === undefined) return;
    if (held > 1) return void share.uris.set(uri, held - 1);
    share.uris.delete(uri);
    share.chars -= uri.length;
    if (share.uris.size === 0) this.shares.delete(sk);
  }

  private count(k: string, subscriber: string, principal: string | undefined): boolean {
    let s = this.byUri.get(k);
    if (!s) {
      this.byUri.set(k, (s = new Set()));
      this.indexed(k, true);
    }
    const first = s.size === 0;
    if (!s.has(subscriber)) {
      s.add(subscriber);
      let mine = this.bySubscriber.get(subscriber);
      if (!mine) this.bySubscriber.set(subscriber, (mine = new Set()));
      mine.add(k);
      if (principal !== undefined) this.principalOf.set(subscriber, principal);
    }
    return first;
  }

  /**
   * Counts `subscriber` once the upstream holds the subscription: the first one's `make` (the
   * upstream subscribe) is awaited before anyone is counted. Those who come meanwhile wait for
   * its outcome: counted with it when it is made; when it fails, the first of them makes an
   * attempt of its own (so one transient failure does not fail them all), the others waiting
   * again. Throws what this subscriber's own attempt threw; nothing of it is counted then.
   * `principal`: whose the subscriber is (heldFor).
   */
  async join<T>(server: string, uri: string, subscriber: string, conn: string, make: () => Promise<T>, unmake?: () => Promise<unknown>, principal?: string): Promise<Joined<T>> {
    const k = key(server, conn, uri);
    const ticket: Ticket = { subscriber, principal, left: false };
    for (;;) {
      if (this.byUri.get(k)?.has(subscriber)) return {};
      const pending = this.making.get(k);
      if (!pending) break;
      pending.waiting.add(ticket);
      await pending.settled;
      if (ticket.left) return { left: true };
    }
    if (this.byUri.has(k)) {
      this.count(k, subscriber, principal);
      return {};
    }
    return this.make(k, ticket, make, unmake);
  }

  /**
   * The first subscriber's attempt: who waited for it is counted when it succeeds. Made only once
   * an unsubscribe of the URI there still on its way was answered: sent on another connection
   * (legacy HTTP), the subscribe could reach the server first, which then held nothing for the
   * subscribers counted here. Made, with nobody staying, it is let go upstream with `unmake`.
   */
  private async make<T>(k: string, ticket: Ticket, make: () => Promise<T>, unmake?: () => Promise<unknown>): Promise<Joined<T>> {
    let settle = (): void => undefined;
    const pending: Making = { settled: new Promise<void>((r) => (settle = r)), waiting: new Set([ticket]) };
    this.making.set(k, pending);
    try {
      const leaving = this.leaving.get(k);
      if (leaving !== undefined) await leaving;
      const made = await make();
      const staying = [...pending.waiting].filter((t) => !t.left);
      if (staying.length === 0) {
        if (unmake) this.unsubscribeNow(k, unmake).catch(() => undefined);
        return { made, unheld: true };
      }
      for (const t of staying) this.count(k, t.subscriber, t.principal);
      return ticket.left ? { made, left: true } : { made };
    } catch (err) {
      // Its waiters are still waiting: the first of them tries again.
      pending.waiting.delete(ticket);
      throw err;
    } finally {
      this.making.delete(k);
      settle();
    }
  }

  /**
   * Sends (`send`) the upstream unsubscribe of `uri` on connection `conn` of `server`, its last
   * subscriber gone (remove, removeSubscriber): a subscribe of it there is made only once that is
   * answered (make).
   */
  unsubscribing<T>(server: string, conn: string, uri: string, send: () => Promise<T>): Promise<T> {
    return this.unsubscribeNow(key(server, conn, uri), send);
  }

  private unsubscribeNow<T>(k: string, send: () => Promise<T>): Promise<T> {
    const sent = send();
    const answered = sent.then(
      () => undefined,
      () => undefined,
    );
    this.leaving.set(k, answered);
    void answered.then(() => {
      if (this.leaving.get(k) === answered) this.leaving.delete(k);
    });
    return sent;
  }

  /** Whether an upstream unsubscribe of `uri` on connection `conn` of `server` is on its way (a subscribe of it there waits for it). */
  leavingNow(server: string, conn: string, uri: string): boolean {
    return this.leaving.has(key(server, conn, uri));
  }

  /**
   * Where `subscriber` holds `uri` (counted, or waiting for its upstream subscribe): the server
   * it was routed to then, which need not be the one it routes to now.
   */
  heldBy(subscriber: string, uri: string): { server: string; conn: string }[] {
    const out: { server: string; conn: string }[] = [];
    const seen = new Set<string>();
    const found = (k: string): void => {
      const at = parseKey(k);
      if (at.uri !== uri || seen.has(k)) return;
      seen.add(k);
      out.push({ server: at.server, conn: at.conn });
    };
    for (const k of this.bySubscriber.get(subscriber) ?? []) if (k.endsWith(uri)) found(k);
    for (const [k, m] of this.making) if ([...m.waiting].some((t) => t.subscriber === subscriber && !t.left)) found(k);
    return out;
  }

  /** Every subscription `subscriber` is counted for: where (server, connection) and what. */
  heldOf(subscriber: string): { server: string; conn: string; uri: string }[] {
    return [...(this.bySubscriber.get(subscriber) ?? [])].map(parseKey);
  }

  /**
   * Returns true when the last subscriber left (unsubscribe upstream). One still waiting for
   * the upstream subscribe is not counted when it is made.
   */
  remove(server: string, uri: string, subscriber: string, conn = ''): boolean {
    const k = key(server, conn, uri);
    this.leave(this.making.get(k), subscriber);
    const s = this.byUri.get(k);
    if (!s || !s.delete(subscriber)) return false;
    this.uncharge(k, subscriber);
    const mine = this.bySubscriber.get(subscriber);
    mine?.delete(k);
    if (mine?.size === 0) {
      this.bySubscriber.delete(subscriber);
      this.principalOf.delete(subscriber);
    }
    if (s.size > 0) return false;
    this.byUri.delete(k);
    this.indexed(k, false);
    return true;
  }

  /**
   * Drop every subscription of a session; returns what lost its last subscriber (to unsubscribe
   * on that connection). An upstream subscribe it waits for is let go by its maker, once made.
   */
  removeSubscriber(subscriber: string): { server: string; conn: string; uri: string }[] {
    for (const m of this.making.values()) this.leave(m, subscriber);
    const emptied: { server: string; conn: string; uri: string }[] = [];
    for (const k of this.bySubscriber.get(subscriber) ?? []) {
      this.uncharge(k, subscriber);
      const s = this.byUri.get(k);
      if (s?.delete(subscriber) && s.size === 0) {
        this.byUri.delete(k);
        this.indexed(k, false);
        emptied.push(parseKey(k));
      }
    }
    this.bySubscriber.delete(subscriber);
    this.principalOf.delete(subscriber);
    return emptied;
  }

  /** Key `k` of byUri came (`held`) or went: byConn follows. */
  private indexed(k: string, held: boolean): void {
    const at = k.indexOf('\0', k.indexOf('\0') + 1);
    const c = k.slice(0, at);
    const uri = k.slice(at + 1);
    let uris = this.byConn.get(c);
    if (held) {
      if (!uris) this.byConn.set(c, (uris = new Set()));
      uris.add(uri);
    } else if (uris?.delete(uri) && uris.size === 0) this.byConn.delete(c);
  }

  private leave(m: Making | undefined, subscriber: string): void {
    for (const t of m?.waiting ?? []) if (t.subscriber === subscriber) t.left = true;
  }

  /**
   * Who is told that `uri` changed, as said on connection `conn`: its own subscribers there, and
   * those of a URI it is a sub-resource of (an update may name one, digest §4: `file:///dir/a`
   * for a subscription to `file:///dir` or `file:///dir/`).
   */
  subscribers(server: string, uri: string, conn = ''): ReadonlySet<string> {
    const prefix = `${server}\0${conn}\0`;
    const exact = this.byUri.get(prefix + uri);
    const held = this.byConn.get(`${server}\0${conn}`);
    if (!held) return new Set();
    // The parents it may have are its prefixes at a "/" (two for each); the fewer of those and
    // the connection's URIs is looked through.
    let slashes = 0;
    for (let i = uri.indexOf('/'); i >= 0; i = uri.indexOf('/', i + 1)) slashes++;
    const parents = 2 * slashes < held.size ? parentsOf(uri) : [...held].filter((p) => isSubResource(uri, p));
    let all: Set<string> | undefined;
    for (const parent of parents) {
      const s = this.byUri.get(prefix + parent);
      if (s && s !== exact) for (const who of s) (all ??= new Set(exact)).add(who);
    }
    return all ?? exact ?? new Set();
  }

  /** Who holds exactly `uri` on connection `conn` (no sub-resource reasoning: see subscribers). */
  holders(server: string, uri: string, conn = ''): ReadonlySet<string> {
    return this.byUri.get(`${server}\0${conn}\0${uri}`) ?? new Set();
  }

  /**
   * Whom the subscription of `uri` on connection `conn` is held for: the one principal of all its
   * holders, or null when they are several (or one's is not known). The hub's own subscribe of
   * it on a new connection is made for that (CallOptions.principal): a connection that carried it
   * has served them, and a line the server writes about it goes to no other principal's call.
   */
  heldFor(server: string, uri: string, conn = ''): string | null {
    let one: string | undefined;
    for (const s of this.holders(server, uri, conn)) {
      const p = this.principalOf.get(s);
      if (p === undefined || (one !== undefined && p !== one)) return null;
      one = p;
    }
    return one ?? null;
  }

  /** The URIs subscribed on one connection of a server (the main one: a modern upstream's listen filter, a restart's renewal). */
  uris(server: string, conn = ''): string[] {
    return [...(this.byConn.get(`${server}\0${conn}`) ?? [])];
  }
}

/** A subscriber's place among those waiting for an upstream subscribe; `left` once it is unsubscribed or its session ended. */
interface Ticket {
  readonly subscriber: string;
  readonly principal: string | undefined;
  left: boolean;
}

/** An upstream subscribe in flight: settled when it succeeded or failed, and who waits for it (its maker too). */
interface Making {
  readonly settled: Promise<void>;
  readonly waiting: Set<Ticket>;
}

/** How a subscriber joined (Subscriptions.join). */
export interface Joined<T> {
  /** The answer of the upstream subscribe this subscriber made itself. */
  made?: T;
  /** Made, but every subscriber waiting for it left meanwhile: nobody holds it, so it is let go upstream. */
  unheld?: boolean;
  /** The subscriber left (unsubscribed, or its session ended) before it was counted: it is not. */
  left?: boolean;
}

function key(server: string, conn: string, uri: string): string {
  return `${server}\0${conn}\0${uri}`;
}

function parseKey(k: string): { server: string; conn: string; uri: string } {
  const [server, conn, ...rest] = k.split('\0');
  return { server: server!, conn: conn!, uri: rest.join('\0') };
}

/** Every `parent` that `uri` lies under (isSubResource): its prefixes that end at a "/" or before one. */
function parentsOf(uri: string): string[] {
  const out: string[] = [];
  for (let i = uri.indexOf('/'); i >= 0; i = uri.indexOf('/', i + 1)) {
    if (i > 0) out.push(uri.slice(0, i));
    if (i + 1 < uri.length) out.push(uri.slice(0, i + 1));
  }
  return out;
}

/** `uri` lies under `parent`: a path below it (at a "/" boundary), not merely a longer name. */
export function isSubResource(uri: string, parent: string): boolean {
  if (parent === '' || uri.length <= parent.length || !uri.startsWith(parent)) return false;
  return parent.endsWith('/') || uri[parent.length] === '/';
}
