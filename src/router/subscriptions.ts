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

  subscribers(server: string, uri: string): ReadonlySet<string> {
    return this.byUri.get(`${server}\0${uri}`) ?? new Set();
  }

  /** The URIs of one server that have at least one subscriber (a modern upstream's listen filter). */
  uris(server: string): string[] {
    const prefix = `${server}\0`;
    return [...this.byUri.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }
}
