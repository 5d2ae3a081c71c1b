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
/** Longer URIs are not kept (a key of that size per link would be the table's cost). */
const MAX_URI_LENGTH = 2048;

export class LinkedResources {
  /** `<principal>\0<uri>` → server id, oldest first. */
  private readonly byKey = new Map<string, string>();

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
      this.byKey.delete(key);
      this.byKey.set(key, server);
      if (this.byKey.size > MAX_LINKED) this.byKey.delete(this.byKey.keys().next().value!);
    }
  }

  /** The server whose tool last named `uri` to `principal`, if any. */
  serverOf(principal: string, uri: string): string | undefined {
    return this.byKey.get(`${principal}\0${uri}`);
  }

  /** A server removed or reconfigured: its links are not its successor's. */
  forget(server: string): void {
    for (const [k, s] of this.byKey) if (s === server) this.byKey.delete(k);
  }
}
