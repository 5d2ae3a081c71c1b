import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
