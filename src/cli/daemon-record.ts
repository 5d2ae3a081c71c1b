/**
 * Where a running daemon listens, as it says itself: `<ledger>.daemon` beside its ledger (in its
 * state folder), written once it listens and removed when it exits. `listen` is applied only at a
 * restart, so after an edit of `listen.port` (or host, or admin) the config names an address the
 * running daemon does not have: the CLI, finding nothing there, reads this record to find the
 * daemon of that config where it is (daemon-client.ts), and says that the two differ.
 */
import { readFileSync, realpathSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { makeStateDir, stateDir } from '../paths.js';
import { holderRuns, processStart } from '../process-alive.js';

/** What a daemon writes of itself. */
export interface DaemonRecord {
  pid: number;
  /** processStart of the daemon: its pid, used again by another process, is told apart. */
  started?: string;
  /** The absolute path of the config file it runs with. */
  config: string;
  /** Its MCP listener as bound (a wildcard host as it is; the CLI reaches it over loopback). */
  listen: { host: string; port: number };
  /**
   * The file's listen when it started: an address that differs from it came from `start --host`
   * or `--port`, and a file that names another one now was edited since.
   */
  fileListen?: { host: string; port: number };
  /** Its admin listener, when it has one: the socket's absolute path, or a TCP address. */
  admin?: { path: string } | { host: string; port: number };
  /**
   * The ledger it writes (an absolute path, or `:memory:`), when it keeps one: ledger.path is
   * applied only at a restart, so after an edit the CLI's `ledger` commands find it here.
   */
  ledger?: string;
}

/**
 * The record's file for a config whose ledger is at `ledgerPath`: beside it, named for it, as its
 * lock is (`ledger.db.daemon`), since configs with ledgers of their own may share one state
 * folder (`data/`): one name for the folder let each hub's record replace another's, and the
 * first to stop removed the one left. An in-memory ledger's: in the config's state folder.
 */
export function daemonRecordFile(ledgerPath: string, configFile: string): string {
  return ledgerPath === ':memory:' ? join(stateDir(ledgerPath, dirname(resolve(configFile))), 'daemon') : `${resolve(dirname(resolve(configFile)), ledgerPath)}.daemon`;
}

/**
 * Writes this process's record, owner-only, in one step (written beside, then renamed: a CLI
 * reading it meanwhile finds the old one or the new one, never half of one), and removes it when
 * the process exits if it is still this process's. Throws what the file system says.
 */
export function writeDaemonRecord(file: string, record: Omit<DaemonRecord, 'pid' | 'started'>): void {
  makeStateDir(dirname(file));
  const whole: DaemonRecord = { pid: process.pid, started: processStart(process.pid), ...record };
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(whole) + '\n', { mode: 0o600 });
  renameSync(tmp, file);
  process.once('exit', () => {
    try {
      if (readDaemonRecord(file)?.pid === process.pid) unlinkSync(file);
    } catch {
      // another hub's now, or gone: left as it is
    }
  });
}

/** The record at `file` as written, or undefined (none, unreadable, not of this shape). */
export function readDaemonRecord(file: string): DaemonRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
  const r = v as Partial<DaemonRecord> | null;
  const address = (a: unknown): a is { host: string; port: number } =>
    typeof a === 'object' && a !== null && typeof (a as { host?: unknown }).host === 'string' && Number.isInteger((a as { port?: unknown }).port);
  if (typeof r !== 'object' || r === null || !Number.isInteger(r.pid) || typeof r.config !== 'string' || !address(r.listen)) return undefined;
  const admin = r.admin;
  const adminOk = admin === undefined || address(admin) || (typeof admin === 'object' && admin !== null && typeof (admin as { path?: unknown }).path === 'string');
  if (!adminOk || (r.started !== undefined && typeof r.started !== 'string') || (r.fileListen !== undefined && !address(r.fileListen)) || (r.ledger !== undefined && typeof r.ledger !== 'string')) return undefined;
  return r as DaemonRecord;
}

/**
 * The record at `file` when it is that of a daemon running now with `configFile`, and was written
 * by this user, root or the config file's owner (`configUid`): a record another user could write
 * would send the CLI, and its admin key, wherever it said. Undefined otherwise.
 */
export function runningDaemonRecord(file: string, configFile: string, configUid: number): DaemonRecord | undefined {
  let uid: number;
  try {
    uid = statSync(file).uid;
  } catch {
    return undefined;
  }
  const me = process.getuid?.();
  if (me !== undefined && uid !== me && uid !== 0 && uid !== configUid) return undefined;
  const r = readDaemonRecord(file);
  if (!r || real(r.config) !== real(configFile) || !holderRuns(r.pid, r.started)) return undefined;
  return r;
}

/** A file's path with its links resolved (one config by two spellings is one config), or as it is when it is gone. */
function real(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return resolve(file);
  }
}
