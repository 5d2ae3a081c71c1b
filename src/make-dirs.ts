import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * mkdir -p that cannot loop: Node's recursive mkdirSync retries a parent for as long as mkdir
 * says ENOENT, and under /proc (and other pseudo file systems that refuse new folders with
 * ENOENT) it says so for ever, so `switchyard init -c /proc/x/hub.config.json` hung at 100 % CPU.
 * Here each missing folder is made once, top down, and the first refusal is thrown as it is.
 * Returns the topmost folder it made (as mkdirSync's recursive form does), or undefined when
 * `dir` was there already.
 */
export function makeDirs(dir: string, mode?: number): string | undefined {
  const missing: string[] = [];
  for (let at = resolve(dir); ; at = dirname(at)) {
    try {
      statSync(at);
      break; // there (a file in the way: the mkdir below it says ENOTDIR)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    missing.push(at);
    if (dirname(at) === at) break;
  }
  const top = missing.at(-1);
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d, { mode });
    } catch (err) {
      // Made meanwhile by another process (two hubs starting on one folder): as good as made here.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(d).isDirectory()) throw err;
    }
  }
  return top;
}
