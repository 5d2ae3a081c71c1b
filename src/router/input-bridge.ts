import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledError, InputTimeoutError, METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY, RpcError } from '../protocol/errors.js';
import { addRequired, declares, required, requiredNames, undeclaredCode } from '../protocol/client-capabilities.js';
import { INPUT_METHODS, inputResultProblem, normalInputResult } from '../protocol/input-results.js';
import type { ClientCapabilities, InputRequest } from '../protocol/types.js';
import type { CallOptions, Upstream } from '../upstream/types.js';
import { StateError, type Binding, type RequestStateSealer } from './request-state.js';
import type { Canceller, Signal } from '../cancel.js';
import { monotonicNow } from '../monotonic.js';
import type { AuditEnd } from '../ledger/types.js';
import { resultJson } from '../protocol/serialized.js';

type Result = Record<string, unknown>;

/** The client capability an input request needs, or null when the client declared it. */
export function missingCapability(req: InputRequest, caps: ClientCapabilities): Record<string, unknown> | null {
  return declares(caps, req.method, req.params) ? null : required(req.method, req.params);
}

/** What a legacy upstream hears when the client never answers (digest §5.3 A.5). */
function refusal(req: InputRequest): { result?: Result; error?: RpcError } {
  if (req.method === 'elicitation/create') return { result: { action: 'cancel' } };
  if (req.method === 'sampling/createMessage') return { error: new RpcError(-1, 'the user did not answer the sampling request') };
  return { error: new RpcError(METHOD_NOT_FOUND, `the client did not answer ${req.method}`) };
}

/** Legacy URL-mode params carry an elicitationId; modern ones do not (digest §5.1). */
function toModernInput(req: InputRequest): InputRequest {
  if (req.method !== 'elicitation/create' || req.params?.mode !== 'url' || !('elicitationId' in (req.params ?? {}))) return req;
  const { elicitationId: _id, ...params } = req.params!;
  return { method: req.method, params };
}

interface Waiting {
  req: InputRequest;
  resolve: (r: Result) => void;
  reject: (e: unknown) => void;
  /** When the client must have answered it (monotonicNow() ms): set when it is first put to the client, kept across retries. */
  deadline?: number;
}

/** See InputCollector.first. */
export type FirstRequest = 'waiting' | 'asked' | 'handed-on';

/** Where a parked call's first request stands, for the end of its row (InputCollector; Mrtr.run). */
export interface FirstRow {
  readonly first: FirstRequest;
  /** The size of the `input_required` the first request was answered (its row's responseBytes), once it was. */
  readonly answeredBytes?: number;
  /**
   * Undefined when `first` is final for the row's end; while the call is parked (its request
   * answered `input_required`, no retry of its client back yet), what it is once a retry takes
   * the call or none can any more.
   */
  known(): Promise<FirstRequest> | undefined;
}

/**
 * The end of a parked call's first row (Mrtr.run): a round when a retry carries the call's end;
 * the call's end, and a round too, when the call ended while parked, its client not back.
 */
export function firstRowEnd<E extends Omit<AuditEnd, 'latencyMs'>>(first: FirstRequest | undefined, end: E, answeredBytes?: number): E | Pick<AuditEnd, 'outcome' | 'errorKind' | 'responseBytes'> {
  // Either way the request was answered the input_required: its size is the row's, not the end's.
  if (first === 'handed-on') return { outcome: 'input_required', errorKind: null, responseBytes: answeredBytes };
  return first === 'asked' ? { ...end, answeredInputRequired: true, responseBytes: answeredBytes } : end;
}

/**
 * Collects the server → client requests a legacy upstream makes during one call whose client
 * is modern: each becomes an entry of an `input_required` answer, and the client's retry
 * (its `inputResponses`) answers them.
 */
export class InputCollector implements FirstRow {
  private readonly waiting = new Map<string, Waiting>();
  /** While the call is parked, the id it is parked under (InputBridge.park): see known(). */
  parkedAs: string | undefined;
  private unparked: Promise<FirstRequest> | undefined;
  private unpark: ((first: FirstRequest) => void) | undefined;
  private wake: (() => void) | undefined;
  private next = 0;
  /** How many times the upstream asked (a question, or one the client lacks the capability for): see gather. */
  asks = 0;
  /**
   * The call's upstream, whose Upstream.caughtUp (where it has one) gather waits for. The
   * upstream itself, not a closure over it made per call: the call's other closures share that
   * closure's context (docs/BENCHMARKS.md, "Young-generation GC").
   */
  upstream: Upstream | undefined;
  /** Set when the upstream asked for something the client did not declare. */
  missing: Record<string, unknown> | undefined;
  /**
   * Where the call's progress and log messages go: the request of the client now waiting for
   * it (the first, then each retry that resumes it; none while it is parked).
   */
  targets: Pick<CallOptions, 'onProgress' | 'onLog'> = {};
  /**
   * Where the call's first request stands (its row is the one the run finishes): `waiting` for
   * the call; `asked`, answered `input_required` while the call is parked (should it end so and
   * no retry take it, no request would carry its outcome: the first row carries it, and was a
   * round too);
   * `handed-on`, answered so, and a retry of the client waits for the call: the call's end is
   * that retry's row's outcome, the first row's a round.
   */
  first: FirstRequest = 'waiting';
  /** See FirstRow.answeredBytes: set as the first request is answered `input_required` (InputBridge.park). */
  answeredBytes: number | undefined;

  /** `caps`: what the request now waiting for the call declared: the first, then each retry that resumes it. */
  constructor(private caps: ClientCapabilities) {}

  /**
   * A call that ends while parked has no request waiting for its end: the retry that comes for
   * it next takes it (and its row carries it), or none comes in time and the first row keeps it.
   * Finished at once, the first row carried the end and the retry's row did too: one call
   * counted twice, in /metrics and `ledger stats`.
   */
  known(): Promise<FirstRequest> | undefined {
    if (this.parkedAs === undefined) return undefined;
    return (this.unparked ??= new Promise((resolve) => (this.unpark = resolve)));
  }

  /** The call is parked: its request (the first, or a retry's) was answered `input_required`. */
  parked(id: string): void {
    this.first = 'asked';
    this.parkedAs = id;
  }

  /** Parked no more: a retry of the client took the call (`handedOn`), or none can now (time up, the hub stops). */
  resumed(handedOn: boolean): void {
    if (handedOn) this.first = 'handed-on';
    this.parkedAs = undefined;
    const unpark = this.unpark;
    this.unparked = this.unpark = undefined;
    unpark?.(this.first);
  }

  readonly ask = (req: InputRequest, withdrawn?: Signal): Promise<Result> => {
    // Not a question a client can be asked (digest §5.1): the upstream's own mistake, refused
    // to it, and not turned into a capability the client would lack.
    if (!INPUT_METHODS.includes(req.method)) return Promise.reject(new RpcError(METHOD_NOT_FOUND, `the hub does not relay ${req.method} to clients`));
    const need = missingCapability(req, this.caps);
    // A legacy server asks for roots on its own (as it starts, when told they changed) as well
    // as for a call, and over stdio nothing says which: it hears what a legacy client without
    // roots answers, as on a direct connection, and decides; the call is not ended -32021 for
    // it (server-everything's roots ask ended whatever call was in flight as it came).
    if (need && req.method === 'roots/list') return Promise.reject(new RpcError(METHOD_NOT_FOUND, `the client did not declare ${requiredNames(need)}, which ${req.method} needs`));
    if (need) {
      this.missing = addRequired(this.missing ?? {}, need);
      this.woken();
      return Promise.reject(new RpcError(undeclaredCode(this.caps, req.method), `the client did not declare ${requiredNames(need)}, which ${req.method} needs`));
    }
    return new Promise((resolve, reject) => {
      const key = `input-${++this.next}`;
      this.waiting.set(key, { req: toModernInput(req), resolve, reject });
      // Withdrawn by the upstream: no longer asked of the client (a retry's answer to it is ignored).
      withdrawn?.addEventListener('abort', () => this.waiting.get(key) && (this.waiting.delete(key), reject(new CancelledError('the server withdrew its request'))), { once: true });
      this.woken();
    });
  };

  /**
   * Calls `wake` once, as soon as something is waiting for the client (or a capability is
   * missing); if that is so already, in a microtask, so a call that has already settled still
   * wins (see InputBridge.settle). Replaces an earlier `wake`.
   */
  onNeeded(wake: () => void): void {
    if (this.waiting.size > 0 || this.missing) {
      this.wake = undefined;
      queueMicrotask(wake);
    } else this.wake = wake;
  }

  private woken(): void {
    this.asks++;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /**
   * When the client's time is up: the earliest deadline of what waits for it. A question put to
   * the client now gets `now + ms`; one asked before keeps the deadline it got then, so a retry
   * that leaves it unanswered does not give the client more time.
   */
  deadline(now: number, ms: number): number {
    let first = Infinity;
    for (const w of this.waiting.values()) first = Math.min(first, (w.deadline ??= now + ms));
    return first;
  }

  get waitingCount(): number {
    return this.waiting.size;
  }

  requests(): Record<string, InputRequest> {
    const out: Record<string, InputRequest> = {};
    for (const [k, w] of this.waiting) out[k] = w.req;
    return out;
  }

  /**
   * A retry of the client: it answers what it answers (see `answer`) and declares what it
   * declares, and from now on the client is asked only for that (digest §5.1: this request's
   * capabilities, not the first's). A question still open that the retry does not answer and
   * no longer declares the capability for would be asked again: instead nothing of the retry
   * is taken, `missing` says what it lacks, and the call ends with -32021 (InputBridge.park),
   * as it does when a first request lacks it.
   */
  retried(responses: unknown, caps: ClientCapabilities): void {
    this.caps = caps;
    let need: Record<string, unknown> | undefined;
    for (const [k, w] of this.waiting) {
      const v = responses && typeof responses === 'object' && Object.hasOwn(responses, k) ? (responses as Result)[k] : undefined;
      if (v !== undefined && inputResultProblem(w.req.method, v) === undefined) continue;
      const m = missingCapability(w.req, caps);
      if (m) need = addRequired(need ?? {}, m);
    }
    if (need) {
      this.missing = need;
      return;
    }
    this.answer(responses);
  }

  /**
   * Answer what the client answered; unknown keys are ignored, missing ones stay open. So does
   * one whose value is not the asked method's result (an ElicitResult without a valid action,
   * an array…): it is asked again, as a missing answer is (digest §5.1 prefers that to an
   * error), rather than handed to the upstream as the result of its request.
   */
  answer(responses: unknown): void {
    if (!responses || typeof responses !== 'object') return;
    for (const [k, v] of Object.entries(responses as Record<string, unknown>)) {
      const w = this.waiting.get(k);
      if (!w || inputResultProblem(w.req.method, v) !== undefined) continue;
      this.waiting.delete(k);
      w.resolve(normalInputResult(w.req.method, v as Result));
    }
  }

  /** The call ended (refused -32021): what is still asked fails with `err`, and nothing waits. */
  drop(err: unknown): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
  }

  /** The client went away: answer the upstream as a user who did not respond would. */
  giveUp(): void {
    for (const w of this.waiting.values()) {
      const r = refusal(w.req);
      if (r.result) w.resolve(r.result);
      else w.reject(r.error);
    }
    this.waiting.clear();
  }
}

/** A quiet spell after which the upstream is taken to have asked all it asks in this turn. */
const GATHER_QUIET_MS = 1;
/** The longest the first question waits for others: an upstream asking on and on is not waited for. */
const GATHER_MAX_MS = 5;
/**
 * The longest the first question waits for an upstream's word that it is caught up (its ping's
 * answer). Only a server that never answers a ping pays it, once per round; one that does is
 * waited for as long as its turn takes. It was 50 ms: a CI run on a loaded machine (load 16 on two
 * cores) split a server's two questions asked 30 ms apart in one turn, its process and the hub
 * each waiting for a core longer than the 20 ms left.
 */
const CAUGHT_UP_MAX_MS = 200;

/**
 * Requests that an upstream makes together travel together, in one `input_required`. Those
 * its frames already read carry are in after one turn of the event loop (setImmediate); but a
 * legacy server asking three at once writes three frames, and a loaded machine can run the hub
 * between them (the hub read the first alone in one run in ten to five: the client was asked the
 * rest in a second round). Where the upstream can say it is caught up (a legacy stdio process
 * answers a ping after all it wrote before reading it: Upstream.caughtUp), that is waited for,
 * at most CAUGHT_UP_MAX_MS: questions asked in one turn of the server, however far apart its
 * frames, are then all in. Elsewhere (HTTP, whose streams keep no order with each other): until
 * no question came for GATHER_QUIET_MS, at most GATHER_MAX_MS from the first. The usual single
 * question waits a ping's round trip, or one quiet spell, more.
 */
async function gather(collector: InputCollector): Promise<void> {
  await new Promise((r) => setImmediate(r));
  const caughtUp = collector.upstream?.caughtUp?.();
  if (caughtUp) {
    const cap = new AbortController();
    await Promise.race([caughtUp, sleep(CAUGHT_UP_MAX_MS, undefined, { signal: cap.signal }).catch(() => undefined)]);
    cap.abort();
    // Its answer was read after the frames before it; what they started settles in this turn.
    await new Promise((r) => setImmediate(r));
    return;
  }
  const until = monotonicNow() + GATHER_MAX_MS;
  let seen: number;
  do {
    seen = collector.asks;
    await sleep(GATHER_QUIET_MS);
  } while (collector.asks !== seen && monotonicNow() < until);
}

interface Parked {
  run: Promise<Result>;
  collector: InputCollector;
  abort: Canceller;
  timer: NodeJS.Timeout;
}

/**
 * Modern client ↔ legacy upstream (recipe A): a call whose upstream asks the user something
 * is parked here while the client answers `input_required`; the client's retry resumes it.
 * A client that does not answer a question within `timeoutMs` of being first asked it (retries
 * that leave it unanswered do not extend that) gets its call cancelled.
 */
export class InputBridge {
  private readonly parked = new Map<string, Parked>();

  constructor(
    private readonly sealer: RequestStateSealer,
    private readonly timeoutMs: number,
  ) {}

  get size(): number {
    return this.parked.size;
  }

  /** Whether the parked call `id` waits here for its client's retry. */
  has(id: string): boolean {
    return this.parked.has(id);
  }

  /**
   * The `input_required` a parked call's request was answered, again, for a request of its
   * client bound as `bind` (one of the same call): the same questions, under a state of its own
   * for the same parked call. Undefined when the call is not parked here, or when this request
   * did not declare what its questions need (it is never asked that).
   */
  askAgain(collector: InputCollector, bind: Binding, caps: ClientCapabilities): Result | undefined {
    const id = collector.parkedAs;
    if (id === undefined || !this.parked.has(id)) return undefined;
    const requests = collector.requests();
    for (const req of Object.values(requests)) if (missingCapability(req, caps)) return undefined;
    return { resultType: 'input_required', inputRequests: requests, requestState: this.sealer.seal(bind, { k: 'park', id }) };
  }

  /**
   * The final result, or an `input_required` that parks the still-running call: whichever
   * comes first. One promise settled by either side (the first settle wins), rather than a
   * race of three derived promises per call.
   */
  settle(run: Promise<Result>, collector: InputCollector, abort: Canceller, bind: Binding): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      run.then(resolve, reject);
      collector.onNeeded(() => resolve(this.park(run, collector, abort, bind)));
    });
  }

  /** The client must answer first: park the call, or refuse it for a capability it lacks. */
  private async park(run: Promise<Result>, collector: InputCollector, abort: Canceller, bind: Binding): Promise<Result> {
    if (collector.missing) this.refuse(run, collector, abort);
    await gather(collector);
    // One of them needs what the client did not declare (an elicitation and a sampling read
    // together): the call ends refused now, the others with it. Parked, the others were put to
    // the client as an input_required, and the -32021 kept for its retry: the user answered
    // them for nothing, and a client that never came back left them waiting for its time limit.
    if (collector.missing) this.refuse(run, collector, abort);
    // The upstream withdrew what it asked meanwhile: nothing to ask, the call goes on as it was
    // (an input_required with no requests would have the client retry with nothing to answer).
    if (collector.waitingCount === 0) return this.settle(run, collector, abort, bind);
    const id = randomBytes(12).toString('base64url');
    // That request is answered: its stream takes no more progress (the retry's will).
    collector.targets = {};
    collector.parked(id);
    // One limit per question, from when the client was first asked it, however many retries
    // come meanwhile without its answer (each would otherwise park the call, and hold a legacy
    // stdio upstream alone, for another timeoutMs). Monotonic: a wall-clock step between the
    // first ask and a retry would otherwise give the client the step's length more, or none.
    const now = monotonicNow();
    const timer = setTimeout(() => this.expire(id), Math.max(0, collector.deadline(now, this.timeoutMs) - now));
    timer.unref();
    this.parked.set(id, { run, collector, abort, timer });
    run.catch(() => {});
    const answer = { resultType: 'input_required', inputRequests: collector.requests(), requestState: this.sealer.seal(bind, { k: 'park', id }) };
    // The first request's answer, measured for its row (a retry's row measures its own). Its
    // JSON is kept for the edge, which sends that text rather than serialise it again.
    if (collector.answeredBytes === undefined) collector.answeredBytes = Buffer.byteLength(resultJson(answer) ?? '');
    return answer;
  }

  /** The call ends refused -32021 for the capability the client lacks (`collector.missing`). */
  private refuse(run: Promise<Result>, collector: InputCollector, abort: Canceller): never {
    const err = new RpcError(MISSING_CLIENT_CAPABILITY, 'the upstream needs a client capability this request did not declare', {
      requiredCapabilities: collector.missing,
    });
    // The reason is the error itself: the call's ledger row says what the client was told.
    abort.abort(err);
    // Nothing left waiting for a call that ended: the server's own questions were withdrawn
    // with its request (above), but the URL steps the hub itself asks (a -32042's) are no
    // request of the server's, and waited for good, the call's run and first row with them.
    collector.drop(err);
    run.catch(() => {});
    throw err;
  }

  /**
   * The client's retry: answer the parked requests and wait for the next turn, its progress
   * going to `targets`; `caps`, what the retry declared, is what the client may be asked now.
   */
  resume(
    id: string,
    inputResponses: unknown,
    caps: ClientCapabilities,
    bind: Binding,
    signal: Signal,
    targets: Pick<CallOptions, 'onProgress' | 'onLog'> = {},
  ): Promise<Result> {
    const p = this.parked.get(id);
    if (!p) throw new StateError('the call this requestState points to is no longer waiting here (it finished or timed out, or it waits at another hub)');
    this.parked.delete(id);
    clearTimeout(p.timer);
    const onAbort = () => {
      p.collector.giveUp();
      p.abort.abort();
    };
    p.collector.targets = targets;
    p.collector.resumed(true);
    // Cancelled on its way here (its client went away while it waited before it got here, as in
    // the router's start-up grace, which lets a cancelled request on): a listener added now would
    // never run, and the call would go on with the answers its client took back.
    if (signal.aborted) {
      onAbort();
      return this.settle(p.run, p.collector, p.abort, bind);
    }
    signal.addEventListener('abort', onAbort, { once: true });
    // The retry's own capabilities, not the first request's, say what the client may be asked.
    p.collector.retried(inputResponses, caps);
    return this.settle(p.run, p.collector, p.abort, bind).finally(() => signal.removeEventListener('abort', onAbort));
  }

  /**
   * The parked call ends. `why` undefined: the client's time to answer ran out, the hub's limit
   * (InputTimeoutError: the call's row says `timeout`, as when a legacy client does not answer,
   * not `cancelled`, which is the client's own doing). The reason travels upstream in
   * notifications/cancelled and into the ledger row.
   */
  private expire(id: string, why?: string): void {
    const p = this.parked.get(id);
    if (!p) return;
    this.parked.delete(id);
    // No retry can take the call now: its first row carries its end (a call that ended while
    // parked, waiting for a retry, is finished so now).
    p.collector.resumed(false);
    p.collector.giveUp();
    p.abort.abort(why ?? new InputTimeoutError('the input request', this.timeoutMs));
  }

  /** The hub stops: every parked call is cancelled, saying so (not that its client was slow). */
  close(): void {
    for (const id of [...this.parked.keys()]) this.expire(id, 'the hub stopped while the call waited for its client to answer');
  }
}
