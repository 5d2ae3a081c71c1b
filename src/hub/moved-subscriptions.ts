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
import { monotonicNow } from '../monotonic.js';
import { readyWithin } from '../upstream/ready-within.js';
import type { ReloadReport } from './reload.js';

/**
 * How long the servers a reload started are waited for before subscriptions are routed again:
 * a URI's new owner names it in its lists once it is ready. One that is not ready by then has no
 * URIs yet (a new id has no lists kept either), and what only it would have had is dropped.
 */
export const MOVED_WAIT_MS = 30_000;

export interface MovedSources {
  readonly handles: ReadonlyMap<string, ServerHandle>;
  /** Subscribes the endpoint's sessions and listen streams again to what `moved` names (Endpoint.resubscribeMoved). */
  resubscribeMoved(moved: MovedSubscriptions): Promise<{ sessions: number; listenStreams: number }>;
  /** UpstreamSubscriptions.takeMoved. */
  readonly takeMoved: MovedSubscriptions;
  /** A pass over the subscribers begins (UpstreamSubscriptions.movesBegin). */
  movesBegin(): void;
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
 */
export class SubscriptionMoves {
  /** Servers started by reloads not carried yet, and until when (monotonic) each is waited for. */
  private readonly starting = new Map<string, number>();
  /** A reload came that no pass has started for since. */
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
    this.pending = true;
    this.running ??= this.run().finally(() => (this.running = undefined));
  }

  /** Settles once no pass is pending or running (tests). */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  private async run(): Promise<void> {
    while (this.pending && !this.src.stop.aborted) {
      this.pending = false;
      try {
        // Each as it is now: one a later reload replaced is waited for in its new form.
        await Promise.all([...this.starting].map(([id, until]) => this.readyOrGone(id, until)));
        // Another reload came meanwhile: its servers too, before anything is routed.
        if (this.pending || this.src.stop.aborted) continue;
        this.starting.clear();
        this.src.movesBegin();
        // Overtaken by a reload (`pending` again): the rest are taken by the next pass, once its servers are ready.
        const n = await this.src.resubscribeMoved((subscriber, principal, group) => (this.pending ? Promise.resolve([]) : this.src.takeMoved(subscriber, principal, group)));
        if (n.sessions + n.listenStreams > 0) this.src.log.info(n, 'config reload: resource subscriptions whose server changed made again where their URIs are now');
      } catch (err) {
        this.src.log.warn({ err: String((err as Error)?.message ?? err) }, 'config reload: resource subscriptions whose server changed not made again');
      }
    }
  }

  /** Server `id` ready, gone from the config, or given up on (its deadline passed, it failed or stopped). */
  private async readyOrGone(id: string, until: number): Promise<void> {
    for (;;) {
      const h = this.src.handles.get(id);
      if (h === undefined || (await readyWithin(h.upstream, until - monotonicNow(), this.src.stop))) return;
      // Stopped because a reload replaced it (restarted under the same id): the new one is waited for.
      const now = this.src.handles.get(id);
      if (now === undefined || now.upstream === h.upstream || monotonicNow() >= until) return;
    }
  }
}
