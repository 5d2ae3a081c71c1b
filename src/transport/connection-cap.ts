/**
 * How many client connections the hub's listener takes at once when the config does not say
 * (`listen.maxConnections`). Each is a file descriptor; so are the ledger's files, each stdio
 * upstream's pipes and each upstream connection. A flood of connections up to the process's
 * open-file limit left none for those: a stdio server killed meanwhile could not be started
 * again (spawn EMFILE, five times, so `failed` for a minute), and a pending-file switch or a new
 * upstream connection would fail the same way until the flood ended. A reserve is kept for them.
 */
import { readFileSync } from 'node:fs';

/** Descriptors kept for the hub's own files, processes and upstream connections (or a quarter of a small limit). */
const RESERVE = 256;

/** The soft open-file limit (Linux: /proc/self/limits), or undefined where it cannot be read or is unlimited. */
export function openFileLimit(limits = '/proc/self/limits'): number | undefined {
  try {
    const line = readFileSync(limits, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft && /^[0-9]+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

/** The cap for an open-file limit of `limit`: the limit less the reserve, a quarter kept of a small one. */
export function defaultMaxConnections(limit = openFileLimit()): number | undefined {
  if (limit === undefined) return undefined;
  return Math.max(1, limit - Math.min(RESERVE, Math.ceil(limit / 4)));
}
