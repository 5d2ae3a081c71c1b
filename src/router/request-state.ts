import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { makeStateDir } from '../paths.js';
import { argsHash } from '../ledger/canonical.js';
import { openJson, sealJson } from '../sealed.js';
import { DEFAULT_REQUEST_STATE_TTL_MS } from '../config/types.js';
import { decodeStateKey } from '../config/state-key.js';

/**
 * The hub's own MRTR `requestState`: AES-256-GCM sealed, bound to the principal, the endpoint
 * (tool group), the method, the target (tool name or URI) and a digest of the arguments, with an expiry, used once (a
 * retry that surely never reached the upstream gives its use back: `release`). Anything the
 * client sends back is attacker-controlled until it opens here. Used once across restarts too
 * (SpentStateStore, the ledger); a state that carries the user's confirmation is taken as such
 * only where its use is known (its `h`), elsewhere the user is asked again.
 */
export type StateBody =
  /**
   * Modern ↔ modern: the upstream's own state, nested, and which upstream minted it. `ok`: the
   * user already confirmed this call (policy.confirm), so its later rounds do not ask again.
   * `r`, with a confirmation (here and in `confirm`): the digest of the arguments the user
   * confirmed when a plugin's beforeCall made them other than the client's (the envelope's `a`
   * binds those); a retry whose hooks make other ones is asked again (call-tool.ts).
   */
  | { k: 'fwd'; server: string; up?: string; ok?: 1; r?: string }
  /** A call parked at this hub instance, waiting for the client's input (legacy upstream). */
  | { k: 'park'; id: string }
  /**
   * The hub asked the user to confirm this call; the retry carries the answer. `again`, set by
   * open() only: the answer is not taken here (it was asked where this hub cannot tell whether
   * it was spent), so the user is asked again.
   */
  | { k: 'confirm'; again?: 1; r?: string };

interface Envelope {
  p: string; // principal
  m: string; // method
  t: string; // target: tool/prompt name or uri
  a: string; // args digest
  e: number; // expiry, epoch ms
  n: string; // nonce, for single use
  b: StateBody;
  /**
   * The tool group whose endpoint the request came through; absent: `/mcp` (or a plain stdio).
   * A group is an authorization boundary (an API key limited to groups): one principal's state
   * from one group's endpoint is not taken on another's, as its idempotency keys are not.
   */
  g?: string;
  /** The trace id and span id of the request answered with this state (see traceOf). */
  tr?: [string, string];
  /**
   * Where a state that carries the user's confirmation (confirms()) was sealed: the home of the
   * store its use is recorded in (the ledger's id), or of the process when there is none. Another
   * hub, or the same one restarted without its ledger, cannot tell whether it was spent: taken
   * there, a confirmation used once would run its call again unasked.
   */
  h?: string;
}

/**
 * Where the hub's spent states outlive the process (the ledger), so a restarted hub refuses a
 * state spent before the restart as it refuses one spent since: the client's retry that
 * confirmed a call, sent again, would run the call again without the user asked.
 */
export interface SpentStateStore {
  /** The store's own id (the ledger file's): a confirmation sealed under it is taken by hubs of this store alone. */
  readonly home: string;
  /** The nonces spent and not yet expired when the store was opened, with their expiry (epoch ms); read once. */
  spent(): Iterable<[string, number]>;
  add(nonce: string, expires: number): void;
  delete(nonce: string): void;
  /** Forgets the nonces expired by `now`. */
  prune(now: number): void;
}

export interface Binding {
  principal: string;
  /** The tool group of the request's endpoint (CallContext.group); undefined: `/mcp`. */
  group?: string;
  method: string;
  target: string;
  /** The arguments' digest (argsHash), or the arguments to work it out from when a state is sealed or opened. */
  argsDigest?: string;
  args?: unknown;
  /** The request's span: the retry's row joins its trace (traceOf), so a call's rounds are one trace. */
  span?: { traceId: string; spanId: string };
}

/**
 * The binding's argument digest, worked out once and only when a state is sealed or opened:
 * most calls never need it (no ledger row, no idempotency key, no MRTR round).
 */
export function argsDigestOf(bind: Binding): string {
  return (bind.argsDigest ??= argsHash(bind.args ?? {}));
}

export class StateError extends Error {
  override readonly name = 'StateError';
}

const VERSION = 'sy1.';

export class RequestStateSealer {
  /** Nonces already opened, until their expiry (single use; across restarts with a `spent` store). */
  private readonly used = new Map<string, number>();
  /** Envelope.h of the confirmations sealed here: the store's home, else this process's own. */
  private readonly home: string;

  constructor(
    private readonly key: Buffer,
    private readonly ttlMs = DEFAULT_REQUEST_STATE_TTL_MS,
    private readonly now: () => number = Date.now,
    /** Where spent states are recorded (the ledger); absent (ledger off): this process only. */
    private readonly spent?: SpentStateStore,
  ) {
    if (key.length !== 32) throw new Error('requestState key must be 32 bytes');
    if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) throw new Error('policy.requestStateTtlMs must be a positive number of milliseconds');
    this.home = spent?.home ?? randomBytes(12).toString('base64url');
    if (spent) for (const [n, e] of spent.spent()) this.used.set(n, e);
  }

  seal(bind: Binding, body: StateBody): string {
    const env: Envelope = { p: bind.principal, m: bind.method, t: bind.target, a: argsDigestOf(bind), e: this.now() + this.ttlMs, n: randomBytes(9).toString('base64url'), b: body };
    if (bind.span) env.tr = [bind.span.traceId, bind.span.spanId];
    if (bind.group !== undefined) env.g = bind.group;
    if (confirms(body)) env.h = this.home;
    return VERSION + sealJson(this.key, env);
  }

  /**
   * The trace id and span id of the request a state of `principal`'s answered, or undefined (not
   * one of ours, another principal's, sealed without them). Consumes nothing and checks nothing
   * else: open() still decides whether the retry is taken.
   */
  traceOf(state: unknown, principal: string): { traceId: string; spanId: string } | undefined {
    if (typeof state !== 'string' || !state.startsWith(VERSION)) return undefined;
    try {
      const env = openJson(this.key, state.slice(VERSION.length)) as Envelope;
      const tr = env.p === principal ? env.tr : undefined;
      return Array.isArray(tr) && typeof tr[0] === 'string' && typeof tr[1] === 'string' ? { traceId: tr[0], spanId: tr[1] } : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The server whose round a state of `principal`'s forwarded (a modern upstream's) for this
   * method and target, or undefined (not one of ours, another principal's, another request's,
   * expired or used already, a parked call's or a confirmation's). Consumes nothing, as
   * traceOf: open() still decides. The retry of a state open() will refuse waits for no server
   * (up to RETRY_WAIT_MS while it restarts) only to be refused then.
   */
  serverOf(state: unknown, principal: string, method: string, target: unknown): string | undefined {
    if (typeof state !== 'string' || !state.startsWith(VERSION)) return undefined;
    try {
      const env = openJson(this.key, state.slice(VERSION.length)) as Envelope;
      if (env.p !== principal || env.m !== method || env.t !== target || !(env.e > this.now()) || this.used.has(env.n)) return undefined;
      return env.b?.k === 'fwd' && typeof env.b.server === 'string' ? env.b.server : undefined;
    } catch {
      return undefined;
    }
  }

  /** Opens and consumes a state; throws StateError with a message fit for the client. */
  open(state: unknown, bind: Binding): StateBody {
    return this.opened(state, bind, true);
  }

  /** What open() would take now, without using it up; undefined for what it would refuse. */
  peek(state: unknown, bind: Binding): StateBody | undefined {
    try {
      return this.opened(state, bind, false);
    } catch (err) {
      if (err instanceof StateError) return undefined;
      throw err;
    }
  }

  private opened(state: unknown, bind: Binding, use: boolean): StateBody {
    if (typeof state !== 'string' || !state.startsWith(VERSION)) throw new StateError('requestState was not issued by this hub');
    let env: Envelope;
    try {
      env = openJson(this.key, state.slice(VERSION.length)) as Envelope;
    } catch {
      throw new StateError('requestState is invalid or was tampered with');
    }
    const now = this.now();
    if (env.e <= now) throw new StateError('requestState has expired; send the original request again');
    if (env.p !== bind.principal) throw new StateError('requestState belongs to another principal');
    if (env.g !== bind.group) throw new StateError('requestState was issued on another endpoint (tool group)');
    if (env.m !== bind.method || env.t !== bind.target) throw new StateError('requestState was issued for another request');
    if (env.a !== argsDigestOf(bind)) throw new StateError('requestState was issued for other arguments');
    this.sweep(now);
    if (this.used.has(env.n)) throw new StateError('requestState was already used');
    if (use) {
      this.used.set(env.n, env.e);
      // A parked call's state is worth nothing to another process: it holds no such call.
      if (env.b.k !== 'park') this.spent?.add(env.n, env.e);
    }
    return env.h === this.home || !confirms(env.b) ? env.b : unconfirmed(env.b);
  }

  /**
   * Makes an opened state usable again: only for a request the hub knows never reached the
   * upstream (refused connection, circuit open, not ready…), so that the client's retry of it,
   * safe to send again, is not refused as already used. A state that may have been delivered
   * stays used.
   */
  release(state: unknown): void {
    if (typeof state !== 'string' || !state.startsWith(VERSION)) return;
    let env: Envelope;
    try {
      env = openJson(this.key, state.slice(VERSION.length)) as Envelope;
    } catch {
      return; // Not one of ours: nothing was consumed.
    }
    if (this.used.delete(env.n) && env.b?.k !== 'park') this.spent?.delete(env.n);
  }

  private sweep(now: number): void {
    if (this.used.size < 1024) return;
    const size = this.used.size;
    for (const [n, e] of this.used) if (e <= now) this.used.delete(n);
    if (this.used.size < size) this.spent?.prune(now);
  }
}

/** Whether a state carries the user's confirmation (policy.confirm) of its call. */
function confirms(b: StateBody): boolean {
  return b.k === 'confirm' || (b.k === 'fwd' && b.ok === 1);
}

/** A confirming state as a hub takes it that cannot tell whether it was spent: the user is asked again. */
function unconfirmed(b: StateBody): StateBody {
  if (b.k === 'confirm') return { k: 'confirm', again: 1 };
  if (b.k !== 'fwd') return b;
  const { ok: _dropped, r: _rewritten, ...rest } = b;
  return rest;
}

/**
 * The sealing key: from config or SWITCHYARD_STATE_KEY (64 hex chars or base64 of 32 bytes);
 * otherwise generated on first start and kept beside the ledger with mode 0600, so restarts
 * and other hubs sharing the file accept each other's states.
 */
export function loadStateKey(configured: string | undefined, keyFile: string): Buffer {
  const given = configured ?? process.env.SWITCHYARD_STATE_KEY;
  if (given) {
    const k = decodeStateKey(given);
    // Named by where it came from: one from the environment is no fault of the config file.
    if (!k) throw new Error(`${configured !== undefined ? 'policy.requestStateKey' : 'the environment variable SWITCHYARD_STATE_KEY'} must be 32 bytes (64 hex characters or base64)`);
    return k;
  }
  if (existsSync(keyFile)) {
    const k = Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'hex');
    if (k.length === 32) return k;
  }
  const k = randomBytes(32);
  makeStateDir(dirname(keyFile));
  writeFileSync(keyFile, k.toString('hex') + '\n', { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  return k;
}
