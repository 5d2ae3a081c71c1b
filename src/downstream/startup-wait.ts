import { HubStoppingError } from '../protocol/errors.js';
import { errorResponse, type Request } from '../protocol/jsonrpc.js';
import type { ServerCapabilities } from '../protocol/types.js';
import type { CallContext } from '../router/context.js';
import type { HubCore } from './core.js';
import type { Exchange } from './exchange.js';
import { stoppedError } from './results.js';

/**
 * What an initialize or server/discover answers with, waited for (a fresh hub's upstreams still
 * starting: every `switchyard stdio` spawn) only while its exchange is open; undefined once it
 * closed: the stdio hub stopping (stdin EOF past the drain, a signal), the client cancelling,
 * an HTTP client gone. Its answer could not be sent any more, yet its row said ok. Undefined
 * too, its exchange still open, when the hub's stop began while it waited (the core's
 * HubStoppingError): answered the stop's error then (unanswered), not at the grace's end.
 */
export async function capabilitiesWhileOpen(core: HubCore, ex: Exchange): Promise<ServerCapabilities | undefined> {
  if (ex.closed.aborted) return undefined;
  let onClose = (): void => undefined;
  const closed = new Promise<undefined>((r) => (onClose = () => r(undefined)));
  ex.closed.addEventListener('abort', onClose, { once: true });
  try {
    return await Promise.race([core.capabilities(ex.group), closed]);
  } catch (err) {
    if (err instanceof HubStoppingError) return undefined;
    throw err;
  } finally {
    ex.closed.removeEventListener('abort', onClose);
  }
}

/**
 * A request whose exchange closed before it could be answered (capabilitiesWhileOpen): the
 * client went away or cancelled, cancelled and nothing sent; the hub's stop (stdio), whose
 * client still waits, is told so, its row unavailable. An exchange still open: the hub's stop
 * began while it waited (capabilitiesWhileOpen), told so the same way.
 */
export async function unanswered(core: HubCore, req: Request, ex: Exchange, ctx: CallContext): Promise<void> {
  const reason = ex.closed.aborted ? ex.closed.reason : new HubStoppingError(true);
  if (reason instanceof HubStoppingError) {
    await core.recordLocal(req.method, ctx, { outcome: 'unavailable', errorKind: 'transport', errorMessage: reason.message });
    return ex.reply(errorResponse(req.id, stoppedError(reason)));
  }
  return core.recordLocal(req.method, ctx, { outcome: 'cancelled', errorKind: null, errorMessage: 'ended before it was answered: the hub stopped or the client went away while it waited for the servers to start' });
}
