import { LEGACY, MODERN, type Era } from '../protocol/era.js';
import { RpcError, TransportError, UNSUPPORTED_PROTOCOL_VERSION } from '../protocol/errors.js';
import { META_SERVER_INFO } from '../protocol/meta.js';
import type { Implementation, ServerCapabilities } from '../protocol/types.js';
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import { discoverProblem, type ProbeVerdict } from './era-probe.js';
import { modernMeta } from './envelope.js';
import { cacheTtl } from '../protocol/ttl.js';
import { UpstreamBase, type UpstreamOptions } from './rpc-base.js';
import type { UpstreamLimits, UpstreamSpec } from './types.js';
import { HealthTimer } from './health-timer.js';
import { isObj } from '../protocol/jsonrpc.js';

/** The parts of a DiscoverResult or InitializeResult the hub keeps. */
export function serverFacts(r: Record<string, unknown>, serverInfo: unknown): {
  capabilities: ServerCapabilities;
  serverInfo: Implementation | undefined;
  instructions: string | undefined;
} {
  return {
    capabilities: isObj(r.capabilities) ? (r.capabilities as ServerCapabilities) : {},
    serverInfo: isObj(serverInfo) && typeof serverInfo.name === 'string' ? (serverInfo as Implementation) : undefined,
    instructions: typeof r.instructions === 'string' ? r.instructions : undefined,
  };
}

export function discoverFacts(d: Record<string, unknown>): ReturnType<typeof serverFacts> {
  return serverFacts(d, isObj(d._meta) ? d._meta[META_SERVER_INFO] : undefined);
}

/**
 * The least time between two `server/discover` of a ready modern server: a DiscoverResult is a
 * cacheable result (digest §3.3), asked again once its ttlMs is over, but a server that says 0
 * (stale at once) is not asked at every list. Its capabilities change only with a redeploy.
 */
export const REDISCOVER_MIN_MS = 30_000;

/**
 * Era detection and the handshake, the same for every transport (digest §2.3): a kept legacy
 * verdict goes straight to `initialize`; otherwise the transport's probe decides, a modern
 * verdict is never followed by a fallback, and a legacy one runs `initialize`.
 */
export abstract class HandshakingUpstream extends UpstreamBase {
  /** The era verdict, kept across reconnects and respawns; a configured era is fixed. */
  protected verdict: Era | undefined;

  /** The next health check (checkHealth, `servers.<id>.healthCheckMs`), while ready. */
  private readonly health = new HealthTimer(() => this.checkHealth());

  constructor(spec: UpstreamSpec, log: Logger, opts?: UpstreamOptions) {
    super(spec, log, opts);
    if (spec.era !== 'auto') this.verdict = spec.era;
    this.on('state', (s: string) => {
      if (s === 'ready') this.armHealthCheck();
    });
  }

  /** Whether the server still answers, as the transport can tell; runs when the health timer fires. */
  protected abstract checkHealth(): void;

  /** The next check in `inMs` (the configured interval by default). */
  protected armHealthCheck(ms = this.spec.healthCheckMs ?? 0, inMs = ms): void {
    if (!this.closed) this.health.arm(ms, inMs);
  }

  /** A reload's new interval counts from now: the check armed under the old one is dropped. */
  override retime(limits: UpstreamLimits): void {
    const was = this.spec.healthCheckMs;
    super.retime(limits);
    if (this.spec.healthCheckMs === was) return;
    this.health.drop();
    if (this._state === 'ready') this.armHealthCheck();
  }

  override close(): Promise<void> {
    this.health.drop();
    return super.close();
  }

  protected abstract probe(): Promise<ProbeVerdict>;
  protected abstract initialize(): Promise<void>;
  /** Before `initialize` after a legacy verdict (stdio respawns a process that exited on the probe). */
  protected beforeLegacyInit(_v: Extract<ProbeVerdict, { kind: 'legacy' }>): Promise<void> {
    return Promise.resolve();
  }

  /**
   * `initialize` after a legacy verdict; true instead when the probe's own answer, come late,
   * proved the server modern first (stdio: a process slower to start than probeTimeoutMs).
   */
  protected initializeUnlessModern(): Promise<boolean> {
    return this.initialize().then(() => false);
  }

  /** A fresh connection for a server found modern after it was sent `initialize` (stdio: respawn). */
  protected startOver(): Promise<void> {
    return Promise.resolve();
  }

  protected async handshake(): Promise<void> {
    if (this.verdict === LEGACY) {
      try {
        await this.initialize();
        return;
      } catch (err) {
        // A kept verdict that fails with a protocol answer, or as a modern-only server refuses
        // `initialize` over HTTP (400/404/405 without a JSON-RPC answer, digest §2.3), is
        // re-checked: the server may have been redeployed in the other era. A configured one is not.
        if (this.spec.era !== 'auto' || !refusesLegacy(err)) throw err;
        this.log.info({ err: (err as Error).message }, 'legacy handshake failed; probing the era again');
        this.verdict = undefined;
      }
    }
    let v = await this.probe();
    if (v.kind === 'modern-retry') v = await this.probe();
    switch (v.kind) {
      case 'modern':
        this.useDiscover(v.discover);
        this.verdict = MODERN;
        return;
      case 'unsupported':
        throw new Error(`server speaks only protocol versions ${v.supported.join(', ')}; the hub speaks ${MODERN}`);
      case 'modern-retry':
        throw new Error(`server/discover failed: ${v.reason}`);
      case 'no-evidence': {
        const err = new TransportError(`server/discover failed: ${v.reason}`);
        // How long a busy server asked to be left alone: the next attempt waits for it (Lifecycle).
        err.retryAfterMs = v.retryAfterMs;
        throw err;
      }
      case 'legacy':
        if (this.spec.era === MODERN) throw new Error(`configured as ${MODERN}, but ${v.reason}`);
        await this.beforeLegacyInit(v);
        if (await this.initializeUnlessModern().catch((err: unknown) => refusedAsModernOnly(err, v.reason))) {
          // It had `initialize` too, and a server of both eras may hold to it: a new connection,
          // whose probe then waits for its answer (a modern verdict never falls back).
          this.log.info('server/discover answered after the probe timeout: the server is modern; connecting again');
          this.verdict = MODERN;
          await this.startOver();
          return this.handshake();
        }
        this.verdict = LEGACY;
    }
  }

  protected useDiscover(d: Record<string, unknown>): void {
    const f = discoverFacts(d);
    this._era = MODERN;
    this._protocolVersion = MODERN;
    this._capabilities = f.capabilities;
    this._serverInfo = f.serverInfo;
    this._instructions = f.instructions;
    this.discoverStaleAt = monotonicNow() + Math.max(this.spec.rediscoverMinMs ?? REDISCOVER_MIN_MS, cacheTtl(d.ttlMs));
  }

  /** The params of the hub's `server/discover`: the probe's and the later ones alike. */
  protected discoverParams(): Record<string, unknown> {
    return { _meta: modernMeta({ clientInfo: this.clientInfo }) };
  }

  /** When the DiscoverResult in use goes stale (monotonicNow() ms); see refreshDiscover. */
  private discoverStaleAt = Infinity;
  private rediscovering = false;

  /**
   * A modern server is never reconnected to while it answers (an HTTP one has no connection to
   * lose), so without this a redeploy that adds a family (prompts), drops one, or changes its
   * instructions would stay unseen until the hub restarts. Called when the hub uses the
   * server's capabilities (a list); the answer comes in the background, for later requests.
   */
  refreshDiscover(): void {
    if (this._era !== MODERN || this._state !== 'ready' || this.rediscovering || monotonicNow() < this.discoverStaleAt) return;
    this.rediscovering = true;
    // A failure is asked again no sooner than a success would be.
    this.discoverStaleAt = monotonicNow() + (this.spec.rediscoverMinMs ?? REDISCOVER_MIN_MS);
    const before = this.described();
    this.call('server/discover', this.discoverParams(), { timeoutMs: this.spec.timeoutMs }, true)
      .then(
        (d) => {
          if (this._state !== 'ready' || this._era !== MODERN) return;
          const problem = discoverProblem(d);
          if (problem !== undefined || !(d.supportedVersions as string[]).includes(MODERN)) {
            this.log.warn({ problem: problem ?? `${MODERN} is no longer listed` }, 'server/discover asked again: the answer is not taken');
            return;
          }
          this.useDiscover(d);
          if (this.described() === before) return;
          this.log.info('server/discover asked again: capabilities, instructions or serverInfo changed');
          this.setState('ready', 'server/discover changed');
        },
        (err: unknown) => this.log.warn({ err: (err as Error)?.message ?? String(err) }, 'server/discover asked again: failed'),
      )
      .finally(() => (this.rediscovering = false));
  }

  /** What a DiscoverResult gave, to tell a change. */
  private described(): string {
    return JSON.stringify([this._capabilities ?? null, this._instructions ?? null, this._serverInfo ?? null]);
  }
}

/**
 * `initialize` after a legacy verdict, refused with -32022 naming 2026-07-28: how a modern-only
 * server answers it (digest §2.4), so the probe's answer was a modern server's, and broken. The
 * operator is told that, and what the probe got, not only the server's word ("unsupported").
 * Any other failure is rethrown as it is.
 */
function refusedAsModernOnly(err: unknown, probeSaid: string): never {
  if (err instanceof RpcError && err.code === UNSUPPORTED_PROTOCOL_VERSION && isObj(err.data) && Array.isArray(err.data.supported) && err.data.supported.includes(MODERN))
    throw new Error(`${probeSaid}, and initialize was refused with -32022 naming ${MODERN}: a modern-only server whose server/discover answer must be fixed`);
  throw err;
}

/** An `initialize` failure that says the server may no longer speak 2025-11-25. */
function refusesLegacy(err: unknown): boolean {
  if (err instanceof RpcError) return true;
  return err instanceof TransportError && (err.status === 400 || err.status === 404 || err.status === 405);
}
