import { CredentialRevokedError, heldKeyRefusal, heldTokenRefusal, type HeldCredentials } from '../auth/held-credential.js';
import type { Logger } from '../log.js';
import type { Catalog, Routed, ServerHandle, View } from '../catalog/catalog.js';
import type { CallPlan, PluginRunner } from '../plugins/runner.js';
import { runsAsTask } from './legacy-task.js';
import { argsHash, NestingTooDeepError } from '../ledger/canonical.js';
import type { AuditSink } from '../ledger/sink.js';
import type { AuditBegin, AuditEnd, KeyOwner, StoredAnswer } from '../ledger/types.js';
import { CancelledError, errorSeenBy, HEADER_MISMATCH, HubStoppingError, INTERNAL_ERROR, INVALID_PARAMS, notSent, MISSING_CLIENT_CAPABILITY, refusedUnapplied, RpcError, TimeoutError, TransportError, UpstreamRpcError, UpstreamUnavailableError, URL_ELICITATION_REQUIRED } from '../protocol/errors.js';
import type { CallOptions } from '../upstream/types.js';
import { notDelivered as neverSent } from '../upstream/retry.js';
import { reasonOf, unlessAborted, unlessWanted, type Signal } from '../cancel.js';
import { redactConfigSecrets } from '../policy/config-secrets.js';
import { argsRefusal, checkedOutput } from '../policy/tool-check.js';
import { withoutHubError } from '../policy/tool-errors.js';
import type { SchemaValidator } from '../policy/validate.js';
import type { CallContext } from './context.js';
import { toolRetry } from './call-policy.js';
import { cutOffError, endedWhileHeld, outcomeOfError, outcomeSeenBy, toolErrorResult } from './outcome.js';
import { elicits } from '../protocol/client-capabilities.js';
import { paramHeaderProblem } from '../protocol/param-headers.js';
import { awaitsUrlSteps, isCapabilityRefusal, UnfinishedTurnError, urlStepsNamedFor, UrlStepsUnsupportedError, type Mrtr } from './mrtr.js';
import { firstRowEnd, type InputCollector } from './input-bridge.js';
import { endedKey, settleIdempotency, usedForRefusal, type Settled } from './idempotency.js';
import { argsDigestOf, type Binding } from './request-state.js';
import { CONFIRM_KEY, accepted, type Confirmer } from '../policy/confirm.js';
import { MODERN } from '../protocol/era.js';
import { shownName } from '../protocol/shown-value.js';
import { META_IDEMPOTENCY_KEY } from '../protocol/meta.js';
import { heldReason } from '../catalog/held-reason.js';
import { beginOf, bytesOf, callOptions, endOf, connectionFor, forwardedParams, isRetry, retryOf, viewOf, withoutStrayRound, type BeginTarget, type Result, type UpstreamFor } from './forwarding.js';
import { withScreenedContentIcons } from '../catalog/icons.js';
import { connectionReplaced, replacedError, rerouteIfReplaced, unshownSince } from './replaced.js';

/**
 * The router options tools/call reads. The router hands over its own options object, read per
 * call as before, so nothing is copied or re-bound.
 */
export interface ToolCallOptions {
  /** See RouterOptions.startupGrace. */
  startupGrace: (ctx?: CallContext) => Promise<void> | undefined;
  /** See RouterOptions.closingUpstreams. */
  closingUpstreams?: () => boolean;
  /** See RouterOptions.stopBegun. */
  stopBegun?: Signal;
  confirmer?: Confirmer;
  upstreamFor?: UpstreamFor;
  validator?: SchemaValidator;
  plugins?: PluginRunner;
  /** See RouterOptions.credentials. */
  credentials?: HeldCredentials;
  /** See RouterOptions.server: the handle in use now, by server id. */
  server?: (id: string) => ServerHandle | undefined;
}

export interface ToolCallDeps {
  catalog: Catalog;
  ledger: AuditSink;
  mrtr: Mrtr;
  log: Logger;
  opts: ToolCallOptions;
}

/**
 * tools/call, the one path with policy, plugins and idempotency in front of the upstream; kept
 * apart from the router so that path reads in one place. Its row is committed before the call
 * is forwarded and again before its answer is returned, like every routed request.
 */
export class ToolCall {
  private readonly catalog: Catalog;
  private readonly ledger: AuditSink;
  private readonly mrtr: Mrtr;
  private readonly log: Logger;
  private readonly opts: ToolCallOptions;
  /** Keyed calls parked now (a modern client's, a legacy upstream asking), by keyText: see askedAgain. */
  private readonly parkedKeys = new Map<string, InputCollector>();

  constructor(deps: ToolCallDeps) {
    this.catalog = deps.catalog;
    this.ledger = deps.ledger;
    this.mrtr = deps.mrtr;
    this.log = deps.log;
    this.opts = deps.opts;
  }

  /**
   * Whether this call's idempotency key belongs to a call that has ended (its answer or a refusal
   * is kept), so the call is answered from it whatever the state of its server now: for a tool
   * group's client, when its group shows the tool (showsTool). Claims nothing. Synchronous but
   * for such a key of a group's client whose tool the hub's last built list does not hold (a
   * fresh hub builds it in the background): its route is looked up then, as the call's would be.
   */
  keyEnded(params: Result, ctx: CallContext): boolean | Promise<boolean> {
    const key = ctx.idempotencyKey;
    if (!key || typeof params.name !== 'string' || ctx.idempotencyClash !== undefined) return false;
    let hash: string;
    try {
      hash = argsHash(params.arguments ?? {});
    } catch {
      return false; // too deep to hash: refused as such by call()
    }
    if (endedKey(this.ledger.idempotency, keyOwner(ctx), key, params.name, hash) === undefined) return false;
    return this.showsTool(params.name, ctx);
  }

  /**
   * Whether a tool group's view holds a tool name: shown now, or of a server that is down and
   * would show it once back. A key is its principal's on this endpoint, but the group may hide its
   * tool now (a reload), or the key was kept before keys were scoped to endpoints (every endpoint
   * reads such a key): the answer kept for a tool the group hides is not for the group's clients
   * (nor its name: showsTool).
   */
  private groupHas(hubName: string, view: View): boolean {
    return this.catalog.knownTool(hubName, view) !== undefined || this.catalog.downItem('tools', hubName, view) !== undefined;
  }

  /**
   * Whether this caller may be told of a tool from a key (its kept answer, keyEnded; a refusal
   * naming the tool the key was used for): any caller but a tool group's client, which is told
   * only of a tool its group shows (groupHas). The hub's tools list may not hold it (on a fresh
   * hub the first calls are routed by their server's list alone, the list built in the
   * background), so the name is then routed for this view as a call by it would be. Asked only
   * for a key whose call has ended: a call without one never waits for it.
   */
  private showsTool(hubName: string, ctx: CallContext): boolean | Promise<boolean> {
    if (ctx.group === undefined) return true;
    const view = viewOf(ctx);
    if (this.groupHas(hubName, view)) return true;
    this.log.debug({ name: hubName, group: ctx.group }, "a key's tool routed for a group's client");
    return unlessAborted(() => this.catalog.resolveTool(hubName, view).then((r) => r !== undefined, () => false), ctx.signal, () => false);
  }

  /**
   * Whether a call the hub's tools list cannot route now has a key whose call has ended, of a tool
   * whose server is down and would show it to this view once back (downItem): the route would
   * wait for every server's list, the slowest one's too (Catalog.resolveTool: the down server's
   * is not there to go by), though the answer is the key's whatever it finds; on a fresh hub,
   * its server starting, that held a retry up to a list's timeout. Asked only when the list
   * misses, and for a keyed call alone.
   */
  private endedOfDown(hubName: string, view: View, hash: string | undefined, ctx: CallContext): boolean {
    const key = ctx.idempotencyKey;
    if (!key || hash === undefined || ctx.idempotencyClash !== undefined || key.length > MAX_KEY_LENGTH) return false;
    if (this.catalog.downItem('tools', hubName, view) === undefined) return false;
    return endedKey(this.ledger.idempotency, keyOwner(ctx), key, hubName, hash) !== undefined;
  }

  /**
   * A key's kept answer (audited `replayed`), or its refusal (`denied`). A kept error (a tool
   * error, a JSON-RPC error) is replayed as one: the row says which (errorKind, errorCode), so
   * /metrics and `ledger stats` count it as the error its client got again, not a success.
   */
  private async answerSettled(settled: Settled, end: (e: AuditEnd) => Promise<void>, t0: number, ctx: CallContext): Promise<Result> {
    if ('answer' in settled) {
      const a = settled.answer;
      const replayed = 'result' in a ? bytesOf(this.ledger, a.result) : undefined;
      const error = 'error' in a ? keptError(a) : undefined;
      // The error as this client is sent it (the first call's client may have been of the other era).
      const seen = error && errorSeenBy(ctx.clientEra === MODERN, error);
      const failed: Partial<AuditEnd> = seen
        ? { errorKind: 'jsonrpc', errorCode: seen.code, errorMessage: seen.message }
        : 'result' in a && a.result.isError === true
          ? { errorKind: 'tool' }
          : {};
      await end({ outcome: 'replayed', ...failed, responseBytes: replayed, latencyMs: performance.now() - t0 });
      if ('error' in a) throw error as RpcError;
      return a.result;
    }
    const refusal = 'refusal' in settled ? settled.refusal : usedForRefusal(settled, await this.showsTool(settled.usedFor, ctx));
    // Its client cancelled while the other tool's name was routed (showsTool, a group's client on
    // a fresh hub): cancelled, nothing sent, not a refusal its client never got.
    if ('usedFor' in settled && ctx.signal.aborted) {
      const err = cutOffError(notSent(new CancelledError(reasonOf(ctx.signal))), ctx.signal);
      await end({ ...outcomeOfError(err), latencyMs: performance.now() - t0 });
      throw err;
    }
    // Not 0: a duplicate refused so may have waited out the first call with its key.
    await end({ outcome: 'denied', errorKind: 'policy', errorMessage: refusal, latencyMs: performance.now() - t0 });
    return toolErrorResult(refusal);
  }

  /**
   * The tool a name routes to when that takes a list (none built yet, or one changed since):
   * its server's list when the name can be that server's only, else every server's, the slowest
   * one's too (Catalog.resolveTool). Its client's cancellation, or the hub's stop, ends it then,
   * recorded so (nothing was sent): it held a stop signal after stdin EOF (`switchyard stdio`)
   * until the drain time ran out, its client unanswered meanwhile.
   */
  private async resolved(hubName: string, view: View, ctx: CallContext, names: BeginTarget, t0: number): Promise<Routed | undefined> {
    try {
      const routed = await unlessAborted(
        () => this.catalog.resolveTool(hubName, view),
        ctx.signal,
        () => {
          throw cutOffError(notSent(new CancelledError(reasonOf(ctx.signal))), ctx.signal);
        },
      );
      // Resolved as the stop closed the servers (in flight at an HTTP hub's drain deadline): a
      // tool of one it closed is missing, and was answered "Unknown tool" (-32602). Ended as the
      // stop ends a call: nothing was sent.
      if (this.opts.closingUpstreams?.()) throw new HubStoppingError(true);
      return routed;
    } catch (err) {
      const stopping = err instanceof HubStoppingError && !ctx.signal.aborted;
      if (ctx.signal.aborted || stopping) {
        await this.ledger
          .record(beginOf('tools/call', ctx, names), { ...outcomeOfError(err), latencyMs: performance.now() - t0 })
          .catch((e: unknown) => this.log.error({ err: e instanceof Error ? e.message : String(e) }, 'audit row not written'));
      }
      // Its client is told as one the stop ended is (-32603 the hub is shutting down).
      throw stopping ? new RpcError(INTERNAL_ERROR, (err as Error).message) : err;
    }
  }

  /**
   * The route of a call the aggregate built last does not route (readyTool): the one the hub let
   * past the start-up grace with, or a list's. A server replaced meanwhile has the hub route the
   * call again (router/replaced.ts).
   */
  private async routedSlowly(hubName: string, view: View, ctx: CallContext, names: BeginTarget, t0: number): Promise<Routed | undefined> {
    const generation = this.catalog.generation;
    const routed = ctx.routedInGrace ?? (await this.resolved(hubName, view, ctx, names, t0));
    rerouteIfReplaced(generation, this.catalog.generation, routed?.server, this.opts.server, ctx);
    return routed;
  }

  async call(params: Result, ctx: CallContext): Promise<Result> {
    const t0 = performance.now();
    const hubName = typeof params.name === 'string' ? params.name : '';
    const args = params.arguments ?? {};
    // The digest goes into the ledger's row and an idempotency claim; without either it is
    // worked out only if an MRTR state is sealed or opened (argsDigestOf).
    let hash: string | undefined;
    let tooDeep: RpcError | undefined;
    try {
      hash = this.ledger.enabled !== false || ctx.idempotencyKey ? argsHash(args) : undefined;
    } catch (err) {
      if (!(err instanceof NestingTooDeepError)) throw err;
      tooDeep = new RpcError(INVALID_PARAMS, `Invalid arguments: ${err.message}`);
    }
    const grace = this.opts.startupGrace(ctx);
    if (grace) await unlessAborted(() => grace, ctx.signal, () => undefined);
    const view = viewOf(ctx);
    // The groups its route is judged under (a route from the start-up grace's was judged before
    // this call began: looked at again before it is sent, whatever the version).
    const groupsAt = ctx.routedInGrace === undefined ? this.catalog.groups.version : -1;
    // The key set its credential was let in under (the edge checked it as the request came, maybe
    // before its body had arrived): a reload since, even one before this call got here, counts.
    const keysAt = ctx.credentialKeysAt ?? this.opts.credentials?.keysVersion ?? 0;
    // A call let past the start-up grace comes with the route that let it (hub/startup-grace.ts); read
    // only when the aggregate has none, so the usual call pays nothing for it.
    // Nor is a key whose call has ended routed when its tool's server is down (endedOfDown): it is
    // answered from the key below, not after the lists a route would wait for.
    const routed = hubName
      ? (this.catalog.readyTool(hubName, view) ??
        (ctx.routedInGrace === undefined && this.endedOfDown(hubName, view, hash, ctx) ? undefined : await this.routedSlowly(hubName, view, ctx, { hubName, argsHash: hash, args }, t0)))
      : undefined;
    const begin = beginOf('tools/call', ctx, {
      hubName,
      argsHash: hash,
      args,
      server: routed?.server.id,
      upstreamName: routed?.upstreamName,
      upstreamEra: routed?.server.upstream.era,
    });
    // A key that is not text would otherwise be ignored, and the write run again on a retry.
    const rawKey = (params._meta as Result | undefined)?.[META_IDEMPOTENCY_KEY];
    const badKey =
      rawKey !== undefined && (typeof rawKey !== 'string' || rawKey === '')
        ? new RpcError(INVALID_PARAMS, `Invalid params: _meta["${META_IDEMPOTENCY_KEY}"] must be a non-empty string`)
        : ctx.idempotencyKey === '' // so is an Idempotency-Key header with nothing in it (it was ignored)
          ? new RpcError(INVALID_PARAMS, 'Invalid params: the Idempotency-Key header must not be empty')
          : ctx.idempotencyKey !== undefined && ctx.idempotencyKey.length > MAX_KEY_LENGTH // stored whole, and quoted in refusals
            ? new RpcError(INVALID_PARAMS, `Invalid params: an idempotency key holds at most ${MAX_KEY_LENGTH} characters (this one ${ctx.idempotencyKey.length})`)
            : ctx.idempotencyClash !== undefined
              ? new RpcError(INVALID_PARAMS, `Invalid params: the Idempotency-Key header and _meta["${META_IDEMPOTENCY_KEY}"] name different keys; send one, or the same in both`)
              : undefined;
    const refusal = tooDeep ?? argumentsProblem(params.arguments) ?? badKey;
    if (refusal) {
      await this.ledger.record(begin, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: refusal.code, errorMessage: refusal.message, latencyMs: 0 });
      throw refusal;
    }
    // A key whose call has ended is answered even when its tool cannot be routed now: the hub
    // lets such a call past the refusals of a server that is down or restarting (keyEnded), and
    // "unavailable" would tell the client that a call which ran, and whose answer is kept, did not.
    // A client of a tool group, though, only for a tool its group shows (groupHas).
    const fromKey = !routed && ctx.idempotencyKey && hash !== undefined && (ctx.group === undefined || this.groupHas(hubName, view));
    const endedUnrouted = fromKey ? endedKey(this.ledger.idempotency, keyOwner(ctx), ctx.idempotencyKey!, hubName, hash!) : undefined;
    if (endedUnrouted) {
      // Its row names the server whose tool it was, as far as the names it had say.
      const owner = this.catalog.downItem('tools', hubName, view);
      return this.answerSettled(endedUnrouted, (e) => this.ledger.begin(owner ? { ...begin, server: owner.server.id, upstreamName: owner.upstreamName } : begin).finish(e), t0, ctx);
    }
    if (!routed) {
      // A tool held back for a pending pin change (a client calling it from a list shown before
      // the change): still unknown to the client, but saying why, and its row names whose it is.
      const held = hubName ? await this.catalog.heldItem('tools', hubName, view) : undefined;
      // A name that is no string is no tool's (both eras require one): said so, as a missing uri is.
      const err = new RpcError(INVALID_PARAMS, held ? `Unknown tool: ${shownName(hubName)} (${heldReason('tool', held.record)})` : typeof params.name !== 'string' ? 'tools/call needs params.name, a string' : `Unknown tool: ${hubName ? shownName(hubName) : '(no name)'}`);
      const row = held ? { ...begin, server: held.server.id, upstreamName: held.upstreamName, upstreamEra: held.server.upstream.era } : begin;
      await this.ledger.record(row, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message, latencyMs: 0 });
      throw err;
    }
    // The hub re-serves the tool's schema over HTTP, so it must check the Mcp-Param-* mirrors itself.
    const headerProblem = ctx.requestHeader ? paramHeaderProblem(routed.item.inputSchema, args, ctx.requestHeader) : null;
    if (headerProblem) {
      const err = new RpcError(HEADER_MISMATCH, headerProblem);
      await this.ledger.record(begin, { outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: err.code, errorMessage: err.message, latencyMs: 0 });
      throw err;
    }
    // Arguments that break the tool's inputSchema never reach the upstream.
    const refused = argsRefusal(this.opts.validator, hubName, routed.item, args);
    if (refused) {
      await this.ledger.record(begin, { outcome: 'tool_error', errorKind: 'policy', errorMessage: refused.message, latencyMs: performance.now() - t0 });
      return refused.result;
    }
    const { server, upstreamName } = routed;
    const principal = ctx.principal;
    // The row begins here, before anything below may wait (a parked call's end, the user's
    // confirmation, a plugin, an earlier call with the same idempotency key): a hub killed
    // meanwhile leaves the call `unknown` at its next start, not without a row.
    const audit = this.ledger.begin(begin);
    const end = (e: AuditEnd): Promise<void> => audit.finish(e);
    const bind: Binding = { principal, group: ctx.group, method: 'tools/call', target: hubName, argsDigest: hash, args, span: ctx.span };
    const key = ctx.idempotencyKey;
    const owner = keyOwner(ctx);
    // A key whose call has ended is answered before a retry's requestState is opened or the user
    // asked: a client that sends its last request again (its response lost) gets the stored
    // answer, not -32602 for a requestState used up, nor a confirmation of a call that has run
    // (declined, it would read as not run). Plugins still see it, as they see every replay.
    // But a retry for a call parked here takes that call, though it ended and its key holds its
    // answer: the same answer, and its row carries the call's end (the first row is a round).
    let keyEnded = key ? endedKey(this.ledger.idempotency, owner, key, hubName, argsDigestOf(bind)) : undefined;
    if (keyEnded && isRetry(params, ctx) && this.mrtr.parkedHere(params.requestState, bind)) keyEnded = undefined;
    const retry = !keyEnded && isRetry(params, ctx) ? await retryOf(this.mrtr, this.ledger, end, 'tools/call', params, ctx, bind, server, t0) : undefined;
    if (retry && 'result' in retry) return retry.result;
    // Plugins see the call once the hub's checks let it through, before the user is asked to
    // confirm it: the user confirms the arguments that will run, a hook's rewrite included, and a
    // hook's deny refuses without asking. A deny is a tool error, audited. On a modern client's
    // retry the hooks run again (once per attempt): what they make is checked against what the
    // user confirmed (confirm()).
    const plugins = this.opts.plugins?.callHooks ? this.opts.plugins : undefined;
    const pluginTool = plugins && {
      hubName,
      upstreamName,
      server: { id: server.id, trust: server.config.trust, era: server.upstream.era },
      annotations: routed.annotations ?? {},
    };
    let plan: CallPlan | undefined;
    if (plugins && pluginTool) {
      // A plan given at once (no beforeCall hook) is not waited for: no turn for it.
      const planned = plugins.beforeCall(pluginTool, principal, ctx.group, args as Result);
      plan = planned instanceof Promise ? await planned : planned;
      if (plan.deny) {
        // The hub's own words, to the client and the ledger: a plugin that names the key its
        // options gave it in a reason must not give it away (a config secret; only a deny pays).
        const msg = `Tool ${hubName} was refused by plugin ${plan.deny.plugin}: ${redactConfigSecrets(plan.deny.reason)}`;
        await end({ outcome: 'denied', errorKind: 'policy', errorMessage: msg, latencyMs: performance.now() - t0 });
        return toolErrorResult(msg);
      }
      // A plugin's rewrite is held to the tool's inputSchema like the client's own arguments.
      // With a beforeCall hook, plan.arguments is always the hooks' copy, changed or not.
      const rewritten = plan.arguments !== args ? argsRefusal(this.opts.validator, hubName, routed.item, plan.arguments) : undefined;
      if (rewritten) {
        const msg = `Tool ${hubName} was not run: the arguments as a plugin rewrote them break its inputSchema (${rewritten.message})`;
        await end({ outcome: 'denied', errorKind: 'policy', errorMessage: msg, latencyMs: performance.now() - t0 });
        return toolErrorResult(msg);
      }
    }
    // What will run, as the user is asked to confirm it: the hooks' arguments, else the client's.
    const runArgs = plan ? plan.arguments : args;
    // Whether the user confirmed these arguments on a retry, and the digest of a rewrite so
    // confirmed (StateBody `r`: undefined when what runs is the client's own arguments, which the
    // state's binding holds already): a modern upstream's later rounds carry both.
    let confirmed: { rewrite?: string } | undefined;
    // Without a confirmation policy confirm() is not called: no await for it then.
    let confirmation: Result | undefined;
    // The policy the call was judged under: a reload replaces the Confirmer (Router.setConfirmer),
    // so one compare before sending tells whether it must be judged again (reconfirm()).
    const confirmerAt = this.opts.confirmer;
    try {
      if (!keyEnded && this.opts.confirmer?.active) {
        const asked = await this.confirm(ctx, routed, hubName, runArgs, bind, retry);
        if ('answer' in asked) confirmation = asked.answer;
        else if (asked.confirmed) confirmed = asked;
      }
    } catch (err) {
      // Its client cancelled the call while the user was asked: cancelled, and nothing ran (the
      // hub's stop: unavailable, as its client is answered).
      await end({ ...outcomeOfError(cutOffError(err, ctx.signal)), latencyMs: performance.now() - t0 });
      throw err;
    }
    if (confirmation) {
      await end({ ...this.confirmationEnd(confirmation), latencyMs: performance.now() - t0 });
      return confirmation;
    }
    if (key) {
      const again = keyEnded ? undefined : this.askedAgain(owner, key, bind, ctx);
      if (again) {
        await end({ outcome: 'input_required', errorKind: null, responseBytes: bytesOf(this.ledger, again), latencyMs: performance.now() - t0 });
        return again;
      }
      let settled: Awaited<ReturnType<typeof settleIdempotency>>;
      try {
        settled = keyEnded ?? (await settleIdempotency(this.ledger.idempotency, owner, key, hubName, argsDigestOf(bind), ctx.signal));
      } catch (err) {
        // Its client cancelled while it waited for the first call with this key: it ran nothing
        // (the hub's stop: unavailable, as its client is answered).
        await end({ ...outcomeOfError(cutOffError(err, ctx.signal)), latencyMs: performance.now() - t0 });
        throw err;
      }
      if (settled) return this.answerSettled(settled, end, t0, ctx);
    }
    // A retry whose requestState opened (and so was used up) but which surely never reached the
    // upstream gives that use back: the client may send it again (RELIABILITY: safe to retry).
    const unspent = retry ? () => this.mrtr.sealer.release(params.requestState) : undefined;
    let finished = false;
    /**
     * `answer`: a known outcome to store for replay. `ran`: false when the upstream surely never
     * saw the call (the key is freed), true when it may have run (the key becomes unknown).
     */
    /**
     * Where this request stands in a parked call (Mrtr.run): answered `input_required`, its row
     * a round, when a retry of its client carries the call's end instead (firstRowEnd).
     */
    let first: InputCollector | undefined;
    const finish = (end: Omit<AuditEnd, 'latencyMs'>, answer: StoredAnswer | undefined, ran: boolean) => {
      finished = true;
      if (key) {
        if (first) this.forgetParked(owner, key, first);
        // Stored before the audit row finishes, so the answer commits in the same batch or earlier.
        if (answer) this.ledger.idempotency.complete(owner, key, answer);
        else if (ran) this.ledger.idempotency.markUnknown(owner, key);
        else this.ledger.idempotency.abandon(owner, key);
      }
      const latencyMs = performance.now() - t0;
      // Ended while parked: this row carries the end only if no retry of its client takes it.
      const later = first?.known();
      if (later) return later.then((f) => audit.finish(Object.assign({}, firstRowEnd(f, end, first?.answeredBytes), { latencyMs })));
      return audit.finish(Object.assign({}, firstRowEnd(first?.first, end, first?.answeredBytes), { latencyMs }));
    };
    /**
     * The end of a call that was sent: answered with its own outcome even if its row cannot be
     * finished (a full disk), which then stays in flight and is `unknown` at the next start. Told
     * instead that the hub does not run calls it cannot record, an unkeyed client would retry a
     * write that ran.
     */
    const finishRan = (end: Omit<AuditEnd, 'latencyMs'>, answer: StoredAnswer | undefined, ran: boolean): Promise<void> =>
      finish(end, answer, ran).catch((err: unknown) =>
        this.log.error({ server: server.id, err: err instanceof Error ? err.message : String(err) }, 'a call was sent but its audit row could not be finished; answered'),
      );
    try {
      // The row's own line (written when it began, perhaps several turns ago) and what is
      // queued since, such as the key's claim. Nothing to wait for with the ledger off, nor
      // when the line was written at once and nothing is queued (a lone call): no turn then.
      if (this.ledger.enabled !== false && !(audit.writtenNow === true && this.ledger.committedNow?.() === true)) await Promise.all([audit.written, this.ledger.whenCommitted()]);
    } catch (err) {
      // The row could not be written, so the call is not forwarded: the key is free again, and
      // the row, should it reach SQLite later, says the call was refused.
      await finish(outcomeOfError(err), undefined, false).catch(() => undefined);
      unspent?.();
      throw err;
    }
    // Its server's connection replaced while the row was written: the old one drains only what it was sent.
    const replaced = connectionReplaced(server, this.opts.server);
    const found = replaced ? server : connectionFor(this.opts, server, ctx);
    const conn = found instanceof Promise ? await found : found;
    if (replaced || conn.upstream.state !== 'ready') {
      const err = replaced ? replacedError(server) : new UpstreamUnavailableError(server.id, conn.upstream.state, conn.upstream.lastError);
      await finish(outcomeOfError(err), undefined, false);
      unspent?.();
      return toolErrorResult(`Tool ${hubName} is unavailable: ${err.message}`);
    }
    // A reload changed `policy` while the call was held after its confirmation check (its row's
    // write, an earlier call with its idempotency key, its own connection's start): a call the
    // new policy confirms is not sent unasked. Asked now as it would have been (a modern client
    // answered input_required, its key freed for the retry; one that cannot be asked refused).
    // A call the user already confirmed, or answered from its key, is not asked again.
    if (this.opts.confirmer !== confirmerAt && confirmed === undefined && !keyEnded) {
      let again: Awaited<ReturnType<typeof this.confirm>>;
      try {
        again = await this.confirm(ctx, routed, hubName, runArgs, bind, undefined);
      } catch (err) {
        await finish(outcomeOfError(cutOffError(err, ctx.signal)), undefined, false);
        unspent?.();
        throw err;
      }
      if ('answer' in again) {
        await finish(this.confirmationEnd(again.answer), undefined, false);
        unspent?.();
        return again.answer;
      }
      if (again.confirmed) confirmed = again;
    }
    // A reload revoked its API key while the call was held (its row written, a plugin): not sent,
    // and answered as a request with that key is now (401, or 403 for an endpoint its groups
    // lost), its row saying so as the edge's refusal does. So for an OAuth token that stopped
    // working meanwhile (its key rotated out of the key set): 401.
    const lapsed = ctx.credentialLapse ? heldTokenRefusal(this.opts.credentials, ctx.credentialLapse, ctx.principal, ctx.group) : null;
    const revoked = heldKeyRefusal(this.opts.credentials, keysAt, ctx.credentialKey, ctx.principal, ctx.group, hubName, server.config.prefix, upstreamName) ?? (lapsed instanceof Promise ? await lapsed : lapsed);
    if (revoked) {
      const ended = endedWhileHeld(ctx);
      await finish(ended ? outcomeOfError(ended) : { outcome: 'denied', errorKind: 'policy', errorCode: revoked.status, errorMessage: revoked.message }, undefined, false);
      unspent?.();
      throw ended ?? new CredentialRevokedError(revoked);
    }
    // A reload changed the groups while the call was held (its row written, a plugin, the user's
    // confirmation): a tool its group no longer shows is not sent through it, as it would not be
    // to a call that came after. Unknown to the group, as then; nothing ran. So for a tool its
    // server's own settings no longer show under this name (`tools.deny`, `allow`, `prefix`).
    if (
      (ctx.group !== undefined && this.catalog.groups.version !== groupsAt && !this.catalog.groups.includes(ctx.group, 'tools', server.id, hubName, upstreamName, server.config.prefix)) ||
      unshownSince(server, this.opts.server, upstreamName)
    ) {
      const err = endedWhileHeld(ctx) ?? new RpcError(INVALID_PARAMS, `Unknown tool: ${shownName(hubName)}`);
      await finish(outcomeOfError(err), undefined, false);
      unspent?.();
      throw err;
    }
    const forwarded = retry ? forwardedParams(retry.params, 'name', upstreamName) : withoutStrayRound(forwardedParams(params, 'name', upstreamName), ctx);
    if (plan && plan.arguments !== args) forwarded.arguments = plan.arguments;
    // Null arguments were checked as none (`args`), so none are sent: the SDK servers answer a
    // null with -32603 and a dump of their own parser's complaint.
    else if (forwarded.arguments === null) delete forwarded.arguments;
    // A tool its server runs only as a task: the hub drives the task, the client gets the result.
    if (runsAsTask(server, routed.item)) forwarded.task = {};
    // The hub declares no tasks: a client's task augmentation is ignored, as the spec has a
    // receiver that declares none do (a server would answer a task nobody could poll).
    else if (forwarded.task !== undefined) delete forwarded.task;
    // A legacy client is asked what a modern upstream's input_required needs: what the client
    // answers in that asking (its refusal, its error) comes after the upstream's last answer,
    // which was input_required, so it is no outcome of the call (see the catch below). The hub's
    // stop ending the call meanwhile is not the client's answer: its key is left unknown, as for
    // a client's cancellation then (safe: a retry with the key is refused, never run twice).
    const askClient = ctx.askClient;
    const asking: CallContext = askClient ? { ...ctx, askClient: (r, withdrawn) => askClient(r, withdrawn).catch(askedAndFailed) } : ctx;
    const body = async (opts: CallOptions, parkedRun?: InputCollector): Promise<Result> => {
      first = parkedRun;
      if (key && parkedRun) this.parkedKeys.set(keyText(owner, key), parkedRun);
      try {
        const raw = withoutHubError(await this.mrtr.roundTrips('tools/call', conn, forwarded, asking, opts, bind, confirmed !== undefined && retry?.confirmed === true, confirmed?.rewrite), server.config.trust);
        const isFinal = raw.resultType === undefined || raw.resultType === 'complete';
        const checked = isFinal ? checkedOutput(this.opts.validator, hubName, routed.item, raw) : raw;
        let result = checked;
        // The hub's verdict in place of a result: the row says so.
        let refused = checked !== raw ? checked : undefined;
        if (isFinal && plugins && pluginTool && plan) {
          // Hooks that return at once (redact-secrets') give the result at once: no turn for it.
          const after = plugins.afterCall(pluginTool, principal, ctx.group, plan, result);
          result = after instanceof Promise ? await after : after;
          // A replacement is held to the outputSchema as the upstream's answer was: a client
          // checks it too (an SDK client's callTool threw on one a plugin made).
          if (result !== checked) {
            const held = checkedOutput(this.opts.validator, hubName, routed.item, result, true);
            if (held !== result) refused = result = held;
          }
        }
        // Icons of the resources it links: an untrusted server's, screened as its listed items' are.
        if (isFinal && server.config.trust !== 'trusted') result = withScreenedContentIcons(result, server.config.url);
        // The resources it links may be in no list: a read of one goes to this server (catalog.routeUri).
        if (isFinal) this.catalog.links.note(server.id, principal, result);
        const row = endOf(this.ledger, result);
        // The hub's verdict on the upstream's result, not the upstream's own error: the row says so.
        if (refused) Object.assign(row, { errorKind: 'policy', errorMessage: firstText(refused) });
        // An input_required turn is no outcome yet: the key is freed for the client's retry; so
        // is a refusal for a capability the client did not declare, which its retry may declare.
        const rowDone = finishRan(row, isFinal && !isCapabilityRefusal(raw) ? { result } : undefined, false);
        // With the ledger off the row's finish is settled as it is made (NullLedger's): it still
        // runs (the observers hear of it, the key is settled), but waiting for it cost the call a
        // turn. A parked call's first row may still wait, for a retry of its client
        // (InputCollector.known), and is waited for as before.
        // Nor when the finish line was written at once with nothing queued (a lone call): the
        // row is committed as finishRan returns.
        if ((this.ledger.enabled !== false && this.ledger.committedNow?.() !== true) || first?.parkedAs !== undefined) await rowDone;
        return result;
      } catch (caught) {
        // A legacy client is sent an untrusted upstream's -32042 with its steps naming it (and kept so for a replay).
        const err = urlStepsNamedFor(cutOffError(caught, opts.signal), ctx, conn);
        // Asked of the user as URL steps, then issued again: the next attempt's outcome is the call's.
        if (awaitsUrlSteps(err, ctx, conn)) throw err;
        // URL steps for a client that cannot take them: a tool error saying them; nothing ran.
        if (err instanceof UrlStepsUnsupportedError) {
          const r = toolErrorResult(err.message);
          await finishRan(endOf(this.ledger, r), undefined, false);
          return r;
        }
        const notDelivered = neverSent(err);
        // A 401 or 403 to the call's own request was not applied either (see noOutcome): the retry
        // the client sends once it has logged in again carries the same requestState.
        if (notDelivered || refusedUnapplied(err)) unspent?.();
        // Only a JSON-RPC answer is a known outcome worth replaying; anything else may have run or
        // not. -32021 is about what the request declared: never replayed; the upstream's own
        // frees the key (it refuses before running), the hub's cut-off one leaves it unknown. An
        // error from asking the client (a legacy client's refusal of an input_required turn) is
        // the client's, not the upstream's: the upstream only answered input_required, so, as for
        // a modern client that takes that turn, the key is freed; the row still says what failed.
        // So for a turn the hub could not take further (UnfinishedTurnError).
        const capability = err instanceof RpcError && err.code === MISSING_CLIENT_CAPABILITY;
        // A 401 or 403 to the call's own request: it was not applied, so its key is free too.
        // A -32042 passed on to a legacy client: the upstream ran nothing yet, its client is to
        // call again once the user is done at the URL (digest §5.2), with the same key: kept, that
        // call was answered the -32042 again, for good.
        const noOutcome =
          err instanceof UnfinishedTurnError ||
          (err instanceof RpcError && (failedAsking.has(err) || err.code === URL_ELICITATION_REQUIRED)) ||
          refusedUnapplied(err);
        const stored = err instanceof RpcError && !capability && !noOutcome ? storedError(err) : undefined;
        await finishRan(outcomeSeenBy(ctx.clientEra === MODERN, err), stored, capability ? err !== caught : !notDelivered && !noOutcome);
        // The hub stopping: its client gets the -32603 of a request refused while it drains (Endpoint).
        if (err instanceof RpcError || err instanceof CancelledError || err instanceof HubStoppingError) throw err;
        if (err instanceof TimeoutError || err instanceof TransportError || err instanceof UpstreamUnavailableError)
          return toolErrorResult(`Tool ${hubName} failed: ${err.message}`);
        this.log.error({ err, server: server.id }, 'tools/call failed');
        return toolErrorResult(`Tool ${hubName} failed inside the hub`);
      }
    };
    // The call's end, whichever request of the client it reaches (a parked call ends on a retry):
    // unfinished by `body` only when the user turned down a URL step, so the upstream never ran it.
    // Not async callbacks: `body` has finished the row (the usual call), and an async callback's
    // promise would resolve the outcome two turns later, for nothing.
    const ended = (run: Promise<Result>): Promise<Result> =>
      run.then(
        (result) => (finished ? result : finish(endOf(this.ledger, result), undefined, false).then(() => result)),
        (err: unknown) => {
          if (finished) throw err;
          return finish(outcomeSeenBy(ctx.clientEra === MODERN, err), undefined, false).then(() => Promise.reject(err));
        },
      );
    const opts = callOptions(ctx, conn, this.opts.stopBegun, toolRetry(server.config, upstreamName, routed.item));
    // Awaited, not handed on: an async function's promise resolved with another takes two more turns.
    if (!key) return await this.mrtr.run(ctx, conn, opts, bind, body, ended);
    // A keyed call whose client goes away (a closed connection, a cancellation) while a retry
    // with its key waits for it runs on: cancelled, it would leave the key unknown and the retry
    // refused, though the retry is what the client sent instead. Its own client is answered
    // nothing, as for any cancelled request; the retry gets the answer.
    const keys = this.ledger.idempotency;
    opts.signal = unlessWanted(ctx.signal, () => keys.awaited?.(keyOwner(ctx), key) === true);
    const r = await this.mrtr.run(ctx, conn, opts, bind, body, ended);
    if (ctx.signal.aborted) throw new CancelledError(reasonOf(ctx.signal));
    return r;
  }

  /**
   * A modern client's keyed call sent again while the call with its key (the same tool and
   * arguments) is parked, waiting for that client's answer: the first's answer, the same
   * questions of the same call, under a state of its own. A client whose input_required was lost
   * sends its request again; waiting for the call's end, which only a retry with the lost state
   * could bring, it was held for policy.inputTimeoutMs and then refused as of an unknown outcome.
   */
  private askedAgain(owner: KeyOwner, key: string, bind: Binding, ctx: CallContext): Result | undefined {
    if (this.parkedKeys.size === 0 || ctx.clientEra !== MODERN) return undefined;
    const parked = this.parkedKeys.get(keyText(owner, key));
    return parked && this.mrtr.bridge.askAgain(parked, bind, ctx.clientCapabilities);
  }

  private forgetParked(owner: KeyOwner, key: string, collector: InputCollector): void {
    const k = keyText(owner, key);
    if (this.parkedKeys.get(k) === collector) this.parkedKeys.delete(k);
  }

  /** The row of a call answered by its confirmation: waiting for the user, or refused. */
  private confirmationEnd(confirmation: Result): Omit<AuditEnd, 'latencyMs'> {
    const waiting = confirmation.resultType === 'input_required';
    return {
      outcome: waiting ? 'input_required' : 'denied',
      errorKind: waiting ? null : 'policy',
      errorMessage: waiting ? 'awaiting the user\'s confirmation' : String((confirmation.content as { text?: string }[])[0]?.text),
      responseBytes: bytesOf(this.ledger, confirmation),
    };
  }

  /**
   * Policy confirmation of a risky call, of `args` as they will run (a beforeCall hook's
   * rewrite): `{ answer }`, what to answer now (an `input_required` asking a modern client, or a
   * refusal), or go ahead, with the digest of the rewrite the user confirmed when there was one.
   * Legacy clients are asked on their session while the call waits. A modern client's retry
   * carries the user's answer (`retry`); a yes counts only for the arguments it was given for:
   * hooks that make other ones on the retry have the user asked again.
   */
  private async confirm(
    ctx: CallContext,
    routed: Routed,
    hubName: string,
    args: unknown,
    bind: Binding,
    retry: { confirmed?: boolean; rewritten?: string } | undefined,
  ): Promise<{ answer: Result } | { confirmed?: true; rewrite?: string }> {
    const c = this.opts.confirmer;
    const answered = retry?.confirmed;
    if (answered === false) return { answer: toolErrorResult(`Tool ${hubName} was declined by the user.`) };
    if (!c?.active) return {};
    let rewrite: string | undefined;
    try {
      rewrite = rewriteDigest(args, bind);
    } catch (err) {
      if (!(err instanceof NestingTooDeepError)) throw err;
      return { answer: toolErrorResult(`Tool ${hubName} was not run: the arguments as a plugin rewrote them cannot be confirmed (${err.message})`) };
    }
    if (answered === true && retry?.rewritten === rewrite) return { confirmed: true, rewrite };
    if (!c.needed(hubName, routed.server.config, routed.upstreamName, routed.item.annotations)) return {};
    // The confirmation is a form.
    if (!elicits(ctx.clientCapabilities, 'form'))
      return { answer: toolErrorResult(`Tool ${hubName} needs the user's confirmation, and this client cannot ask the user (it did not declare form elicitation). It was not run.`) };
    const req = c.request(hubName, routed.server.id, args);
    if (ctx.clientEra === MODERN) {
      const state = this.mrtr.sealer.seal(bind, rewrite === undefined ? { k: 'confirm' } : { k: 'confirm', r: rewrite });
      return { answer: { resultType: 'input_required', inputRequests: { [CONFIRM_KEY]: req }, requestState: state } };
    }
    try {
      // Withdrawn when the hub's stop closes the upstreams: the call waits on the hub alone.
      if (ctx.askClient && accepted(await ctx.askClient(req, this.mrtr.stopping))) return { confirmed: true, rewrite };
    } catch (err) {
      // The call was cancelled while its user was asked: that is no answer of the user's.
      if (ctx.signal.aborted) throw err instanceof CancelledError ? err : new CancelledError(reasonOf(ctx.signal));
      // Nor is the hub's stop: ended as a call the stop ends, never sent.
      if (this.mrtr.stopping.aborted) throw new HubStoppingError(true);
      this.log.debug({ err: String((err as Error)?.message ?? err) }, 'confirmation request failed');
    }
    return { answer: toolErrorResult(`Tool ${hubName} was declined by the user.`) };
  }
}

/**
 * The digest of the arguments that will run when they are not the client's own (a beforeCall
 * hook's rewrite); undefined when they are, which the request state's binding holds already.
 * With a hook the arguments are always its copy, changed or not: compared by digest.
 */
function rewriteDigest(args: unknown, bind: Binding): string | undefined {
  if (args === bind.args) return undefined;
  const digest = argsHash(args ?? {});
  return digest === argsDigestOf(bind) ? undefined : digest;
}

/** Errors raised by asking the client on the upstream's behalf (call-tool body): never the call's outcome. */
const failedAsking = new WeakSet<object>();

function askedAndFailed(err: unknown): never {
  if (err !== null && typeof err === 'object') failedAsking.add(err);
  throw err;
}

/** A JSON-RPC error kept for replay, saying whether the upstream answered it. */
function storedError(err: RpcError): StoredAnswer {
  return err instanceof UpstreamRpcError ? { error: err.toJSON(), upstream: true } : { error: err.toJSON() };
}

/**
 * A kept JSON-RPC error as it was raised. The upstream's when marked so; and when kept unmarked
 * (by a hub before answers were marked) with a code of the range the 2026 spec reserves
 * (-32020…-32099), which the hub never keeps of its own: its -32020/-32022 refuse a request
 * before its key is claimed, and no -32021 is kept. So a replay is mapped for its client's era
 * (errorSeenBy) however old the kept answer.
 */
function keptError(a: { error: unknown; upstream?: true }): RpcError {
  const e = RpcError.from(a.error);
  const upstream = a.upstream === true || (e.code >= -32099 && e.code <= -32020);
  return upstream ? new UpstreamRpcError(e.code, e.message, e.data) : e;
}

/** Longest idempotency key taken (a UUID is 36 characters): a longer one is held whole in the key table. */
const MAX_KEY_LENGTH = 256;

/**
 * Whose a call's idempotency key is: its principal's on the endpoint it came through. A tool
 * group is an authorization boundary (an API key limited to groups), so one principal's keys on
 * two groups are apart: neither replays nor refuses the other's call.
 */
function keyOwner(ctx: CallContext): KeyOwner {
  return ctx.group === undefined ? ctx.principal : { principal: ctx.principal, group: ctx.group };
}

/** A key and its owner as one map key. */
function keyText(owner: KeyOwner, key: string): string {
  return typeof owner === 'string' ? `${owner}\0\0${key}` : `${owner.principal}\0${owner.group ?? ''}\0${key}`;
}

/** The text of a result's first content block (the hub's own error results have one). */
function firstText(result: Result): string | undefined {
  const c = (result.content as { text?: unknown }[] | undefined)?.[0];
  return typeof c?.text === 'string' ? c.text : undefined;
}

/**
 * A tools/call whose `arguments` is no object breaks the CallToolRequest schema of both eras
 * (`arguments?: {[key: string]: unknown}`): a protocol error, -32602, as the tools page has a
 * malformed request answered (and the SDK v2 server does), not a tool execution error the model
 * is asked to correct. `null` is taken as none (clients that write absent fields as null).
 */
function argumentsProblem(args: unknown): RpcError | undefined {
  if (args === undefined || args === null || (typeof args === 'object' && !Array.isArray(args))) return undefined;
  return new RpcError(INVALID_PARAMS, `Invalid params: tools/call arguments must be an object, not ${Array.isArray(args) ? 'an array' : typeof args}`);
}

