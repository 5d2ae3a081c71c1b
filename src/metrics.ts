/**
 * Prometheus metrics (prom-client, one registry per hub so tests can run several hubs).
 * The hot path pays a few map lookups and increments per finished call (CallSeries);
 * everything else (upstream state, cache and ledger counters, sessions) is read from its owner
 * only when /metrics is scraped.
 */
import { createRequire } from 'node:module';
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { CallSeries } from './call-series.js';
import { UnlabelledHistogram } from './unlabelled-histogram.js';
import { EventLoopLag } from './event-loop-lag.js';
import { shownOutcome, type AuditBegin, type AuditEnd, type LedgerCounters } from './ledger/types.js';
import { UPSTREAM_STATES, type UpstreamState } from './upstream/types.js';

export interface MetricsSources {
  /**
   * restarts: of the server's own connection; principalRestarts: of principals' own ones, summed.
   * hungRestarts, principalHungRestarts: of those, the ones after a hang (the rest followed a failure).
   */
  servers(): Iterable<{ id: string; state: UpstreamState; restarts: number; hungRestarts?: number; principalRestarts?: number; principalHungRestarts?: number }>;
  cacheStats(): { hits: number; misses: number; staleServed: number };
  /** Group-commit counters of a SQLite ledger; undefined when the ledger is off. */
  ledgerCounters(): LedgerCounters | undefined;
  /** Open legacy sessions (HTTP and stdio). */
  openSessions(): number;
}

const PROCESS_PREFIX = 'switchyard_process_';
const requireCjs = createRequire(import.meta.url);

/**
 * prom-client's default process and Node.js metrics, all but its event-loop lag (whose 10 ms
 * sampler woke an idle hub 100 times a second: EventLoopLag reports those names instead).
 * collectDefaultMetrics has no switch for one part, so each collector it lists is registered
 * from its own module, as collectDefaultMetrics does.
 */
function defaultMetricsButLag(register: Registry): void {
  type Collector = (register: Registry, config: { prefix: string }) => void;
  for (const name of collectDefaultMetrics.metricsList)
    if (name !== 'eventLoopLag') (requireCjs(`prom-client/lib/metrics/${name}.js`) as Collector)(register, { prefix: PROCESS_PREFIX });
}

/**
 * A restarts counter's two series per server: `reason="hung"`, restarts after it was taken down
 * as hung (calls left unanswered, a circuit the breaker opened on timeouts alone, a health check
 * unanswered though it was there); `reason="failure"`, every other (a process that exited or could
 * not start, a connection lost or refused, a circuit the breaker opened on other failures).
 * `sum by (server)` is the total the counter had before it had the label.
 */
function incByReason(c: Counter<string>, server: string, all: number, hung: number): void {
  c.inc({ server, reason: 'hung' }, hung);
  c.inc({ server, reason: 'failure' }, all - hung);
}
const OK_OUTCOMES = new Set(['ok', 'replayed']);
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Only names a client chose from a bounded catalog become a label; URIs and unknown names do not. */
function toolLabel(b: AuditBegin, e: AuditEnd): string {
  if (b.method !== 'tools/call' && b.method !== 'prompts/get') return '';
  if (!(e.server ?? b.server)) return ''; // unknown name: unbounded, keep it out of the label set
  return b.hubName ?? '';
}

/** Methods a client can name freely would make the label set unbounded: others count as "other". */
const METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'subscriptions/listen',
  'logging/setLevel',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
]);

export class Metrics {
  readonly registry = new Registry();
  /** Calls, errors and durations by method, server and tool: see CallSeries. */
  private readonly calls = new CallSeries(LATENCY_BUCKETS, OK_OUTCOMES);
  /** The ledger's commit time, observed on every call: see UnlabelledHistogram. */
  private readonly commit = new UnlabelledHistogram(COMMIT_BUCKETS);
  /** Forwarded calls not finished: a number, read when scraped (a Gauge's inc() hashes its empty label set on every call). */
  private inflight = 0;
  /** Requests answered `input_required`: rounds of a call, counted apart from the calls. */
  private readonly rounds: Counter<string>;
  private readonly lag: EventLoopLag;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    defaultMetricsButLag(this.registry);
    this.lag = new EventLoopLag(this.registry, PROCESS_PREFIX);
    for (const m of this.calls.metrics({
      calls: { name: 'switchyard_calls_total', help: 'Requests finished by the hub, by method, upstream server, tool or prompt name and outcome' },
      errors: {
        name: 'switchyard_call_errors_total',
        help: 'Requests that did not end ok (tool errors, JSON-RPC errors, timeouts, cancellations, denials, unavailable upstreams)',
      },
      duration: { name: 'switchyard_call_duration_seconds', help: 'Time from a request reaching the router to its answer, by method, server and tool' },
    }))
      this.registry.registerMetric(m as unknown as Metric);
    this.registry.registerMetric(
      this.commit.metric('switchyard_ledger_commit_seconds', 'Time from queueing a finished audit row to its commit (its write to the pending file)') as unknown as Metric,
    );
    const calls = () => this.inflight;
    new Gauge({
      name: 'switchyard_calls_in_flight',
      help: 'Forwarded calls not finished yet',
      registers,
      collect() {
        this.set(calls());
      },
    });
    this.rounds = new Counter({
      name: 'switchyard_input_rounds_total',
      help: 'Requests answered input_required (the client was asked for input and retries): rounds of a call, which switchyard_calls_total counts once, at the request that gets its answer',
      labelNames: ['method', 'server', 'tool'],
      registers,
    });
    new Gauge({
      name: 'switchyard_upstream_state',
      help: 'Upstream state: 1 for the state each upstream is in, 0 for the others',
      labelNames: ['server', 'state'],
      registers,
      collect() {
        this.reset();
        for (const s of sources.servers()) for (const st of UPSTREAM_STATES) this.set({ server: s.id, state: st }, s.state === st ? 1 : 0);
      },
    });
    new Counter({
      name: 'switchyard_upstream_restarts_total',
      help: "Automatic restarts of each upstream's own connection since the hub started, over every one it had (servers restart and reloads keep the count), by reason: hung (taken down for answering nothing, a circuit opened by timeouts alone) or failure (exited, could not start, connection lost, circuit opened by other failures); principals' own connections in switchyard_upstream_principal_restarts_total",
      labelNames: ['server', 'reason'],
      registers,
      collect() {
        this.reset();
        // prom-client counters have no set(): reset per scrape and add the owner's total.
        for (const s of sources.servers()) incByReason(this, s.id, s.restarts, s.hungRestarts ?? 0);
      },
    });
    new Counter({
      name: 'switchyard_upstream_principal_restarts_total',
      help: "Automatic restarts of principals' own connections to each upstream (processPerPrincipal processes, per-principal HTTP connections) since the hub started, summed over principals, by reason as switchyard_upstream_restarts_total",
      labelNames: ['server', 'reason'],
      registers,
      collect() {
        this.reset();
        for (const s of sources.servers()) incByReason(this, s.id, s.principalRestarts ?? 0, s.principalHungRestarts ?? 0);
      },
    });
    /** A counter of a total its source keeps (reset per scrape, then the total added), or none while the source has nothing. */
    const total = <T>(read: () => T | undefined, name: string, help: string, pick: (t: T) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          const t = read();
          if (t !== undefined) this.inc(pick(t));
        },
      });
    const cache = (name: string, help: string, pick: (s: ReturnType<MetricsSources['cacheStats']>) => number) => total(() => sources.cacheStats(), name, help, pick);
    cache('switchyard_cache_hits_total', 'Upstream list lookups answered from a fresh cache entry', (s) => s.hits);
    cache('switchyard_cache_misses_total', 'Upstream list lookups that needed a fetch', (s) => s.misses);
    cache('switchyard_cache_stale_served_total', 'Failed refreshes answered with the stale entry', (s) => s.staleServed);
    const ledger = (name: string, help: string, pick: (c: LedgerCounters) => number) => total(() => sources.ledgerCounters(), name, help, pick);
    ledger('switchyard_ledger_batches_total', 'Ledger group commits (writes of the pending file)', (c) => c.batches);
    ledger('switchyard_ledger_writes_total', 'Audit rows (begun or finished) carried by those writes', (c) => c.writes);
    ledger('switchyard_ledger_write_failures_total', 'Writes of audit rows that failed (a full disk, an I/O error): the hub refuses the calls it cannot record', (c) => c.writeFailures);
    ledger('switchyard_ledger_thread_restarts_total', 'Ledger ingest threads that ended and were replaced', (c) => c.threadRestarts);
    new Gauge({
      name: 'switchyard_ledger_batches_unapplied',
      help: 'Batches of audit rows in the pending files not yet committed in SQLite (grows while SQLite refuses them)',
      registers,
      collect() {
        this.set(sources.ledgerCounters()?.batchesUnapplied ?? 0);
      },
    });
    new Gauge({
      name: 'switchyard_open_sessions',
      help: 'Open legacy (2025-11-25) client sessions',
      registers,
      collect() {
        this.set(sources.openSessions());
      },
    });
  }

  /** Stops the event-loop sampler (the hub stops). */
  close(): void {
    this.lag.close();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  callStarted(): void {
    this.inflight++;
  }

  /** One finished request (hot path: a few map lookups and increments, see CallSeries); `began` when callStarted counted it. */
  observeCall(b: AuditBegin, e: AuditEnd, began: boolean): void {
    if (began) this.inflight--;
    const method = METHODS.has(b.method) ? b.method : 'other';
    const server = e.server ?? b.server ?? '';
    // One call, however many rounds it took: a round is no call (nor its latency the call's).
    if (e.outcome === 'input_required') return void this.rounds.inc({ method, server, tool: toolLabel(b, e) });
    // Its request was answered input_required (a round), and its row carries the call's end too.
    if (e.answeredInputRequired) this.rounds.inc({ method, server, tool: toolLabel(b, e) });
    // A replayed error is the error its client got again: counted as one (switchyard_call_errors_total).
    const outcome = shownOutcome(e.outcome, e.errorKind);
    this.calls.observe(method, server, toolLabel(b, e), outcome, e.latencyMs / 1000);
  }

  observeCommit(seconds: number): void {
    this.commit.observe(seconds);
  }
}
