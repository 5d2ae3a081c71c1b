/**
 * The start-up grace: for a while from the hub's start (STARTUP_GRACE_MS), a list, a handshake
 * or a call waits for the upstreams still starting rather than be answered without them (a list
 * then would leave out their tools, a handshake their capabilities). Its own module: its waits,
 * shared per endpoint group, and the failMode "closed" servers' part in them are one piece of
 * state with one way out (`over`), which the hub only wires. Past the grace, a call that names
 * one server waits for that server alone (first-start.ts).
 */
import type { Logger } from '../log.js';
import type { Catalog, Routed, ServerHandle } from '../catalog/catalog.js';
import type { ShownRoutes } from './shown-routes.js';
import type { PrincipalUpstreams } from '../auth/upstream-pool.js';
import type { CallContext } from '../router/context.js';
import { failClosedBlocker } from '../router/fail-mode.js';
import { viewOf } from '../router/forwarding.js';
import { changeWithin, type StateSource } from '../upstream/change-within.js';
import { closedPastFirstAttempt, firstStarting, promptNamed } from './first-start.js';
import { unlessAborted, type Signal } from '../cancel.js';
import { envMs } from '../env-ms.js';
import { monotonicNow } from '../monotonic.js';

/**
 * How long from the hub's start a list, a handshake or a call waits for upstreams that are still
 * starting, by default (SWITCHYARD_STARTUP_GRACE_MS; 0: no wait, a server's tools are listed once it is ready).
 */
const STARTUP_GRACE_MS = 3_000;

/** What the grace looks at, all of it the hub's, given once. */
export interface GraceSources {
  /**
   * When the hub was made (monotonicNow()): the grace counts from it. On the wall clock,
   * stepped ahead at boot (NTP's first sync) the grace was over at once, calls refused and
   * /healthz "refusing"; stepped back, calls waited and /healthz said "starting" for that long.
   */
  startedAt: number;
  /** The configured servers, as they are now (a reload or `servers restart` replaces them in place). */
  handles: ReadonlyMap<string, ServerHandle>;
  catalog: Pick<Catalog, 'groups' | 'soleRoute' | 'readyOwner'>;
  routes: Pick<ShownRoutes, 'serverOf'>;
  upstreams: Pick<PrincipalUpstreams, 'isolated' | 'existing'>;
  /** Aborted as the hub's stop begins. */
  stop: Signal;
  log: Logger;
}

export class StartupGrace {
  /** The grace (STARTUP_GRACE_MS), read once per hub. */
  readonly ms = envMs('SWITCHYARD_STARTUP_GRACE_MS', STARTUP_GRACE_MS);
  private ended = false;
  /**
   * The waits of the requests in the start-up grace now, one per endpoint group (and, for calls,
   * with the failMode "closed" servers: wait), one for all of its requests.
   */
  private readonly waits = new Map<string, Promise<void>>();
  /** The wait of the calls in the grace held by failMode "closed" servers starting, one for all (failClosedWait). */
  private closedWait: Promise<void> | undefined;

  constructor(private readonly src: GraceSources) {}

  /**
   * Once true, for good: nothing waits any more. The one look a call pays past the grace (the
   * tools/call path, issue #9), before any other.
   */
  get over(): boolean {
    return this.ended;
  }

  /**
   * Resolves once the upstreams that are still starting are ready (or the grace window is
   * over); undefined when nothing is left to wait for, so a request past start-up need not
   * await at all. `group`: those the endpoint group shows only (`/mcp/<group>`): a server it does
   * not show changes none of its lists, handshakes or calls, and one slow to start (an `npx`
   * download) held the group's clients for the whole grace. `guarded`: a call's (GUARDED_METHODS),
   * which waits for the failMode "closed" servers starting too, shown or not, since while one is
   * not ready every call hub-wide is refused.
   */
  wait(group?: string, guarded = false): Promise<void> | undefined {
    if (this.ended) return undefined;
    // One wait for every request in the grace (of one group): each of its own added a listener to
    // every starting server (Node's MaxListenersExceededWarning past ten requests) and a timer.
    const key = group === undefined ? '' : `${guarded ? 'call' : 'list'}:${group}`;
    const held = this.waits.get(key);
    if (held) return this.inGrace(held);
    let starting = false;
    const pending: ServerHandle[] = [];
    for (const h of this.src.handles.values()) {
      if (h.upstream.state !== 'starting') continue;
      starting = true;
      if (this.src.catalog.groups.showsServer(group, h.id) || (guarded && h.config.failMode === 'closed')) pending.push(h);
    }
    const left = this.left();
    // The stop begun ends the grace too: what waits in it has nothing running upstream, and is
    // answered at once (its waiters see the stop), not held for the rest of the grace.
    if (!starting || left <= 0 || this.src.stop.aborted) {
      // Once nothing is starting (or the window has passed) no later call waits: skip the scan.
      this.ended = true;
      return undefined;
    }
    // Only servers the group does not show are starting: nothing to wait for (looked at again by
    // the group's next request in the grace: one it shows may start again meanwhile).
    if (pending.length === 0) return undefined;
    const wait = this.stateChanges(pending, left, () => {
      // The next request looks again (a server may have started again meanwhile).
      if (this.waits.get(key) === wait) this.waits.delete(key);
    });
    this.waits.set(key, wait);
    return this.inGrace(wait);
  }

  /**
   * A guarded call (GUARDED_METHODS) given `grace`, its wait(group, true): whether it was held in
   * the grace, resolved once its wait is over. Not held when it may go on at once (passes). Held,
   * until the grace's wait ends, or as soon as a failMode "closed" server's first attempt to start
   * fails (the call is refused then, not once every other server still starting is ready, up to
   * the grace's end), or the call's cancellation (its client gone: recorded cancelled then, not
   * when the grace ends).
   */
  async holdCall(grace: Promise<void>, method: string, params: Record<string, unknown>, ctx: CallContext): Promise<boolean> {
    if (await this.passes(method, params, ctx)) return false;
    const guarded = (): Promise<void> =>
      Promise.race([grace, this.closedFirstStarts().then(() => (closedPastFirstAttempt(this.src.handles.values()) ? undefined : grace))]);
    await unlessAborted(guarded, ctx.signal, () => undefined);
    return true;
  }

  /**
   * See HubCore.familyInGrace. Past the grace 'wait', which waits for nothing then. A server shown
   * still starting (its first attempt, or a retry of one that failed) may offer the family once
   * ready; one that was ready counts with what it offered (currentCapabilities). 'on' lets the
   * completion reach route(), where holdCall checks it as it does a prompts/get (the prompt's
   * list, fail-closed servers, own connections): not let past, it waits there for the grace.
   */
  family(method: string, params: Record<string, unknown>, group?: string): 'wait' | 'on' | 'none' {
    if (this.ended || this.left() <= 0 || this.src.stop.aborted) return 'wait';
    let starting = false;
    for (const h of this.src.handles.values()) if (h.upstream.state === 'starting' && this.src.catalog.groups.showsServer(group, h.id)) starting = true;
    if (!starting) return 'none';
    const prompt = promptNamed(method, params);
    return prompt !== undefined && this.src.catalog.readyOwner('prompts', prompt, group) ? 'on' : 'wait';
  }

  /**
   * In the grace's window, and no failMode "closed" server's first attempt to start has failed:
   * a call then waits for such a server (wait, which ends at the attempt's end) rather than being
   * refused. A failed attempt is `starting` again, with its reason: calls are refused then.
   */
  waitsForClosed(): boolean {
    return this.left() > 0 && !closedPastFirstAttempt(this.src.handles.values());
  }

  private left(): number {
    return this.src.startedAt + this.ms - monotonicNow();
  }

  /**
   * Whether a call in the start-up grace goes on at once rather than wait for every server still
   * starting: a tools/call, prompts/get or completion of a prompt's argument (ref/prompt) whose
   * name can only be a ready server's (Catalog.soleRoute: the name is that server's whatever the
   * others list), so the servers starting cannot change where it goes (a first call to a fast
   * server was held up to 3 s by an `npx` server downloading). A failMode "closed" server still
   * starting is waited for first, it alone (closedFirstStarts): the call waits for it rather than be
   * refused, and once it is ready goes on as any (the grace's wait, one for all, held it for every
   * server starting); one whose attempt failed has the call refused at once (holdCall), not at
   * the grace's end; one still starting at the grace's end holds the call as before.
   * Not when the hub would wait for a server's first start for that name (routes, firstStarting),
   * nor when a ready server's calls for this principal go over a connection of its own not ready
   * yet: those wait as before. So do lists, handshakes and discovery, whose answers must include
   * the servers still starting (those the endpoint's group shows: wait), reads, and
   * completions of a resource template's argument (ref/resource: a URI or template is in no
   * server's name space; one starting may list it too, and take it). The lookup fetches the server's list; the caller's going away or the stop ends
   * it (the grace's wait then answers).
   */
  private async passes(method: string, params: Record<string, unknown>, ctx: CallContext): Promise<boolean> {
    const { handles, catalog, upstreams, stop } = this.src;
    const name = method === 'tools/call' ? params.name : promptNamed(method, params);
    if (typeof name !== 'string') return false;
    if (failClosedBlocker(handles.values())) {
      await unlessAborted(() => this.closedFirstStarts(), ctx.signal, () => undefined);
      if (ctx.signal.aborted || stop.aborted || failClosedBlocker(handles.values())) return false;
    }
    for (const h of handles.values()) if (h.upstream.state === 'ready' && upstreams.isolated(h, ctx.principal) && upstreams.existing(h, ctx.principal)?.state !== 'ready') return false;
    const lookup = (): Promise<Routed | null | undefined> => catalog.soleRoute(method === 'tools/call' ? 'tools' : 'prompts', name, viewOf(ctx)).catch(() => undefined);
    const routed = await unlessAborted(() => unlessAborted(lookup, stop, () => undefined), ctx.signal, () => undefined);
    if (!routed || routed.server.upstream.state !== 'ready' || ctx.signal.aborted || stop.aborted) return false;
    const known = method === 'tools/call' ? this.src.routes.serverOf(name, ctx) : undefined;
    if (known !== undefined ? known !== routed.server.id : firstStarting(name, handles.values(), (id) => catalog.groups.showsServer(ctx.group, id)).length > 0) return false;
    // The router routes it so (its list, kept 0 ms, is not fetched again), and does not hold it in the grace.
    ctx.routedInGrace = routed;
    this.src.log.debug({ method, name, server: routed.server.id }, 'a call goes on in the start-up grace: its name is a ready server\'s alone');
    return true;
  }

  /**
   * In the start-up grace, until no failMode "closed" server is on its first attempt to start:
   * each is ready, or one failed (closedPastFirstAttempt: every call that acts is refused then,
   * whatever else still starts); or the grace ends, or the stop begins.
   */
  private async closedFirstStarts(): Promise<void> {
    while (!closedPastFirstAttempt(this.src.handles.values())) {
      const wait = this.failClosedWait();
      if (!wait) return;
      await wait;
    }
  }

  /**
   * The wait, in the start-up grace, of the calls held by the failMode "closed" servers still
   * starting, one for all as wait()'s is: until one of them changes state (ready, or its
   * attempt failed), so that a call is refused as soon as one fails (closedFirstStarts); undefined
   * when none is starting, or the grace is over.
   */
  private failClosedWait(): Promise<void> | undefined {
    if (this.closedWait) return this.closedWait;
    const pending = [...this.src.handles.values()].filter((h) => h.config.failMode === 'closed' && h.upstream.state === 'starting');
    const left = this.left();
    if (pending.length === 0 || left <= 0 || this.src.stop.aborted) return undefined;
    const wait = this.stateChanges(
      pending,
      left,
      () => {
        if (this.closedWait === wait) this.closedWait = undefined;
      },
      1,
    );
    this.closedWait = wait;
    this.src.log.debug({ servers: pending.map((h) => h.id) }, 'calls wait for the failMode "closed" servers still starting');
    return wait;
  }

  /** Resolves once `needed` of `pending` (default: each) have changed state (an attempt to start ended), after `ms`, or as the stop begins; `ended` first. */
  private stateChanges(pending: ServerHandle[], ms: number, ended: () => void, needed = pending.length): Promise<void> {
    // Each of `pending` counts once, at its first change.
    const changed = new Set<StateSource>();
    return changeWithin(pending.map((h) => h.upstream), ms, (from) => changed.add(from).size >= needed, this.src.stop).then(ended);
  }

  /** A wait, said in the debug log (one line per request that waits). */
  private inGrace(wait: Promise<void>): Promise<void> {
    this.src.log.debug('a request waits in the start-up grace for the servers still starting');
    return wait;
  }
}
