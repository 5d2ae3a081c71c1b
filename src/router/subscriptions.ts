/**
 * Resource subscriptions of downstream sessions, reference-counted per upstream URI so the
 * hub subscribes upstream once and unsubscribes when the last session leaves.
 */
export class Subscriptions {
  private readonly byUri = new Map<string, Set<string>>(); // `${server}\0${uri}` → subscribers

  /** Returns true when this is the first subscriber (subscribe upstream). */
  add(server: string, uri: string, subscriber: string): boolean {
    const k = `${server}\0${uri}`;
    let s = this.byUri.get(k);
    if (!s) this.byUri.set(k, (s = new Set()));
    const first = s.size === 0;
    s.add(subscriber);
    return first;
  }

  /** Returns true when the last subscriber left (unsubscribe upstream). */
  remove(server: string, uri: string, subscriber: string): boolean {
    const k = `${server}\0${uri}`;
    const s = this.byUri.get(k);
    if (!s || !s.delete(subscriber)) return false;
    if (s.size > 0) return false;
    this.byUri.delete(k);
    return true;
  }

  /** Drop every subscription of a session; returns the (server, uri) pairs that lost their last subscriber. */
  removeSubscriber(subscriber: string): { server: string; uri: string }[] {
    const emptied: { server: string; uri: string }[] = [];
    for (const [k, s] of this.byUri) {
      if (s.delete(subscriber) && s.size === 0) {
        this.byUri.delete(k);
        const [server, uri] = k.split('\0');
        emptied.push({ server, uri });
      }
    }
    return emptied;
  }

  /**
   * Who is told that `uri` changed: its own subscribers, and those of a URI it is a sub-resource
   * of (an update may name one, digest §4: `file:///dir/a` for a subscription to `file:///dir`
   * or `file:///dir/`).
   */
  subscribers(server: string, uri: string): ReadonlySet<string> {
    const exact = this.byUri.get(`${server}\0${uri}`);
    const prefix = `${server}\0`;
    let all: Set<string> | undefined;
    for (const [k, s] of this.byUri) {
      if (s === exact || !k.startsWith(prefix)) continue;
      const parent = k.slice(prefix.length);
      if (isSubResource(uri, parent)) for (const who of s) (all ??= new Set(exact)).add(who);
    }
    return all ?? exact ?? new Set();
  }

  /** The URIs of one server that have at least one subscriber (a modern upstream's listen filter). */
  uris(server: string): string[] {
    const prefix = `${server}\0`;
    return [...this.byUri.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }
}

/** `uri` lies under `parent`: a path below it (at a "/" boundary), not merely a longer name. */
export function isSubResource(uri: string, parent: string): boolean {
  if (parent === '' || uri.length <= parent.length || !uri.startsWith(parent)) return false;
  return parent.endsWith('/') || uri[parent.length] === '/';
}
