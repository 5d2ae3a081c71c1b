/**
 * The ledger's own principals. No key holder or token subject may be named so, in any case: its
 * rows, idempotency keys and private lists could not be told apart from these.
 */
import { UNAUTHENTICATED } from '../policy/gate.js';

/** Clients of a hub without authentication. */
export const ANONYMOUS = 'anonymous';
/** Whoever spawned `switchyard stdio` (the pipe's one client). */
export const LOCAL = 'local';
/** The hub's own rows (catalog, plugins). */
export const HUB = 'hub';

export const RESERVED_PRINCIPALS: ReadonlySet<string> = new Set([HUB, ANONYMOUS, LOCAL, UNAUTHENTICATED]);

/** What the ledger names a reserved principal for, in the words of an error. */
export function reservedFor(lower: string): string {
  if (lower === HUB) return "the hub's own rows (catalog, plugins)";
  if (lower === LOCAL) return 'the client of `switchyard stdio`';
  if (lower === ANONYMOUS) return 'clients of a hub without authentication';
  return 'requests refused before they had a principal';
}
