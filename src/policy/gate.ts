import type { Authenticator, Identity, Refusal } from '../auth/authenticator.js';
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
import { isObj, type Id, type Request } from '../protocol/jsonrpc.js';
import { firstHeaderValue } from '../protocol/header-value.js';
import { META_PROTOCOL_VERSION } from '../protocol/meta.js';
import { eraOfRequest } from '../protocol/request-era.js';
import { spanOfMeta } from '../protocol/trace-context.js';
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import { TokenBuckets, type BucketSpec, type RateLimiter, type RateLimitSpec } from './rate-limit.js';
import { requestIdText } from '../ledger/request-id.js';
import { mayBeRenamed } from '../catalog/names.js';
import type { OtherNames } from './glob.js';

/** See EdgeGate's `otherNames`. */
export type ToolNames = (hubName: string, principal: string, group: string | undefined) => OtherNames | undefined | Promise<OtherNames | undefined>;

/** A refusal at the edge, with the status the HTTP transport sends (403 step-up, 429). */
export interface EdgeRefusal extends Omit<Refusal, 'status'> {
  status: 403 | 429;
}

export interface RequestFacts {
  clientAddress?: string;
  requestBytes?: number;
  /** The configured tool group whose endpoint the request came to (`/mcp/<group>`, `stdio --group`): its row names it, and a step-up challenge its resource. */
  group?: string;
  /** The HTTP request's traceparent header (see spanOfMeta): a refused row is found under the client's trace too. */
  traceparent?: string;
  /**
   * The HTTP request's headers (node:http's), read only for a refusal's row: its
   * MCP-Protocol-Version says its era as the endpoint tells it (eraOfRequest). None over stdio.
   */
  headers?: Readonly<Record<string, string | string[] | undefined>>;
  /**
   * A malformed message (no request to pass: a wrong `jsonrpc`, an id of a bad type, params by
   * position), classify's verdict on it, read only for a refusal's row, which names what its row
   * would if it were let in: its id, method and target as far as they could be read, and the era
   * its method and `_meta` claim say (`message`, the object as sent), as a request's do.
   */
  malformed?: { readonly id?: Id; readonly method?: string; readonly target?: string; readonly message?: Readonly<Record<string, unknown>> };
}

/** A request refused before its body was read: not authenticated (401/403), too large (413), not JSON (415). */
export interface UnreadRefusal extends RequestFacts {
  /** Undefined: no credential was accepted (the row's principal is UNAUTHENTICATED). */
  principal?: string;
  /** The request's headers: its era and, from a modern client, its method (`Mcp-Method`). */
  header: (name: string) => string | undefined;
  status: number;
  message: string;
}

/** The method a refused message is recorded under when it has none (not JSON-RPC at all). */
export const INVALID_MESSAGE = '(invalid)';

/** The principal of a row for a request no credential was accepted for. */
export const UNAUTHENTICATED = '(unauthenticated)';
/** The method of such a row when no `Mcp-Method` header names one. */
export const UNREAD_MESSAGE = '(unread)';

/**
 * Rows for unauthenticated requests, which anyone who can reach the port can send: per client
 * address and in all, so a flood cannot fill the disk. What is over is counted and logged.
 */
const UNAUTHENTICATED_PER_ADDRESS: BucketSpec = { burst: 20, perSecond: 1 };
const UNAUTHENTICATED_IN_ALL: BucketSpec = { burst: 200, perSecond: 20 };
const THROTTLE_REPORT_MS = 60_000;

/**
 * What the HTTP edge checks once a request is authenticated and parsed, before the endpoint
 * sees it: the tool's scopes (a 403 must be an HTTP status, so it cannot wait for the router)
 * and the rate limits (429 + Retry-After). Every refusal is audited as `denied`.
 */
export class EdgeGate {
  private readonly perAddress = new TokenBuckets();
  private readonly inAll = new TokenBuckets();
  /** Unauthenticated refusals not recorded since the last report, and when that was. */
  private unrecorded = 0;
  private reportedAt = -Infinity;

  constructor(
    readonly auth: Authenticator,
    private limiter: RateLimiter,
    /** `params`: the refused request's (a retry's row joins its call's trace: beginInCallTrace). */
    private readonly audit: (b: AuditBegin, e: AuditEnd, params?: Record<string, unknown>) => Promise<void>,
    private readonly log?: Logger,
    /**
     * A tool's upstream name and its name before the hub renamed it (names.ts baseName), for this
     * principal and group: undefined when it routes nowhere. Scopes and rate-limit globs meet them
     * as a group's deny does (GlobTable). Asked only when a scope or limit goes by name, and then
     * only when some glob meets upstream names (meetsUpstream) or the name ends as a renamed one
     * does (mayBeRenamed), so the usual call pays nothing for it.
     */
    private readonly otherNames?: ToolNames,
  ) {}

  /** A reloaded `policy.rateLimit`, over the buckets as they are (RateLimiter.withSpec). */
  setLimits(spec: RateLimitSpec | undefined): void {
    this.limiter = this.limiter.withSpec(spec);
  }

  /**
   * The audit row of a request refused before its body was read: it reached the hub, so it is
   * recorded (`denied`, the HTTP status as the code), under the method its `Mcp-Method` header
   * names or UNREAD_MESSAGE. Unauthenticated ones are throttled (see UNAUTHENTICATED_IN_ALL).
   */
  async refusedUnread(r: UnreadRefusal): Promise<void> {
    if (r.principal === undefined && !this.mayRecordUnauthenticated(r.clientAddress ?? '')) return;
    const method = r.header('mcp-method');
    // The hub's span for it as for a request it read (spanOfMeta): its `_meta` is unread, but an
    // HTTP traceparent header names the client's trace; without one, the hub starts a trace.
    const span = spanOfMeta(undefined, r);
    await this.audit(
      {
        ts: Date.now(),
        requestId: '',
        principal: r.principal ?? UNAUTHENTICATED,
        group: r.group,
        clientAddress: r.clientAddress,
        // Its body unread, its header alone says its era (a later modern version's included).
        clientEra: eraOfRequest(undefined, undefined, r.header('mcp-protocol-version')),
        method: method && method.length <= 128 ? method : UNREAD_MESSAGE,
        requestBytes: r.requestBytes,
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId,
      },
      { outcome: 'denied', errorKind: 'policy', errorCode: r.status, errorMessage: r.message, latencyMs: 0 },
    );
  }

  private mayRecordUnauthenticated(address: string): boolean {
    if (this.perAddress.take(address, UNAUTHENTICATED_PER_ADDRESS) === 0 && this.inAll.take('', UNAUTHENTICATED_IN_ALL) === 0) return true;
    this.unrecorded++;
    const now = monotonicNow();
    if (now - this.reportedAt >= THROTTLE_REPORT_MS) {
      this.log?.warn({ unrecorded: this.unrecorded }, 'unauthenticated requests refused faster than the ledger records them; the rest are counted here');
      this.reportedAt = now;
      this.unrecorded = 0;
    }
    return false;
  }

  /**
   * `req` undefined: a message that is not JSON-RPC (it has no method). It still counts against
   * the principal's rate limit, so a flood of them writes no more rows than requests would.
   */
  admit(who: Identity, req: Request | undefined, facts: RequestFacts): EdgeRefusal | null | Promise<EdgeRefusal | null> {
    const tool = toolOf(req);
    const other = this.namesOf(tool, who.principal, facts.group);
    return other instanceof Promise ? other.then((o) => this.judged(who, req, tool, o, facts)) : this.judged(who, req, tool, other, facts);
  }

  private judged(who: Identity, req: Request | undefined, tool: string | undefined, other: OtherNames | undefined, facts: RequestFacts): EdgeRefusal | null | Promise<EdgeRefusal | null> {
    const refusal: EdgeRefusal | null =
      (tool === undefined ? null : (this.auth.checkToolScopes(who, tool, facts.group, other) as EdgeRefusal | null)) ?? this.overLimit(who.principal, bucketTool(req, tool), other);
    // Let in (every call of a hub within its limits): said at once, so the request waits no turn for it.
    if (!refusal) return null;
    return this.refused(who.principal, req, tool, refusal, facts).then(() => refusal);
  }

  /**
   * The called tool's other names (otherNames) when a scope or limit goes by name and some glob
   * meets upstream names, or the tool may have been renamed.
   */
  private namesOf(tool: string | undefined, principal: string, group: string | undefined): OtherNames | undefined | Promise<OtherNames | undefined> {
    if (tool === undefined || !this.otherNames) return undefined;
    const scopes = this.auth.toolScopes;
    // readsUpstreamOf: no glob list, or one whose upstream-meeting globs all match the hub name (a bare `*`), costs no lookup.
    if (!(scopes.readsUpstreamOf(tool) || this.limiter.readsUpstreamOf(tool) || ((scopes.size > 0 || this.limiter.byName) && mayBeRenamed(tool)))) return undefined;
    return this.otherNames(tool, principal, group);
  }

  /** Whether `policy.rateLimit` sets any limit (a caller may skip `admitLocal` without one). */
  get limiting(): boolean {
    return this.limiter.enabled;
  }

  /**
   * The rate limits alone, for a transport without HTTP authentication (`switchyard stdio`: the
   * pipe's principal is whoever spawned it, and there are no scopes to check). Audited as admit's.
   */
  async admitLocal(principal: string, req: Request | undefined, facts: RequestFacts): Promise<EdgeRefusal | null> {
    const tool = toolOf(req);
    const found = this.namesOf(tool, principal, facts.group);
    const other = found instanceof Promise ? await found : found;
    const refusal = this.overLimit(principal, bucketTool(req, tool), other);
    if (refusal) await this.refused(principal, req, tool, refusal, facts);
    return refusal;
  }

  /** A 429 when a rate limit of `principal` (and `tool`) is exhausted; a token is taken otherwise. */
  private overLimit(principal: string, tool: string | undefined, other?: OtherNames): EdgeRefusal | null {
    if (!this.limiter.enabled) return null;
    const v = this.limiter.check(principal, tool, other);
    if (v.ok) return null;
    const secs = Number.isFinite(v.retryAfterMs) ? Math.max(1, Math.ceil(v.retryAfterMs / 1000)) : 3600;
    return {
      status: 429,
      headers: { 'retry-after': String(secs) },
      message: `Too Many Requests: the ${v.limit === 'tool' ? `rate limit of ${tool}` : 'rate limit'} for ${principal} is exhausted; retry in ${secs} s`,
    };
  }

  /** The audit row of a request the gate refused. */
  private async refused(principal: string, req: Request | undefined, tool: string | undefined, refusal: EdgeRefusal, facts: RequestFacts): Promise<void> {
    const meta = req?.params?._meta as Record<string, unknown> | undefined;
    // The hub's span for it as for any request, so a traced call refused here is found by its trace id.
    const tp = facts.traceparent;
    const span = req ? spanOfMeta(meta, tp === undefined ? undefined : { header: () => tp }) : undefined;
    await this.audit(
      {
        ts: Date.now(),
        requestId: requestIdText(req ? req.id : facts.malformed?.id),
        principal,
        group: facts.group,
        clientAddress: facts.clientAddress,
        // The era the endpoint would have served it in: its header's, or its `_meta` claim's
        // (an initialize's only when modern), as classifyEra tells them.
        clientEra: req ? eraOfRequest(req.method, req.params, versionHeader(facts.headers)) : eraOfMalformed(facts),
        method: req?.method ?? facts.malformed?.method ?? INVALID_MESSAGE,
        hubName: tool ?? facts.malformed?.target,
        requestBytes: facts.requestBytes,
        traceId: span?.traceId,
        spanId: span?.spanId,
        parentSpanId: span?.parentSpanId,
      },
      { outcome: 'denied', errorKind: 'policy', errorCode: refusal.status, errorMessage: refusal.message, latencyMs: 0 },
      req?.params,
    );
  }
}

/**
 * The tool whose bucket a request takes a token from: none for a modern client's retry that
 * carries a requestState (the answer to the hub's or the upstream's question, such as a
 * confirmation), which goes on the call already counted, as a legacy client's answer on its
 * session does; its principal's bucket still counts it. A forged state takes nothing further:
 * the router refuses it before anything is forwarded. A legacy client's (a request without the
 * modern `_meta` version, as the endpoint tells the eras: classify.ts) is a stray the router
 * drops, its call a first like any other: it takes its token.
 */
function bucketTool(req: Request | undefined, tool: string | undefined): string | undefined {
  if (tool === undefined || typeof req?.params?.requestState !== 'string') return tool;
  const meta = req.params._meta;
  return isObj(meta) && meta[META_PROTOCOL_VERSION] !== undefined ? undefined : tool;
}

/** The tool a request calls, as the client names it (undefined for other methods). */
function toolOf(req: Request | undefined): string | undefined {
  return req?.method === 'tools/call' && typeof req.params?.name === 'string' ? req.params.name : undefined;
}

/** The MCP-Protocol-Version header among node:http's headers (the first, if sent twice). */
function versionHeader(headers: RequestFacts['headers']): string | undefined {
  return firstHeaderValue(headers?.['mcp-protocol-version']);
}

/** The era of a refused message that is no request (RequestFacts.malformed), as eraOfRequest tells a request's. */
function eraOfMalformed(facts: RequestFacts): ReturnType<typeof eraOfRequest> {
  const m = facts.malformed?.message;
  if (!m) return eraOfRequest(facts.malformed?.method, undefined, versionHeader(facts.headers));
  return eraOfRequest(typeof m.method === 'string' ? m.method : undefined, m.params, versionHeader(facts.headers));
}
