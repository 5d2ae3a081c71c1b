/**
 * An upstream MCP server run as a child process. The era is probed with `server/discover` as
 * the very first line (digest §2.3): anything but a DiscoverResult or a -32022 naming versions
 * means legacy, and a process that dies of the probe is respawned before `initialize`. A
 * DiscoverResult that comes after the probe timeout but before initialize's answer (a process
 * slow to start) still means modern. The verdict is kept for respawns; if the kept verdict
 * stops working the server is probed again.
 */
import { CallGate, type GateWait } from './call-gate.js';
import { LEGACY, LEGACY_VERSIONS, MODERN } from '../protocol/era.js';
import { Canceller, reasonOf } from '../cancel.js';
import { CancelledError, RpcError, TimeoutError, TransportError, UpstreamUnavailableError } from '../protocol/errors.js';
import type { Logger } from '../log.js';
import { SpawnError, StdioChild, type ExitInfo } from '../transport/stdio-child.js';
import { HubShortError } from './lifecycle.js';
import { LEGACY_CLIENT_CAPABILITIES } from './envelope.js';
import { stdioVerdict, type ProbeVerdict, type StdioProbeOutcome } from './era-probe.js';
import { HandshakingUpstream, serverFacts } from './handshake.js';
import { errMessage, type UpstreamOptions } from './rpc-base.js';
import { HOLDS_EXCLUSIVE, HOLDS_SHARED, isList, type Pending } from './pending-call.js';
import type { CallOptions, UpstreamSpec } from './types.js';
import { monotonicNow } from '../monotonic.js';

const isModern = (v: ProbeVerdict | undefined): boolean => v?.kind === 'modern' || v?.kind === 'modern-retry';

/** Unread bytes on a child's stdin past which calls are refused, not queued (each is said not sent). */
export const MAX_STDIN_BACKLOG = 16 * 1024 * 1024;

/** A probe still open past probeTimeoutMs: its verdict once answered, and a way to drop it. */
interface LateProbe {
  verdict: ProbeVerdict | undefined;
  /** Resolves when the answer proves the server modern; never otherwise. */
  modern: Promise<void>;
  drop(): void;
}

export class StdioUpstream extends HandshakingUpstream {
  private child: StdioChild | undefined;
  private _lastStderr: string | undefined;

  private readonly gate = new CallGate();

  /** When the process last said anything, or became ready (monotonicNow()): silent since. */
  private heardAt = 0;

  constructor(spec: UpstreamSpec, log: Logger, opts?: UpstreamOptions) {
    super(spec, log, opts);
    if (!spec.command) throw new Error(`server "${spec.id}": a stdio upstream needs a command`);
    this.on('state', (s: string) => {
      if (s === 'ready') this.heardAt = monotonicNow();
    });
  }

  /**
   * A ping: one pipe each way, in order, so its answer comes after whatever the process wrote
   * before it read the ping. A single-threaded server (the SDKs') reads it only once the turn
   * that wrote its questions is over, so every question asked in that turn is in first. Its
   * error (a timeout, the process gone) settles it too; the caller bounds the wait.
   */
  caughtUp(): Promise<unknown> | undefined {
    if (this._era !== LEGACY || this._state !== 'ready') return undefined;
    return this.call('ping', {}, undefined, true).catch(() => undefined);
  }

  /**
   * A process that is alive but answers nothing (hung, or no longer reading its stdin) would
   * be shown ready for good, each call to it waiting out its whole timeout, and nothing would
   * ever restart it. Silent for `healthCheckMs` (nothing at all heard from it, calls in flight
   * or not: a hung server under steady traffic is never idle), it is asked something cheap
   * (legacy: ping; modern: server/discover). If it then stays silent for its own call timeout
   * (timeoutMs: a call in flight that long without a word has timed out anyway, so a process
   * busy for a while is not taken for a hung one), it is ended and restarted, as a hung server
   * (RestartPolicy.onHung: its own growing delay, no count toward the crash-loop limit). Anything
   * it says, an error included, is a process there.
   */
  protected checkHealth(): void {
    const ms = this.spec.healthCheckMs ?? 0;
    if (this.closed || this._state !== 'ready' || ms <= 0) return;
    // Waiting for a client's answer to its own request (an elicitation a user may take minutes
    // over), its silence is expected: the call's timeout is paused too.
    if (this.awaitsClient()) return this.armHealthCheck(ms);
    const silent = monotonicNow() - this.heardAt;
    if (silent < ms) return this.armHealthCheck(ms, ms - silent);
    const [child, heardAt, waitMs] = [this.child, this.heardAt, this.spec.timeoutMs];
    const [method, params] = this._era === MODERN ? ['server/discover', this.discoverParams()] : ['ping', {}];
    const again = (): void => this.armHealthCheck();
    // A ping answered in time while the hub was held up past the wait is read before its timeout
    // is judged (UpstreamBase.timerFired): not taken for a hung process.
    this.call(method, params, { timeoutMs: waitMs }, true).then(again, (err: unknown) => {
      // It said something meanwhile, or the process was already replaced: not this check's to end.
      // Nor once a reload turned checks off (healthCheckMs 0): the operator asked for none.
      const off = (this.spec.healthCheckMs ?? 0) <= 0;
      if (!(err instanceof TimeoutError) || off || this.closed || this._state !== 'ready' || this.child !== child || this.heardAt !== heardAt || this.awaitsClient() || !child) return again();
      this.wentHung(false);
      this.endHung(child, `process stopped answering (silent for ${Math.round((monotonicNow() - heardAt) / 1000)} s, a ${method} unanswered for ${waitMs} ms), and was ended`);
    });
  }

  /** Calls left unanswered (rpc-base noteUnanswered): the process is ended and started again, as a hung one (not a crash). */
  protected callsUnanswered(reason: string): void {
    const child = this.child;
    if (this.closed || this._state !== 'ready' || !child) return;
    this.endHung(child, `${reason}; the process was ended`);
  }

  /**
   * Ends a process found hung and restarts it (as hung: Lifecycle.lost). The stderr line kept
   * from an earlier process that exited goes: shown beside this lastError (/admin/servers), it
   * read as why this one was ended, which the hub did, for `reason`.
   */
  private endHung(child: StdioChild, reason: string): void {
    this.child = undefined;
    this._lastStderr = undefined;
    child.kill();
    this.lost(reason, true);
  }

  /**
   * Legacy stdio cannot say which call a server → client request belongs to: see CallGate. A
   * call that gets in at once leaves the gate when it settles (release()), without a wrapper.
   */
  protected override dispatch(method: string, params: Record<string, unknown>, opts: CallOptions | undefined, holds: number, deadline?: number): Promise<Record<string, unknown>> {
    // A task's requests name their task (rpc-base attributes them so): waiting for its result
    // holds no place in the gate, so tasks run side by side and other calls are not held for them.
    // Nor does the hub's own fetch of a list, which no request of the server's is put down to
    // (ask-target.ts): held behind a call parked for its modern client's retry, it held that
    // retry too, which after a list_changed waits for the tools list (catalog readyTool), until
    // the fetch gave up at timeoutMs (server-everything says list_changed as it starts).
    if (this.verdict !== LEGACY || method === 'tasks/result' || isList(method)) return super.dispatch(method, params, opts, holds, deadline);
    const exclusive = opts?.exclusive === true;
    if (this.gate.tryEnter(exclusive)) return super.dispatch(method, params, opts, holds | (exclusive ? HOLDS_EXCLUSIVE : HOLDS_SHARED), deadline);
    // Waiting for its turn is part of the call: its cancellation and its limits hold here too.
    const { until, ms } = this.waitBudget(opts, deadline);
    const signal = opts?.signal;
    const wait: GateWait = {
      signal,
      ms,
      onAbort: () => new CancelledError(signal ? reasonOf(signal) : undefined),
      onTimeout: (ms) => {
        const err = new TimeoutError(this.id, ms);
        err.message = `server "${this.id}" could not take the call within ${ms} ms: a call that may ask the client runs alone, and others were running`;
        return err;
      },
    };
    let ran = false;
    return this.gate
      .run(
        exclusive,
        () => {
          ran = true;
          return super.dispatch(method, params, opts, holds, until);
        },
        wait,
      )
      .catch((err: unknown) => {
        // A call that never got its turn gives back what it held (a limiter slot); one that ran
        // gave it back when it settled.
        if (!ran) this.release(holds);
        throw err;
      });
  }

  protected override release(holds: number): void {
    if (holds & HOLDS_SHARED) this.gate.leave(false);
    if (holds & HOLDS_EXCLUSIVE) this.gate.leave(true);
    super.release(holds);
  }

  /** The pid of the running child, if any (for status and tests). */
  get pid(): number | undefined {
    return this.child?.alive ? this.child.pid : undefined;
  }

  protected async connect(): Promise<void> {
    this.newProcess();
    await this.spawn();
    await this.handshake();
  }

  protected override async beforeLegacyInit(v: { respawn?: boolean }): Promise<void> {
    if (v.respawn) await this.respawn();
  }

  /**
   * The probe when it had no answer within probeTimeoutMs: silence means legacy (digest §2.3),
   * but a process still starting answers late, and before `initialize` (stdio is in order).
   */
  private lateProbe: LateProbe | undefined;

  /**
   * `server/discover` as the first line. Past probeTimeoutMs without an answer the verdict is
   * legacy, but the call stays open (lateProbe) until initialize's answer; a server already
   * found modern gets the whole timeoutMs, and its silence is no verdict at all.
   */
  protected async probe(): Promise<ProbeVerdict> {
    this.lateProbe = undefined;
    const known = this.verdict === MODERN;
    const stop = new Canceller();
    let proven!: () => void;
    const late: LateProbe = { verdict: undefined, modern: new Promise<void>((resolve) => (proven = resolve)), drop: () => stop.abort() };
    const heard = (o: StdioProbeOutcome): StdioProbeOutcome => {
      late.verdict = o.kind === 'timeout' ? undefined : stdioVerdict(o);
      if (isModern(late.verdict)) proven();
      return o;
    };
    // The verdict is noted in the call's own reactions: before anything awaiting a later answer runs.
    const answer = this.call('server/discover', this.discoverParams(), { timeoutMs: Math.max(this.spec.probeTimeoutMs, this.spec.timeoutMs), signal: stop.signal }, true).then(
      (result) => heard({ kind: 'result', result }),
      (err: unknown) => {
        if (err instanceof RpcError) return heard({ kind: 'error', error: err.toJSON() });
        if (err instanceof TimeoutError || err instanceof CancelledError) return heard({ kind: 'timeout' });
        if (err instanceof TransportError) return heard({ kind: 'exit' });
        throw err;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<'silent'>((resolve) => (timer = setTimeout(() => resolve('silent'), this.spec.probeTimeoutMs)));
    const first = await (known ? answer : Promise.race([answer, silent]));
    clearTimeout(timer);
    let v: ProbeVerdict;
    if (first === 'silent') {
      this.lateProbe = late;
      v = { kind: 'legacy', reason: `no answer to server/discover within ${this.spec.probeTimeoutMs} ms` };
    } else if (known && first.kind === 'timeout') {
      v = { kind: 'no-evidence', reason: `no answer to server/discover within ${this.spec.timeoutMs} ms (a modern server: silence is no verdict)` };
    } else v = stdioVerdict(first);
    this.log.info({ verdict: v.kind, reason: 'reason' in v ? v.reason : undefined }, 'era probe');
    return v;
  }

  /** initialize(), unless the probe's late answer proves the server modern first. */
  protected override async initializeUnlessModern(): Promise<boolean> {
    const late = this.lateProbe;
    this.lateProbe = undefined;
    if (!late) return super.initializeUnlessModern();
    const init = this.initialize();
    init.catch(() => {}); // awaited below unless the late answer wins
    try {
      await Promise.race([init, late.modern]);
    } catch (err) {
      const v = late.verdict;
      if (v?.kind === 'legacy' && v.respawn) {
        // It exited on the probe, late (and so never read initialize): a new process for it.
        await this.respawn();
        await this.initialize();
        return false;
      }
      if (!isModern(v)) {
        late.drop();
        throw err;
      }
    }
    if (isModern(late.verdict)) return true;
    // Legacy: the probe is dropped here, never cancelled on the wire (nothing may precede initialize).
    late.drop();
    return false;
  }

  protected override async startOver(): Promise<void> {
    this.failAll(() => new TransportError('connecting again: the server is modern'));
    await this.respawn();
  }

  protected async initialize(): Promise<void> {
    const r = await this.call(
      'initialize',
      { protocolVersion: LEGACY, capabilities: LEGACY_CLIENT_CAPABILITIES, clientInfo: this.clientInfo },
      { timeoutMs: this.spec.timeoutMs },
      true,
    );
    const version = r.protocolVersion;
    if (typeof version !== 'string' || !(LEGACY_VERSIONS as readonly string[]).includes(version)) {
      throw new Error(`initialize answered with protocol version ${JSON.stringify(version)}, which the hub does not speak`);
    }
    const f = serverFacts(r, r.serverInfo);
    this._era = LEGACY;
    this._protocolVersion = version;
    this._capabilities = f.capabilities;
    this._serverInfo = f.serverInfo;
    this._instructions = f.instructions;
    this.child?.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
  }

  get lastStderr(): string | undefined {
    return this._lastStderr;
  }

  /** Starts the process; rejects when it cannot be started at all (ENOENT, EACCES), or once closed. */
  private async spawn(): Promise<void> {
    // close() fails the handshake in flight, which may read as a process that exited on the
    // probe and so ask for a new one: none after the close, which nothing would close.
    if (this.closed) throw new UpstreamUnavailableError(this.id, 'stopped');
    const s = this.spec;
    let child: StdioChild;
    try {
      child = new StdioChild({ command: s.command!, args: s.args, env: s.env, inheritEnv: s.inheritEnv, cwd: s.cwd, maxFrameBytes: s.maxFrameBytes, log: this.log });
    } catch (err) {
      // Thrown by spawn itself (ENOTDIR, E2BIG, a NUL in an argument): said as any other start failure.
      const why = `process could not start: ${errMessage(err)}`;
      throw err instanceof SpawnError && err.hubShort ? new HubShortError(why) : new TransportError(why, undefined, true);
    }
    this.child = child;
    this.log.debug({ pid: child.pid }, 'spawned');
    child.on('message', (c) => {
      if (this.child !== child) return;
      this.heardAt = monotonicNow();
      this.handleMessage(c);
    });
    child.on('exit', (e: ExitInfo) => this.onExit(child, e));
    child.on('dropped', (d: { id: number | string | undefined; what: string }) => {
      // The answer was read and dropped: its call fails now rather than at its timeout.
      const p = typeof d.id === 'number' ? this.pending.get(d.id) : undefined;
      if (this.child !== child || p === undefined) return;
      const err = new TransportError(`server "${this.id}" answered with ${d.what}`);
      err.oversized = true;
      this.failCall(p, err);
    });
    if (child.pid === undefined) {
      const e = await child.exit;
      const why = `process could not start: ${e.error ?? 'unknown error'}`;
      throw e.hubShort ? new HubShortError(why) : new TransportError(why, undefined, true);
    }
  }

  private async respawn(): Promise<void> {
    const old = this.child;
    this.child = undefined;
    if (old) {
      old.kill();
      await old.exit;
    }
    await this.spawn();
  }

  private onExit(child: StdioChild, e: ExitInfo): void {
    if (this.child !== child) return;
    this.child = undefined;
    const why = e.error
      ? `could not start: ${e.error}`
      : e.broke
        ? `${e.broke} while still running, and was ended`
        : e.signal
          ? `was killed by ${e.signal}`
          : `exited with code ${e.code}`;
    this._lastStderr = e.stderr;
    if (this._state === 'ready') return this.lost(`process ${why}`);
    // Mid-handshake: the handshake call fails and the start attempt reports it.
    this.failAll(() => new TransportError(`process ${why}`));
  }

  protected async disconnect(): Promise<void> {
    const c = this.child;
    this.child = undefined;
    if (c) await c.close();
  }

  protected transmit(p: Pending, frame: string): void {
    const waiting = this.child?.backlog ?? 0;
    if (waiting > MAX_STDIN_BACKLOG) {
      // A server that stops reading its input would have every call to it kept in the hub's memory.
      this.failCall(p, new TransportError(`server "${this.id}" is not reading its input (${Math.round(waiting / 1048576)} MiB waiting); the call was not sent`, undefined, true));
      return;
    }
    // Other calls in flight: the frame may join theirs in one write (see StdioChild.send).
    if (this.child?.send(frame, this.pending.size > 1)) return;
    this.failCall(p, new TransportError(`server "${this.id}" process is not running`, undefined, true));
  }

  protected cancelUpstream(p: Pending, reason: string): void {
    this.sendAside(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: p.id, reason } }));
  }

  protected reply(frame: string): void {
    this.sendAside(frame);
  }

  /** The server is past MAX_STDIN_BACKLOG and frames the hub sends on its own are being dropped. */
  private droppingAside = false;

  /**
   * A frame the hub sends of its own accord (an answer to the server's request, a notification):
   * dropped while the server is not reading its input. A server that floods requests (pings)
   * and reads nothing would otherwise have every answer kept in the hub's memory until it ran out.
   */
  private sendAside(frame: string): void {
    const child = this.child;
    if (!child) return;
    const waiting = child.backlog;
    if (waiting > MAX_STDIN_BACKLOG) {
      if (!this.droppingAside) this.log.warn({ waitingMiB: Math.round(waiting / 1048576) }, 'the server is not reading its input: answers and notifications to it are dropped');
      this.droppingAside = true;
      return;
    }
    this.droppingAside = false;
    child.send(frame);
  }

  notify(method: string, params?: Record<string, unknown>): void {
    if (this._state !== 'ready' || !this.child) {
      this.log.debug({ method }, 'notification dropped: not ready');
      return;
    }
    this.sendAside(JSON.stringify(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params }));
  }
}
