import type { MessageSink } from './core.js';
import type { ProgressInfo } from '../protocol/types.js';

/**
 * How a request's progress reaches its client: as `notifications/progress` with the client's
 * own token, and only when it is above the last value sent for that request (digest §4:
 * progress must increase). What reaches the hub may not: a server may send it wrong, and one
 * call of the client can be several upstream requests, each with progress of its own counted
 * from the start (a modern server's input_required rounds for a legacy client, a safe retry).
 * A client that sees progress go back may take it for a fault, or draw a bar that jumps back.
 */
export function progressRelay(sink: MessageSink, token: unknown): (p: ProgressInfo) => void {
  let last = -Infinity;
  return (p) => {
    if (!(p.progress > last)) return;
    last = p.progress;
    sink.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { ...p, progressToken: token } });
  };
}
