import { DEFAULT_REDACT_KEYS, redact, redactString } from './redact.js';
import { nameText, text, wellFormed } from './columns.js';
import { SERVER_AT } from './audit-apply.js';
import type { AuditBegin, AuditEnd } from './types.js';

const MAX_ERROR_MESSAGE = 4096;

/** What a row stores of the call's bodies (LedgerOptions' storeBodies, redactKeys, maxBodyBytes). */
export interface RowBodyOptions {
  /** Store redacted arguments and results (off by default). */
  storeBodies?: boolean;
  /** Keys whose values are redacted in stored bodies; a string is a case-insensitive regex source. */
  redactKeys?: RegExp | string;
  /** A stored body larger than this is replaced by a size marker. Default 1 MiB. */
  maxBodyBytes?: number;
}

/**
 * A call's begin and finish as the values of a pending file's line (see PendingRecord in
 * audit-apply.ts). A class rather than free functions with an options argument: the ledger
 * calls it on every call, always the one instance, so its fields stay monomorphic loads.
 */
export class RowValues {
  private readonly storeBodies: boolean;
  private readonly redactKeys: RegExp;
  private readonly maxBodyBytes: number;

  /** Throws when `redactKeys` is not a valid regular expression. */
  constructor(opts: RowBodyOptions) {
    this.storeBodies = opts.storeBodies ?? false;
    this.redactKeys = redactPattern(opts.redactKeys);
    this.maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
  }

  /** A begin's values, in BEGIN_COLS order (a pending file's line; see PendingRecord). */
  begin(id: number, b: AuditBegin): unknown[] {
    return [
      id,
      Math.trunc(Number(b.ts)) || 0,
      text(b.requestId) ?? '',
      text(b.principal) ?? '',
      text(b.clientAddress),
      text(b.clientEra) ?? '',
      text(b.clientInfo?.name),
      text(b.clientInfo?.version),
      text(b.method) ?? '',
      nameText(b.hubName),
      text(b.server),
      nameText(b.upstreamName),
      text(b.upstreamEra),
      text(b.idempotencyKey),
      text(b.argsHash),
      finiteOrNull(b.requestBytes),
      this.body(b.args),
      text(b.group),
      text(b.traceId),
      text(b.spanId),
      text(b.parentSpanId),
    ];
  }

  /** A finish's values, in FIN_COLS order; late facts (server, upstream) win, otherwise the begin's stay. */
  finish(start: unknown[], e: AuditEnd): unknown[] {
    return [
      e.outcome,
      text(e.errorKind),
      finiteOrNull(e.errorCode),
      e.errorMessage == null ? null : wellFormed(redactString(String(e.errorMessage)).slice(0, MAX_ERROR_MESSAGE)),
      finiteOrNull(e.latencyMs),
      finiteOrNull(e.responseBytes),
      this.body(e.result),
      text(e.server) ?? start[SERVER_AT],
      nameText(e.upstreamName) ?? start[SERVER_AT + 1],
      text(e.upstreamEra) ?? start[SERVER_AT + 2],
    ];
  }

  private body(v: unknown): string | null {
    if (!this.storeBodies || v === undefined) return null;
    let json: string;
    try {
      json = JSON.stringify(redact(v, this.redactKeys)) ?? 'null';
    } catch {
      return JSON.stringify('[unserializable]');
    }
    if (Buffer.byteLength(json) > this.maxBodyBytes) return JSON.stringify({ truncated: true, bytes: Buffer.byteLength(json) });
    return json;
  }
}

/** A finished row's line: the begin's JSON array, continued by the finish's values. */
export function finishedLine(startJson: string, fin: unknown[]): string {
  return `${startJson.slice(0, -1)},${JSON.stringify(fin).slice(1)}`;
}

function redactPattern(p: RegExp | string | undefined): RegExp {
  if (p === undefined) return DEFAULT_REDACT_KEYS;
  if (typeof p !== 'string') return p;
  try {
    return new RegExp(p, 'i');
  } catch {
    throw new Error('ledger.redactKeys is not a valid regular expression');
  }
}

function finiteOrNull(n: unknown): number | null {
  return typeof n === 'number' && Number.isFinite(n) ? n : null;
}
