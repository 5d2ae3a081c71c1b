import type { EventEmitter } from 'node:events';
import type { Implementation, ServerCapabilities } from '../protocol/types.js';
import type { CallContext } from '../router/context.js';
import type { AuditEnd } from '../ledger/types.js';
import type { SessionStreams } from './resumable.js';
import type { AskClient } from '../upstream/types.js';

/** What the downstream edges need from the rest of the hub; nothing era-specific crosses it. */
export interface HubCore {
  readonly serverInfo: Implementation;
  /**
   * Whether a tools/call's idempotency key is honoured (the ledger keeps keys; `ledger.enabled`
   * takes effect on a restart only). Said to HTTP clients in a header (KEYS_KEPT_HEADER).
   */
  readonly keepsIdempotencyKeys?: boolean;
  /** listen.maxBodyBytes, as the hub started with it: said to HTTP clients on a handshake (MAX_BODY_HEADER). */
  readonly maxBodyBytes?: number;
  /** listen.drainTimeoutMs: said to HTTP clients on a handshake (DRAIN_MS_HEADER). */
  readonly drainTimeoutMs?: number;
  /**
   * The union over upstreams (those an endpoint group shows, when given: what its handshake
   * offers), waiting (bounded) for ones still starting (of those, in the start-up grace).
   */
  capabilities(group?: string): Promise<ServerCapabilities>;
  /** The same, without waiting. */
  currentCapabilities(group?: string): ServerCapabilities;
  /**
   * Whether `currentCapabilities(group)` holds `family`, without building it: asked at each
   * request of a family, so it must not cost a look at every server when it can be answered
   * without one (issue #9: the list families always are offered).
   */
  offers(family: keyof ServerCapabilities, group?: string): boolean;
  /**
   * Whether the request names a server still on its first attempt to start, shown on endpoint
   * `group` (a `completion/complete` of one of its prompts' arguments): a family no server is
   * known to offer yet is not refused for it, since the hub waits for that server
   * (hub/first-start.ts).
   */
  namesFirstStarting?(method: string, params: Record<string, unknown>, group?: string): boolean;
  /**
   * For a request of a family no server shown on endpoint `group` is known to offer yet (a
   * `completion/complete`: the list families always are): 'wait' for the servers still starting
   * (capabilities), as in the start-up grace a handshake does; 'none' in the grace when none shown
   * is still starting (none can offer it by the grace's end: refused at once); 'on' in the grace
   * for a completion of a prompt only a ready server shown can have, which is routed as its
   * prompts/get is (what the servers starting offer cannot change what that server completes).
   */
  familyInGrace?(method: string, params: Record<string, unknown>, group?: string): 'wait' | 'on' | 'none';
  /** The upstreams' instructions a client of this endpoint group gets (undefined group: `/mcp`). */
  instructions(group?: string): string | undefined;
  handle(method: string, params: Record<string, unknown>, ctx: CallContext): Promise<Record<string, unknown>>;
  /**
   * The row of a request answered at the edge or refused there; `extra.hubName`: the tool, prompt
   * or URI it named; `extra.clientEra`: the version its client asked for, when the hub serves
   * none such (a -32022's row), in place of the era of its context. Never rejects: a row the
   * ledger cannot write is logged, and the request is answered all the same (README, "The ledger").
   */
  recordLocal(method: string, ctx: CallContext, end: Omit<AuditEnd, 'latencyMs'> & { latencyMs?: number }, extra?: { hubName?: string; clientEra?: string }): Promise<void>;
  /**
   * 'listChanged' (kind: 'tools'|'prompts'|'resources'|'resourceTemplates', principal?: only
   * its clients, seenBy?: (group) => whether clients of that endpoint group see the change,
   * at?: performance.now() of the last change it stands for);
   * 'resourceUpdated' ({uri, meta?, subscribers: ReadonlySet<string>, seenBy: SeenBy}: a subscriber
   * is told only when its endpoint group shows the resource's server).
   */
  readonly events: EventEmitter;
  /** Subscriber keys of a session that went away, so upstream subscriptions can be released. */
  sessionClosed(sessionKey: string): void;
  /**
   * Subscribe `subscriber` (a modern listen stream) to resource URIs; resolves with the URIs
   * honoured (routed to an upstream that can report updates). Released by sessionClosed.
   * `saidLater`, given, gets those held on a connection not ready yet: their server says them
   * updated to their subscribers itself once it watches them (a gap's signal of its own).
   */
  subscribeResources?(subscriber: string, uris: string[], principal: string, group?: string, saidLater?: Set<string>): Promise<string[]>;
  /**
   * A legacy client of `principal` on endpoint `group` said its roots changed
   * (`notifications/roots/list_changed`); `ask` puts a server's roots/list to it. `firstClient`:
   * a client with roots can be asked now; `canAsk`, whether it still can be (Upstream.rootsChanged's).
   */
  rootsChanged?(principal: string, group: string | undefined, ask: AskClient, firstClient?: boolean, canAsk?: () => boolean): void;
  /** `shows`: the servers the caller may know of (their lines, and a server named in `reason`); undefined: all. */
  health(shows?: (server: string) => boolean, groups?: ReadonlySet<string>): { status: string; reason?: string; servers: { id: string; state: string; era: string | null; tools: number }[] };
}

/**
 * Whether clients of an endpoint group (`/mcp/<group>`; undefined: `/mcp`) see a change; of a
 * list change, given the client's principal, whether that principal's list has it.
 */
export type SeenBy = (group: string | undefined, principal?: string) => boolean;

/** A place to send server → client messages (a GET SSE stream, a POST's SSE stream, stdout). */
export interface MessageSink {
  send(msg: object): void;
  readonly closed: boolean;
  /** false: nothing sent before the answer reaches the client (its Accept had no text/event-stream). */
  readonly canStream?: boolean;
  /** false: kept for a reconnection, with no connection carrying it now (a cut resumable stream). */
  readonly connected?: boolean;
  /** A legacy HTTP session's streams, which this answer joins once it streams (resumable.ts). */
  resumeIn?: SessionStreams;
  /**
   * A resumable stream (what it sends after a cut is kept for its client's reconnection):
   * `cb` hears each cut (false) and reconnection (true) until the returned function is called.
   * Undefined: not one (yet).
   */
  watchConnection?(cb: (connected: boolean) => void): (() => void) | undefined;
}

/**
 * After a reload: the URIs a subscriber (a legacy session's id, a listen stream's key) holds whose
 * owner changed, let go where they were held, for it to subscribe again (UpstreamSubscriptions.takeMoved).
 */
export type MovedSubscriptions = (subscriber: string, principal: string, group: string | undefined) => Promise<string[]>;

/** What 'resourceUpdated' carries. */
export interface ResourceUpdate {
  uri: string;
  /** The server's own `_meta` keys on its update (none of the protocol's), passed on as they came. */
  meta?: Record<string, unknown>;
  subscribers: ReadonlySet<string>;
  seenBy: SeenBy;
}
