import type { MessageSink } from './core.js';
import type { Signal } from '../cancel.js';
import type { Lapse } from '../auth/oauth.js';

/**
 * One incoming message and the way back to its sender, independent of the transport
 * (an HTTP POST or a stdio line).
 */
export interface Exchange {
  readonly transport: 'http' | 'stdio';
  /** Lower-case header lookup (HTTP); stdio has none. */
  header(name: string): string | undefined;
  readonly clientAddress?: string;
  /** The connection it came on (HTTP: its socket), which a session's next message acknowledges answers by. */
  readonly connection?: object;
  readonly principal: string;
  /** The tool group of the endpoint path `/mcp/<group>`, if any. */
  readonly group?: string;
  /** Partition of per-user state (private caches, upstream connections); from the credential. */
  readonly authContext?: string;
  readonly requestBytes: number;
  /** Messages before the final answer. */
  readonly sink: MessageSink;
  /** The final answer (or none, for notifications/responses: 202 on HTTP). */
  reply(msg: object | undefined, status?: number, headers?: Record<string, string>): void;
  /** Fires when the sender goes away before the answer (modern: that is cancellation). */
  readonly closed: Signal;
  /**
   * stdio: fires when the client's stdin ends, the only way its answer to a question put to it
   * could come (its reason says so). HTTP has none: `closed` is the question's stream there.
   */
  readonly inputEnded?: Signal;
  /** When the credential that sent this stops working (epoch ms): a stream it opens ends then. */
  readonly credentialExpiresAt?: number;
  /** An OAuth token's: a stream it opens ends sooner if the token stops verifying (Identity.lapse). */
  readonly credentialLapse?: Lapse;
  /** The API key that sent this (its configured hash; see Identity.key). */
  readonly credentialKey?: string;
  /** The key set version it was let in under (Identity.keysAt). */
  readonly credentialKeysAt?: number;
  /** Turn this exchange into a long-lived stream (modern subscriptions/listen). */
  stream?(): MessageSink & { end(): void };
}
