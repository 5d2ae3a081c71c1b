/**
 * Resources a tool's result named (resource_link and embedded resource blocks). A server may
 * link a resource it does not list (digest §3.4: "Resource links returned by a tool need not
 * appear in resources/list"), and the client that got the link reads it next: the hub routes
 * such a read to the server whose tool named the URI, for the principal it was named to, since
 * no list or template says whose it is. Bounded: the oldest links are forgotten first.
 */
import { isObj } from '../protocol/jsonrpc.js';

/** Links kept, over every principal and server. */
export const MAX_LINKED = 4096;
/**
 * Links kept for one principal: past it, that principal's oldest go. Without it one client
 * whose tools answer with thousands of links (a search, a directory listing) pushed every other
 * user's links out, and their reads of those resources were "not found".
 */
export const MAX_LINKED_PER_PRINCIPAL = 1024;
/** Longer URIs are not kept (a key of that size per link would be the table's cost). */
const MAX_URI_LENGTH = 2048;

export class LinkedResources {
  /** `<principal>\0<uri>` → server id, oldest first. */
  private readonly byKey = new Map<string, string>();
  /** Each principal's keys, oldest first (the same order as in byKey). */
  private readonly byPrincipal = new Map<string, Set<string>>();

  /** The URIs the content blocks of a tool's result (`result.content`) name, as `server`'s for `principal`. */
  note(server: string, principal: string, result: Record<string, unknown>): void {
    const content = result.content;
    if (!Array.isArray(content)) return;
    for (const block of content) {
      if (!isObj(block)) continue;
      const uri = block.type === 'resource_link' ? block.uri : block.type === 'resource' && isObj(block.resource) ? block.resource.uri : undefined;
      if (typeof uri !== 'string' || uri.length === 0 || uri.length > MAX_URI_LENGTH) continue;
      const key = `${principal}\0${uri}`;
      // Named again: the newest.
      this.drop(key);
      this.byKey.set(key, server);
      let mine = this.byPrincipal.get(principal);
      if (!mine) this.byPrincipal.set(principal, (mine = new Set()));
      mine.add(key);
      if (mine.size > MAX_LINKED_PER_PRINCIPAL) this.drop(mine.values().next().value!);
      else if (this.byKey.size > MAX_LINKED) this.drop(this.byKey.keys().next().value!);
    }
  }

  /** The server whose tool last named `uri` to `principal`, if any. */
  serverOf(principal: string, uri: string): string | undefined {
    return this.byKey.get(`${principal}\0${uri}`);
  }

  /** A server removed or reconfigured: its links are not its successor's. */
  forget(server: string): void {
    for (const [k, s] of this.byKey) if (s === server) this.drop(k);
  }

  private drop(key: string): void {
    if (!this.byKey.delete(key)) return;
    // A principal holds no NUL (an API key's name is [A-Za-z0-9._@|:+-], a token's has no control character).
    const principal = key.slice(0, key.indexOf('\0'));
    const mine = this.byPrincipal.get(principal);
    mine?.delete(key);
    if (mine?.size === 0) this.byPrincipal.delete(principal);
  }
}
