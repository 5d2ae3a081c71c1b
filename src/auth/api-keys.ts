import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiKeyConfig } from '../config/types.js';

/** Prefix of keys the hub makes, so a leaked key is recognisable (secret scanners, logs). */
export const API_KEY_PREFIX = 'sy_';

/** A new random API key (256 bits). Shown once; only its hash is stored. */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export interface KeyHolder {
  principal: string;
  scopes: string[];
  /** The key's configured hash (lower-case hex): names the key without being it. */
  key: string;
  /** The tool groups whose endpoints alone it may use; undefined: every endpoint. */
  groups?: ReadonlySet<string>;
}

/**
 * Looks a presented key up among the configured hashes. Every entry is compared, each in
 * constant time, so the time taken says nothing about which hash (or how much of one) matched.
 */
export class ApiKeyStore {
  private readonly entries: { hash: Buffer; holder: KeyHolder }[];

  constructor(keys: readonly ApiKeyConfig[]) {
    this.entries = keys.map((k) => ({ hash: Buffer.from(k.sha256, 'hex'), holder: { principal: k.principal, scopes: k.scopes ?? [], key: k.sha256.toLowerCase(), groups: k.groups ? new Set(k.groups) : undefined } }));
  }

  get size(): number {
    return this.entries.length;
  }

  /** The holder of a configured hash (KeyHolder.key): a credential let in before, looked up again. */
  holderOf(key: string): KeyHolder | undefined {
    for (const e of this.entries) if (e.holder.key === key) return e.holder;
    return undefined;
  }

  lookup(presented: string): KeyHolder | undefined {
    const h = createHash('sha256').update(presented, 'utf8').digest();
    let found: KeyHolder | undefined;
    for (const e of this.entries) if (e.hash.length === h.length && timingSafeEqual(e.hash, h) && !found) found = e.holder;
    return found;
  }
}
