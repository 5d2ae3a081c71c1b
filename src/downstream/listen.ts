import { randomBytes } from 'node:crypto';
import { META_SERVER_INFO, META_SUBSCRIPTION_ID } from '../protocol/meta.js';
import { UpstreamUnavailableError } from '../protocol/errors.js';
import type { Request } from '../protocol/jsonrpc.js';
import type { HubCore, MessageSink, MovedSubscriptions, ResourceUpdate, SeenBy } from './core.js';
import type { Exchange } from './exchange.js';
import { endAtExpiry } from './expiry.js';
import type { LostEndpoint } from '../config/reload.js';
import type { Logger } from '../log.js';

interface Listener {
  id: string | number;
  sink: MessageSink & { end(): void };
  tools: boolean;
  prompts: boolean;
  resources: boolean;
  /** Subscriber key of its resource subscriptions (released when the stream ends). */
  key: string;
  principal: string;
  /** The endpoint group it was opened on (`/mcp/<group>`). */
  group: string | undefined;
  /** The API key that opened it (Identity.key). */
  credentialKey: string | undefined;
  /** Ends the stream from the hub's side, releasing what it holds. */
  close(): void;
}

/**
 * What is wrong with a listen request's `notifications` (a SubscriptionFilter, required: the
 * flags booleans, `resourceSubscriptions` an array of strings; digest §4.1), or undefined.
 * Members it does not know (an extension's, as the tasks extension's `taskIds`) pass.
 */
export function listenFilterProblem(filter: unknown): string | undefined {
  if (filter === undefined) return 'notifications is required (the notification types to receive)';
  if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) return 'notifications must be an object';
  const f = filter as Record<string, unknown>;
  for (const k of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'])
    if (f[k] !== undefined && typeof f[k] !== 'boolean') return `notifications.${k} must be a boolean`;
  const uris = f.resourceSubscriptions;
  if (uris !== undefined && !(Array.isArray(uris) && uris.every((u) => typeof u === 'string'))) return 'notifications.resourceSubscriptions must be an array of strings';
  return undefined;
}

/** The subscriber keys of listen streams start so (a legacy session's are its session id). */
const LISTEN_KEY_PREFIX = 'listen:';

/** Whether a subscriber key is a listen stream's. */
export function isListenKey(key: string): boolean {
  return key.startsWith(LISTEN_KEY_PREFIX);
}

/** Most URIs one listen request may subscribe to. */
const MAX_RESOURCE_SUBSCRIPTIONS = 256;

const FLAG: Record<string, 'tools' | 'prompts' | 'resources'> = {
  tools: 'tools',
  prompts: 'prompts',
  resources: 'resources',
  resourceTemplates: 'resources',
};
const METHOD = {
  tools: 'notifications/tools/list_changed',
  prompts: 'notifications/prompts/list_changed',
  resources: 'notifications/resources/list_changed',
} as const;

/**
 * Modern `subscriptions/listen` streams: acknowledgement first, then only the opted-in list
 * changes, each tagged with the listen request's id (digest §4.1).
 */
export class ListenHub {
  private readonly listeners = new Set<Listener>();

  constructor(
    private readonly core: HubCore,
    private readonly log: Logger,
    /** Streams open at once, per principal and in all (as legacy sessions: listen.maxSessions*). */
    private readonly limits: { perPrincipal: number; total: number } = { perPrincipal: Infinity, total: Infinity },
  ) {
    core.events.on('resourceUpdated', (u: ResourceUpdate) => {
      for (const l of this.listeners)
        if (u.subscribers.has(l.key) && !l.sink.closed && u.seenBy(l.group))
          l.sink.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: u.uri, _meta: { ...u.meta, [META_SUBSCRIPTION_ID]: l.id } } });
    });
    core.events.on('listChanged', (kind: string, principal?: string, seenBy?: SeenBy) => {
      const flag = FLAG[kind];
      if (!flag) return;
      for (const l of this.listeners) {
        if (l.sink.closed) this.listeners.delete(l);
        else if (l[flag] && (principal === undefined || l.principal === principal) && (seenBy === undefined || seenBy(l.group, l.principal))) l.sink.send({ jsonrpc: '2.0', method: METHOD[flag], params: { _meta: { [META_SUBSCRIPTION_ID]: l.id } } });
      }
    });
  }

  /**
   * Whether `principal` may open another stream. Each holds a socket, a timer and up to 256
   * resource subscriptions, as a legacy session does, and is capped like one; a stream is
   * never ended to make room (each is in use), the newcomer is refused.
   */
  private hasRoom(principal: string): boolean {
    let mine = this.opening.get(principal) ?? 0;
    let all = this.openingTotal;
    for (const l of this.listeners) {
      if (l.sink.closed) {
        this.listeners.delete(l);
        continue;
      }
      all++;
      if (l.principal === principal) mine++;
    }
    return mine < this.limits.perPrincipal && all < this.limits.total;
  }

  /** Streams being opened (past hasRoom, not yet listeners): counted, or requests that come together all pass. */
  private readonly opening = new Map<string, number>();
  private openingTotal = 0;

  /**
   * A place for one more stream of `principal`, held from now until the stream is a listener or
   * failed (the function given back lets it go); undefined when `capped` and there is none.
   */
  reserve(principal: string, capped: boolean): (() => void) | undefined {
    if (capped && !this.hasRoom(principal)) return undefined;
    this.opening.set(principal, (this.opening.get(principal) ?? 0) + 1);
    this.openingTotal++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.opening.get(principal) ?? 1) - 1;
      if (n > 0) this.opening.set(principal, n);
      else this.opening.delete(principal);
      this.openingTotal--;
    };
  }

  /**
   * Open a listen stream. Resource URIs in `resourceSubscriptions` are subscribed upstream
   * (through the hub's own listen filter for modern upstreams, reference-counted
   * resources/subscribe for legacy ones) before the acknowledgement, which names the ones honoured.
   */
  open(req: Request, ex: Exchange, release: () => void): Promise<boolean> {
    // Never rejects: whatever goes wrong ends this stream, not the hub. The slot goes once the
    // stream is a listener (counted as one from then) or failed. Resolves with whether it is one.
    return this.openStream(req, ex)
      .catch(() => {
        try {
          ex.reply(undefined, 500);
        } catch {
          // the exchange is gone already
        }
        return false;
      })
      .finally(release);
  }

  private async openStream(req: Request, ex: Exchange): Promise<boolean> {
    const want = (req.params?.notifications ?? {}) as Record<string, unknown>;
    const honoured: Record<string, unknown> = {};
    for (const k of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const) if (want[k] === true) honoured[k] = true;
    if (!ex.stream) {
      ex.reply(undefined, 400);
      return false;
    }
    const key = `${LISTEN_KEY_PREFIX}${randomBytes(12).toString('base64url')}`;
    const uris = Array.isArray(want.resourceSubscriptions)
      ? [...new Set(want.resourceSubscriptions.filter((u): u is string => typeof u === 'string' && u.length > 0))].slice(0, MAX_RESOURCE_SUBSCRIPTIONS)
      : [];
    if (uris.length && this.core.subscribeResources) {
      try {
        // The endpoint's group limits subscriptions as it limits reads.
        const got = await this.core.subscribeResources(key, uris, ex.principal, ex.group);
        if (got.length) honoured.resourceSubscriptions = got;
      } catch (err) {
        // Nothing honoured, which the acknowledgement tells the client (it names the subset
        // honoured, digest §4.1): an error answer would end the stream, and the list changes it
        // asked for with it. What was subscribed before the failure is let go (nothing else would).
        const server = err instanceof UpstreamUnavailableError ? err.server : undefined;
        this.log.warn({ server, principal: ex.principal, group: ex.group, uris: uris.length, err: String((err as Error)?.message ?? err) }, 'listen stream: its resource subscriptions failed, none honoured');
        this.core.sessionClosed(key);
      }
    }
    if (ex.closed.aborted) {
      this.core.sessionClosed(key);
      return false;
    }
    const sink = ex.stream();
    let released = false;
    const release = (): void => {
      this.listeners.delete(l);
      if (released) return;
      released = true;
      if (honoured.resourceSubscriptions) this.core.sessionClosed(key);
    };
    const l: Listener = {
      id: req.id,
      sink,
      tools: honoured.toolsListChanged === true,
      prompts: honoured.promptsListChanged === true,
      resources: honoured.resourcesListChanged === true,
      key,
      principal: ex.principal,
      group: ex.group,
      credentialKey: ex.credentialKey,
      close: () => {
        stop();
        unwatch?.();
        release();
        this.finish(l);
      },
    };
    sink.send({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: honoured, _meta: { [META_SUBSCRIPTION_ID]: req.id } },
    });
    this.listeners.add(l);
    // The credential that opened the stream is its credential: it ends with it, and the client
    // listens again with a fresh one.
    const stop = endAtExpiry(ex.credentialExpiresAt, () => l.close());
    // Or sooner, with a token that stops verifying (its key left the key set), as a removed API key's.
    const unwatch = ex.credentialLapse?.watch(() => l.close());
    ex.closed.addEventListener('abort', () => {
      stop();
      unwatch?.();
      release();
    });
    return true;
  }

  /**
   * The streams of principals whose credentials were revoked, or opened with a removed API key
   * or one whose groups no longer include their endpoint (`lost`), end now; how many.
   */
  endStreamsOf(principals: ReadonlySet<string>, lost: LostEndpoint = () => false): number {
    return this.endWhere((l) => principals.has(l.principal) || lost(l.credentialKey, l.group));
  }

  /** The streams opened on `/mcp/<group>` of a group a reload removed end now, as a session there does; how many. */
  endStreamsOfGroups(gone: (group: string) => boolean): number {
    return this.endWhere((l) => l.group !== undefined && gone(l.group));
  }

  /** The streams whose subscriber key is among `keys` end now, gracefully (UpstreamSubscriptions.unwatched); how many. */
  endStreamsHolding(keys: ReadonlySet<string>): number {
    return this.endWhere((l) => keys.has(l.key));
  }

  /**
   * A reload changed the owner of URIs streams hold (a server removed or renamed, a URI routed to
   * another server now): `moved` lets go of those a stream holds where they were and names them.
   * Each is subscribed again at its owner now and said updated once on the stream, as after the
   * hub's other gaps in watching: a change while they moved was not heard. A stream one of whose
   * URIs is not honoured now (routed nowhere, or to a server its group does not show) ends,
   * gracefully: its acknowledgement said it was, which cannot be taken back, and its client,
   * listening again, is told what is watched now (as UpstreamSubscriptions.unwatched). How many
   * streams had any.
   */
  async resubscribeMoved(moved: MovedSubscriptions): Promise<number> {
    let n = 0;
    for (const l of [...this.listeners]) {
      if (l.sink.closed || !this.core.subscribeResources) continue;
      const uris = await moved(l.key, l.principal, l.group);
      if (uris.length === 0) continue;
      n++;
      const honoured = await this.core.subscribeResources(l.key, uris, l.principal, l.group).catch(() => [] as string[]);
      // Ended meanwhile (its release ran before these were made): what was just made is let go.
      if (!this.listeners.has(l) || l.sink.closed) {
        this.core.sessionClosed(l.key);
        continue;
      }
      if (honoured.length < uris.length) {
        this.log.info({ principal: l.principal, uris: uris.length, honoured: honoured.length }, 'listen stream: resource subscriptions a reload moved are not all honoured now: the stream ended, for its client to listen again');
        l.close();
        continue;
      }
      for (const uri of honoured) l.sink.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri, _meta: { [META_SUBSCRIPTION_ID]: l.id } } });
      this.log.info({ principal: l.principal, uris: honoured.length }, 'resource subscriptions moved to another server by a reload: said updated on the listen stream, since a change while they moved was not heard');
    }
    return n;
  }

  /** The streams `which` picks end now, gracefully (their requests answered); how many. */
  private endWhere(which: (l: Listener) => boolean): number {
    let n = 0;
    for (const l of [...this.listeners])
      if (which(l)) {
        l.close();
        n++;
      }
    return n;
  }

  closeAll(): void {
    for (const l of this.listeners) this.finish(l);
    this.listeners.clear();
  }

  /**
   * The hub ends a stream on its own (shutdown, the credential that opened it expired or was
   * removed): gracefully, by answering the listen request (digest §4.1), so its client can tell
   * the end from a dropped connection; then the stream closes.
   */
  private finish(l: Listener): void {
    if (!l.sink.closed)
      l.sink.send({ jsonrpc: '2.0', id: l.id, result: { resultType: 'complete', _meta: { [META_SUBSCRIPTION_ID]: l.id, [META_SERVER_INFO]: this.core.serverInfo } } });
    l.sink.end();
  }
}
