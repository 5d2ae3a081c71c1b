/**
 * What a new config changes in a running hub. Servers are compared one by one: a server whose
 * connection settings changed is restarted; one whose other settings changed (names, filters,
 * trust, timeouts, retries, failMode) keeps its connection and only its catalog entry is
 * rebuilt. API keys are swapped in while authentication stays on (reloadableApiKeys), so a
 * leaked key is revoked without a restart, whatever else in `auth` changed with it. So is
 * `policy` (rate limits, confirmation, pinning and poisoning), but for the request-state
 * settings (reloadablePolicy), and so are `groups`
 * (reloadableGroups), `plugins` (reloadablePlugins) and `pageSize`. Other settings of the hub
 * itself (listen, ledger, names, the rest of auth) take effect only on a restart; a reload
 * reports them and keeps the running ones.
 */
import { authRequired } from '../auth/authenticator.js';
import type { ApiKeyConfig, HubConfig, PolicyConfig, ServerConfig } from './types.js';

/** Server settings the hub reads per call or per list, so a change needs no reconnect. */
const LIVE_KEYS: ReadonlySet<string> = new Set([
  'prefix',
  'trust',
  'tools',
  'cacheTtlMs',
  'failMode',
  'retry',
  'timeoutMs',
  'maxTotalTimeoutMs',
  'autoApprove',
  // Only when the hub asks an idle server whether it is there: no reason to end its sessions.
  'healthCheckMs',
]);

/** Hub-level sections a reload cannot change. */
const RESTART_ONLY = ['listen', 'ledger', 'names', 'auth'] as const;
/**
 * Policy settings a reload cannot change: a new key would void every requestState clients hold
 * (and their calls in progress), and the input bridge is built with its timeout.
 */
const POLICY_RESTART_ONLY = ['requestStateKey', 'requestStateTtlMs', 'inputTimeoutMs'] as const;

export interface ServerDiff {
  added: ServerConfig[];
  removed: string[];
  /** Connection settings changed: stop the old connection, start a new one. */
  restarted: ServerConfig[];
  /** Only live settings changed: same connection, new handle. */
  updated: ServerConfig[];
  unchanged: string[];
  /**
   * Entries disabled in the new config that it adds, or whose disabled entry it changes: none
   * runs, but `switchyard servers` lists them, so a reload that brought one changed something
   * (a server turned off is `removed`).
   */
  disabled: string[];
  /**
   * Disabled entries the new config no longer has: none ran, but `switchyard servers` listed
   * them and the ledger kept their rows (capabilities, resource routes), which go now.
   */
  removedDisabled: string[];
}

/** A stable JSON form (object keys sorted), so key order in the file never counts as a change. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

function enabled(servers: Record<string, ServerConfig>): Map<string, ServerConfig> {
  return new Map(Object.values(servers).filter((s) => s.enabled).map((s) => [s.id, s]));
}

export function diffServers(prev: Record<string, ServerConfig>, next: Record<string, ServerConfig>): ServerDiff {
  const a = enabled(prev);
  const b = enabled(next);
  const d: ServerDiff = { added: [], removed: [], restarted: [], updated: [], unchanged: [], disabled: [], removedDisabled: [] };
  for (const id of a.keys()) if (!b.has(id)) d.removed.push(id);
  for (const [id, s] of b) {
    const old = a.get(id);
    if (!old) {
      d.added.push(s);
      continue;
    }
    const keys = new Set([...Object.keys(old), ...Object.keys(s)]);
    let live = false;
    let restart = false;
    for (const k of keys) {
      if (canonical((old as unknown as Record<string, unknown>)[k]) === canonical((s as unknown as Record<string, unknown>)[k])) continue;
      if (LIVE_KEYS.has(k)) live = true;
      else restart = true;
    }
    if (restart) d.restarted.push(s);
    else if (live) d.updated.push(s);
    else d.unchanged.push(id);
  }
  const before = new Map(Object.values(prev).map((s) => [s.id, s]));
  for (const s of Object.values(next)) {
    if (s.enabled) continue;
    const old = before.get(s.id);
    if (!old || (!old.enabled && canonical(old) !== canonical(s))) d.disabled.push(s.id);
  }
  const kept = new Set(Object.values(next).map((s) => s.id));
  for (const s of Object.values(prev)) if (!s.enabled && !kept.has(s.id)) d.removedDisabled.push(s.id);
  return d;
}

/**
 * Hub-level sections that differ (they need a restart to take effect); `authOn` as for
 * reloadableApiKeys. `auth` is named when anything but its keys differs, or when its keys do
 * and the running hub has authentication off (turning it on is a restart).
 */
export function restartOnlyChanges(prev: HubConfig, next: HubConfig, authOn = authRequired(prev.auth)): string[] {
  const differs = (k: (typeof RESTART_ONLY)[number]) =>
    k === 'auth' ? canonical(withoutKeys(prev.auth)) !== canonical(withoutKeys(next.auth)) || (!authOn && keysDiffer(prev, next)) : canonical(prev[k]) !== canonical(next[k]);
  // Named by the key that changed (listen.admin, not listen: the operator looks for what to restart for).
  const sections: string[] = RESTART_ONLY.filter(differs).flatMap((k) => (k === 'auth' ? [k] : changedKeys(k, prev[k], next[k])));
  for (const k of POLICY_RESTART_ONLY) if (canonical(prev.policy?.[k]) !== canonical(next.policy?.[k])) sections.push(`policy.${k}`);
  return sections;
}

/**
 * What the file holds for the sections a reload left for a restart (restartOnlyChanges), in one
 * string: a reload that finds the same as the one before it found nothing new there.
 */
export function restartOnlyValues(next: HubConfig, sections: readonly string[]): string {
  const at = (path: string): unknown => path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], next);
  return canonical(sections.map((s) => [s, at(s)]));
}

/** `section`'s keys whose values differ, as key paths; the section itself unless both are objects. */
function changedKeys(section: string, a: unknown, b: unknown): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isObject(a) || !isObject(b)) return [section];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => canonical(a[k]) !== canonical(b[k]));
  return keys.length ? keys.map((k) => `${section}.${k}`) : [section];
}

function withoutKeys(auth: HubConfig['auth']): unknown {
  return { ...auth, apiKeys: undefined };
}

function keysDiffer(prev: HubConfig, next: HubConfig): boolean {
  return canonical(prev.auth?.apiKeys ?? []) !== canonical(next.auth?.apiKeys ?? []);
}

/**
 * The policy a reload puts in place when `policy` changed: the new one, with the running
 * request-state settings kept (POLICY_RESTART_ONLY). undefined: no change a reload applies.
 */
export function reloadablePolicy(prev: HubConfig, next: HubConfig): PolicyConfig | undefined {
  const kept: PolicyConfig = { ...next.policy };
  for (const k of POLICY_RESTART_ONLY) {
    if (prev.policy?.[k] === undefined) delete kept[k];
    else kept[k] = prev.policy[k];
  }
  return canonical(kept) === canonical(prev.policy ?? {}) ? undefined : kept;
}

/**
 * The groups a reload puts in place when `groups` changed (`{}` when the section went away).
 * A group's view is worked out per list from the lists the hub holds, so nothing else waits
 * for a restart. undefined: no change.
 */
export function reloadableGroups(prev: HubConfig, next: HubConfig): NonNullable<HubConfig['groups']> | undefined {
  return canonical(prev.groups ?? {}) === canonical(next.groups ?? {}) ? undefined : (next.groups ?? {});
}

/**
 * The `plugins` section of a reload when it changed (`{}` when it went away): the plugins are
 * loaded again from it. undefined: no change (plugin files edited under an unchanged section
 * are found by the hub, which compares what they hold: pluginSources in plugins/loader.ts).
 */
export function reloadablePlugins(prev: HubConfig, next: HubConfig): NonNullable<HubConfig['plugins']> | undefined {
  return canonical(prev.plugins ?? {}) === canonical(next.plugins ?? {}) ? undefined : (next.plugins ?? {});
}

/**
 * The API keys a reload swaps in, when `auth.apiKeys` changed and the running hub has
 * authentication on (`authOn`, decided at its start), whatever else in `auth` changed: the rest
 * waits for a restart (restartOnlyChanges), but a removed key must not keep working meanwhile.
 * Even the last key can go: the hub then refuses every request it cannot check otherwise until
 * a restart, rather than keep a revoked key working. Turning authentication on or off stays a
 * restart: whether the hub may listen off loopback and whether principals get upstream
 * connections of their own are decided at start. undefined: no key change, or auth is off.
 */
export function reloadableApiKeys(prev: HubConfig, next: HubConfig, authOn = authRequired(prev.auth)): ApiKeyConfig[] | undefined {
  return authOn && keysDiffer(prev, next) ? (next.auth?.apiKeys ?? []) : undefined;
}

/**
 * Keys a reload kept (same hash, same principal) whose `groups` now leave out an endpoint they
 * could use: hash → the groups left to them. What such a key holds open (a GET stream, a listen
 * stream, a legacy session) on an endpoint it lost must end, as for a revoked key; each of its
 * requests is checked against the new groups anyway. A new key, or one moved to another
 * principal (revoked whole), is not listed.
 */
export function narrowedKeyGroups(prev: readonly ApiKeyConfig[], next: readonly ApiKeyConfig[]): Map<string, ReadonlySet<string>> {
  const before = new Map(prev.map((k) => [k.sha256.toLowerCase(), k]));
  const narrowed = new Map<string, ReadonlySet<string>>();
  for (const k of next) {
    const was = before.get(k.sha256.toLowerCase());
    if (!k.groups || !was || was.principal !== k.principal) continue;
    const now = new Set(k.groups);
    if (!was.groups || was.groups.some((g) => !now.has(g))) narrowed.set(k.sha256.toLowerCase(), now);
  }
  return narrowed;
}

/** Whether what a key (its hash) opened on an endpoint (`group`; undefined: `/mcp`) must end. */
export type LostEndpoint = (key: string | undefined, group: string | undefined) => boolean;

/** The key was removed, or its groups (`narrowed`, above) no longer include that endpoint. */
export function lostEndpoint(removed: ReadonlySet<string>, narrowed: ReadonlyMap<string, ReadonlySet<string>>): LostEndpoint {
  return (key, group) => {
    if (key === undefined) return false;
    if (removed.has(key)) return true;
    const left = narrowed.get(key);
    return left !== undefined && (group === undefined || !left.has(group));
  };
}

/**
 * One line for the log: what a reload did. `removed`: the servers that stopped (taken out of the
 * file, or turned off) and the disabled entries taken out of it, which nothing ran.
 */
export function describeDiff(d: ServerDiff): { added: string[]; removed: string[]; restarted: string[]; updated: string[]; disabled: string[] } {
  return {
    added: d.added.map((s) => s.id),
    removed: [...d.removed, ...d.removedDisabled],
    restarted: d.restarted.map((s) => s.id),
    updated: d.updated.map((s) => s.id),
    disabled: d.disabled,
  };
}
