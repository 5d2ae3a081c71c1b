import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeDirs } from './make-dirs.js';

/** The folder holding package.json, whether running from src/ (tests) or dist/src/ (built). */
function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

export const packageRoot: string = findRoot();

/**
 * The hub's state directory: the ledger's folder (what the hub keeps besides the ledger lives
 * beside it), or `.switchyard` in the config's folder for an in-memory ledger.
 */
export function stateDir(ledgerPath: string, configDir: string): string {
  return ledgerPath === ':memory:' ? join(configDir, '.switchyard') : dirname(ledgerPath);
}

/** Where `switchyard login <id>` keeps the server's tokens (src/upstream/oauth-token-store.ts). */
export function oauthTokenFile(ledgerPath: string, configDir: string, serverId: string): string {
  return join(stateDir(ledgerPath, configDir), 'oauth-tokens', `${encodeURIComponent(serverId)}.json`);
}

/**
 * mkdir -p for a folder of the hub's state. The topmost folder this creates gets a `.gitignore`
 * of `*`: the state holds the state key, login tokens and the audit rows, and a config made in a
 * project (`switchyard init` there, as docs/IDE-SETUP.md has it) puts `data/` inside that
 * project's repository, where `git add -A` would take them. A folder already there is left alone.
 */
export function makeStateDir(dir: string, mode?: number): void {
  const made = makeDirs(dir, mode);
  if (made === undefined) return;
  try {
    writeFileSync(join(made, '.gitignore'), "# Switchyard's state (keys, login tokens, the ledger): not for version control\n*\n", { flag: 'wx' });
  } catch {
    // Only a courtesy: the state itself is what must be written.
  }
}
