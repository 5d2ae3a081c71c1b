import { randomBytes } from 'node:crypto';
import { CancelledError, METHOD_NOT_FOUND, RpcError } from '../protocol/errors.js';
import type { Response } from '../protocol/jsonrpc.js';
import type { ClientCapabilities, Implementation, InputRequest, LoggingLevel } from '../protocol/types.js';
import type { MessageSink } from './core.js';
import type { Canceller, Signal } from '../cancel.js';
import { KeyedTable } from '../keyed-table.js';
import { declares } from '../protocol/client-capabilities.js';

/** One legacy (2025-11-25) client session: its handshake facts and its open server → client requests. */
export class LegacySession {
  initialized = false;
  logLevel: LoggingLevel | undefined;
  /** The standalone GET stream (HTTP) or stdout (stdio), for notifications not tied to a request. */
  stream: MessageSink | undefined;
  lastSeen = Date.now();
  /** The tool group of the endpoint the session was opened on (`/mcp/<group>`); it keeps it. */
  group: string | undefined;
  /** The API key that opened it (Identity.key): the session ends when that key is removed. */
  key: string | undefined;
  /** The API key that opened its GET stream: the session ends when that key is removed too. */
  streamKey: string | undefined;
  readonly inflight = new KeyedTable<Canceller>();
  private nextId = 0;
  private readonly pending = new Map<string, { resolve: (r: Record<string, unknown>) => void; reject: (e: unknown) => void }>();

  constructor(
    readonly protocolVersion: string,
    readonly clientInfo: Implementation | undefined,
    readonly capabilities: ClientCapabilities,
    readonly principal: string,
    readonly id: string = randomBytes(18).toString('base64url'),
  ) {}

  /**
   * Send a server → client request on `sink` (the channel of the call that caused it) and wait
   * for the client's answer. Refused at once when the client did not declare the capability.
   */
  ask(sink: MessageSink, req: InputRequest, signal?: Signal): Promise<Record<string, unknown>> {
    if (!declares(this.capabilities, req.method, req.params))
      return Promise.reject(new RpcError(METHOD_NOT_FOUND, `the client did not declare support for ${req.method}`));
    if (sink.closed) return Promise.reject(new RpcError(-32603, 'the client is no longer connected'));
    // A question nobody can hear would wait for the upstream's own timeout: refused at once.
    if (sink.canStream === false)
      return Promise.reject(new RpcError(-32603, `the client cannot be asked (${req.method}) on this answer: its request's Accept header has no text/event-stream`));
    const id = `sy-${++this.nextId}`;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      signal?.addEventListener('abort', () => {
        if (!this.pending.delete(id)) return;
        // The call that asked is cancelled: so is our question to the client (digest §6.1).
        if (!sink.closed) sink.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'the request that asked was cancelled' } });
        reject(new CancelledError());
      });
      const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method: req.method };
      if (req.params) msg.params = req.params;
      sink.send(msg);
    });
  }

  /** A client's answer to one of our requests; false when nothing was waiting for it. */
  answer(msg: Response): boolean {
    const p = this.pending.get(String(msg.id));
    if (!p) return false;
    this.pending.delete(String(msg.id));
    if ('error' in msg) p.reject(RpcError.from(msg.error));
    else p.resolve(msg.result);
    return true;
  }

  /** close() was called: nothing more is sent to it. */
  ended = false;

  close(): void {
    this.ended = true;
    for (const p of this.pending.values()) p.reject(new RpcError(-32603, 'session closed'));
    this.pending.clear();
    for (const c of this.inflight.values()) c.abort();
    this.inflight.clear();
  }
}
