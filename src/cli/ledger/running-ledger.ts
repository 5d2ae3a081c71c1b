/**
 * The ledger a running daemon of this config writes when it is not the one the config names now:
 * ledger.path is applied only at a restart, so after an edit the file names a ledger the daemon
 * has not made yet, and `ledger query` said there was none while the daemon wrote the old one.
 * The daemon records its ledger beside both (daemon-record.ts, written again at each reload).
 */
import { existsSync, statSync } from 'node:fs';
import { daemonRecordFile, runningDaemonRecord } from '../daemon-record.js';

export function runningDaemonLedger(path: string, configFile: string): { ledger: string; pid: number } | undefined {
  let uid: number;
  try {
    uid = statSync(configFile).uid;
  } catch {
    return undefined;
  }
  const r = runningDaemonRecord(daemonRecordFile(path, configFile), configFile, uid);
  if (r?.ledger === undefined || r.ledger === ':memory:' || r.ledger === path || !existsSync(r.ledger)) return undefined;
  return { ledger: r.ledger, pid: r.pid };
}
