import type { Era } from '../protocol/era.js';
import type { Id } from '../protocol/jsonrpc.js';
import type { ClientCapabilities, Implementation, InputRequest, LoggingLevel, ProgressInfo } from '../protocol/types.js';
import type { Signal } from '../cancel.js';
import type { TraceSpan } from '../protocol/trace-context.js';
import type { Routed } from '../catalog/catalog.js';
import type { Lapse } from '../auth/oauth.js';

/**
 * One downstream request in era-neutral form. The downstream edge builds it; the core never
 * looks at initialize, version headers, session ids or resultType.
 */
export interface CallContext {
  /** The client's JSON-RPC id; undefined for a message refused before it had a valid one (its row has no id). */
  requestId: Id | undefined;
  principal: string;
  /** The tool group the client selected with the endpoint path `/mcp/<group>`; undefined = all. */
  group?: string;
  /**
   * The caller's authorization context, from its credential (`principal:<name>`): the partition
   * key of private caches and per-principal upstream connections.
   */
  authContext?: string;
  /** The API key that let the request in (its configured hash): looked up again before a held call is sent. */
  credentialKey?: string;
  /** The key set version `credentialKey` was let in under (Identity.keysAt). */
  credentialKeysAt?: number;
  /** The OAuth token that let the request in (Identity.lapse): checked again before a held call is sent. */
  credentialLapse?: Lapse;
  clientAddress?: string;
  clientEra: Era;
  clientInfo?: Implementation;
  clientCapabilities: ClientCapabilities;
  /** Aborted when the client cancels or goes away. */
  signal: Signal;
  /** Present when the client asked for progress; the edge maps it back to the client's token. */
  onProgress?: (p: ProgressInfo) => void;
  /** Log messages (notifications/message params) for this call, filtered by the edge. */
  onLog?: (params: Record<string, unknown>) => void;
  logLevel?: LoggingLevel;
  /**
   * Ask the client something on this call's channel (legacy sessions only; the edge refuses
   * methods the client did not declare). Modern clients get input_required instead.
   */
  askClient?: (req: InputRequest, withdrawn?: Signal) => Promise<Record<string, unknown>>;
  /** A legacy upstream's notifications/elicitation/complete for a question relayed to this client. */
  onElicitationComplete?: (params: Record<string, unknown>) => void;
  /** `_meta` keys that travel on: the client's pass-through keys, `traceparent` naming `span`. */
  meta?: Record<string, unknown>;
  /** The hub's span for this request (W3C trace context): what its row records, the parent of what it forwards. */
  span?: TraceSpan;
  idempotencyKey?: string;
  /** An Idempotency-Key header that names another key than `_meta`'s (idempotencyKey): the call is refused. */
  idempotencyClash?: string;
  requestBytes?: number;
  /** A legacy session id or undefined; used to scope per-session state (subscriptions, log level). */
  sessionKey?: string;
  /**
   * Request headers by lower-case name, for modern HTTP requests only: `Mcp-Param-*` mirrors of
   * arguments are checked once the tool's schema is known.
   */
  requestHeader?: (name: string) => string | undefined;
  /**
   * Set by the hub for a call it let past the start-up grace (hub/startup-grace.ts): the route its
   * server's list gave, which the router takes rather than ask for that list again (a list kept
   * 0 ms was fetched twice). Past the grace, never set.
   */
  routedInGrace?: Routed;
  /**
   * How many times the hub routed this request again because a server was replaced while its
   * route was looked up (router/replaced.ts); unset the first time.
   */
  rerouted?: number;
}
