/**
 * One-use tickets for the status page's live feed. A browser cannot put an `Authorization`
 * header on a WebSocket, so with authentication on the page first asks for a ticket
 * (`POST /admin/ticket`, an ordinary admin request with its header) and opens
 * `/admin/events?ticket=…` with it. A ticket is random, works once, and only for a short
 * while: the credential itself never goes into a URL.
 */
import { randomBytes } from 'node:crypto';
import { monotonicNow } from '../monotonic.js';
import type { Lapse } from '../auth/oauth.js';

/** Long enough for the page to open its WebSocket, short enough that a leaked URL is stale. */
export const TICKET_TTL_MS = 30_000;
/** Tickets asked for and not used are dropped, oldest first, beyond this many. */
const MAX_OPEN = 64;

export class AdminTickets {
  /**
   * Ticket → when it stops working (on `now`), and when the credential that asked for it does
   * (epoch ms: the feed it opens ends then). A Map keeps insertion order: the first entry is the oldest.
   */
  private readonly open = new Map<string, { until: number; credentialExpiresAt?: number; lapse?: Lapse }>();

  /**
   * `now`: the monotonic clock a ticket's life is measured on: on the wall clock, stepped back an
   * hour (NTP, an operator), a ticket left in a leaked URL worked for that hour, and stepped
   * ahead, every ticket just issued failed. `wallNow`: the clock of credential expiries (a
   * token's `exp` is a time of day), read once at issue for the time the credential has left.
   */
  constructor(
    private readonly now: () => number = monotonicNow,
    private readonly ttlMs = TICKET_TTL_MS,
    private readonly wallNow: () => number = Date.now,
  ) {}

  get size(): number {
    return this.open.size;
  }

  /** `lapse`: the asking credential's (an OAuth token's), which the feed the ticket opens is watched by. */
  issue(credentialExpiresAt?: number, lapse?: Lapse): { ticket: string; expiresInMs: number } {
    const now = this.now();
    for (const [t, { until }] of this.open) if (until <= now) this.open.delete(t);
    while (this.open.size >= MAX_OPEN) this.open.delete(this.open.keys().next().value!);
    const ticket = randomBytes(32).toString('base64url');
    const until = now + (credentialExpiresAt === undefined ? this.ttlMs : Math.min(this.ttlMs, credentialExpiresAt - this.wallNow()));
    this.open.set(ticket, { until, credentialExpiresAt, lapse });
    return { ticket, expiresInMs: until - now };
  }

  /** Every open ticket stops working (a key changed: a ticket does not say which key asked for it). */
  revokeAll(): void {
    this.open.clear();
  }

  /**
   * Once, for a ticket issued and not yet expired: when its credential stops working (if it
   * does); null otherwise. The ticket is gone afterwards either way.
   */
  redeem(ticket: string): { credentialExpiresAt?: number; lapse?: Lapse } | null {
    const t = this.open.get(ticket);
    if (t === undefined) return null;
    this.open.delete(ticket);
    return t.until > this.now() ? { credentialExpiresAt: t.credentialExpiresAt, lapse: t.lapse } : null;
  }
}
