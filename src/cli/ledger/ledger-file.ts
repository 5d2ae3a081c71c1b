import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DEFAULT_KEY_TTL_MS, DEFAULT_LEDGER_PATH } from '../../ledger/db.js';
import { interpolateEnv } from '../../config/interpolate.js';
import { parseJsonText } from '../../config/load.js';
import { durationMs } from '../../config/duration.js';
import { NO_CONFIG } from '../config-problems.js';
import { UsageError } from '../usage-error.js';

/** The options every `ledger` subcommand takes (the parent command's): which ledger, by file or config. */
export interface CommonArgs {
  db?: string;
  config?: string;
}

/** The ledger file: --db, else `ledger.path` of the config file (relative to its folder). */
export function resolveLedgerPath(args: CommonArgs): string {
  if (args.db) return resolve(args.db);
  const file = resolve(args.config ?? 'hub.config.json');
  if (!existsSync(file)) {
    if (args.config) throw new UsageError(`${args.config}: ${NO_CONFIG}: give the config whose ledger.path names the ledger, or the ledger itself with --db`);
    return resolve(DEFAULT_LEDGER_PATH);
  }
  const p = ledgerKey(file, 'path');
  // One that is no path (a list, a number, ""): the default ledger beside the config is another
  // than the one the config means, to be read, or pruned, as its own.
  if (p !== undefined && (typeof p !== 'string' || p === ''))
    throw new UsageError(`${file}: ledger.path must be a path (a string, not empty): give the ledger's, or the ledger itself with --db`);
  return resolve(dirname(file), p ?? DEFAULT_LEDGER_PATH);
}

/**
 * SQLite's own words for a file it cannot read ("file is not a database") name no file: with
 * --db, the config's ledger.path and a typo all possible, the operator is told which one.
 */
export function sqliteSaysOf(path: string | undefined, err: unknown): Error {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (err as { code?: unknown } | null)?.code;
  if (path === undefined || typeof code !== 'string' || !code.startsWith('SQLITE_') || e.message.includes(path)) return e;
  return new Error(`${path}: ${e.message} (${code})`);
}

/**
 * One key of the config file's `ledger` (its ${env:…} filled in, as the hub does): only that is
 * read, so a variable that only some server's secret needs is not this command's business.
 */
function ledgerKey(file: string, key: 'path' | 'idempotencyTtl' | 'enabled'): unknown {
  let cfg: unknown;
  try {
    cfg = parseJsonText(readFileSync(file, 'utf8'));
  } catch (err) {
    // An errno by its code, as every command says one (Node's own words repeat the syscall: "EISDIR: illegal operation on a directory, read").
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(code ? `cannot read ${file} (${code})` : `cannot read ${file}: ${(err as Error).message}`);
  }
  const raw = (cfg as { ledger?: Record<string, unknown> } | null)?.ledger?.[key];
  if (raw === undefined) return undefined;
  const { value, problems } = interpolateEnv({ ledger: { [key]: raw } }, process.env);
  if (problems.length) throw new UsageError(`${file}: ${problems.join('; ')}`);
  return (value as { ledger: Record<string, unknown> }).ledger[key];
}

/**
 * Whether the config file turns the ledger off (`ledger.enabled: false`): then no start makes
 * the ledger ledger.path names, and "the hub makes it when it starts" would send the operator
 * to wait for a file that never comes.
 */
export function ledgerOff(args: CommonArgs): boolean {
  const file = resolve(args.config ?? 'hub.config.json');
  return existsSync(file) && ledgerKey(file, 'enabled') === false;
}

/**
 * How long the hub remembers an idempotency key (`ledger.idempotencyTtl` of the config, as the
 * hub reads it; a day without one): a key past it counts as absent to a retry, though it stays in
 * the table until the hub's hourly purge. Read from the config file whichever file --db names.
 */
export function resolveKeyTtlMs(args: CommonArgs): number {
  const file = resolve(args.config ?? 'hub.config.json');
  if (!existsSync(file)) return DEFAULT_KEY_TTL_MS;
  const raw = ledgerKey(file, 'idempotencyTtl');
  if (raw === undefined) return DEFAULT_KEY_TTL_MS;
  const ms = durationMs(raw);
  if (ms === undefined) throw new UsageError(`${file}: ledger.idempotencyTtl must be a whole number of milliseconds or a duration such as "24h"`);
  return ms;
}
