import { randomUUID } from 'node:crypto';
import { CancelledError, ClientRpcError, HubStoppingError, INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError, UpstreamRpcError, URL_ELICITATION_REQUIRED } from '../protocol/errors.js';
import { LEGACY, MODERN } from '../protocol/era.js';
import type { InputRequest } from '../protocol/types.js';
import type { ServerHandle } from '../catalog/catalog.js';
import type { CallOptions } from '../upstream/types.js';
import type { CallContext } from './context.js';
import { CONFIRM_KEY, verdict } from '../policy/confirm.js';
import { InputBridge, InputCollector, missingCapability } from './input-bridge.js';
import { askerOf, inputRequestsProblem, MAX_OPEN_ASKS, namedAsker, relayedInput, relayedInputs } from '../protocol/input-results.js';
import { RequestStateSealer, StateError, type Binding, type StateBody } from './request-state.js';
import { Canceller, reasonOf, type Signal } from '../cancel.js';
import { monotonicNow } from '../monotonic.js';
import { asTask } from './legacy-task.js';
import { onFailure } from '../on-failure.js';
import { setField } from '../protocol/copy.js';
import { addRequired, elicits, requiredNames } from '../protocol/client-capabilities.js';
import { isObj } from '../protocol/jsonrpc.js';

type Result = Record<string, unknown>;

/** Rounds of legacy-client ↔ modern-upstream translation before the hub gives up. */
const MAX_ROUNDS = 10;

/** A modern client's retry, after its requestState opened. */
export type Retry =
  | { kind: 'resume'; result: Promise<Result> }
  | { kind: 'forward'; server: string; params: Result; confirmed: boolean; rewritten?: string }
  | { kind: 'confirm'; accepted: boolean | undefined; params: Result; rewritten?: string };

/**
 * The call ends on an upstream's input_required turn the hub could not take further (a client
 * that cannot be asked, too many rounds, a malformed request): the upstream never ran the call,
 * so this is no outcome of it (call-tool.ts frees an idempotency key for it, never replays it).
 */
export class UnfinishedTurnError extends RpcError {}

/**
 * Era translation of "the server needs input from the user" (digest §5.3): legacy
 * server → client requests and modern `input_required` results, in all four directions.
 */
export class Mrtr {
  readonly bridge: InputBridge;
  /** Aborts when the hub's stop, its drain time over, closes the upstreams (close()). */
  private readonly closing = new Canceller();

  constructor(
    readonly sealer: RequestStateSealer,
    private readonly inputTimeoutMs: number,
    /** The largest request the hub reads (listen.maxBodyBytes): a requestState must fit in one to come back. */
    private readonly maxRequestBytes = Infinity,
  ) {
    this.bridge = new InputBridge(sealer, inputTimeoutMs);
  }

  /**
   * The hub stops (its drain time over, as it closes the upstreams): what waits for a client's
   * answer waits on the hub alone, and ends now, answered as a call the stop ends (-32603 the hub
   * is shutting down). A legacy client's answer to a question of a modern upstream's round (the
   * round is over upstream) or to a confirmation (the call not sent yet) was ended only once
   * every upstream had closed, 2 s and more later for one that ignores the end of its stdin.
   * A modern client's parked call ends too (InputBridge.close).
   */
  close(): void {
    // A string: what a client's question withdrawn then says (LegacySession.ask's notifications/cancelled).
    this.closing.abort('the hub is shutting down');
    this.bridge.close();
  }

  /** Aborted once the hub's stop closes the upstreams (close()): a question to a client is withdrawn then. */
  get stopping(): Signal {
    return this.closing.signal;
  }

  /**
   * Run `body` (the forwarded call, ledger included). A modern client of a legacy upstream
   * cannot be asked mid-call, so the call is parked and the client answers `input_required`
   * (recipe A); everyone else runs straight through. `ended` sees a parked run settle, URL-step
   * rounds included, even when a later request of the client takes its result (a run straight
   * through is `body` alone, which finishes its own row). `first`, given to both for a parked
   * run: where its first request stands (InputCollector.first): whether a retry of the client,
   * not the first request, now waits for the call's end (the first was answered
   * `input_required`, so the call's outcome is the retry's row's), and, for a call that ends
   * while parked, whether a retry takes it (FirstRow.known).
   */
  run(
    ctx: CallContext,
    server: ServerHandle,
    opts: CallOptions,
    bind: Binding,
    body: (opts: CallOptions, first?: InputCollector) => Promise<Result>,
    ended: (run: Promise<Result>, first?: InputCollector) => Promise<Result> = (r) => r,
  ): Promise<Result> {
    if (!parks(ctx, server)) return body(opts);
    const collector = new InputCollector(ctx.clientCapabilities);
    collector.upstream = server.upstream;
    const abort = new Canceller();
    // The call's own signal (opts), which a keyed call's retry waiting for it may hold off.
    const signal = opts.signal ?? ctx.signal;
    if (signal.aborted) abort.abort(signal.reason);
    else signal.addEventListener('abort', () => abort.abort(signal.reason), { once: true });
    // A clone (a spread first in its literal: V8 copies the object whole) rather than
    // Object.assign({}, opts), which copied it key by key: ~2k instructions a parked call.
    const callOpts: CallOptions = { ...opts, signal: abort.signal, onServerRequest: collector.ask };
    // Progress and logs follow the call to whichever request of the client waits for it.
    collector.targets = { onProgress: opts.onProgress, onLog: opts.onLog };
    if (opts.onProgress) callOpts.onProgress = (p) => collector.targets.onProgress?.(p);
    if (opts.onLog) callOpts.onLog = (l) => collector.targets.onLog?.(l);
    // The server's word that a URL step of its -32042 is done (urlStepRounds waits for it).
    const steps = new UrlStepsDone();
    callOpts.onElicitationComplete = steps.heard;
    const run = ended(
      withUrlSteps(() => body(callOpts, collector), { collector, method: bind.method, asker: askerOf(server), steps, timeoutMs: this.inputTimeoutMs, signal: abort.signal, stopping: this.closing.signal }),
      collector,
    );
    return this.bridge.settle(run, collector, abort, bind);
  }

  /**
   * One upstream request plus the rounds its `input_required` answers need: passed on to a
   * modern client under the hub's seal (recipe C), or turned into real requests to a legacy
   * client and retried upstream (recipe B). `confirmed`: the user confirmed this call, and the
   * modern client's next round must say so (the state carries it). `rewritten`: the digest of
   * the arguments it confirmed when plugins made them other than the client's (StateBody `r`).
   */
  async roundTrips(method: string, server: ServerHandle, params: Result, ctx: CallContext, opts: CallOptions, bind: Binding, confirmed = false, rewritten?: string): Promise<Result> {
    let p = params;
    /** The URL steps a legacy client accepted in the last round, by the id the hub made up for each (urlStepsDone). */
    let accepted: UrlStep[] | undefined;
    /** URL steps the legacy client accepted: when its time for each is up (monotonic ms), by URL. */
    const acceptedUrls = new Map<unknown, number>();
    let waitMs = URL_STEP_WAIT_MS;
    for (let round = 0; ; ) {
      let r: Result;
      try {
        if (p.task === undefined) r = await server.upstream.request(method, p, opts);
        else r = await asTask(server, method, p, opts);
      } catch (err) {
        if (ctx.clientEra === MODERN) throw err;
        return legacyMissingCapability(err, method);
      }
      if (accepted !== undefined) accepted = urlStepsDone(accepted, r, ctx);
      if (r.resultType !== 'input_required') {
        // Unrecognised, or an extension's the hub did not declare (a task): invalid (digest §2.2).
        if (r.resultType !== undefined && r.resultType !== 'complete')
          throw new RpcError(INTERNAL_ERROR, `the upstream answered with resultType ${JSON.stringify(r.resultType)}, which the hub did not ask for and cannot relay`);
        return r;
      }
      // An input_required that breaks the protocol is the upstream's fault, never the client's
      // (it is not asked, nor told it lacks a capability named after whatever the upstream wrote).
      const malformed = inputRequiredProblem(r);
      if (malformed) throw new UnfinishedTurnError(INTERNAL_ERROR, `server "${server.id}" answered with a malformed input_required: ${malformed}`);
      // The hub never asks a client for what it did not declare (digest §5.1), whoever asks.
      const need = undeclared(r.inputRequests, ctx.clientCapabilities);
      if (need) {
        const err = new RpcError(MISSING_CLIENT_CAPABILITY, 'the upstream needs a client capability this request did not declare', { requiredCapabilities: need });
        if (ctx.clientEra === MODERN) throw err;
        return legacyMissingCapability(err, method);
      }
      if (ctx.clientEra === MODERN) {
        const up = typeof r.requestState === 'string' ? r.requestState : undefined;
        const sealed = this.sealer.seal(bind, confirmed ? { k: 'fwd', server: server.id, up, ok: 1, ...(rewritten === undefined ? {} : { r: rewritten }) } : { k: 'fwd', server: server.id, up });
        // Sealed, the upstream's state grows by half: one the client could never send back would
        // have its retry refused as too large (413), a failure it cannot make sense of.
        if (sealed.length >= this.maxRequestBytes)
          throw new UnfinishedTurnError(
            INTERNAL_ERROR,
            `server "${server.id}" answered with a requestState of ${up?.length ?? 0} characters, ${sealed.length} once sealed for the client: more than a request to this hub may carry (listen.maxBodyBytes, ${this.maxRequestBytes} bytes), so it could never come back`,
          );
        const forwarded: Result = { ...r, requestState: sealed };
        if (r.inputRequests !== undefined) forwarded.inputRequests = relayedInputs(r.inputRequests, askerOf(server));
        return forwarded;
      }
      if (!ctx.askClient) throw new UnfinishedTurnError(INTERNAL_ERROR, 'the upstream needs input from the user and this client cannot be asked');
      // Each entry is a question put to the client at once: as many as a legacy server may have open.
      const asks = r.inputRequests === undefined ? 0 : Object.keys(r.inputRequests as Result).length;
      if (asks > MAX_OPEN_ASKS)
        throw new UnfinishedTurnError(INTERNAL_ERROR, `server "${server.id}" asked ${asks} questions in one input_required round; the hub puts at most ${MAX_OPEN_ASKS} before a client at once`);
      // Only URL steps the client accepted, asked again: the user agreed to open each (digest
      // §5.1: what an accept means), and the upstream has not found them done yet. Asked again,
      // a client that answers at once (or a user who clicks through) opened the URL ten times in
      // a moment and the call ended unfinished: instead the same answers go again after a wait
      // that doubles, until the client's time for the step (policy.inputTimeoutMs) is up.
      const again = acceptedAgain(r.inputRequests, acceptedUrls);
      if (again !== undefined) {
        const left = again.until - monotonicNow();
        if (left <= 0)
          throw new UnfinishedTurnError(INTERNAL_ERROR, `the client agreed to complete a step at a URL (${again.urls.join(', ')}), and the upstream did not find it done within ${this.inputTimeoutMs} ms`);
        try {
          await pause(Math.min(waitMs, left), opts.signal, this.closing.signal);
        } catch (err) {
          if (p.task === undefined) dismissUpstream(method, server, params, r, opts);
          throw this.closing.signal.aborted && !ctx.signal.aborted ? new HubStoppingError() : err;
        }
        waitMs = Math.min(waitMs * 2, URL_STEP_WAIT_MAX_MS);
        p = { ...params, inputResponses: again.answers };
        if (r.requestState !== undefined) p.requestState = r.requestState;
        continue;
      }
      if (round >= MAX_ROUNDS) throw new UnfinishedTurnError(INTERNAL_ERROR, `the upstream still needed input after ${MAX_ROUNDS} rounds`);
      round++;
      let inputResponses: Result;
      // Each URL step gets its elicitationId here, the one the client is asked with (askAll keeps it).
      const asked = legacyInputs(relayedInputs(r.inputRequests, askerOf(server), true));
      try {
        inputResponses = await this.askAll(asked, ctx.askClient);
        if (ctx.onElicitationComplete !== undefined) accepted = urlStepsAccepted(asked, inputResponses);
        noteAcceptedUrls(asked, inputResponses, acceptedUrls, monotonicNow() + this.inputTimeoutMs);
        waitMs = URL_STEP_WAIT_MS;
      } catch (err) {
        if (p.task === undefined) dismissUpstream(method, server, params, r, opts);
        // Withdrawn by the hub's stop (close()), not ended by the call's own signal (its client,
        // or `switchyard stdio` stopping, which says why): ended as a call the stop ends.
        throw this.closing.signal.aborted && !ctx.signal.aborted ? new HubStoppingError() : err;
      }
      p = { ...params, inputResponses };
      // Echoed byte-exact; absent stays absent (digest §5.1).
      if (r.requestState !== undefined) p.requestState = r.requestState;
    }
  }

  /**
   * One round's questions, asked of a legacy client at once. When one fails (refused, or
   * unanswerable) the round fails and the call ends with it, so the others still open are
   * withdrawn there and then: the client hears notifications/cancelled for each, and the
   * session forgets them (their timers with them). The call's cancellation withdraws them too
   * (LegacySession.ask follows the call's signal).
   */
  private async askAll(requests: unknown, ask: NonNullable<CallContext['askClient']>): Promise<Result> {
    const entries = requests && typeof requests === 'object' ? Object.entries(requests as Record<string, InputRequest>) : [];
    const closing: Signal = this.closing.signal;
    if (closing.aborted) throw new HubStoppingError();
    const round = new Canceller();
    // The hub's stop withdraws the round's questions (the client hears why), and the call ends as one the stop ended.
    const stop = (): void => round.abort(closing.reason);
    closing.addEventListener('abort', stop, { once: true });
    let answers: Result[];
    try {
      answers = await Promise.all(entries.map(([, req]) => ask(toLegacyInput(req), round.signal).catch((err: unknown) => Promise.reject(refusalOf(req.method, err)))));
    } catch (err) {
      round.abort('the call that asked ended: another question of the same round failed');
      throw err;
    } finally {
      closing.removeEventListener('abort', stop);
    }
    // The upstream chose the keys: "__proto__" is one like any other (setField), not the prototype.
    const out: Result = {};
    entries.forEach(([k], i) => setField(out, k, answers[i]));
    return out;
  }

  /** Whether `state` would open (bound to `bind`) as the state of a call parked here, waiting for this retry. Uses nothing up. */
  parkedHere(state: unknown, bind: Binding): boolean {
    const body = this.sealer.peek(state, bind);
    return body?.k === 'park' && this.bridge.has(body.id);
  }

  /**
   * Open a modern client's retry; throws -32602 for anything that does not check out. `caps`:
   * the capabilities the retry declared; `targets`: its progress and log sinks.
   */
  openRetry(params: Result, bind: Binding, caps: CallContext['clientCapabilities'], signal: Signal, targets: Pick<CallOptions, 'onProgress' | 'onLog'> = {}): Retry {
    let body: StateBody;
    try {
      body = this.sealer.open(params.requestState, bind);
    } catch (err) {
      if (err instanceof StateError) throw new RpcError(INVALID_PARAMS, err.message);
      throw err;
    }
    if (body.k === 'park') {
      try {
        return { kind: 'resume', result: this.bridge.resume(body.id, params.inputResponses, caps, bind, signal, targets) };
      } catch (err) {
        if (err instanceof StateError) throw new RpcError(INVALID_PARAMS, err.message);
        throw err;
      }
    }
    const forwarded: Result = { ...params };
    if (body.k === 'confirm') {
      const answers = (params.inputResponses ?? {}) as Record<string, unknown>;
      delete forwarded.requestState;
      delete forwarded.inputResponses;
      // An answer this hub cannot tell was not spent already (body.again) is none: asked again.
      return { kind: 'confirm', accepted: body.again ? undefined : verdict(answers[CONFIRM_KEY]), params: forwarded, rewritten: body.r };
    }
    if (body.up === undefined) delete forwarded.requestState;
    else forwarded.requestState = body.up;
    return { kind: 'forward', server: body.server, params: forwarded, confirmed: body.ok === 1, rewritten: body.ok === 1 ? body.r : undefined };
  }
}

/**
 * A legacy client's error for a question of a modern upstream's round, as the call ends with it.
 * No `inputResponses` value carries an error (digest §5.1), so the call ends at the client with
 * it. A code JSON-RPC reserves (-32768..-32000) reads as about the request it answers: the
 * client's -32601 for `roots/list` (it has no roots) would say tools/call was not found. Such a
 * one becomes -32603 naming the refused question, as a turn the hub could not take further; the
 * client's own codes (sampling's `-1`, the user said no) stay as they are.
 */
function refusalOf(method: string, err: unknown): unknown {
  if (!(err instanceof ClientRpcError) || err.code < -32768 || err.code > -32000) return err;
  return new UnfinishedTurnError(INTERNAL_ERROR, `the client refused ${method} (error ${err.code}: ${err.message})`);
}

/**
 * A legacy client's round that failed (the client refused a question, left it unanswered, or
 * cancelled the call) leaves a modern upstream waiting for a retry that will not come. One that
 * holds the call meanwhile — a hub behind this one parking a legacy server's call — would hold
 * it, and that server's other calls with it, until its own input time limit. Its elicitations
 * are answered `cancel` in one last retry (digest §5.3 B.6), whose answer nobody waits for.
 * Sampling and roots have no such answer (a refusal is an error, which no `inputResponses` value
 * carries): that retry declares neither capability instead, a request's own capabilities being
 * what its server may ask of it (digest §5.1), so a server that still needs one answers -32021
 * and lets the call go (a hub behind this one ends its parked call so) rather than holding it
 * for an answer that will not come. Only a round with a requestState: an upstream holds a call for a retry only by what its
 * requestState names (a hub's parked call is found by it). One without holds nothing, as a
 * stateless server does: the retry would only run the tool again from its start (what it does
 * before it asks, done twice), for an answer nobody reads. An empty one names nothing either.
 */
function dismissUpstream(method: string, server: ServerHandle, params: Result, r: Result, opts: CallOptions): void {
  if (typeof r.requestState !== 'string' || r.requestState === '') return;
  const answers: Result = {};
  const asked = r.inputRequests && typeof r.inputRequests === 'object' ? Object.entries(r.inputRequests as Record<string, InputRequest>) : [];
  let caps = opts.clientCapabilities;
  for (const [k, req] of asked) {
    if (req?.method === 'elicitation/create') setField(answers, k, { action: 'cancel' });
    else if (req?.method === 'sampling/createMessage' || req?.method === 'roots/list') {
      const cap = req.method === 'roots/list' ? 'roots' : 'sampling';
      if (caps && Object.hasOwn(caps, cap)) {
        const { [cap]: _dropped, ...rest } = caps;
        caps = rest;
      }
    }
  }
  if (Object.keys(answers).length === 0 && caps === opts.clientCapabilities) return;
  const last: Result = { ...params, inputResponses: answers, requestState: r.requestState };
  // Not the call's signal (it may be what ended the call) nor its sinks: the call is over. The
  // hub's own request (hubOwn), made for nobody: no call left unanswered, nor a client's in a slot's queue.
  const once: CallOptions = { timeoutMs: opts.timeoutMs, maxTotalTimeoutMs: opts.maxTotalTimeoutMs, meta: opts.meta, clientCapabilities: caps, principal: opts.principal, hubOwn: true };
  Promise.resolve()
    .then(() => server.upstream.request(method, last, once))
    .catch(() => undefined);
}

/** A modern client of a legacy upstream: its call is parked when the upstream asks (Mrtr.run). */
function parks(ctx: CallContext, server: ServerHandle): boolean {
  return ctx.clientEra === MODERN && server.upstream.era === LEGACY;
}

/**
 * `err` is no outcome yet: a legacy upstream's -32042 that Mrtr.run turns into URL steps for
 * a modern client, after which the call is issued again. The attempt that failed so must not
 * be recorded (or stored for an idempotency key) as the call's answer.
 */
export function awaitsUrlSteps(err: unknown, ctx: CallContext, server: ServerHandle): boolean {
  return parks(ctx, server) && urlSteps(err) !== null;
}

/** How a call's URL steps are asked and waited for (withUrlSteps). */
interface UrlStepRun {
  collector: InputCollector;
  method: string;
  asker: string | undefined;
  steps: UrlStepsDone;
  /** How long the user has to complete a step they agreed to open (policy.inputTimeoutMs). */
  timeoutMs: number;
  /** The call's own: its end (its client gone) ends a wait for a step. */
  signal: Signal;
  /** The hub's stop closing the upstreams (Mrtr.stopping): a wait for a step ends then too, as a legacy client's question does. */
  stopping: Signal;
}

/** The first wait for a step the server still asks after the user agreed to open it, doubled each time up to URL_STEP_WAIT_MAX_MS. */
const URL_STEP_WAIT_MS = 500;
const URL_STEP_WAIT_MAX_MS = 8_000;

/**
 * The elicitationIds a legacy server said done (notifications/elicitation/complete, an optional
 * notification: digest §5.2) for a modern client's call, whose own client has no such
 * notification; and a wait for them.
 */
class UrlStepsDone {
  private readonly done = new Set<string>();
  private wake: (() => void) | undefined;

  readonly heard = (params: Record<string, unknown>): void => {
    if (typeof params.elicitationId !== 'string' || this.done.size >= MAX_OPEN_ASKS * MAX_ROUNDS) return;
    this.done.add(params.elicitationId);
    this.wake?.();
  };

  /** Whether every one of `ids` was said done. */
  all(ids: string[]): boolean {
    return ids.length > 0 && ids.every((id) => this.done.has(id));
  }

  /** Resolves once every one of `ids` is said done, or `ms` passed; rejects when either signal aborts. */
  wait(ids: string[], ms: number, signal: Signal, stopping: Signal): Promise<void> {
    if (this.all(ids)) return Promise.resolve();
    return pause(ms, signal, stopping, (end) => {
      this.wake = () => {
        if (this.all(ids)) end();
      };
      return () => {
        this.wake = undefined;
      };
    });
  }
}

/**
 * A legacy upstream's -32042 (URLElicitationRequired) for a modern client: its URL steps are
 * asked as URL-mode input requests (the collector drops elicitationId); once the user accepted
 * them all, the original request is issued again (digest §5.3 A.7). Anything but accept ends
 * the call: a tool error for tools/call, an error otherwise (-32042 is retired for modern clients).
 */
function withUrlSteps(call: () => Promise<Result>, run: UrlStepRun): Promise<Result> {
  // The usual call never fails this way: only a failure enters the rounds.
  return onFailure(call, (err) => urlStepRounds(err, call, run));
}

/** A URL step's identity across attempts: its elicitationId, else its URL. */
const stepKey = (step: Result): string => (typeof step.elicitationId === 'string' ? `id:${step.elicitationId}` : `url:${String(step.url)}`);

/**
 * The rounds after the first attempt failed with `first`. A modern client's accept means only
 * that the user agreed to open the URL (digest §5.1): the request issued again at once still
 * meets the -32042 while the user is at it. Asked again, a client that fulfils rounds on its own
 * (the SDK's, 10 of them) opened the URL ten times in a second and the call ended unfinished.
 * So a step the user accepted is not asked again: the request waits, issued again as the server
 * says the step done (notifications/elicitation/complete) and, as that notification is optional,
 * after a wait that doubles (0.5 s up to 8 s), until the user's time for it is up
 * (policy.inputTimeoutMs from the accept). Steps new to the call are asked, each a round.
 */
async function urlStepRounds(first: unknown, call: () => Promise<Result>, run: UrlStepRun): Promise<Result> {
  const { collector, method, asker } = run;
  let err = first;
  /** The steps the user accepted: when their time is up (monotonic ms). */
  const accepted = new Map<string, number>();
  let waitMs = URL_STEP_WAIT_MS;
  for (let round = 0; ; ) {
    const steps = urlSteps(err);
    if (!steps) throw err;
    const fresh = steps.filter((s) => !accepted.has(stepKey(s)));
    if (fresh.length === 0) {
      const left = Math.min(...steps.map((s) => accepted.get(stepKey(s))!)) - monotonicNow();
      if (left <= 0) {
        const where = steps.map((s) => String(s.url)).join(', ');
        const why = `the user agreed to complete ${steps.length === 1 ? 'a step at a URL' : 'steps at URLs'} (${where}), and the upstream did not find ${steps.length === 1 ? 'it' : 'them'} done within ${run.timeoutMs} ms`;
        if (method === 'tools/call') return { content: [{ type: 'text', text: why }], isError: true };
        throw new RpcError(INTERNAL_ERROR, why);
      }
      const ids = steps.flatMap((s) => (typeof s.elicitationId === 'string' ? [s.elicitationId] : []));
      try {
        await run.steps.wait(ids.length === steps.length ? ids : [], Math.min(waitMs, left), run.signal, run.stopping);
      } catch (e) {
        throw run.stopping.aborted && !run.signal.aborted ? new HubStoppingError() : e;
      }
      waitMs = Math.min(waitMs * 2, URL_STEP_WAIT_MAX_MS);
    } else {
      if (round >= MAX_ROUNDS) {
        // -32042 is retired for modern clients (digest §1.3): say it in their terms.
        const why = `the upstream still asked for steps at a URL after ${MAX_ROUNDS} rounds`;
        if (method === 'tools/call') return { content: [{ type: 'text', text: why }], isError: true };
        throw new RpcError(INTERNAL_ERROR, why);
      }
      round++;
      const answers = await Promise.all(fresh.map((params) => collector.ask(relayedInput({ method: 'elicitation/create', params }, asker))));
      const refused = answers.find((a) => a.action !== 'accept');
      if (refused) {
        const why = `the upstream needs the user to complete a step at a URL, and the user answered "${String(refused.action)}"`;
        if (method === 'tools/call') return { content: [{ type: 'text', text: why }], isError: true };
        throw new RpcError(INTERNAL_ERROR, why);
      }
      const until = monotonicNow() + run.timeoutMs;
      for (const s of fresh) accepted.set(stepKey(s), until);
      waitMs = URL_STEP_WAIT_MS;
    }
    try {
      return await call();
    } catch (e) {
      err = e;
    }
  }
}

/** The URL-mode elicitations of a -32042 error, or null when it is not one we can relay. */
function urlSteps(err: unknown): Result[] | null {
  if (!(err instanceof RpcError) || err.code !== URL_ELICITATION_REQUIRED) return null;
  const list = (err.data as { elicitations?: unknown } | undefined)?.elicitations;
  if (!Array.isArray(list) || list.length === 0) return null;
  const steps: Result[] = [];
  for (const e of list as Result[]) {
    if (!e || typeof e !== 'object' || typeof e.url !== 'string') return null;
    steps.push({ ...e, mode: 'url', message: typeof e.message === 'string' ? e.message : 'Please open this URL', url: e.url });
  }
  return steps;
}

/**
 * `err` as a legacy client is sent it: an untrusted upstream's -32042 with the message of each
 * of its URL steps naming the server (namedAsker), as the steps urlStepRounds asks a modern
 * client do: the client shows that message as it offers the user the URL, and behind the hub it
 * would seem the hub's (input-results.ts, relayedInput). The error's own message too, the
 * server's text as well, which a client may show beside the steps or alone. A trusted server's,
 * a modern client's (its own rounds name them) and any other error: `err` itself. Only a
 * failure comes here.
 */
export function urlStepsNamedFor(err: unknown, ctx: CallContext, server: ServerHandle): unknown {
  if (ctx.clientEra === MODERN || !(err instanceof RpcError) || err.code !== URL_ELICITATION_REQUIRED) return err;
  const asker = askerOf(server);
  if (!elicits(ctx.clientCapabilities, 'url')) return new UrlStepsUnsupportedError(err, asker);
  if (asker === undefined) return err;
  const data = err.data;
  const named =
    isObj(data) && Array.isArray(data.elicitations)
      ? { ...data, elicitations: data.elicitations.map((e: unknown) => (isObj(e) && typeof e.message === 'string' ? { ...e, message: namedAsker(asker, e.message) } : e)) }
      : data;
  const message = namedAsker(asker, err.message);
  return err instanceof UpstreamRpcError ? new UpstreamRpcError(err.code, message, named) : new RpcError(err.code, message, named);
}

/**
 * A legacy upstream's -32042 for a legacy client that did not declare URL elicitation
 * (`elicitation.url`): it is never sent an error it said it cannot take (digest §5.2, gated by
 * what the client declared at initialize), as a modern client is never asked a URL step it did
 * not declare. The steps, in words: the message (naming an untrusted server, as relayed steps
 * do) and the URL, which the user may still open. A `tools/call` ends as a tool error with this
 * text (call-tool.ts), another request with -32603. The upstream ran nothing: no outcome kept for
 * an idempotency key, which its retry, once the user is done, may use again.
 */
export class UrlStepsUnsupportedError extends RpcError {
  constructor(err: RpcError, asker: string | undefined) {
    const list = (err.data as { elicitations?: unknown } | undefined)?.elicitations;
    const steps = (Array.isArray(list) ? list : [])
      .filter((e): e is Result => isObj(e) && typeof e.url === 'string')
      .map((e) => {
        const message = typeof e.message === 'string' && e.message !== '' ? e.message : 'Please open this URL';
        return `${asker === undefined ? message : namedAsker(asker, message)} (${String(e.url)})`;
      });
    const said = asker === undefined ? err.message : namedAsker(asker, err.message);
    super(
      INTERNAL_ERROR,
      `the upstream needs the user to complete ${steps.length === 1 ? 'a step at a URL' : 'steps at URLs'} first, and this client did not declare URL elicitation (elicitation.url): ${steps.length > 0 ? steps.join('; ') : said}`,
    );
  }
}

/**
 * Tool results that stand for a -32021 in a legacy client's era: about what the client
 * declared, not the call's outcome, so never kept for an idempotent replay.
 */
const capabilityRefusals = new WeakSet<object>();
export const isCapabilityRefusal = (r: object): boolean => capabilityRefusals.has(r);

/**
 * A -32021 (the legacy client did not declare what a modern upstream needs: the upstream's own,
 * or the hub's for an input_required asking it) in the caller's era, which has no such code: a
 * tool error for tools/call, as a legacy server's own refusal reads, else -32603 with the same
 * data, naming the upstream's error as toLegacyError does its -32020/-32022. Not -32601, which
 * a client reads as its own request's method not found (the hub offers the method). Any other
 * error is rethrown unchanged.
 */
function legacyMissingCapability(err: unknown, method: string): Result {
  if (!(err instanceof RpcError) || err.code !== MISSING_CLIENT_CAPABILITY) throw err;
  const need = (err.data as { requiredCapabilities?: unknown } | undefined)?.requiredCapabilities;
  const names = isObj(need) ? requiredNames(need) : '';
  const why = `the upstream needs a client capability this client did not declare${names ? `: ${names}` : ''}`;
  if (method === 'tools/call') {
    const r = { content: [{ type: 'text', text: why }], isError: true };
    capabilityRefusals.add(r);
    return r;
  }
  const said = err instanceof UpstreamRpcError ? ` (the upstream answered ${err.code}: ${err.message})` : '';
  throw new RpcError(INTERNAL_ERROR, `${why}${said}`, err.data);
}

/**
 * What is wrong with an upstream's `input_required` result (digest §5.1), or undefined:
 * `inputRequests` a map of requests naming only the three allowed methods, `requestState` a
 * string, and at least one of them there (an empty map counts as none).
 */
function inputRequiredProblem(r: Result): string | undefined {
  const bad = inputRequestsProblem(r.inputRequests);
  if (bad) return bad;
  if (r.requestState !== undefined && typeof r.requestState !== 'string') return 'requestState must be a string';
  const asks = r.inputRequests !== undefined && Object.keys(r.inputRequests as Result).length > 0;
  if (!asks && r.requestState === undefined) return 'it has neither inputRequests nor requestState';
  return undefined;
}

/** What the client would have to declare for these input requests, or null when it declared all of it. */
function undeclared(requests: unknown, caps: CallContext['clientCapabilities']): Record<string, unknown> | null {
  if (!requests || typeof requests !== 'object') return null;
  let need: Record<string, unknown> | null = null;
  for (const req of Object.values(requests as Record<string, InputRequest>)) {
    const m = req && typeof req === 'object' && typeof req.method === 'string' ? missingCapability(req, caps) : null;
    if (m) need = addRequired(need ?? {}, m);
  }
  return need;
}

/** A URL step a legacy client accepted: the elicitationId the hub made up for it, and its URL. */
interface UrlStep {
  id: string;
  url: unknown;
}

/** Each URL-mode elicitation of a round with its elicitationId (toLegacyInput); other requests as they are. */
function legacyInputs(requests: unknown): unknown {
  if (!isObj(requests)) return requests;
  let out: Result | undefined;
  for (const [k, req] of Object.entries(requests)) {
    const legacy = toLegacyInput(req as InputRequest);
    if (legacy === req) continue;
    out ??= { ...requests };
    setField(out, k, legacy);
  }
  return out ?? requests;
}

/** The URL steps of a round (legacyInputs) its client answered `accept`; undefined when none. */
function urlStepsAccepted(asked: unknown, answers: Result): UrlStep[] | undefined {
  if (!isObj(asked)) return undefined;
  let steps: UrlStep[] | undefined;
  for (const [k, req] of Object.entries(asked as Record<string, InputRequest>)) {
    const id = req?.method === 'elicitation/create' && req.params?.mode === 'url' ? req.params.elicitationId : undefined;
    if (typeof id === 'string' && (answers[k] as Result | undefined)?.action === 'accept') (steps ??= []).push({ id, url: req.params!.url });
  }
  return steps;
}

/**
 * A modern upstream learns whether a URL step was done on the retry (digest §5.1): it answered
 * it, and no longer asks that URL (a result, or other questions), so the step the legacy client
 * accepted is complete, and its client is told so under the elicitationId the hub made up for
 * it (digest §5.3 B.3), as a legacy server tells its own: a client that shows the step as under
 * way until then, or retries on it, is not left waiting. One asked again is not done.
 */
function urlStepsDone(steps: UrlStep[], r: Result, ctx: CallContext): UrlStep[] | undefined {
  const again = r.resultType === 'input_required' && isObj(r.inputRequests) ? Object.values(r.inputRequests) : [];
  let still: UrlStep[] | undefined;
  for (const s of steps) {
    if (again.some((q) => isObj(q) && q.method === 'elicitation/create' && isObj(q.params) && q.params.mode === 'url' && q.params.url === s.url)) {
      (still ??= []).push(s);
      continue;
    }
    ctx.onElicitationComplete?.({ elicitationId: s.id });
  }
  // Asked again: done only once the upstream stops asking (a round that is not asked keeps them, roundTrips).
  return still;
}

/** The URL steps of a round (legacyInputs) the client answered `accept`, noted with when its time for them is up. */
function noteAcceptedUrls(asked: unknown, answers: Result, urls: Map<unknown, number>, until: number): void {
  if (!isObj(asked)) return;
  for (const [k, req] of Object.entries(asked as Record<string, InputRequest>))
    if (req?.method === 'elicitation/create' && req.params?.mode === 'url' && (answers[k] as Result | undefined)?.action === 'accept') urls.set(req.params.url, until);
}

/**
 * A round that asks only URL steps the client accepted before (by URL): the same answers
 * (`accept`) for it, the URLs, and when the client's time for the first of them is up.
 * Undefined when it asks anything else.
 */
function acceptedAgain(requests: unknown, urls: Map<unknown, number>): { answers: Result; urls: string[]; until: number } | undefined {
  if (urls.size === 0 || !isObj(requests)) return undefined;
  const entries = Object.entries(requests);
  if (entries.length === 0) return undefined;
  const answers: Result = {};
  const seen: string[] = [];
  let until = Infinity;
  for (const [k, q] of entries) {
    if (!isObj(q) || q.method !== 'elicitation/create' || !isObj(q.params) || q.params.mode !== 'url' || !urls.has(q.params.url)) return undefined;
    setField(answers, k, { action: 'accept' });
    seen.push(String(q.params.url));
    until = Math.min(until, urls.get(q.params.url)!);
  }
  return { answers, urls: seen, until };
}

/**
 * Resolves after `ms`, or sooner once the `early` hook (if any) calls the end it is handed;
 * rejects as soon as either signal aborts (with its reason). What `early` returns is run
 * however the wait ends.
 */
function pause(ms: number, a: Signal | undefined, b: Signal, early?: (end: () => void) => () => void): Promise<void> {
  const gone = a?.aborted ? a : b.aborted ? b : undefined;
  if (gone) return Promise.reject(new CancelledError(reasonOf(gone)));
  return new Promise((resolve, reject) => {
    let undo: (() => void) | undefined;
    const finish = (): void => {
      clearTimeout(t);
      a?.removeEventListener('abort', onAbort);
      b.removeEventListener('abort', onAbort);
      undo?.();
    };
    const onAbort = (): void => {
      finish();
      reject(new CancelledError(reasonOf(a?.aborted ? a : b)));
    };
    const end = (): void => {
      finish();
      resolve();
    };
    const t = setTimeout(end, ms);
    a?.addEventListener('abort', onAbort, { once: true });
    b.addEventListener('abort', onAbort, { once: true });
    undo = early?.(end);
  });
}

/** Legacy URL-mode elicitations need an elicitationId, which modern ones do not carry. */
function toLegacyInput(req: InputRequest): InputRequest {
  if (req?.method !== 'elicitation/create' || req.params?.mode !== 'url' || req.params.elicitationId) return req;
  return { method: req.method, params: { ...req.params, elicitationId: randomUUID() } };
}
