import { readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * The file SQLite opens for `dbPath`: every symlink resolved, so that a ledger.path that is a
 * symlink to another config's ledger (or to the folder holding it) has that ledger's lock.
 * SQLite follows a symlink to a file not created yet and creates its target, so such a link is
 * followed by hand; a file not there at all is its folder's real path and its name.
 */
export function realLedgerPath(dbPath: string): string {
  let path = resolve(dbPath);
  for (let hops = 0; hops < 40; hops++) {
    try {
      return realpathSync(path);
    } catch {
      // not there (yet), or a symlink to something not there
    }
    let target: string;
    try {
      target = readlinkSync(path);
    } catch {
      const dir = dirname(path);
      return dir === path ? path : join(realLedgerPath(dir), basename(path));
    }
    path = resolve(dirname(path), target);
  }
  return path; // a symlink loop: SQLite cannot open it either
}
