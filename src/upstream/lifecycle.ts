/**
 * The life of one upstream connection, whatever it carries: its state and what the handshake
 * learned, start, retry with backoff after a failure or a lost connection, the crash-loop limit,
 * and close. Subclasses supply connect/disconnect and fail their calls in flight.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import type { Era } from '../protocol/era.js';
import { TransportError, UpstreamUnavailableError } from '../protocol/errors.js';
import type { Implementation, ServerCapabilities } from '../protocol/types.js';
import { redactErrorText } from '../policy/secret-text.js';
import { monotonicNow } from '../monotonic.js';
import { RestartPolicy, type BackoffOptions } from './backoff.js';
import { HUB_CLIENT_INFO } from './envelope.js';
import type { UpstreamLimits, UpstreamSpec, UpstreamState } from './types.js';

/** The longest wait a server's Retry-After gets before the next attempt to connect. */
const RETRY_AFTER_CAP_MS = 60_000;

/** How long a failure asks the next connection to wait (its Retry-After), up to RETRY_AFTER_CAP_MS; 0 when it asks nothing. */
export function askedWaitMs(err: unknown): number {
  return err instanceof TransportError ? Math.min(err.retryAfterMs ?? 0, RETRY_AFTER_CAP_MS) : 0;
}

/**
 * How soon a start that failed for the hub's own want (HubShortError) is tried again: no backoff
 * grows and no crash loop counts it, so the server is back about this soon after the hub has
 * descriptors again.
 */
export const HUB_SHORT_RETRY_MS = 1_000;

/**
 * A start that failed for want of the hub's own resources (no file descriptors left for a
 * child's pipes, no process or memory to fork: any command would have failed), no fault of the
 * server's: it does not count
 * toward the crash-loop limit, which would have the server `failed`, and retried only once a
 * minute, for the hub's own trouble.
 */
export class HubShortError extends TransportError {
  constructor(message: string) {
    super(message, undefined, true);
  }
}

export interface UpstreamOptions {
  /** The hub's identity toward upstreams (default: switchyard and its package version). */
  clientInfo?: Implementation;
  backoff?: Partial<BackoffOptions>;
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export abstract class Lifecycle extends EventEmitter {
  readonly id: string;
  /** Replaced, never changed in place, when a reload changes its time limits (retime). */
  protected spec: UpstreamSpec;
  protected readonly log: Logger;
  protected readonly clientInfo: Implementation;

  protected _state: UpstreamState = 'starting';
  protected _era: Era | undefined;
  protected _protocolVersion: string | undefined;
  protected _capabilities: ServerCapabilities | undefined;
  protected _serverInfo: Implementation | undefined;
  protected _instructions: string | undefined;
  protected _lastError: string | undefined;
  /**
   * Why a ready connection was lost (or its circuit opened), until the next one is: the reason
   * an operator looks for. The failures of the attempts to reconnect (often a timeout of the
   * handshake) are said after it in lastError, not instead of it.
   */
  private downReason: string | undefined;
  private _since = Date.now();
  private _restarts = 0;
  /** Of those, the attempts after it was taken down as hung (switchyard_upstream_restarts_total{reason="hung"}). */
  private _hungRestarts = 0;
  /** The ready connection last lost was taken down as hung (lost or trip with `hung`), and it is not back yet. */
  private downHung = false;

  protected closed = false;
  private closing: Promise<void> | undefined;
  private readonly policy: RestartPolicy;
  private retryTimer: NodeJS.Timeout | undefined;
  private first: Promise<void> | undefined;
  private everReady = false;
  /** A connect attempt is running (for an open circuit: the half-open probe). */
  protected attempting = false;

  constructor(spec: UpstreamSpec, log: Logger, opts: UpstreamOptions = {}) {
    super();
    this.id = spec.id;
    this.spec = spec;
    this.log = log.child({ server: spec.id });
    this.clientInfo = opts.clientInfo ?? HUB_CLIENT_INFO;
    this.policy = new RestartPolicy(opts.backoff);
  }

  get state(): UpstreamState {
    return this._state;
  }
  get era(): Era | undefined {
    return this._era;
  }
  get protocolVersion(): string | undefined {
    return this._protocolVersion;
  }
  get capabilities(): ServerCapabilities | undefined {
    return this._capabilities;
  }
  get serverInfo(): Implementation | undefined {
    return this._serverInfo;
  }
  get instructions(): string | undefined {
    return this._instructions;
  }
  get lastError(): string | undefined {
    return this._lastError;
  }
  get since(): number {
    return this._since;
  }
  get restarts(): number {
    return this._restarts;
  }
  /** Of `restarts`, those after it was taken down as hung, each attempt until it is back (its failed ones too). */
  get hungRestarts(): number {
    return this._hungRestarts;
  }

  /** Connect and handshake; sets era, version, capabilities. Throws when it cannot. */
  protected abstract connect(): Promise<void>;
  /** Tear the connection down (no restart follows). */
  protected abstract disconnect(): Promise<void>;
  /** Fail every call in flight (the connection is gone or closing). */
  protected abstract failInFlight(message: string): void;
  /** A connect attempt succeeded; called just before the state becomes `ready`. */
  protected connected(): void {}

  protected setState(s: UpstreamState, detail?: string): void {
    if (s === this._state && detail === undefined) return;
    // `since` is when it entered the state (/healthz, servers' SINCE): each failed attempt of a
    // server restarting for an hour is said again (detail), not a new state.
    if (s !== this._state) this._since = Date.now();
    this._state = s;
    this.log.info({ state: s, detail }, 'upstream state');
    this.emit('state', s, detail);
  }

  retime(limits: UpstreamLimits): void {
    this.spec = { ...this.spec, timeoutMs: limits.timeoutMs, maxTotalTimeoutMs: limits.maxTotalTimeoutMs };
    if (limits.healthCheckMs !== undefined) this.spec.healthCheckMs = limits.healthCheckMs;
  }

  start(): Promise<void> {
    if (this.closed) return Promise.reject(new UpstreamUnavailableError(this.id, 'stopped'));
    if (this._state === 'ready') return Promise.resolve();
    if (this.first === undefined) {
      this.first = this.attempt();
      return this.first;
    }
    if (this._state === 'failed') return Promise.reject(new UpstreamUnavailableError(this.id, 'failed', this._lastError));
    // A retry is scheduled or running: report its outcome.
    return new Promise((resolve, reject) => {
      const on = (s: UpstreamState): void => {
        if (s === 'ready') resolve();
        else if (s === 'stopped') reject(new UpstreamUnavailableError(this.id, s));
        else if (this.retryTimer !== undefined) reject(new UpstreamUnavailableError(this.id, s, this._lastError));
        else return;
        this.off('state', on);
      };
      this.on('state', on);
    });
  }

  private async attempt(): Promise<void> {
    this.retryTimer = undefined;
    this.attempting = true;
    try {
      await this.connect();
    } catch (err) {
      this.attempting = false;
      // Whatever the upstream said on the way goes to /healthz, the logs and failMode's answers.
      const msg = redactErrorText(errMessage(err));
      this._lastError = this.downReason === undefined ? msg : `${this.downReason}; the last attempt to reconnect failed: ${msg}`;
      // Closed meanwhile (the hub stopping, a reload retiring it): that is why, and no failure.
      if (this.closed) this.log.debug({ err: msg }, 'upstream start ended by its close');
      else this.log.warn({ err: msg }, 'upstream could not start');
      void this.disconnect().catch(() => undefined);
      // A server that asked to be left alone for a while (Retry-After) is, up to a minute (the
      // retry interval of a failed one): sooner is refused again, and a crash loop to it.
      if (!this.closed) this.scheduleRetry(msg, askedWaitMs(err), err instanceof HubShortError);
      throw err;
    }
    this.attempting = false;
    if (this.closed) {
      void this.disconnect().catch(() => undefined);
      throw new UpstreamUnavailableError(this.id, 'stopped');
    }
    this.everReady = true;
    // Back: what stays to be read is why it went down, not how its attempts to reconnect failed.
    if (this.downReason !== undefined) this._lastError = this.downReason;
    this.downReason = undefined;
    this.downHung = false;
    this.policy.onReady();
    this.connected();
    this.setState('ready');
  }

  /** `hung`: taken down for being hung, not crashed (RestartPolicy.onHung). */
  private scheduleRetry(reason: string, minDelayMs = 0, hubShort = false, hung = false): void {
    // Monotonic: a wall clock stepped back would keep old crashes inside the crash-loop window.
    const p = hubShort ? this.policy.onHubShort(HUB_SHORT_RETRY_MS) : hung ? this.policy.onHung() : this.policy.onFailure(monotonicNow());
    const failed = p.failed;
    const delayMs = Math.max(p.delayMs, minDelayMs);
    this.retryTimer = setTimeout(() => {
      this._restarts++;
      if (this.downHung) this._hungRestarts++;
      this.attempt().catch(() => undefined);
    }, delayMs);
    this.retryTimer.unref();
    this.setState(failed ? 'failed' : this.everReady ? 'restarting' : 'starting', reason);
  }

  /** The server answered its calls again after it was taken down as hung: its hung backoff starts over. */
  protected servedWell(): void {
    this.policy.onServedWell();
  }

  /**
   * The subclass lost a ready connection: fail what was in flight and restart. `hung`: it ended
   * a process that was alive but answered nothing (RestartPolicy.onHung), no crash.
   */
  protected lost(reason: string, hung = false): void {
    if (this.closed || this._state !== 'ready') return;
    reason = redactErrorText(reason);
    this._lastError = this.downReason = reason;
    this.downHung = hung;
    this.log.warn({ reason }, 'upstream connection lost');
    this.failInFlight(`server "${this.id}" connection lost: ${reason}`);
    this.scheduleRetry(reason, 0, false, hung);
  }

  /**
   * Stop taking calls without dropping the ones in flight (their own streams may still
   * answer), and reconnect after at least `minDelayMs`: an open circuit breaker. `hung`: for
   * calls it left unanswered (RestartPolicy.onHung).
   */
  protected trip(reason: string, minDelayMs: number, hung = false): void {
    if (this.closed || this._state !== 'ready') return;
    reason = redactErrorText(reason);
    this._lastError = this.downReason = reason;
    this.downHung = hung;
    this.log.warn({ reason }, 'circuit opened');
    this.scheduleRetry(reason, minDelayMs, false, hung);
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.setState('stopped');
    this.failInFlight(`server "${this.id}" was closed`);
    this.closing = this.disconnect().catch((err) => this.log.warn({ err: errMessage(err) }, 'error while closing'));
    return this.closing;
  }
}
