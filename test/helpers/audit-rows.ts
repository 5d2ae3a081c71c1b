import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { HubProcess } from './hub-process.js';
import type { Json } from './wire.js';

/** The audit rows of `method` (tools/call by default) of `principal` in the hub's ledger, oldest first: outcome, code and message. */
export function rowsOf(h: HubProcess, principal: string, method = 'tools/call'): Json[] {
  const db = new Database(join(h.dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare('SELECT outcome, error_code AS code, error_message AS message FROM audit WHERE method = ? AND principal = ? ORDER BY id').all(method, principal) as Json[];
  } finally {
    db.close();
  }
}
