import { DEFAULT_REDACT_KEYS, redact, redactString } from './redact.js';
import { nameText, text, wellFormed } from './columns.js';
import { BEGIN_COLS, SERVER_AT } from './audit-apply.js';
import { configSecretsVersion } from '../policy/config-secrets.js';
import type { AuditBegin, AuditEnd } from './types.js';
import { jsonText } from '../protocol/json-text.js';

export { jsonText };

const MAX_ERROR_MESSAGE = 4096;

/** Routes kept (see Route); a call's is looked for among these in turn. */
const ROUTES_KEPT = 16;
// Route's ten columns, principal to upstream_era, must stay together in this order in a begin.
if (BEGIN_COLS.slice(3, 13).join() !== 'principal,client_address,client_era,client_name,client_version,method,hub_name,server,upstream_name,upstream_era' || SERVER_AT !== 10)
  throw new Error('audit columns: a route\'s columns are out of order (see Route)');

/**
 * A begin's ten columns from principal to upstream_era, which every call of one client to one
 * tool shares: kept with the raw values they were made from, and their JSON (what JSON.stringify
 * writes between a line's brackets for them) made once the route comes again. Their JSON was
 * two thirds of a begin line's `JSON.stringify` (V8 copies nearly every string character by
 * character), and their text and name checks ~1k a call. Its server, upstream name and era are
 * what a finish falls back to (the late facts).
 */
export interface Route {
  readonly principal: unknown;
  readonly clientAddress: unknown;
  readonly clientEra: unknown;
  readonly clientName: unknown;
  readonly clientVersion: unknown;
  readonly method: unknown;
  readonly hubName: unknown;
  readonly rawServer: unknown;
  readonly rawUpstreamName: unknown;
  readonly rawUpstreamEra: unknown;
  /** configSecretsVersion() when made: the names' redaction depends on the config's secrets. */
  readonly secrets: number;
  /** The ten values, then (from the route's second call on) their JSON. */
  readonly values: unknown[];
  json: string | undefined;
  readonly server: string | null;
  readonly upstreamName: string | null;
  readonly upstreamEra: string | null;
}

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
  /** The latest routes, at most ROUTES_KEPT; `nextRoute` is the slot a new one takes. */
  private readonly routes: Route[] = [];
  private nextRoute = 0;

  /** Throws when `redactKeys` is not a valid regular expression. */
  constructor(opts: RowBodyOptions) {
    this.storeBodies = opts.storeBodies ?? false;
    this.redactKeys = redactPattern(opts.redactKeys);
    this.maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
  }

  /**
   * A begin's values, in BEGIN_COLS order (a pending file's line; see PendingRecord). The ledger
   * writes their JSON by beginLine, which a property test holds to JSON.stringify of these.
   */
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
      ...this.afterRoute(b),
    ];
  }

  /** A begin's eight values after its route's ten (idempotency_key to parent_span_id), in BEGIN_COLS order. */
  private afterRoute(b: AuditBegin): unknown[] {
    return [text(b.idempotencyKey), text(b.argsHash), finiteOrNull(b.requestBytes), this.body(b.args), text(b.group), text(b.traceId), text(b.spanId), text(b.parentSpanId)];
  }

  /**
   * A begin's line less its closing bracket (beginLine, finishedLine): the JSON array of
   * begin()'s values, the same text as JSON.stringify writes for them (a restarted hub and the
   * ingest thread read it; test/unit/ledger-begin-line.test.ts). `r` is route(b). Open, so the
   * finish continues it without a slice: this text is a tree of a few strings, which a slice
   * would copy into one first, as the begin's write does (~1k instructions each).
   */
  beginOpen(id: number, b: AuditBegin, r: Route): string {
    const ts = Math.trunc(Number(b.ts)) || 0;
    if (r.json === undefined) {
      // A route met once so far, perhaps the only time (a hub's tools called in turn, more than
      // ROUTES_KEPT of them): one JSON.stringify of the line, as before routes were kept.
      return JSON.stringify([id, ts, text(b.requestId) ?? '', ...r.values, ...this.afterRoute(b)]).slice(0, -1);
    }
    const tail = this.afterRoute(b);
    // Integers (id, and ts truncated, never -0): String's text is JSON.stringify's; an infinite ts is null there.
    return '[' + id + ',' + tsText(ts) + ',' + jsonText(text(b.requestId) ?? '') + ',' + r.json + ',' + JSON.stringify(tail).slice(1, -1);
  }

  /** The route's columns of `b`: a kept Route when its raw values are b's (===), else made (and kept when they are text). */
  route(b: AuditBegin): Route {
    const info = b.clientInfo;
    const name = info?.name;
    const version = info?.version;
    const secrets = configSecretsVersion();
    const routes = this.routes;
    for (let i = 0; i < routes.length; i++) {
      const r = routes[i]!;
      if (
        r.hubName === b.hubName &&
        r.rawServer === b.server &&
        r.rawUpstreamName === b.upstreamName &&
        r.principal === b.principal &&
        r.method === b.method &&
        r.clientEra === b.clientEra &&
        r.clientAddress === b.clientAddress &&
        r.clientName === name &&
        r.clientVersion === version &&
        r.rawUpstreamEra === b.upstreamEra &&
        r.secrets === secrets
      ) {
        r.json ??= JSON.stringify(r.values).slice(1, -1);
        return r;
      }
    }
    const v = [
      text(b.principal) ?? '',
      text(b.clientAddress),
      text(b.clientEra) ?? '',
      text(name),
      text(version),
      text(b.method) ?? '',
      nameText(b.hubName),
      text(b.server),
      nameText(b.upstreamName),
      text(b.upstreamEra),
    ];
    const r: Route = {
      principal: b.principal,
      clientAddress: b.clientAddress,
      clientEra: b.clientEra,
      clientName: name,
      clientVersion: version,
      method: b.method,
      hubName: b.hubName,
      rawServer: b.server,
      rawUpstreamName: b.upstreamName,
      rawUpstreamEra: b.upstreamEra,
      secrets,
      values: v,
      json: undefined,
      server: v[7],
      upstreamName: v[8],
      upstreamEra: v[9],
    };
    // Only text (or nothing) is kept: an object's text could change under the same reference.
    if (
      isText(b.principal) && isText(b.clientAddress) && isText(b.clientEra) && isText(name) && isText(version) &&
      isText(b.method) && isText(b.hubName) && isText(b.server) && isText(b.upstreamName) && isText(b.upstreamEra)
    ) {
      routes[this.nextRoute] = r;
      this.nextRoute = (this.nextRoute + 1) % ROUTES_KEPT;
    }
    return r;
  }

  /** A finish's values, in FIN_COLS order; late facts (server, upstream) win, otherwise the begin's (its route's) stay. */
  finish(start: Route, e: AuditEnd): unknown[] {
    return [
      e.outcome,
      text(e.errorKind),
      finiteOrNull(e.errorCode),
      e.errorMessage == null ? null : wellFormed(redactString(String(e.errorMessage)).slice(0, MAX_ERROR_MESSAGE)),
      finiteOrNull(e.latencyMs),
      finiteOrNull(e.responseBytes),
      this.body(e.result),
      text(e.server) ?? start.server,
      nameText(e.upstreamName) ?? start.upstreamName,
      text(e.upstreamEra) ?? start.upstreamEra,
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

/** A begin's line, from its open text (RowValues.beginOpen). */
export function beginLine(open: string): string {
  return open + ']';
}

/** A finished row's line: the begin's JSON array (its open text, RowValues.beginOpen), continued by the finish's values. */
export function finishedLine(open: string, fin: unknown[]): string {
  return `${open},${JSON.stringify(fin).slice(1)}`;
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

function isText(v: unknown): boolean {
  return v === undefined || v === null || typeof v === 'string';
}

/** '000' to '999'. */
const THREE_DIGITS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'));
/** The seconds of the last ts written (ms since the epoch) and their text. */
let tsSeconds = -1;
let tsSecondsText = '';

/**
 * A begin's ts (an integer: truncated) as JSON.stringify writes it, `null` if not finite. A ts of
 * today is over 2^31, a heap number, whose text V8 makes afresh each time by its shortest-digits
 * conversion (the runtime call and FastDtoa: ~1.1k instructions a call in the hub under callgrind, issue #9);
 * here it is the text of its second, kept while calls come in that second, and one of a thousand
 * kept three-digit strings.
 */
export function tsText(ts: number): string {
  if (!(ts >= 1000 && ts <= Number.MAX_SAFE_INTEGER && ts % 1 === 0)) return Number.isFinite(ts) ? String(ts) : 'null';
  const seconds = Math.floor(ts / 1000);
  if (seconds !== tsSeconds) {
    tsSeconds = seconds;
    tsSecondsText = String(seconds);
  }
  return tsSecondsText + THREE_DIGITS[ts - seconds * 1000]!;
}

function finiteOrNull(n: unknown): number | null {
  return typeof n === 'number' && Number.isFinite(n) ? n : null;
}
