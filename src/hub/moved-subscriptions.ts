/**
 * After a reload that changed servers, resource subscriptions whose URI's owner changed (its
 * server removed or renamed, the URI routed to another server now, or hidden by a plugin or the
 * policy) are made again at the server that has them now, for the same subscriber, and said
 * updated once: keyed by server, they were held for a server that was gone, and their clients
 * heard nothing more, told nothing.
 */
import type { Logger } from '../log.js';
import type { Signal } from '../cancel.js';
import type { ServerHandle } from '../catalog/catalog.js';
import type { MovedSubscriptions } from '../downstream/core.js';
import { envMs } from '../env-ms.js';
import { monotonicNow } from '../monotonic.js';
import { readyWithin } from '../upstream/ready-within.js';
import type { ReloadReport } from './reload.js';

/**
 * How long the servers a reload started are waited for before subscriptions are routed again:
 * a URI's new owner names it in its lists once it is ready. One not ready by then keeps what
 * routes nowhere held where it was (it may be that server's), and moves it once it is ready
 * (SubscriptionMoves.late). SWITCHYARD_MOVED_WAIT_MS changes it.
 */
export const MOVED_WAIT_MS = envMs('SWITCHYARD_MOVED_WAIT_MS', 30_000);

/** The longest a timer waits (setTimeout's limit): a late server is watched for as long as it takes. */
const FOREVER_MS = 2_147_483_647;

export interface MovedSources {
  readonly handles: ReadonlyMap<string, ServerHandle>;
  /** Subscribes the endpoint's sessions and listen streams again to what `moved` names (Endpoint.resubscribeMoved). */
  resubscribeMoved(moved: MovedSubscriptions): Promise<{ sessions: number; listenStreams: number }>;
  /** UpstreamSubscriptions.takeMoved. */
  readonly takeMoved: MovedSubscriptions;
  /**
   * A pass over the subscribers begins (UpstreamSubscriptions.movesBegin); `keepUnrouted`: a
   * server a reload started is not ready yet, and a URI of a server gone that routes nowhere now
   * may be its: kept where it is held, not dropped.
   */
  movesBegin(keepUnrouted: boolean): void;
  readonly stop: Signal;
  readonly log: Logger;
}

/**
 * Whether a reload changed anything that may move a URI to another server: its servers, the
 * groups (one that no longer shows a URI's server may show another that serves it), or what the
 * lists hide (the policy's poisoning verdict, the plugins' list hooks): a URI hidden at its
 * server routes to another that lists it, or nowhere; shown again, back to the first.
 */
export function mayMoveUris(r: ReloadReport): boolean {
  return r.added.length + r.removed.length + r.restarted.length + r.updated.length > 0 || r.applied.some((s) => s === 'groups' || s === 'policy' || s === 'plugins');
}

/**
 * Carries the subscriptions reloads move, one pass at a time. A reload while an earlier one's
 * servers start (or while its pass runs) is not a pass of its own beside it: the earlier pass,
 * run once a server the later reload stopped gave up starting, routed to the config of then,
 * whose new servers were not ready, and dropped what only they serve (a listen stream ended, a
 * legacy session left with nothing). The servers every pending reload started are waited for
 * (each for MOVED_WAIT_MS from its reload), then one pass runs; a pass a later reload overtakes
 * stops taking subscribers, and the next pass, after that reload's servers, takes the rest.
 *
 * A server not ready by its deadline (a renamed one slow to start: `npx` fetching a package) has
 * no lists yet: a URI only it serves routes nowhere, and was dropped, for good (a legacy session
 * is never told; a listen stream ended, and its client, listening again, was told it is not
 * watched, and not told when it could be). Such a server is watched on (`late`), URIs that route
 * nowhere stay held where they were meanwhile, and a pass runs again when it is ready (or given
 * up on: failed, stopped, removed, when what still routes nowhere is dropped).
 */
export class SubscriptionMoves {
  /** Servers started by reloads not carried yet, and until when (monotonic) each is waited for. */
  private readonly starting = new Map<string, number>();
  /** Servers a reload started that were not ready when its pass ran: a pass runs again when each is ready, or given up on. */
  private readonly late = new Set<string>();
  /** A reload came (or a late server settled) that no pass has started for since. */
  private pending = false;
  private running: Promise<void> | undefined;

  constructor(
    private readonly src: MovedSources,
    private readonly waitMs = MOVED_WAIT_MS,
  ) {}

  /** A reload (`report`) applied: its moves are carried in the background (never rejects). */
  after(report: ReloadReport): void {
    if (!mayMoveUris(report)) return;
    const until = monotonicNow() + this.waitMs;
    for (const id of [...report.added, ...report.restarted]) this.starting.set(id, until);
    this.again();
  }

  private again(): void {
    this.pending = true;
    this.running ??= this.run().finally(() => (this.running = undefined));
  }

  private async run(): Promise<void> {
    while (this.pending && !this.src.stop.aborted) {
      this.pending = false;
      try {
        // Each as it is now: one a later reload replaced is waited for in its new form.
        await Promise.all([...this.starting].map(([id, until]) => this.readyOrGone(id, until)));
        // Another reload came meanwhile: its servers too, before anything is routed.
        if (this.pending || this.src.stop.aborted) continue;
        for (const id of this.starting.keys()) if (this.notReady(id)) this.watchLate(id);
        this.starting.clear();
        const waiting = [...this.late].filter((id) => this.notReady(id));
        if (waiting.length) this.src.log.info({ servers: waiting }, 'config reload: servers it started are not ready yet: resource subscriptions whose URI routes nowhere stay held until they are');
        this.src.movesBegin(waiting.length > 0);
        // Overtaken by a reload (`pending` again): the rest are taken by the next pass, once its servers are ready.
        const n = await this.src.resubscribeMoved((subscriber, principal, group) => (this.pending ? Promise.resolve([]) : this.src.takeMoved(subscriber, principal, group)));
        if (n.sessions + n.listenStreams > 0) this.src.log.info(n, 'config reload: resource subscriptions whose server changed made again where their URIs are now');
      } catch (err) {
        this.src.log.warn({ err: String((err as Error)?.message ?? err) }, 'config reload: resource subscriptions whose server changed not made again');
      }
    }
  }

  private notReady(id: string): boolean {
    const h = this.src.handles.get(id);
    return h !== undefined && h.upstream.state !== 'ready';
  }

  /** Watches server `id`, not ready by its deadline, until it is ready or given up on; then a pass runs. */
  private watchLate(id: string): void {
    if (this.late.has(id)) return;
    this.late.add(id);
    void this.readyOrGone(id, Infinity).then(() => {
      this.late.delete(id);
      if (!this.src.stop.aborted) this.again();
    });
  }

  /** Server `id` ready, gone from the config, or given up on (its deadline passed, it failed or stopped). */
  private async readyOrGone(id: string, until: number): Promise<void> {
    for (;;) {
      const h = this.src.handles.get(id);
      if (h === undefined || (await readyWithin(h.upstream, Math.min(until - monotonicNow(), FOREVER_MS), this.src.stop))) return;
      // Stopped because a reload replaced it (restarted under the same id): the new one is waited for.
      const now = this.src.handles.get(id);
      if (now === undefined || now.upstream === h.upstream || monotonicNow() >= until) return;
    }
  }
}
