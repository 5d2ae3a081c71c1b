/**
 * The tools of a server that is down. The catalog lists only ready servers, so without this a
 * client that listed the tools earlier would get "Unknown tool" from a server that is merely
 * restarting; instead the call answers at once that the tool is unavailable, naming the server
 * and its state (issue 6). Only names the catalog itself showed to the same tool group are
 * remembered, so filters, quarantine and groups keep hiding what they hide.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import { UpstreamUnavailableError } from '../protocol/errors.js';
import type { AuditEnd } from '../ledger/types.js';
import type { BeginTarget } from './forwarding.js';
import type { CallContext } from './context.js';
import { outcomeOfError, toolErrorResult } from './outcome.js';

/** Bound on remembered names (group × tool); the oldest go first. */
const MAX_ROUTES = 100_000;

export class KnownRoutes {
  private readonly routes = new Map<string, string>();

  private key(group: string | undefined, hubName: string): string {
    return `${group ?? ''}\0${hubName}`;
  }

  remember(group: string | undefined, hubName: string, serverId: string): void {
    const k = this.key(group, hubName);
    if (this.routes.get(k) === serverId) return;
    this.routes.delete(k);
    this.routes.set(k, serverId);
    if (this.routes.size > MAX_ROUTES) this.routes.delete(this.routes.keys().next().value!);
  }

  serverOf(group: string | undefined, hubName: string): string | undefined {
    return this.routes.get(this.key(group, hubName));
  }

  /** A server removed or reconfigured: what it served may be shown differently now. */
  forgetServer(serverId: string): void {
    for (const [k, id] of this.routes) if (id === serverId) this.routes.delete(k);
  }
}

type Recorder = (method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'>, extra?: BeginTarget) => Promise<void>;

/** The isError answer (and its audit row) of a call to a tool whose server is down. */
export async function refuseDownTool(hubName: string, h: ServerHandle, ctx: CallContext, record: Recorder): Promise<Record<string, unknown>> {
  const err = new UpstreamUnavailableError(h.id, h.upstream.state, h.upstream.lastError);
  await record('tools/call', ctx, outcomeOfError(err), { hubName, server: h.id, upstreamEra: h.upstream.era });
  return toolErrorResult(`Tool ${hubName} is unavailable: ${err.message}`);
}
