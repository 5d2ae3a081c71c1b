/**
 * One hub process per ledger file. The ledger hands out row ids in memory and marks rows left
 * in flight as unknown when it opens, so two hubs writing one file (two `switchyard stdio`
 * windows on one config, or one next to the daemon) would fail each other's calls. A lock file
 * next to the database says who writes it; a lock whose process is gone is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { HubConfig } from '../config/types.js';

export class LedgerBusyError extends Error {
  constructor(
    readonly path: string,
    readonly holder: { pid: number; command?: string },
  ) {
    super(
      `the ledger ${path} is in use by another switchyard process (pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''}). ` +
        'Share that daemon with `switchyard connect`, or give this config its own ledger.path.',
    );
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function mtime(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function readHolder(file: string): { pid: number; command?: string } | undefined {
  try {
    const v = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown; command?: unknown };
    return typeof v.pid === 'number' ? { pid: v.pid, command: typeof v.command === 'string' ? v.command : undefined } : undefined;
  } catch {
    return undefined; // being written right now, or garbage: treated as stale below
  }
}

/** The live process holding the writer lock of the ledger at `dbPath`, if any. */
export function ledgerWriter(dbPath: string): { pid: number; command?: string } | undefined {
  const holder = readHolder(`${resolve(dbPath)}.lock`);
  return holder && alive(holder.pid) ? holder : undefined;
}

/**
 * Takes the writer lock of the config's ledger (nothing when the ledger is off), waiting up to
 * `waitMs` for a live holder to go away (a client's short-lived probe process, a restart).
 * Released when this process exits. Throws LedgerBusyError.
 */
export async function lockLedger(config: HubConfig, command: string, waitMs: number): Promise<void> {
  if (!config.ledger.enabled) return;
  const db = resolve(config.file ? dirname(config.file) : process.cwd(), config.ledger.path);
  const file = `${db}.lock`;
  const deadline = Date.now() + waitMs;
  mkdirSync(dirname(db), { recursive: true });
  for (;;) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, JSON.stringify({ pid: process.pid, command }));
      closeSync(fd);
      process.once('exit', () => {
        if (readHolder(file)?.pid === process.pid) unlinkSync(file);
      });
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST') throw err;
    }
    const holder = readHolder(file);
    // An unreadable lock may be one being written this instant: only an old one is stale.
    if (!holder && Date.now() - mtime(file) < 2_000) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    if (!holder || !alive(holder.pid)) {
      // Stale: its process is gone (or the file is unreadable). Remove it and try again.
      try {
        unlinkSync(file);
      } catch {
        // someone else removed it first
      }
      continue;
    }
    if (holder.pid === process.pid) return;
    if (Date.now() >= deadline) throw new LedgerBusyError(db, holder);
    await new Promise((r) => setTimeout(r, 100));
  }
}
