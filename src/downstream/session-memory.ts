import { createHash } from 'node:crypto';
import type { LoggingLevel } from '../protocol/types.js';

/** What a legacy session gathered at the hub that its id cannot carry (the id is fixed). */
export interface Kept {
  uris: string[];
  logLevel?: LoggingLevel;
}

/** Where it outlives the hub process (the ledger). Keys are digests of session ids. */
export interface SessionMemoryStore {
  /** The store's own id (the ledger file's), sealed into the ids of the sessions it keeps. */
  readonly home: string;
  get(key: string): Kept | undefined;
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
    private readonly now: () => number = Date.now,
  ) {}

  get home(): string {
    return this.store.home;
  }

  opened(sessionId: string): void {
    this.put(sessionId, keyOf(sessionId), { uris: [] });
  }

  /** What the session has here; undefined: it is not open at this hub (never was, or ended). */
  recall(sessionId: string): Kept | undefined {
    return this.store.get(keyOf(sessionId));
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
    if (lastSeen - (this.written.get(sessionId) ?? 0) < TOUCH_EVERY_MS) return;
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

function keyOf(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}
