/**
 * Observation of finished requests without touching the router: the router's AuditSink is
 * wrapped, so every row it finishes (one-step records included) is also seen by metrics and
 * by the live feed. Works the same with the SQLite ledger and with the ledger turned off.
 */
import { nameText, text } from './ledger/columns.js';
import { redactString } from './ledger/redact.js';
import { requestIdAsSent, type RequestIdJson } from './ledger/format.js';
import type { AuditSink } from './ledger/sink.js';
import { shownOutcome, type AuditBegin, type AuditEnd, type AuditHandle } from './ledger/types.js';

/** What /admin/events streams for each finished request: no arguments, no results. */
export interface AuditEvent extends RequestIdJson {
  type: 'audit';
  ts: number;
  principal: string;
  /** The tool group whose endpoint the request came through. */
  group?: string;
  /** The W3C trace id of the request's span (its ledger row's). */
  traceId?: string;
  clientEra: string;
  clientName?: string;
  method: string;
  name?: string;
  server?: string;
  upstreamName?: string;
  /** As `ledger query` shows it: a replayed error is `replayed_error` (shownOutcome). */
  outcome: string;
  errorMessage?: string;
  latencyMs: number;
}

export interface AuditObserver {
  /** A forwarded call began (before its row is committed). */
  began?(b: AuditBegin): void;
  /** A request finished (`began`: it was announced by began()); synchronous, so it must be cheap. */
  ended(b: AuditBegin, e: AuditEnd, began: boolean): void;
  /** The finished row was committed this many seconds after it was queued. */
  committed?(seconds: number): void;
}

export function auditEvent(b: AuditBegin, e: AuditEnd): AuditEvent {
  const ev: AuditEvent = {
    type: 'audit',
    ts: b.ts,
    // A client's id, name or method is its own to size; the feed's viewers' memory is not: cut as
    // the ledger's columns are. The id as sent, as /admin/ledger and `ledger query --json` give it.
    ...requestIdAsSent(text(b.requestId) ?? '', b.principal),
    principal: b.principal,
    clientEra: b.clientEra,
    method: text(b.method) ?? '',
    outcome: shownOutcome(e.outcome, e.errorKind),
    latencyMs: Math.round((e.latencyMs ?? 0) * 1000) / 1000,
  };
  if (b.group) ev.group = b.group;
  if (b.traceId) ev.traceId = b.traceId;
  if (b.clientInfo?.name) ev.clientName = text(b.clientInfo.name)!;
  if (b.hubName) ev.name = nameText(b.hubName)!;
  const server = e.server ?? b.server;
  if (server) ev.server = server;
  const upstreamName = e.upstreamName ?? b.upstreamName;
  if (upstreamName) ev.upstreamName = nameText(upstreamName)!;
  if (e.errorMessage) ev.errorMessage = redactString(String(e.errorMessage)).slice(0, 500);
  return ev;
}

/**
 * Observations run at the end of the turn of the event loop, after the answers written in it:
 * metrics and the live feed are no part of a call's latency (at concurrency 1 they were
 * ~0.01 ms of it). Order is kept. An observer's fault never fails the call it watches.
 * Queued as records, not closures: a call queues two or three, at every call.
 */
type Later =
  | { o: AuditObserver; kind: 'began'; b: AuditBegin }
  | { o: AuditObserver; kind: 'ended'; b: AuditBegin; e: AuditEnd; began: boolean }
  | { o: AuditObserver; kind: 'committed'; seconds: number };

let later: Later[] = [];

function afterTurn(l: Later): void {
  if (later.length === 0) setImmediate(runLater);
  later.push(l);
}

function runLater(): void {
  const ls = later;
  later = [];
  for (const l of ls) {
    try {
      if (l.kind === 'ended') l.o.ended(l.b, l.e, l.began);
      else if (l.kind === 'began') l.o.began!(l.b);
      else l.o.committed!(l.seconds);
    } catch {
      // metrics and the live feed are best effort
    }
  }
}

/**
 * Commit times, one `then` per commit rather than per row: the rows queued in one turn share
 * the ledger's promise (its write at the turn's end), so they wait on it together.
 */
class CommitTimer {
  private promise: Promise<void> | undefined;
  private starts: number[] = [];

  constructor(private readonly o: AuditObserver) {}

  time(p: Promise<void>): Promise<void> {
    if (p !== this.promise) {
      this.promise = p;
      const starts: number[] = (this.starts = []);
      p.then(
        () => this.done(starts),
        () => {
          if (starts === this.starts) this.promise = undefined; // a failed write commits nothing
        },
      );
    }
    this.starts.push(performance.now());
    return p;
  }

  private done(starts: number[]): void {
    if (starts === this.starts) this.promise = undefined;
    const now = performance.now();
    for (const t0 of starts) afterTurn({ o: this.o, kind: 'committed', seconds: (now - t0) / 1000 });
  }
}

/** A handle of the inner sink, with its finish reported to the observer. */
class TappedHandle implements AuditHandle {
  private done: Promise<void> | undefined;

  constructor(
    private readonly h: AuditHandle,
    private readonly b: AuditBegin,
    private readonly o: AuditObserver,
    private readonly timer: CommitTimer | undefined,
  ) {}

  get rowId(): number {
    return this.h.rowId;
  }

  /**
   * The inner row's `written`: a call that waited across turns since its begin (a plugin, the
   * user's confirmation, an earlier call with its key) checks it before it forwards (call-tool).
   * Without it the router saw none, and a row the disk refused in an earlier turn went unseen.
   */
  get written(): Promise<void> | undefined {
    return this.h.written;
  }

  get writtenNow(): boolean | undefined {
    return this.h.writtenNow;
  }

  finish(e: AuditEnd): Promise<void> {
    if (this.done) return this.done;
    afterTurn({ o: this.o, kind: 'ended', b: this.b, e, began: true });
    const p = this.h.finish(e);
    this.done = this.timer ? this.timer.time(p) : p;
    return this.done;
  }
}

/** `inner` with every begin/finish/record also reported to `o`. A member added to AuditSink must be forwarded here too. */
export function tapAudit(inner: AuditSink, o: AuditObserver): AuditSink {
  // Without a ledger nothing is committed: switchyard_ledger_commit_seconds must not count
  // requests then (it did, as zeros), and the promise chain that timed them is saved.
  if (inner.enabled === false && o.committed) o = { began: o.began, ended: o.ended };
  const timer = o.committed ? new CommitTimer(o) : undefined;
  return {
    enabled: inner.enabled,
    idempotency: inner.idempotency,
    whenCommitted: () => inner.whenCommitted(),
    committedNow: inner.committedNow ? () => inner.committedNow!() : undefined,
    close: () => inner.close(),
    nameStore: inner.nameStore ? () => inner.nameStore!() : undefined,
    pinStore: inner.pinStore ? () => inner.pinStore!() : undefined,
    itemPinStores: inner.itemPinStores ? () => inner.itemPinStores!() : undefined,
    lookForPinChanges: inner.lookForPinChanges ? () => inner.lookForPinChanges!() : undefined,
    begin(b: AuditBegin): AuditHandle {
      const h = inner.begin(b);
      if (o.began) afterTurn({ o, kind: 'began', b });
      return new TappedHandle(h, b, o, timer);
    },
    record(b: AuditBegin, e: AuditEnd): Promise<void> {
      afterTurn({ o, kind: 'ended', b, e, began: false });
      const p = inner.record(b, e);
      return timer ? timer.time(p) : p;
    },
  };
}
