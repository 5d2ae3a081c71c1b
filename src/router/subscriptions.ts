/**
 * Resource subscriptions of downstream sessions, reference-counted per upstream connection and
 * URI so the hub subscribes on a connection once and unsubscribes when its last session leaves.
 * `conn` names the connection: '' the server's own, `principal:<p>` a principal's own (with
 * credentials of its own, or a legacy HTTP server behind authentication): an upstream session
 * is never shared across users (docs/SECURITY.md), and neither is what it subscribed to.
 */
export class Subscriptions {
  private readonly byUri = new Map<string, Set<string>>(); // `${server}\0${conn}\0${uri}` → subscribers

  /** Returns true when this is the first subscriber (subscribe upstream). */
  add(server: string, uri: string, subscriber: string, conn = ''): boolean {
    const k = `${server}\0${conn}\0${uri}`;
    let s = this.byUri.get(k);
    if (!s) this.byUri.set(k, (s = new Set()));
    const first = s.size === 0;
    s.add(subscriber);
    return first;
  }

  /**
   * Where `subscriber` holds `uri`: the server it was routed to then, which need not be the one
   * it routes to now.
   */
  heldBy(subscriber: string, uri: string): { server: string; conn: string }[] {
    const out: { server: string; conn: string }[] = [];
    for (const [k, s] of this.byUri) {
      const at = parseKey(k);
      if (at.uri === uri && s.has(subscriber)) out.push({ server: at.server, conn: at.conn });
    }
    return out;
  }

  /** Returns true when the last subscriber left (unsubscribe upstream). */
  remove(server: string, uri: string, subscriber: string, conn = ''): boolean {
    const k = `${server}\0${conn}\0${uri}`;
    const s = this.byUri.get(k);
    if (!s || !s.delete(subscriber)) return false;
    if (s.size > 0) return false;
    this.byUri.delete(k);
    return true;
  }

  /** Drop every subscription of a session; returns what lost its last subscriber (to unsubscribe on that connection). */
  removeSubscriber(subscriber: string): { server: string; conn: string; uri: string }[] {
    const emptied: { server: string; conn: string; uri: string }[] = [];
    for (const [k, s] of this.byUri) {
      if (s.delete(subscriber) && s.size === 0) {
        this.byUri.delete(k);
        emptied.push(parseKey(k));
      }
    }
    return emptied;
  }

  /**
   * Who is told that `uri` changed, as said on connection `conn`: its own subscribers there, and
   * those of a URI it is a sub-resource of (an update may name one, digest §4: `file:///dir/a`
   * for a subscription to `file:///dir` or `file:///dir/`).
   */
  subscribers(server: string, uri: string, conn = ''): ReadonlySet<string> {
    const prefix = `${server}\0${conn}\0`;
    const exact = this.byUri.get(prefix + uri);
    let all: Set<string> | undefined;
    for (const [k, s] of this.byUri) {
      if (s === exact || !k.startsWith(prefix)) continue;
      const parent = k.slice(prefix.length);
      if (isSubResource(uri, parent)) for (const who of s) (all ??= new Set(exact)).add(who);
    }
    return all ?? exact ?? new Set();
  }

  /** The URIs subscribed on one connection of a server (the main one: a modern upstream's listen filter, a restart's renewal). */
  uris(server: string, conn = ''): string[] {
    const prefix = `${server}\0${conn}\0`;
    return [...this.byUri.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }
}

function parseKey(k: string): { server: string; conn: string; uri: string } {
  const [server, conn, ...rest] = k.split('\0');
  return { server: server!, conn: conn!, uri: rest.join('\0') };
}

/** `uri` lies under `parent`: a path below it (at a "/" boundary), not merely a longer name. */
export function isSubResource(uri: string, parent: string): boolean {
  if (parent === '' || uri.length <= parent.length || !uri.startsWith(parent)) return false;
  return parent.endsWith('/') || uri[parent.length] === '/';
}
