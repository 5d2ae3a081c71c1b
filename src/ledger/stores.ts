import type { Database } from 'better-sqlite3';
import type { Logger } from '../log.js';
import type { ItemPinKind } from '../catalog/pins.js';
import { LedgerCapabilityStore } from './capabilities.js';
import { DEFAULT_KEY_TTL_MS } from './db.js';
import { GroupCommit } from './group-commit.js';
import { IdempotencyStore } from './idempotency.js';
import { LedgerNameStore } from './names.js';
import { LedgerPinStore, PinChangeWatch } from './pins.js';
import { LedgerResourceRouteStore } from './resource-routes.js';
import { LedgerSessionMemoryStore } from './session-memory.js';
import { LedgerSpentStates } from './spent-states.js';

const PURGE_EVERY_MS = 60 * 60 * 1000;
/**
 * How long a write here waits for SQLite's write lock once one was refused for it (another
 * process holding it past busy_timeout), until one commits again: these writes run on the hub's
 * event loop. Longer than the ingest thread's usual transaction (a few ms); the backlog it moves
 * once the lock is let go can take longer, and a keyed call then may be refused once more.
 */
const LOCKED_WAIT_MS = 100;

/**
 * The ledger's tables other than audit (idempotency keys, hub names, capabilities, resource
 * routes, session memory, spent requestStates, pins): SQLite writes on the hub's thread, through one group commit.
 * Audit rows go another way (pending files, the ingest thread), so that commit chains nothing.
 */
export class LedgerStores {
  readonly gc: GroupCommit;
  readonly idempotency: IdempotencyStore;
  readonly names: LedgerNameStore;
  readonly capabilities: LedgerCapabilityStore;
  readonly resourceRoutes: LedgerResourceRouteStore;
  readonly sessionMemory: LedgerSessionMemoryStore;
  readonly spentStates: LedgerSpentStates;
  readonly pins: LedgerPinStore;
  readonly itemPins: Record<ItemPinKind, LedgerPinStore>;
  readonly pinWatch: PinChangeWatch;
  private purgeTimer: NodeJS.Timeout | undefined;

  constructor(db: Database, idempotencyTtlMs: number | undefined, now: () => number, log: Logger) {
    // Audit rows are chained by the applier (its own group commit); these writes are not.
    const gc = (this.gc = new GroupCommit(db, { before: noop, after: noop }, log, LOCKED_WAIT_MS));
    this.idempotency = new IdempotencyStore(db, gc, idempotencyTtlMs ?? DEFAULT_KEY_TTL_MS, now, log);
    this.names = new LedgerNameStore(db, gc, now, log);
    this.capabilities = new LedgerCapabilityStore(db, gc, now, log);
    this.resourceRoutes = new LedgerResourceRouteStore(db, gc, now, log);
    this.sessionMemory = new LedgerSessionMemoryStore(db, gc, now, log);
    this.spentStates = new LedgerSpentStates(db, gc, now, log, this.sessionMemory.home);
    const pinWatch = (this.pinWatch = new PinChangeWatch(db, log));
    this.pins = new LedgerPinStore(db, gc, log, pinWatch);
    this.itemPins = {
      prompts: new LedgerPinStore(db, gc, log, pinWatch, 'prompts'),
      resources: new LedgerPinStore(db, gc, log, pinWatch, 'resources'),
      resourceTemplates: new LedgerPinStore(db, gc, log, pinWatch, 'resourceTemplates'),
    };
  }

  /** Expired idempotency keys go now and hourly: once the start's recovery is done. */
  startPurging(): void {
    const purge = (): void => void this.idempotency.purgeExpired().catch(() => undefined);
    purge();
    this.purgeTimer = setInterval(purge, PURGE_EVERY_MS);
    this.purgeTimer.unref();
  }

  /** No more purges: a close is under way (close() follows once the last rows are in). */
  stopPurging(): void {
    clearInterval(this.purgeTimer);
  }

  /** Rejects idempotency waiters nobody will answer, stops the pin polls, commits what is queued. */
  close(): void {
    this.idempotency.close();
    this.pins.close();
    for (const p of Object.values(this.itemPins)) p.close();
    this.gc.close();
  }
}

function noop(): void {}
