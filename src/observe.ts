/**
 * Observation of finished requests without touching the router: the router's AuditSink is
 * wrapped, so every row it finishes (one-step records included) is also seen by metrics and
 * by the live feed. Works the same with the SQLite ledger and with the ledger turned off.
 */
import { redactString } from './ledger/redact.js';
import type { AuditSink } from './ledger/sink.js';
import type { AuditBegin, AuditEnd, AuditHandle } from './ledger/types.js';

/** What /admin/events streams for each finished request: no arguments, no results. */
export interface AuditEvent {
  type: 'audit';
  ts: number;
  requestId: string;
  principal: string;
  clientEra: string;
  clientName?: string;
  method: string;
  name?: string;
  server?: string;
  upstreamName?: string;
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
    requestId: b.requestId,
    principal: b.principal,
    clientEra: b.clientEra,
    method: b.method,
    outcome: e.outcome,
    latencyMs: Math.round((e.latencyMs ?? 0) * 1000) / 1000,
  };
  if (b.clientInfo?.name) ev.clientName = String(b.clientInfo.name);
  if (b.hubName) ev.name = b.hubName;
  const server = e.server ?? b.server;
  if (server) ev.server = server;
  const upstreamName = e.upstreamName ?? b.upstreamName;
  if (upstreamName) ev.upstreamName = upstreamName;
  if (e.errorMessage) ev.errorMessage = redactString(String(e.errorMessage)).slice(0, 500);
  return ev;
}

/**
 * Observations run at the end of the turn of the event loop, after the answers written in it:
 * metrics and the live feed are no part of a call's latency (at concurrency 1 they were
 * ~0.01 ms of it). Order is kept. An observer's fault never fails the call it watches.
 */
let later: (() => void)[] = [];

function afterTurn(f: () => void): void {
  if (later.length === 0) setImmediate(runLater);
  later.push(f);
}

function runLater(): void {
  const fs = later;
  later = [];
  for (const f of fs) {
    try {
      f();
    } catch {
      // metrics and the live feed are best effort
    }
  }
}

function timed(p: Promise<void>, o: AuditObserver): Promise<void> {
  if (!o.committed) return p;
  const t0 = performance.now();
  p.then(
    () => {
      const s = (performance.now() - t0) / 1000;
      afterTurn(() => o.committed!(s));
    },
    () => undefined,
  );
  return p;
}

/** `inner` with every begin/finish/record also reported to `o`. A member added to AuditSink must be forwarded here too. */
export function tapAudit(inner: AuditSink, o: AuditObserver): AuditSink {
  // Without a ledger nothing is committed: switchyard_ledger_commit_seconds must not count
  // requests then (it did, as zeros), and the promise chain that timed them is saved.
  if (inner.enabled === false && o.committed) o = { began: o.began, ended: o.ended };
  return {
    enabled: inner.enabled,
    idempotency: inner.idempotency,
    whenCommitted: () => inner.whenCommitted(),
    close: () => inner.close(),
    nameStore: inner.nameStore ? () => inner.nameStore!() : undefined,
    pinStore: inner.pinStore ? () => inner.pinStore!() : undefined,
    begin(b: AuditBegin): AuditHandle {
      const h = inner.begin(b);
      if (o.began) afterTurn(() => o.began!(b));
      let done: Promise<void> | undefined;
      return {
        rowId: h.rowId,
        finish(e: AuditEnd): Promise<void> {
          if (done) return done;
          afterTurn(() => o.ended(b, e, true));
          done = timed(h.finish(e), o);
          return done;
        },
      };
    },
    record(b: AuditBegin, e: AuditEnd): Promise<void> {
      afterTurn(() => o.ended(b, e, false));
      return timed(inner.record(b, e), o);
    },
  };
}
