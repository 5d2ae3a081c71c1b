import type { EventEmitter } from 'node:events';
import type { RetryPolicy } from './retry.js';
import type { Era } from '../protocol/era.js';
import type {
  ClientCapabilities,
  Implementation,
  InputRequest,
  LoggingLevel,
  ProgressInfo,
  ServerCapabilities,
} from '../protocol/types.js';
import type { Signal } from '../cancel.js';
import type { Limiter } from './limiter.js';
import type { InheritEnv } from '../transport/child-env.js';
import type { UpstreamOAuthConfig } from '../config/types.js';

/** Every state an upstream can be in; the type is derived from it, so a list of them (metrics) cannot miss one. */
export const UPSTREAM_STATES = ['starting', 'ready', 'restarting', 'failed', 'stopped'] as const;
export type UpstreamState = (typeof UPSTREAM_STATES)[number];

/** How to reach one upstream; produced from hub.config.json by src/config. */
export interface UpstreamSpec {
  id: string;
  /** stdio */
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  /** What of the hub's environment a stdio child gets (transport/child-env.ts). */
  inheritEnv?: InheritEnv;
  cwd?: string;
  /** Streamable HTTP */
  url?: string;
  headers?: Record<string, string>;
  /** Tokens the hub obtains itself (client credentials, oauth-client.ts) or a user's login stored (authorization code, oauth-stored-client.ts). */
  oauth?: UpstreamOAuthConfig;
  /** oauth.grant authorization_code: the file `switchyard login` stores the tokens in. */
  oauthTokenFile?: string;
  /** 'auto' probes; a fixed era skips the probe. */
  era: 'auto' | Era;
  /** Idle timeout of a request; each progress notification restarts it. */
  timeoutMs: number;
  /** Hard cap on a request however much progress it reports (default: none beyond timeoutMs resets). */
  maxTotalTimeoutMs?: number;
  /** Bound on the stdio era probe (silence past it means legacy). */
  probeTimeoutMs: number;
  /**
   * HTTP: idle this long (no call in flight, none ended since), notification streams open or
   * not, the server is checked for an answer within timeoutMs (within probeTimeoutMs when a new
   * connection to it does not complete either), else restarting. stdio:
   * silent this long (calls in flight or not), it is pinged, and ended and restarted if it stays
   * silent for timeoutMs. 0 or unset: never.
   */
  healthCheckMs?: number;
  /** Largest frame accepted from the upstream (bytes). */
  maxFrameBytes: number;
  /** Requests in flight at once (default unlimited) and how many may wait beyond that (default 0). */
  maxConcurrent?: number;
  maxQueue?: number;
  /**
   * The slots of another connection to the same server, shared instead of maxConcurrent and
   * maxQueue of its own: a principal's own connection (auth/upstream-pool.ts) takes its calls'
   * slots from the server's, so the server never has more than maxConcurrent in flight.
   */
  limiter?: Limiter;
  /** HTTP: consecutive failures that open the circuit, and the wait before the first probe. */
  circuitBreaker?: { failures: number; cooldownMs: number };
  /**
   * Modern: the least time between two `server/discover` of a ready server, whatever its
   * `ttlMs` says (default REDISCOVER_MIN_MS in handshake.ts). Not a config key: tests shorten it.
   */
  rediscoverMinMs?: number;
}

/** Puts a server's request to a client (elicitation, sampling, roots) and resolves with its answer. */
export type AskClient = (req: InputRequest, withdrawn?: Signal) => Promise<Record<string, unknown>>;

export interface CallOptions {
  signal?: Signal;
  timeoutMs?: number;
  /** Overrides the spec's maxTotalTimeoutMs for this call. */
  maxTotalTimeoutMs?: number;
  /**
   * Ask the upstream for progress even when the caller did not (the hub's own token), so that
   * progress keeps the idle timeout alive; the caller still sees progress only via onProgress.
   */
  askProgress?: boolean;
  /** Send again when that is safe (see retry.ts); absent: one attempt. */
  retry?: RetryPolicy;
  /**
   * The hub's stop begun: a wait between attempts (a backoff, the upstream restarting) ends then
   * with a HubStoppingError, nothing running upstream to drain (retry.ts).
   */
  stop?: Signal;
  /**
   * The hub's own request, made for no caller (a subscription renewed after a restart): no call,
   * answered or not, in the count of calls left unanswered (UpstreamBase.noteUnanswered), as the
   * hub's lists are not.
   */
  hubOwn?: boolean;
  /** Progress from the upstream for this call; the connection owns the upstream progressToken. */
  onProgress?: (p: ProgressInfo) => void;
  /** `notifications/message` the upstream sent about this call (HTTP POST stream) or while it ran. */
  onLog?: (params: Record<string, unknown>) => void;
  /**
   * Whom the call is for. A legacy connection's log lines are session-wide: one that no answer
   * stream carried goes to a lone call only while the connection has served one principal.
   * null: made for several principals at once (the hub's own subscribe of a URI that several
   * hold, Subscriptions.heldFor): the connection has served more than one from then on.
   */
  principal?: string | null;
  /**
   * A legacy upstream's server-to-client request (elicitation/create, sampling/createMessage,
   * roots/list) that belongs to this call. Resolve with the client's result; reject with an
   * RpcError to send an error back. Absent: the connection answers -32601 itself. `withdrawn`
   * aborts when the upstream no longer wants the answer (its notifications/cancelled for the
   * request, or the call ended): nothing is sent back then.
   */
  onServerRequest?: AskClient;
  /**
   * The server named in the message of each elicitation it asks the client (relayedInput): its
   * id when it is untrusted (protocol/input-results.ts, askerOf); absent, the message is its own.
   */
  asker?: string;
  /** The client is a legacy one: its questions say the asker in `_meta` too (ASKER_META). */
  askerInMeta?: boolean;
  /**
   * A legacy upstream's notifications/elicitation/complete for a URL-mode elicitation this call
   * relayed (found by its elicitationId). Absent: dropped.
   */
  onElicitationComplete?: (params: Record<string, unknown>) => void;
  /**
   * The caller can answer server → client requests: on a legacy stdio upstream such a call runs
   * alone, so a request the server makes during it can only be this call's (see CallGate).
   */
  exclusive?: boolean;
  /** What the downstream client of this call declared (modern upstreams get it in `_meta`). */
  clientCapabilities?: ClientCapabilities;
  /** Non-envelope `_meta` keys to pass through unchanged (trace context, third-party). */
  meta?: Record<string, unknown>;
  /** Modern: stamped as io.modelcontextprotocol/logLevel. */
  logLevel?: LoggingLevel;
  /**
   * Where onLog's lines go, when that is shared by other calls: a legacy session's id (its log
   * lines are session-wide). A line relayed to several calls goes once to each scope.
   */
  logScope?: string;
  /** Told the progress token this request goes out with (a task's tools/call: see progressToken). */
  onToken?: (token: string) => void;
  /**
   * Go out with this progress token rather than a new one. A task's `tasks/result` takes its
   * `tools/call`'s: the server's progress for the task carries that one for the task's whole
   * life, and it must keep the wait for the result alive (router/legacy-task.ts).
   */
  progressToken?: string;
}

/** What a reload may change of a running connection (Upstream.retime). */
export interface UpstreamLimits {
  timeoutMs: number;
  maxTotalTimeoutMs?: number;
  /** The idle check's interval; unset: as it was. */
  healthCheckMs?: number;
}

/**
 * One upstream MCP server, whatever its transport and era. `request` takes era-neutral params
 * (no envelope `_meta`) and resolves with the result object as the upstream sent it
 * (`resultType` may be present for modern upstreams). It rejects with RpcError when the upstream
 * answered an error, and with a HubError subclass (TimeoutError, CancelledError, TransportError,
 * UpstreamUnavailableError) for failures the hub observed itself.
 *
 * Events:
 *  - 'state' (state: UpstreamState, detail?: string)
 *  - 'notification' ({method, params}): notifications not tied to a call, e.g.
 *    notifications/tools/list_changed, notifications/resources/updated, notifications/message.
 */
export interface Upstream extends EventEmitter {
  readonly id: string;
  readonly state: UpstreamState;
  readonly era: Era | undefined;
  /** Negotiated protocol version (legacy may be older than 2025-11-25). */
  readonly protocolVersion: string | undefined;
  readonly capabilities: ServerCapabilities | undefined;
  readonly serverInfo: Implementation | undefined;
  readonly instructions: string | undefined;
  readonly lastError: string | undefined;
  /**
   * A stdio process's stderr line that reads like the reason it last exited (redacted): for
   * operators (admin views) only. Never in lastError, which clients are told: the stderr of a
   * server can name what its own environment holds.
   */
  readonly lastStderr?: string;
  readonly since: number;
  readonly restarts: number;
  /** Of `restarts`, those after it was taken down as hung (calls left unanswered, a health check unanswered), not crashed. */
  readonly hungRestarts: number;
  /** Requests in flight and waiting for a slot (see maxConcurrent / maxQueue). */
  readonly load: { active: number; queued: number };
  /**
   * Whether a call sent on this connection itself is still unanswered (its listen streams and
   * handshake aside); `load` counts every connection sharing its limiter.
   */
  readonly busy?: boolean;
  /** Where its requests take their slots (maxConcurrent / maxQueue); other connections to the server may share it (UpstreamSpec.limiter). */
  readonly limiter: Limiter;
  /** Connect, detect the era and handshake. Resolves when ready; rejects if it could not start. */
  start(): Promise<void>;
  request(method: string, params: Record<string, unknown>, opts?: CallOptions): Promise<Record<string, unknown>>;
  notify(method: string, params?: Record<string, unknown>): void;
  /**
   * Settles once every message the upstream wrote before it read what the hub sends now has
   * been read here: where one connection carries both ways in order (a legacy stdio process,
   * which answers a ping after what it wrote before reading it). Undefined where nothing can
   * tell (HTTP, whose streams are not ordered with each other; a modern server, never pinged).
   */
  caughtUp?(): Promise<unknown> | undefined;
  /**
   * A client of `principal` said its roots changed (a legacy `notifications/roots/list_changed`):
   * passed on to a legacy server whose calls on this connection were that principal's alone, and
   * `ask` (that client) answers its `roots/list` sent outside any call from now on. False when
   * nothing was passed on (a modern server hears of roots only in a request's input_required).
   * `firstClient`: not a change the client said, but a client with roots there at all (its
   * session's stream open), passed on only where the server asked for roots outside any call
   * when no client could answer (refused) and none answers yet: such a server (one that asks
   * once, as it starts) would otherwise never have a client's roots until that client changed them;
   * and where the client that answers them can no longer be asked (`canAsk` of its own, given
   * when it became that client, says so: its session ended, its stream closed), whose roots the
   * server would keep for good. `canAsk`: whether this client can still be asked.
   */
  rootsChanged?(principal: string, ask: AskClient, firstClient?: boolean, canAsk?: () => boolean): boolean;
  /**
   * The server's own time limits changed (a reload): calls from now on are bounded by these,
   * and a timeout is judged the server's (breaker evidence) or a caller's own against them.
   */
  retime(limits: UpstreamLimits): void;
  close(): Promise<void>;
  /**
   * False while the server's list changes cannot reach the hub: a legacy HTTP server without a
   * standalone (GET) stream. Its lists then get a freshness rather than "until list_changed".
   * Undefined: they can (stdio, modern servers, which are listened to).
   */
  readonly hearsNotifications?: boolean;
  /**
   * Modern HTTP upstreams: tool definitions this connection serves calls for without having
   * listed them itself (a principal's connection answered from the shared public list), for
   * their `x-mcp-header` declarations.
   */
  learnTools?(tools: readonly Record<string, unknown>[]): void;
  /**
   * Modern upstreams: ask `server/discover` again, in the background, when the DiscoverResult in
   * use is stale (its ttlMs, digest §3.3). Capabilities, instructions or serverInfo that changed
   * are taken, and said as a 'state' event ('ready', "server/discover changed"), as a restart
   * would be. Does nothing otherwise (legacy, not ready, still fresh, already asking).
   */
  refreshDiscover?(): void;
  /**
   * Modern upstreams: open a `subscriptions/listen` stream with this filter. Every message of
   * the stream (the acknowledgement included) goes to `onMessage`, and so do those that come
   * tagged with its id after it ended (a stream closed as the server said something on it); the
   * change notifications are also emitted as 'notification' events, unless `onMessage` returns
   * false (it keeps that one: see ListenManager, a copy of a change a newer stream says too). On
   * a legacy or not-ready upstream the handle ends at once.
   */
  listen?(filter: ListenFilter, onMessage: ListenSink): ListenHandle;
}

/** Where a listen stream's messages go; false: not emitted as a 'notification' event (the sink keeps it). */
export type ListenSink = (n: { method: string; params: Record<string, unknown> }) => boolean | void;

/** What a `subscriptions/listen` asks for (digest §4.1); omitted = not subscribed. */
export interface ListenFilter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
}

export interface ListenEnd {
  /** 'closed' when the hub closed it; otherwise why the stream ended. */
  reason: string;
  /** The failure, when it ended with one (an RpcError when the upstream refused the listen). */
  error?: Error;
}

export interface ListenHandle {
  /** Stop listening: closes the stream (HTTP) or sends notifications/cancelled (stdio). */
  close(): void;
  /**
   * Stop listening once what the server said on this stream before now has come (another stream
   * took its place): at once where the server's messages come in the order it wrote them (stdio,
   * one pipe), a little later over HTTP, where each stream is a connection of its own and one
   * written to before another's acknowledgement may still bring it after. Without it, close().
   */
  retire?(): void;
  /** Settles (never rejects) when the subscription is over, for whatever reason. */
  readonly ended: Promise<ListenEnd>;
}
