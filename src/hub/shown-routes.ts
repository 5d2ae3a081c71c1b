import type { Catalog } from '../catalog/catalog.js';
import type { CallContext } from '../router/context.js';
import { KnownRoutes } from '../router/down-tools.js';

/**
 * Tool names clients were shown, by group, and the server behind each, so a down server's tools
 * answer "unavailable" rather than "unknown" (see router/down-tools.ts); and, for names shown by
 * an earlier hub process, the server they are stored for (Catalog.downItem). Kept out of the hub so
 * the routing lookup and what a reload must forget live in one place.
 */
export class ShownRoutes {
  private known = new KnownRoutes();
  /**
   * Names a principal was shown from its own connection to a server (its credentials, its own
   * process): remembered for it alone, by KnownRoutes' group slot naming principal and group.
   * Kept with the others, another principal's call by such a name, while the server was down,
   * was told the tool is "unavailable" where any name it was never shown is "unknown".
   */
  private own = new KnownRoutes();
  private learned = new WeakMap<object, Set<string | undefined>>();

  constructor(private readonly catalog: Pick<Catalog, 'knownTool' | 'downItem'>) {}

  /** The server a tools/call by this name goes to for this client, if the hub knows one. */
  serverOf(name: string, ctx: CallContext): string | undefined {
    // The principal's own names are looked for only when the shared ones lack the name.
    let id = this.known.serverOf(ctx.group, name) ?? this.own.serverOf(ownSlot(ctx.principal, ctx.group), name);
    if (id === undefined) {
      // The aggregate built last for this principal (no list fetch here); the router builds one if there is none.
      const routed = this.catalog.knownTool(name, { principal: ctx.principal, group: ctx.group });
      if (routed) this.remember(routed, ctx, name, (id = routed.server.id));
      // Not remembered: the name was not shown here, and stays unknown once that server is back
      // without it.
      else id = this.catalog.downItem('tools', name, { principal: ctx.principal, group: ctx.group })?.server.id;
    }
    return id;
  }

  /** Remember which server serves each tool a client was just shown (see down-tools.ts). */
  async learn(result: Record<string, unknown>, ctx: CallContext): Promise<void> {
    const tools = Array.isArray(result.tools) ? (result.tools as { name?: unknown }[]) : [];
    // Pages of an aggregate keep their identity (Router.page): learn each page once per group.
    let groups = this.learned.get(tools);
    if (!groups) this.learned.set(tools, (groups = new Set()));
    if (groups.has(ctx.group)) return;
    groups.add(ctx.group);
    const view = { principal: ctx.principal, group: ctx.group };
    for (const t of tools) {
      if (typeof t?.name !== 'string') continue;
      // The aggregate this list came from, not a fresh build per tool (no upstream fetch).
      const routed = this.catalog.knownTool(t.name, view);
      if (routed) this.remember(routed, ctx, t.name, routed.server.id);
    }
  }

  private remember(routed: { own?: boolean }, ctx: CallContext, name: string, serverId: string): void {
    if (routed.own) this.own.remember(ownSlot(ctx.principal, ctx.group), name, serverId);
    else this.known.remember(ctx.group, name, serverId);
  }

  /** The groups changed: any name may be shown differently now. */
  forgetAll(): void {
    this.known = new KnownRoutes();
    this.own = new KnownRoutes();
    this.learned = new WeakMap();
  }

  /** A server removed or reconfigured: its names may be shown differently now, so every page is learned again. */
  forgetServer(serverId: string): void {
    this.known.forgetServer(serverId);
    this.own.forgetServer(serverId);
    this.learned = new WeakMap();
  }
}

/**
 * A principal's slot in `own`, led by the principal's length, so that no principal (free text:
 * an OAuth sub may hold anything) and group spell another's (a group's name holds no NUL).
 */
function ownSlot(principal: string, group: string | undefined): string {
  return `${principal.length}:${principal}\0${group ?? ''}`;
}
