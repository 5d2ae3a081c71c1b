import type { Logger } from '../log.js';
import { INTERNAL_ERROR, HubStoppingError, RpcError } from '../protocol/errors.js';
import { LOG_LEVELS } from '../protocol/types.js';
import type { LostEndpoint } from '../config/reload.js';
import { monotonicNow } from '../monotonic.js';
import type { HubCore, MovedSubscriptions, ResourceUpdate, SeenBy } from './core.js';
import { LegacySession } from './legacy-session.js';
import type { SessionFacts, SessionIds } from './session-ids.js';
import type { Kept, SessionMemory } from './session-memory.js';
import { OwedUpdates } from './owed-updates.js';

const DEFAULT_SESSION_IDLE_MS = 60 * 60_000;
export const DEFAULT_MAX_SESSIONS = 10_000;
export const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL = 100;

/**
 * A session with its GET stream open or a call in flight is in use, however quiet. A GET stream
 * kept for its client's reconnection (ResumableStream) is open only while a connection carries it.
 */
function busy(s: LegacySession): boolean {
  return (s.stream !== undefined && !s.stream.closed && s.stream.connected !== false) || s.inflight.size > 0;
}

/**
 * The legacy sessions an endpoint holds (HTTP ones by the id their client sends, stdio ones by
 * their pipe's) and their lifetimes: found, taken back after a restart, given room within
 * maxSessions and maxSessionsPerPrincipal, told of list changes and resource updates, and ended
 * (DELETE, idleness, a revoked credential, a removed group).
 */
export class SessionTable {
  readonly sessions = new Map<string, LegacySession>();
  /** Legacy sessions of stdio hubs (one per process, or one per initialize), by id. */
  readonly stdioSessions = new Map<string, LegacySession>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly core: HubCore,
    private readonly log: Logger,
    /** sessionIdleTimeoutMs, maxSessions, maxSessionsPerPrincipal: when legacy HTTP sessions end without a DELETE. */
    private readonly limits: { sessionIdleTimeoutMs?: number; maxSessions?: number; maxSessionsPerPrincipal?: number },
    /** Session ids that carry their session, so a restarted hub (or another) takes them back. */
    private readonly sessionIds?: SessionIds,
    /** What such sessions gathered (subscriptions, a log level), taken back with them. */
    private readonly memory?: SessionMemory,
  ) {
    const idle = limits.sessionIdleTimeoutMs ?? DEFAULT_SESSION_IDLE_MS;
    this.sweeper = setInterval(() => this.endIdleSessions(idle), Math.min(idle, 60_000));
    this.sweeper.unref();
    core.events.on('listChanged', (kind: string, principal?: string, seenBy?: SeenBy, at?: number) => this.broadcastLegacy(kind, principal, seenBy, at));
    core.events.on('resourceUpdated', (u: ResourceUpdate) => {
      for (const key of u.subscribers) {
        const s = this.sessions.get(key) ?? this.stdioSession(key);
        if (!s || !u.seenBy(s.group)) continue;
        s.stream?.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: u.meta ? { uri: u.uri, _meta: u.meta } : { uri: u.uri } });
        // No stream to say it on yet (a session taken back by a POST): said when it opens.
        if (s.owedUpdates !== undefined && (s.stream === undefined || s.stream.closed)) s.owedUpdates.missed(u.uri);
      }
    });
  }

  /**
   * `principal`: only that principal's sessions (its own list changed); `seenBy`: only sessions
   * whose group shows the change; `at`: when the last change it stands for was made (performance.now()),
   * which a session answered its initialize after has in every list it can fetch: not told.
   */
  broadcastLegacy(kind: string, principal?: string, seenBy?: SeenBy, at?: number): void {
    const method =
      kind === 'tools' ? 'notifications/tools/list_changed' : kind === 'prompts' ? 'notifications/prompts/list_changed' : 'notifications/resources/list_changed';
    const msg = { jsonrpc: '2.0', method };
    const told = (s: LegacySession) =>
      (principal === undefined || s.principal === principal) && (seenBy === undefined || seenBy(s.group, s.principal)) && (at === undefined || s.listsFrom === undefined || at >= s.listsFrom);
    for (const s of this.sessions.values()) if (s.initialized && s.stream && !s.stream.closed && told(s)) s.stream.send(msg);
    for (const s of this.stdioSessions.values()) if (s.initialized && !s.ended && s.stream && !s.stream.closed && told(s)) s.stream.send(msg);
  }

  /** A stdio session by id, while it is open (a closed one is let go here). */
  stdioSession(id: string): LegacySession | undefined {
    const s = this.stdioSessions.get(id);
    if (s?.ended) this.stdioSessions.delete(id);
    return s?.ended ? undefined : s;
  }

  /**
   * The session with this id, or one an earlier hub process (or another hub with the same key)
   * opened for this principal on this endpoint, taken back: initialized, as its client last
   * knew it, with the subscriptions and log level this hub's ledger kept for it (SessionMemory),
   * without a GET stream (its client opens it again). NO_ROOM: it would be taken back, but the
   * hub is at maxSessions with every session busy; the client is told to try again (503), not
   * that its session is gone (404, after which it would start anew, losing what it had).
   */
  sessionFor(sid: string, principal: string, group: string | undefined, credentialKey?: string): LegacySession | NoRoom | undefined {
    const held = this.sessions.get(sid);
    // Another principal's, or another endpoint's (/mcp, /mcp/<group>), is not found here.
    if (held) return held.principal === principal && held.group === group ? held : undefined;
    if (!this.sessionIds) return undefined;
    const back = this.revivable(sid, principal, group, credentialKey);
    if (!back) return undefined;
    if (!this.roomForSession(principal)) return NO_ROOM;
    const { facts, kept } = back;
    const session = new LegacySession(facts.protocolVersion, facts.clientInfo, facts.capabilities, principal, sid);
    session.initialized = true;
    session.group = group;
    session.key = credentialKey;
    this.sessions.set(sid, session);
    // Subscribed again, as its client believes it still is; a URI that routes nowhere now is dropped.
    if (kept?.logLevel !== undefined && LOG_LEVELS.includes(kept.logLevel)) session.logLevel = kept.logLevel;
    if (kept?.uris.length)
      this.subscribeAgain(session, kept.uris, (uris) =>
        this.log.info({ principal, uris }, 'subscribed resources of a session taken back said updated, since a change while the hub was down was not heard'),
      );
    this.log.info({ principal, client: facts.clientInfo?.name, subscriptions: kept?.uris.length ?? 0 }, 'legacy session taken back (opened by an earlier hub process, or another hub)');
    return session;
  }

  /**
   * Subscribes `session` again to `uris` (routed as they are now; one that routes nowhere, or to a
   * server its group does not show, is dropped, its memory too), and owes it the gap's signal:
   * each URI subscribed again said updated once, on its GET stream (at once when that is open,
   * else when its client opens it: OwedUpdates). `told` hears how many were said.
   */
  private subscribeAgain(session: LegacySession, uris: string[], told: (uris: number) => void): void {
    if (!this.core.subscribeResources) return;
    const sid = session.id;
    // Held on a server not ready yet (still starting after the hub's restart): it says them
    // updated itself once it watches them (UpstreamSubscriptions.resubscribe, a modern one's
    // listen), on the session's stream, or with this gap's if that is not open (OwedUpdates.missed).
    // Said here too, its client heard each twice, the first time while nothing watched it.
    const saidLater = new Set<string>();
    const made = this.core.subscribeResources(sid, uris, session.principal, session.group, saidLater).then(
      (honoured): readonly string[] => {
        // Ended meanwhile (a DELETE right after the restart): what was just made is let go.
        if (session.ended || (this.sessions.get(sid) ?? this.stdioSessions.get(sid)) !== session) {
          this.core.sessionClosed(sid);
          return [];
        }
        for (const uri of uris) if (!honoured.includes(uri)) this.memory?.unsubscribed(sid, uri);
        return honoured.filter((u) => !saidLater.has(u));
      },
      (err: unknown): readonly string[] => {
        this.log.warn({ err: String((err as Error)?.message ?? err) }, 'resource subscriptions of a session not renewed');
        return [];
      },
    );
    // Nothing watched them while the hub was down, or while their server was replaced; what an
    // earlier gap still owes (a take-back whose client has not opened its GET stream yet) with them.
    const gap = new OwedUpdates(session.owedUpdates?.withOwed(made) ?? made, told);
    session.owedUpdates = gap;
    if (session.stream && !session.stream.closed) gap.streamOpened(session);
  }

  /**
   * A reload changed the owner of URIs sessions hold (a server removed or renamed, a URI routed
   * to another server now): `moved` lets go of those a session holds where they were and names
   * them. Each such session is subscribed again at their owners now and told each updated once,
   * as a session taken back after a restart is: a change while nothing watched them was not
   * heard. How many sessions had any.
   */
  async resubscribeMoved(moved: MovedSubscriptions): Promise<number> {
    let n = 0;
    for (const s of [...this.sessions.values(), ...this.stdioSessions.values()]) {
      if (s.ended) continue;
      const uris = await moved(s.id, s.principal, s.group);
      if (uris.length === 0 || s.ended) continue;
      n++;
      this.subscribeAgain(s, uris, (told) =>
        this.log.info({ principal: s.principal, uris: told }, 'resource subscriptions moved to another server by a reload: said updated, since a change while they moved was not heard'),
      );
    }
    return n;
  }

  /**
   * A session not held here that this principal may take back on this endpoint, and what this
   * hub's ledger kept of it. Issued by a hub of this ledger: only while its row is here (an
   * ended one has none), and only with the API key that opened it (`credentialKey`, its
   * configured hash; SessionMemory.recall): a key removed since, while no hub held the session,
   * takes nothing back, and neither does another key of its principal. Another hub's session
   * comes back without what it gathered there.
   */
  private revivable(sid: string, principal: string, group: string | undefined, credentialKey: string | undefined): { facts: SessionFacts; kept?: Kept } | undefined {
    const facts = this.sessionIds?.reopen(sid);
    if (!facts || facts.principal !== principal || facts.group !== group) return undefined;
    if (this.memory === undefined || facts.home !== this.memory.home) return { facts };
    const kept = this.memory.recall(sid, credentialKey);
    return kept ? { facts, kept } : undefined;
  }

  /**
   * DELETE: the principal's session ends. One this hub would take back ends without being taken
   * back (so without room: a full hub still forgets it, and a restarted one then refuses it).
   */
  deleteSession(sid: string, principal: string, group: string | undefined, credentialKey?: string): boolean {
    const held = this.sessions.get(sid);
    if (held) return held.principal === principal && held.group === group && this.endSession(sid);
    if (!this.revivable(sid, principal, group, credentialKey)) return false;
    this.memory?.ended(sid);
    return true;
  }

  /**
   * A client that goes away without DELETE leaves its session behind: one quiet for `idleMs`,
   * with no GET stream open and nothing in flight, ends. Its client gets 404 and starts anew.
   * Measured on the monotonic clock (LegacySession.lastSeen), as the kept streams are (resumable.ts).
   */
  private endIdleSessions(idleMs: number): void {
    const now = monotonicNow();
    const before = now - idleMs;
    for (const [id, s] of this.sessions) {
      s.streams?.sweep(now);
      if (s.lastSeen < before && !busy(s)) this.endSession(id);
      else this.memory?.touch(id, s.lastSeen);
    }
  }

  /**
   * Whether `principal` may open another legacy session, making room if it must. A principal at
   * its own cap gives up its idlest free session; at the hub's cap, the principal holding the
   * most does, never one holding fewer than the newcomer would. One client opening sessions in a
   * loop ends only its own; holding streams on all of them it can still fill the hub's cap, which
   * the per-principal cap keeps to maxSessions / maxSessionsPerPrincipal such clients.
   */
  roomForSession(principal: string): boolean {
    const perPrincipal = this.limits.maxSessionsPerPrincipal ?? DEFAULT_MAX_SESSIONS_PER_PRINCIPAL;
    const held = new Map<string, number>();
    for (const s of this.sessions.values()) held.set(s.principal, (held.get(s.principal) ?? 0) + 1);
    const idlestOf = (who: string): LegacySession | undefined => {
      let idlest: LegacySession | undefined;
      for (const s of this.sessions.values()) if (s.principal === who && !busy(s) && (!idlest || s.lastSeen < idlest.lastSeen)) idlest = s;
      return idlest;
    };
    let victim: LegacySession | undefined;
    if ((held.get(principal) ?? 0) >= perPrincipal) {
      victim = idlestOf(principal);
      if (!victim) return false;
    } else if (this.sessions.size >= (this.limits.maxSessions ?? DEFAULT_MAX_SESSIONS)) {
      // Largest holders first, and none holding fewer than the requester would (with the one it
      // asks for): a principal never gains a session at the cost of a smaller one's.
      const mine = (held.get(principal) ?? 0) + 1;
      const order = [...held.entries()].map(([who, n]): [string, number] => [who, who === principal ? mine : n]).sort((a, b) => b[1] - a[1]);
      for (const [who, n] of order) {
        if (n < mine) break;
        if ((victim = idlestOf(who))) break;
      }
      if (!victim) return false;
    }
    if (victim) this.endSession(victim.id);
    return true;
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  /**
   * The hub stops, its drain time over and its upstreams closed, which failed each call waiting
   * on one. A legacy call still running waits on the hub alone (its client's answer to a question
   * relayed from a modern upstream's input_required, a confirmation): nothing else would end it,
   * and the hub exited with its client unanswered and its row in flight. Each is ended so
   * (HubStoppingError): answered -32603 `the hub is shutting down` while its connection is still
   * open, and recorded `unavailable`. The sessions stay open: a restarted hub takes them back.
   */
  stopCalls(): void {
    const stopping = new HubStoppingError();
    for (const s of [...this.sessions.values(), ...this.stdioSessions.values()]) for (const call of s.inflight.values()) call.abort(stopping);
  }

  /** DELETE (HTTP), stdin EOF or idleness: the session ends and its subscriptions are released. */
  endSession(id: string, why?: string): boolean {
    const s = this.sessions.get(id);
    if (!s) return false;
    this.sessions.delete(id);
    s.close(undefined, why);
    // What it kept for reconnections goes with it: a later Last-Event-ID gets the session's 404.
    s.streams?.clear();
    // Its GET stream ends too: a session that is gone must not go on receiving notifications.
    (s.stream as { end?: () => void } | undefined)?.end?.();
    this.core.sessionClosed(id);
    this.memory?.ended(id);
    return true;
  }

  /**
   * Sessions of principals whose credentials were revoked, or opened with a removed API key
   * (`keys`: their hashes) or one whose groups no longer include their endpoint (`lost`), end at
   * once, GET streams included; so do those the ledger remembers for a restarted hub opened with
   * a removed key (SessionMemory.forgetOpenedBy), which no hub of it takes back then.
   */
  endSessionsOf(principals: ReadonlySet<string>, keys: ReadonlySet<string> = NO_KEYS, lost: LostEndpoint = (k) => k !== undefined && keys.has(k)): number {
    let n = 0;
    for (const [id, s] of this.sessions) {
      // A request in flight is told why (Session not found: …): a key removed, or its groups narrowed.
      const revoked = principals.has(s.principal) || (s.key !== undefined && keys.has(s.key)) || (s.streamKey !== undefined && keys.has(s.streamKey));
      if ((revoked || lost(s.key, s.group) || lost(s.streamKey, s.group)) && this.endSession(id, revoked ? REVOKED : NARROWED)) n++;
    }
    return n + (this.memory?.forgetOpenedBy(keys) ?? 0);
  }

  /**
   * Sessions opened on `/mcp/<group>` of a group a reload removed end at once, GET streams
   * included: their every request would get the path's 404, while a GET stream stayed open,
   * told nothing, and the session held its place. A request in flight is told why.
   */
  endSessionsOfGroups(gone: (group: string) => boolean): number {
    let n = 0;
    for (const [id, s] of this.sessions) if (s.group !== undefined && gone(s.group) && this.endSession(id, groupRemoved(s.group))) n++;
    return n;
  }
}

const NO_KEYS: ReadonlySet<string> = new Set();
/** Why endSessionsOf or endSessionsOfGroups ended a session, as its requests in flight are told. */
const REVOKED = 'the API key that opened it was revoked';
const NARROWED = 'the API key that opened it no longer reaches this endpoint (its groups changed)';
const groupRemoved = (group: string): string => `the group it was opened on (/mcp/${group}) was removed`;

/** SessionTable.sessionFor's answer for a session it would take back if the hub had room (503, not 404). */
export const NO_ROOM = Symbol('no room for the session');
export type NoRoom = typeof NO_ROOM;
/** With every session busy, room comes when a client closes a stream or goes idle: a guess, not a promise. */
export const NO_ROOM_HEADERS: Readonly<Record<string, string>> = { 'retry-after': '5' };

export function noRoomError(): RpcError {
  return new RpcError(INTERNAL_ERROR, 'Service Unavailable: too many open sessions, try again later');
}
