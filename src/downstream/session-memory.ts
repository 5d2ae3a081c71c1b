import { createHash } from 'node:crypto';
import type { LoggingLevel } from '../protocol/types.js';

/** What a legacy session gathered at the hub that its id cannot carry (the id is fixed). */
export interface Kept {
  uris: string[];
  logLevel?: LoggingLevel;
}

/** Where it outlives the hub process (the ledger). Keys are digests of session ids. */
export interface SessionMemoryStore {
  get(key: string): Kept | undefined;
  put(key: string, kept: Kept): void;
  delete(key: string): void;
}

/** More is not worth keeping for one session: past it, a subscription lives in this process only. */
export const MAX_KEPT_URIS = 1_000;

/**
 * The subscriptions and log level of legacy HTTP sessions, so a hub that takes a session back
 * after a restart (SessionIds.reopen) gives it what it had: its client was never told they
 * ended, and would wait for updates that never come.
 */
export class SessionMemory {
  constructor(private readonly store: SessionMemoryStore) {}

  recall(sessionId: string): Kept | undefined {
    return this.store.get(keyOf(sessionId));
  }

  subscribed(sessionId: string, uri: string): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key) ?? { uris: [] };
    if (kept.uris.includes(uri) || kept.uris.length >= MAX_KEPT_URIS) return;
    this.store.put(key, { ...kept, uris: [...kept.uris, uri] });
  }

  unsubscribed(sessionId: string, uri: string): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key);
    if (!kept?.uris.includes(uri)) return;
    this.store.put(key, { ...kept, uris: kept.uris.filter((u) => u !== uri) });
  }

  levelSet(sessionId: string, logLevel: LoggingLevel): void {
    const key = keyOf(sessionId);
    const kept = this.store.get(key) ?? { uris: [] };
    if (kept.logLevel !== logLevel) this.store.put(key, { ...kept, logLevel });
  }

  ended(sessionId: string): void {
    const key = keyOf(sessionId);
    if (this.store.get(key)) this.store.delete(key);
  }
}

function keyOf(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('hex');
}
