import { parseJsonText } from '../config/load.js';
import { readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { generateApiKey, hashApiKey } from './api-keys.js';
import { RESERVED_PRINCIPALS, reservedFor } from './principals.js';

/** The principal pattern of the config schema (`$defs.principal`). */
export const PRINCIPAL_RE = /^[A-Za-z0-9._@|:+-]{1,128}$/;

type Json = Record<string, unknown>;

function readDoc(file: string): Json {
  const doc = parseJsonText(readFileSync(file, 'utf8'));
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`${file}: not a JSON object`);
  return doc as Json;
}

/**
 * Write next to the file and rename over it, keeping its mode, so a crash never leaves half a
 * config. A symlink is followed first: renaming over the link would replace it with a copy and
 * leave its target, the file a running hub reads, as it was (a removed key would still work).
 */
function writeDoc(file: string, doc: Json): void {
  const target = realpathSync(file);
  const tmp = `${target}.${process.pid}.tmp`;
  let mode = 0o600;
  try {
    mode = statSync(target).mode & 0o777;
  } catch {
    // a new file stays owner-only
  }
  writeFileSync(tmp, `${JSON.stringify(doc, null, 2)}\n`, { mode });
  renameSync(tmp, target);
}

function keysOf(doc: Json): Json[] {
  const auth = (doc.auth ??= {}) as Json;
  if (auth === null || typeof auth !== 'object' || Array.isArray(auth)) throw new Error('"auth" is not an object');
  const keys = (auth.apiKeys ??= []) as unknown;
  if (!Array.isArray(keys)) throw new Error('"auth.apiKeys" is not an array');
  return keys as Json[];
}

/** Adds a new key for `principal` to the config file; returns the key (the file holds only its hash). */
export function addApiKey(file: string, principal: string, scopes?: string[], groups?: string[]): string {
  if (!PRINCIPAL_RE.test(principal)) throw new Error('a principal is 1-128 characters of letters, digits and ._@|:+-');
  // The ledger's own names, in any case: a key holder called so could not be told apart from them.
  const lower = principal.toLowerCase();
  if (RESERVED_PRINCIPALS.has(lower))
    throw new Error(`"${principal}" is reserved: the ledger names ${reservedFor(lower)} so`);
  const doc = readDoc(file);
  // A key limited to a group the config has not could use no endpoint (the config check says so too).
  const configured = doc.groups !== null && typeof doc.groups === 'object' ? doc.groups : {};
  const unknown = (groups ?? []).filter((g) => !Object.hasOwn(configured, g));
  if (unknown.length) throw new Error(`no tool group named ${unknown.map((g) => JSON.stringify(g)).join(', ')} (${Object.keys(configured).join(', ') || 'the config has no groups'})`);
  const key = generateApiKey();
  const entry: Json = { principal, sha256: hashApiKey(key) };
  if (scopes?.length) entry.scopes = scopes;
  if (groups?.length) entry.groups = [...new Set(groups)];
  keysOf(doc).push(entry);
  writeDoc(file, doc);
  return key;
}

/** Removes every key of `principal`; returns how many. */
export function removeApiKeys(file: string, principal: string): number {
  const doc = readDoc(file);
  const keys = keysOf(doc);
  const kept = keys.filter((k) => k.principal !== principal);
  (doc.auth as Json).apiKeys = kept;
  if (kept.length !== keys.length) writeDoc(file, doc);
  return keys.length - kept.length;
}

export function listApiKeys(file: string): { principal: string; hashPrefix: string; scopes: string[]; groups: string[] }[] {
  return keysOf(readDoc(file)).map((k) => ({
    principal: String(k.principal),
    hashPrefix: String(k.sha256 ?? '').slice(0, 12),
    scopes: Array.isArray(k.scopes) ? (k.scopes as string[]) : [],
    groups: Array.isArray(k.groups) ? (k.groups as string[]) : [],
  }));
}
