/**
 * What the hub does with a request around the router (route): the waits for servers still
 * starting (the start-up grace, a server's first start) or on their way back (a retry), the
 * refusals while a failMode "closed" server is down or a tool's server is, a route looked up again
 * when its server was replaced meanwhile, and the tool names a tools/list showed. A usual
 * tools/call past start-up goes through here on every call (issue #9): each look on its way is a
 * field of this object or a map lookup, and nothing here waits unless the call must.
 */
import type { Logger } from '../log.js';
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import type { ServerCapabilities } from '../protocol/types.js';
import { shownName } from '../protocol/shown-value.js';
import { CancelledError, HubStoppingError, METHOD_NOT_FOUND, notSent, RpcError } from '../protocol/errors.js';
import type { CallContext } from '../router/context.js';
import type { Router } from '../router/router.js';
import type { InFlight } from '../router/inflight.js';
import type { RequestStateSealer } from '../router/request-state.js';
import { failClosedBlocker, GUARDED_METHODS, refuseClosed } from '../router/fail-mode.js';
import { RouteReplacedError, reroutesLeft } from '../router/replaced.js';
import { refuseDownTool } from '../router/down-tools.js';
import { isRetry, type BeginTarget } from '../router/forwarding.js';
import { callTimeoutMs } from '../router/call-policy.js';
import { cutOffError, outcomeOfError } from '../router/outcome.js';
import type { Upstream } from '../upstream/types.js';
import { readyWithin } from '../upstream/ready-within.js';
import { reasonOf, unlessAborted, type Signal } from '../cancel.js';
import { backSoon, RETRY_WAIT_MS, ROUND_METHODS } from './back-soon.js';
import { firstAttemptEnded, firstStarting, onFirstAttempt, promptNamed } from './first-start.js';
import type { ServerHandles } from './server-handles.js';
import type { ShownRoutes } from './shown-routes.js';
import type { StartupGrace } from './startup-grace.js';
import { ownReady, usedBy, type ConnectionPool } from './own-connection.js';

/** What the dispatch looks at and calls, all of it the hub's, given once. */
export interface DispatchSources {
  /** The configured servers, as they are now (a reload or `servers restart` replaces them in place). */
  readonly handles: ServerHandles;
  readonly catalog: Pick<Catalog, 'groups' | 'knownTool'>;
  readonly routes: Pick<ShownRoutes, 'serverOf' | 'learn'>;
  readonly router: Pick<Router, 'handle' | 'recordLocal' | 'keyEnded'>;
  readonly grace: Pick<StartupGrace, 'wait' | 'holdCall'>;
  readonly upstreams: ConnectionPool;
  /** Reads the server a round's request state names (a retry's). */
  readonly sealer: Pick<RequestStateSealer, 'serverOf'>;
  /** Aborted as the hub's stop begins (stopAccepting). */
  readonly stop: Signal;
  /** Whether the servers shown to an endpoint group offer a capability family (Hub.offers). */
  offers(family: keyof ServerCapabilities, group?: string): boolean;
  readonly log: Logger;
}

/** The server (upstream name and era) of a tools/call's tool, as the catalog showed it to this caller's group; none when it did not. */
export function toolServerOf(catalog: Pick<Catalog, 'knownTool'>, method: string, hubName: string | undefined, principal: string, group: string | undefined): BeginTarget {
  const known = method === 'tools/call' && hubName ? catalog.knownTool(hubName, { principal, group }) : undefined;
  return known ? { server: known.server.id, upstreamName: known.upstreamName, upstreamEra: known.server.upstream.era } : {};
}

export class Dispatch {
  // Fields of their own, not looks through the sources: route() reads several on every call.
  private readonly handles: DispatchSources['handles'];
  private readonly catalog: DispatchSources['catalog'];
  private readonly routes: DispatchSources['routes'];
  private readonly router: DispatchSources['router'];
  private readonly grace: DispatchSources['grace'];
  private readonly upstreams: DispatchSources['upstreams'];
  private readonly sealer: DispatchSources['sealer'];
  private readonly stop: Signal;
  private readonly offers: DispatchSources['offers'];
  private readonly log: Logger;

  constructor(src: DispatchSources) {
    this.handles = src.handles;
    this.catalog = src.catalog;
    this.routes = src.routes;
    this.router = src.router;
    this.grace = src.grace;
    this.upstreams = src.upstreams;
    this.sealer = src.sealer;
    this.stop = src.stop;
    this.offers = src.offers;
    this.log = src.log;
  }

  /** The servers on their first attempt to start a name no route knows may be of, if shown to the caller (no hot path). */
  private firstStarting(hubName: string, ctx: CallContext): ServerHandle[] {
    return firstStarting(hubName, this.handles.values(), (id) => this.catalog.groups.showsServer(ctx.group, id));
  }

  namesFirstStarting(method: string, params: Record<string, unknown>, group?: string): boolean {
    const prompt = promptNamed(method, params);
    return prompt !== undefined && firstStarting(prompt, this.handles.values(), (id) => this.catalog.groups.showsServer(group, id)).length > 0;
  }

  /**
   * A call whose idempotency key's call has ended is answered from the key before anything else
   * (README): a server down or starting now does not undo a call that ran and whose answer is kept.
   * Asked only on the way to a refusal or a wait; a promise only for a tool group's client whose
   * tool the hub's tools list does not hold yet (ToolCall.keyEnded).
   */
  private answeredFromKey(method: string, params: Record<string, unknown>, ctx: CallContext): boolean | Promise<boolean> {
    const ended = method === 'tools/call' && ctx.idempotencyKey !== undefined && this.router.keyEnded(params, ctx);
    if (typeof ended === 'boolean') return ended;
    // Its client cancelled while the tool's name was routed: recorded cancelled, as any request
    // cut while it waits, not refused (a row of a refusal its client never got).
    return ended.then(async (yes) => {
      if (!yes && ctx.signal.aborted) await this.endedWhileWaiting(method, params, ctx, this.calledServer(method, params, ctx));
      return yes;
    });
  }

  /** The server a request names by its tool (or prompt), for the row of one ended while it waited. */
  private calledServer(method: string, params: Record<string, unknown>, ctx: CallContext): ServerHandle | undefined {
    return this.handles.get(toolServerOf(this.catalog, method, typeof params.name === 'string' ? params.name : undefined, ctx.principal, ctx.group).server ?? '');
  }

  /**
   * `inflight`: the count this request leaves when it ends (the first routing; one routed again
   * inside it does not). Left in a finally, not by a reaction to its promise: one job less a
   * request. So every return hands on a settled value (`return await`), none a promise.
   */
  async route(method: string, params: Record<string, unknown>, ctx: CallContext, inflight?: InFlight): Promise<Record<string, unknown>> {
    try {
      if (GUARDED_METHODS.has(method)) {
        // Not past its client's cancellation (over HTTP, its going away): recorded cancelled then,
        // not when the grace ends (up to 3 s later), nor refused for a fail-closed server still
        // starting (a row of a refusal its client never heard). Only a call that waited pays.
        const grace = this.grace.wait(ctx.group, true);
        if (grace && (await this.grace.holdCall(grace, method, params, ctx))) {
          if (ctx.signal.aborted || this.stop.aborted) await this.endedWhileWaiting(method, params, ctx, this.calledServer(method, params, ctx));
          // A completion the edge let on for a ready server's prompt (familyInGrace) but the grace
          // held has waited it out: answered as it is from then on, -32601 while no server shown
          // offers completions (the edge's refusal past the grace), not as the router would have.
          if (method === 'completion/complete' && !this.offers('completions', ctx.group) && !this.namesFirstStarting(method, params, ctx.group)) {
            const err = new RpcError(METHOD_NOT_FOUND, `method not found: ${shownName(method)}`);
            await this.router.recordLocal(method, ctx, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message });
            throw err;
          }
        }
        // Only when a server has failMode "closed": the usual hub has none, and its calls look at no server here.
        const down = this.handles.anyFailClosed ? failClosedBlocker(this.handles.values()) : undefined;
        if (down && !(await this.answeredFromKey(method, params, ctx))) {
          // A tool group's client is not told of a server its group does not show (for a key limited to groups, a boundary).
          const shown = this.catalog.groups.showsServer(ctx.group, down.server);
          // Its row names its tool's server, as a rate limit's does (withToolServer): the message names the blocker.
          return await refuseClosed(method, params, ctx, down, (m, c, e, x) => this.router.recordLocal(m, c, e, { ...x, ...toolServerOf(this.catalog, m, x?.hubName, c.principal, c.group) }), shown);
        }
      }
      if (method === 'tools/call' && typeof params.name === 'string') {
        const id = this.routes.serverOf(params.name, ctx);
        const h = id === undefined ? undefined : this.handles.get(id);
        // A server on its first attempt to start past the start-up grace: a call by a name an
        // earlier process gave it, or by a name in its prefix space no list showed (for a server
        // without prefix: any name in no prefix space), waits for that attempt
        // (hub/first-start.ts), then is routed as any (unknown if the server does not show the tool).
        const starting = h ? (onFirstAttempt(h) ? [h] : []) : this.firstStarting(params.name, ctx);
        let waited = false;
        let firstWait = false;
        if (starting.length > 0 && !(await this.answeredFromKey(method, params, ctx))) {
          waited = firstWait = true;
          await this.firstStarts(method, params.name, starting, ctx);
        }
        // A modern client's retry (the user answered its round) to a server restarting after a crash: a short wait for it (hub/back-soon.ts).
        // isRetry first: the connection's lookup is paid by retries alone, not by every call.
        const used = h && isRetry(params, ctx) ? usedBy(this.upstreams, h, ctx.principal) : undefined;
        if (h && used && backSoon(used) && !(await this.answeredFromKey(method, params, ctx))) {
          waited = true;
          await this.backWithin(h, used, ctx);
        }
        if (waited) await this.endedWhileWaiting(method, params, ctx, h);
        // Its server was replaced meanwhile (a reload, `servers restart`): the attempt it waited
        // for ended with the old connection's close, not a start. Routed again, to wait for the
        // new one, not told the old one is stopped (or that the tool is unknown).
        if (firstWait && this.replacedWhileWaiting(starting, ctx)) return await this.routeAgain(method, params, ctx);
        // A tool of a server that is down is not listed any more, but it is not unknown either.
        // Not when the caller's own connection to it is ready (standsAlone): it needs nothing of the server's main one.
        if (h && h.upstream.state !== 'ready' && !ownReady(this.upstreams, h, ctx.principal) && !(await this.answeredFromKey(method, params, ctx))) return await refuseDownTool(params.name, h, ctx, (m, c, e, x) => this.router.recordLocal(m, c, e, x));
      } else {
        // A prompt names its server as a tool does; so does the completion of a prompt's argument.
        const prompt = promptNamed(method, params);
        const starting = prompt === undefined ? [] : this.firstStarting(prompt, ctx);
        if (prompt !== undefined && starting.length > 0) {
          await this.firstStarts(method, prompt, starting, ctx);
          // Cancelled (or ended by the hub's stop) while it waited: its row said what the router then
          // made of it (`Unknown prompt`, the server's state), which its client never got.
          await this.endedWhileWaiting(method, params, ctx, starting.length === 1 ? starting[0] : undefined);
          if (this.replacedWhileWaiting(starting, ctx)) return await this.routeAgain(method, params, ctx);
        }
        // A read's or a prompt's round is answered as a tool call's is (the user answered it, and
        // its state names the server): its retry waits for that server back as a tool call's does.
        const back = ROUND_METHODS.has(method) && isRetry(params, ctx) ? this.handles.get(this.sealer.serverOf(params.requestState, ctx.principal, method, method === 'resources/read' ? params.uri : params.name) ?? '') : undefined;
        const used = back && usedBy(this.upstreams, back, ctx.principal);
        if (back && used && backSoon(used)) {
          await this.backWithin(back, used, ctx);
          await this.endedWhileWaiting(method, params, ctx, back);
        }
      }
      let result: Record<string, unknown>;
      try {
        result = await this.router.handle(method, params, ctx);
      } catch (err) {
        if (!(err instanceof RouteReplacedError)) throw err;
        // Its server was replaced while its route was looked up (router/replaced.ts): routed again,
        // as a request that came after, nothing of it recorded or sent yet.
        this.log.debug({ method, server: err.server }, 'a server was replaced while the request was routed: routed again');
        return await this.routeAgain(method, params, ctx);
      }
      if (method === 'tools/list') await this.routes.learn(result, ctx);
      return result;
    } finally {
      inflight?.leave();
    }
  }

  /** Routed again from the start, as a request that came after (nothing of it recorded or sent yet). */
  private async routeAgain(method: string, params: Record<string, unknown>, ctx: CallContext): Promise<Record<string, unknown>> {
    ctx.routedInGrace = undefined;
    ctx.rerouted = (ctx.rerouted ?? 0) + 1;
    return await this.route(method, params, ctx);
  }

  /** One of the servers a request waited for the first start of is not its server's handle any more (bounded: reroutesLeft). */
  private replacedWhileWaiting(starting: readonly ServerHandle[], ctx: CallContext): boolean {
    return reroutesLeft(ctx) && starting.some((s) => this.handles.get(s.id) !== s);
  }

  /** Until each of `starting` ends its first attempt to start, within its timeoutMs, or the request is cancelled, or the stop begins. */
  private async firstStarts(method: string, name: string, starting: ServerHandle[], ctx: CallContext): Promise<void> {
    this.log.debug({ method, name, servers: starting.map((s) => s.id) }, 'waiting for the first start of its server');
    await Promise.all(starting.map((s) => firstAttemptEnded(s, s.config.timeoutMs, ctx.signal, this.stop)));
  }

  /** A retry's short wait for `u`, its server's connection on its way back (hub/back-soon.ts), within the request's own timeout. */
  private backWithin(h: ServerHandle, u: Upstream, ctx: CallContext): Promise<boolean> {
    this.log.debug({ server: h.id, state: u.state }, 'a retry waits for its server to be back');
    // Not past the stop's beginning (stopBegun): the closing upstream ends readyWithin's own wait.
    return unlessAborted(() => readyWithin(u, Math.min(RETRY_WAIT_MS, callTimeoutMs(h.config, ctx.meta)), ctx.signal), this.stop, () => false);
  }

  /**
   * A request its client cancelled (or the hub's stop ended) while it waited for its server: so
   * its row says, not that its server was down, and it is answered as any request ended so
   * (nothing was sent). Nothing when it was not. The stop begun (stopBegun) ends the wait: the
   * request is answered then with the stop's own error (-32603 the hub is shutting down, audited
   * unavailable), as a list waiting in the start-up grace is, not refused as a down tool ("server
   * stopped") once the closing upstream ended its server's first attempt.
   */
  private async endedWhileWaiting(method: string, params: Record<string, unknown>, ctx: CallContext, h: ServerHandle | undefined): Promise<void> {
    if (!ctx.signal.aborted && !this.stop.aborted) return;
    const err = ctx.signal.aborted ? cutOffError(notSent(new CancelledError(reasonOf(ctx.signal))), ctx.signal) : new HubStoppingError(true);
    const target = typeof params.name === 'string' ? params.name : typeof params.uri === 'string' ? params.uri : undefined;
    await this.router.recordLocal(method, ctx, outcomeOfError(err), { hubName: target, ...(h && { server: h.id, upstreamEra: h.upstream.era }) });
    throw err;
  }
}
