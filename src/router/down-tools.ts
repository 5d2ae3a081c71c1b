/**
 * The tools of a server that is down. The catalog lists only ready servers, so without this a
 * client that listed the tools earlier would get "Unknown tool" from a server that is merely
 * restarting; instead the call answers at once that the tool is unavailable, naming the
 * server and its state (issue 6). The last list the server gave stays in the list cache; the
 * hub name of each tool is the one the name store assigned, or the plain `<prefix>__<name>`.
 */
import type { ServerHandle } from '../catalog/catalog.js';
import type { ListCache } from '../catalog/list-cache.js';
import { baseName, type NameStore } from '../catalog/names.js';
import { UpstreamUnavailableError } from '../protocol/errors.js';
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
import type { CallContext } from './context.js';
import { outcomeOfError, toolErrorResult } from './outcome.js';

export function downToolServer(hubName: string, handles: Iterable<ServerHandle>, cache: ListCache, store?: NameStore): ServerHandle | undefined {
  for (const h of handles) {
    if (h.upstream.state === 'ready') continue;
    const e = cache.peek(`${h.id}\0tools`);
    if (!e) continue;
    for (const it of e.items) {
      const up = String(it.name);
      if ((store?.get(h.id, 'tool', up) ?? baseName(h.config.prefix, up)) === hubName) return h;
    }
  }
  return undefined;
}

export function unavailableError(h: ServerHandle): UpstreamUnavailableError {
  return new UpstreamUnavailableError(h.id, h.upstream.state, h.upstream.lastError);
}

type Recorder = (method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'>, extra?: Partial<AuditBegin>) => Promise<void>;

/** The isError answer (and its audit row) of a call to a tool whose server is down. */
export async function refuseDownTool(hubName: string, h: ServerHandle, ctx: CallContext, record: Recorder): Promise<Record<string, unknown>> {
  const err = unavailableError(h);
  await record('tools/call', ctx, outcomeOfError(err), { hubName, server: h.id, upstreamEra: h.upstream.era });
  return toolErrorResult(`Tool ${hubName} is unavailable: ${err.message}`);
}
