import { dirname, resolve } from 'node:path';
import type { HubConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { Ledger } from './ledger.js';
import { NullLedger, type AuditSink } from './sink.js';

/**
 * The hub's ledger from its config: the SQLite Ledger (path relative to the config file's
 * folder), or a NullLedger when `ledger.enabled` is false. Throws LedgerVersionError for a
 * database written by a newer Switchyard.
 */
export function openLedger(config: HubConfig, log: Logger, opts: { now?: () => number } = {}): AuditSink {
  if (!config.ledger.enabled) return new NullLedger();
  const base = config.file ? dirname(config.file) : process.cwd();
  return Ledger.open({
    path: resolve(base, config.ledger.path),
    storeBodies: config.ledger.storeBodies,
    redactKeys: config.ledger.redactKeys || undefined,
    idempotencyTtlMs: config.ledger.idempotencyTtlMs,
    log: log.child({ component: 'ledger' }),
    now: opts.now,
  });
}
