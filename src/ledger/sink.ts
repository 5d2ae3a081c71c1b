import type { NameStore } from '../catalog/names.js';
import type { ItemPinKind, PinStore } from '../catalog/pins.js';
import type { ResourceRouteStore } from '../catalog/resource-routes.js';
import type { SessionMemoryStore } from '../downstream/session-memory.js';
import type { CapabilityStore } from '../hub/known-capabilities.js';
import type { SpentStateStore } from '../router/request-state.js';
import type { AuditBegin, AuditEnd, AuditHandle, IdempotencyClaim, KeyOwner, StoredAnswer } from './types.js';

/** What the router needs from the ledger; the SQLite Ledger implements it, NullLedger skips it. */
export interface AuditSink {
  /** false: nothing is recorded, so the router skips work done only for the ledger (sizes). */
  readonly enabled?: boolean;
  begin(b: AuditBegin): AuditHandle;
  /** Resolves once everything queued so far is committed. */
  whenCommitted(): Promise<void>;
  /** True when whenCommitted() would wait for nothing (nothing queued, no write failed this turn). Absent: wait. */
  committedNow?(): boolean;
  record(b: AuditBegin, e: AuditEnd): Promise<void>;
  readonly idempotency: {
    claim(owner: KeyOwner, key: string, tool: string, argsHash: string): IdempotencyClaim;
    /** The claim's answer for a key whose call has ended (or a conflict), without claiming; undefined otherwise. */
    peek?(owner: KeyOwner, key: string, tool: string, argsHash: string): IdempotencyClaim | undefined;
    complete(owner: KeyOwner, key: string, answer: StoredAnswer): void;
    abandon(owner: KeyOwner, key: string): void;
    /** The call may have run but its outcome is not known: the key stays refused. */
    markUnknown(owner: KeyOwner, key: string): void;
    /** Whether another request waits now for the answer of the key's call in flight. */
    awaited?(owner: KeyOwner, key: string): boolean;
  };
  close(): Promise<void>;
  /** Persistent hub-name assignments, so names survive restarts. */
  nameStore?(): NameStore | undefined;
  /** Pinned tool definitions; absent (NullLedger): the catalog keeps them in memory. */
  pinStore?(): PinStore | undefined;
  /** Pinned prompts, resources and templates, a store per kind; absent: kept in memory. */
  itemPinStores?(): Record<ItemPinKind, PinStore> | undefined;
  /** Reads the pins changed by another process now (the CLI's approval); true when one changed. Absent: pins are in memory. */
  lookForPinChanges?(): boolean;
  /** Each server's capabilities when last ready, so they count while it starts after a restart. */
  capabilityStore?(): CapabilityStore | undefined;
  /** The resource URIs and templates each server last showed, so they route while it is down after a restart. */
  resourceRouteStore?(): ResourceRouteStore | undefined;
  /** The legacy sessions open at the hub and what they gathered, so a restarted hub takes a session back whole (and not an ended one). */
  sessionMemoryStore?(): SessionMemoryStore | undefined;
  /** The hub's requestStates spent here, so a restarted hub does not take one again; absent: spent in this process only. */
  spentStateStore?(): SpentStateStore | undefined;
}

/** `ledger.enabled: false`: nothing is recorded and idempotency keys are not honoured. */
export class NullLedger implements AuditSink {
  readonly enabled = false;
  private id = 0;
  begin(): AuditHandle {
    const rowId = ++this.id;
    return { rowId, finish: () => Promise.resolve() };
  }
  whenCommitted(): Promise<void> {
    return Promise.resolve();
  }
  record(): Promise<void> {
    return Promise.resolve();
  }
  readonly idempotency = {
    claim: (): IdempotencyClaim => ({ kind: 'new' }),
    complete: () => {},
    abandon: () => {},
    markUnknown: () => {},
  };
  close(): Promise<void> {
    return Promise.resolve();
  }
}
