import type { Authenticator, Identity, Refusal } from '../auth/authenticator.js';
import type { AuditBegin, AuditEnd } from '../ledger/types.js';
import { LEGACY, MODERN } from '../protocol/era.js';
import type { Request } from '../protocol/jsonrpc.js';
import { META_PROTOCOL_VERSION } from '../protocol/meta.js';
import type { RateLimiter } from './rate-limit.js';

/** A refusal at the edge, with the status the HTTP transport sends (403 step-up, 429). */
export interface EdgeRefusal extends Omit<Refusal, 'status'> {
  status: 403 | 429;
}

export interface RequestFacts {
  clientAddress?: string;
  requestBytes?: number;
}

/**
 * What the HTTP edge checks once a request is authenticated and parsed, before the endpoint
 * sees it: the tool's scopes (a 403 must be an HTTP status, so it cannot wait for the router)
 * and the rate limits (429 + Retry-After). Every refusal is audited as `denied`.
 */
export class EdgeGate {
  constructor(
    readonly auth: Authenticator,
    private readonly limiter: RateLimiter,
    private readonly audit: (b: AuditBegin, e: AuditEnd) => Promise<void>,
  ) {}

  async admit(who: Identity, req: Request, facts: RequestFacts): Promise<EdgeRefusal | null> {
    const tool = req.method === 'tools/call' && typeof req.params?.name === 'string' ? req.params.name : undefined;
    let refusal: EdgeRefusal | null = tool === undefined ? null : (this.auth.checkToolScopes(who, tool) as EdgeRefusal | null);
    if (!refusal && this.limiter.enabled) {
      const v = this.limiter.check(who.principal, tool);
      if (!v.ok) {
        const secs = Number.isFinite(v.retryAfterMs) ? Math.max(1, Math.ceil(v.retryAfterMs / 1000)) : 3600;
        refusal = {
          status: 429,
          headers: { 'retry-after': String(secs) },
          message: `Too Many Requests: the ${v.limit === 'tool' ? `rate limit of ${tool}` : 'rate limit'} for ${who.principal} is exhausted; retry in ${secs} s`,
        };
      }
    }
    if (refusal) {
      const meta = req.params?._meta as Record<string, unknown> | undefined;
      await this.audit(
        {
          ts: Date.now(),
          requestId: String(req.id),
          principal: who.principal,
          clientAddress: facts.clientAddress,
          clientEra: meta?.[META_PROTOCOL_VERSION] !== undefined ? MODERN : LEGACY,
          method: req.method,
          hubName: tool,
          requestBytes: facts.requestBytes,
        },
        { outcome: 'denied', errorKind: 'policy', errorCode: refusal.status, errorMessage: refusal.message, latencyMs: 0 },
      );
    }
    return refusal;
  }
}
