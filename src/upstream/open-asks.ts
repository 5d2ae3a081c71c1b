/**
 * A legacy server's requests relayed to a call's client and not yet answered, by the server's
 * request id: each with the signal that withdraws it at the client, when the call that asked
 * ends or the server itself cancels it. Relaying the question and its answer stays with the
 * connection (UpstreamBase.onServerRequest).
 */
import { Canceller } from '../cancel.js';
import { idKey } from '../protocol/jsonrpc.js';
import type { Pending } from './pending-call.js';

/** Why a server-to-client request was withdrawn when the upstream itself cancelled it: it wants no answer then. */
export const WITHDRAWN_BY_SERVER = 'the server withdrew its request';

export class OpenAsks {
  private readonly asks = new Map<string, { p: Pending; withdrawn: Canceller }>();

  get size(): number {
    return this.asks.size;
  }

  /** The server's request `key` is put to `p`'s client: what withdraws it there. */
  open(key: string, p: Pending): Canceller {
    const withdrawn = new Canceller();
    this.asks.set(key, { p, withdrawn });
    return withdrawn;
  }

  /** The client answered it (or failed to): forgotten, unless a later request of the same id took its place. */
  close(key: string, withdrawn: Canceller): void {
    if (this.asks.get(key)?.withdrawn === withdrawn) this.asks.delete(key);
  }

  /** The call `p` ended: its questions still open at the client are withdrawn there (the client hears notifications/cancelled), as nobody will use their answers now. */
  withdrawFor(p: Pending): void {
    for (const a of this.asks.values()) if (a.p === p) a.withdrawn.abort('the call that asked ended');
  }

  /**
   * The server cancelled its request `requestId` (on `via`'s answer stream, or where no stream
   * says whose): so does the hub, at the client. Whether it was one put to a client.
   */
  withdrawnByServer(requestId: unknown, via: Pending | undefined): boolean {
    const ask = this.asks.get(idKey(requestId));
    if (!ask || (via !== undefined && via !== ask.p)) return false;
    ask.withdrawn.abort(WITHDRAWN_BY_SERVER);
    return true;
  }
}
