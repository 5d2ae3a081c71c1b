import { createHash } from 'node:crypto';
import type { LoggingLevel } from '../protocol/types.js';
import { monotonicNow } from '../monotonic.js';

/** What a legacy session gathered at the hub that its id cannot carry (the id is fixed). */
export interface Kept {
  uris: string[];
  logLevel?: LoggingLevel;
  /**
   * The API key that opened the session (openerOf its configured hash), which alone takes it
   * back; '' opened without one (an OAuth token, or authentication off): its principal takes it
   * back. Absent: a row from before keys were recorded (migrations/0011): any key of its principal.
   */
  opener?: string;
}

/** Where it outlives the hub process (the ledger). Keys are digests of session ids. */
export interface SessionMemoryStore {
  /** The store's own id (the ledger file's), sealed into the ids of the sessions it keeps. */
  readonly home: string;
  get(key: string): Kept | undefined;
  entries(): Iterable<[string, Kept]>;
  put(key: string, kept: Kept): void;
  delete(key: string): void;
}

/** More is not worth keeping for one session: past it, a subscription lives in this process only. */
export const MAX_KEPT_URIS = 1_000;
/** A session in use has its row rewritten this often, so the 30-day prune never takes it. */
export const TOUCH_EVERY_MS = 24 * 60 * 60 * 1000;

/**
 * The legacy HTTP sessions open at this hub and what each gathered here (its subscriptions and
 * log level), so a restarted hub that takes a session back (SessionIds.reopen) gives it what it
 * had: its client was never told they ended, and would wait for updates that never come. A
 * session with no row (it ended) is not taken back by a hub of the same ledger.
 */
export class SessionMemory {
  /** When this process last wrote each session's row, by session id (touch hashes nothing until one is due). */
  private readonly written = new Map<string, number>();

  constructor(
    private readonly store: SessionMemoryStore,
    /** The clock of LegacySession.lastSeen (monotonic): only compared with it, never stored. */
    private readonly now: () => number = monotonicNow,
  ) {}

  get home(): string {
    return this.store.home;
  }

  /** `apiKey`: the configured hash of the key that opened it (Identity.key), if one did. */
  opened(sessionId: string, apiKey: string | undefined): void {
    this.put(sessionId, keyOf(sessionId), { uris: [], opener: openerOf(apiKey) });
  }

  /**
   * What the session has here, when `apiKey` (as for opened) may take it back; undefined: it is
   * not open at this hub (never was, or ended), or another credential opened it. A row from
   * before openers were kept is bound to the first key that takes it back.
   */
  recall(sessionId: string, apiKey: string | undefined): Kept | undefined {
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (kept?.opener === undefined) {
      if (kept) this.put(sessionId, key, { ...kept, opener: openerOf(apiKey) });
      return kept;
    }
    // '' (no API key opened it): its principal's, as the caller checked.
    return kept.opener === '' || kept.opener === openerOf(apiKey) ? kept : undefined;
  }

  /**
   * A reload removed these keys (configured hashes): the sessions they opened that this process
   * does not hold are not taken back by any hub of this ledger, and neither are rows whose opener
   * is not known. How many rows went.
   */
  forgetOpenedBy(apiKeys: ReadonlySet<string>): number {
    if (apiKeys.size === 0) return 0;
    const openers = new Set([...apiKeys].map(openerOf));
    const gone = [...this.store.entries()].filter(([, k]) => k.opener === undefined || openers.has(k.opener)).map(([key]) => key);
    for (const key of gone) this.store.delete(key);
    return gone.length;
  }

  subscribed(sessionId: string, uri: string): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (!kept || kept.uris.includes(uri) || kept.uris.length >= MAX_KEPT_URIS) return;
    this.put(sessionId, key, { ...kept, uris: [...kept.uris, uri] });
  }

  unsubscribed(sessionId: string, uri: string): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (!kept?.uris.includes(uri)) return;
    this.put(sessionId, key, { ...kept, uris: kept.uris.filter((u) => u !== uri) });
  }

  levelSet(sessionId: string, logLevel: LoggingLevel): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (kept && kept.logLevel !== logLevel) this.put(sessionId, key, { ...kept, logLevel });
  }

  /** The session was used at `lastSeen`: its row is rewritten once a day. */
  touch(sessionId: string, lastSeen: number): void {
    // Not written by this process (a session taken back after a restart): due at once, as before.
    if (lastSeen - (this.written.get(sessionId) ?? -Infinity) < TOUCH_EVERY_MS) return;
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (kept) this.put(sessionId, key, kept);
    else this.written.set(sessionId, this.now()); // not kept here (another hub's): looked at once a day
  }

  ended(sessionId: string): void {
    const key = keyOf(sessionId);
    this.written.delete(sessionId);
    if (this.store.get(key)) this.store.delete(key);
  }

  private put(sessionId: string, key: string, kept: Kept): void {
    this.written.set(sessionId, this.now());
    this.store.put(key, kept);
  }
}

/**
 * What a row keeps of the key that opened its session: a digest of its configured hash, enough
 * to tell a principal's keys apart; never the key (the ledger holds no secret) nor the hash.
 */
export function openerOf(apiKey: string | undefined): string {
  return apiKey === undefined ? '' : createHash('sha256').update(`switchyard session opener v1\0${apiKey.toLowerCase()}`).digest('hex').slice(0, 32);
}

function keyOf(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}
