import type { Logger } from '../log.js';
import type { HubConfig, PolicyConfig, ServerConfig } from '../config/types.js';
import type { Catalog, ServerHandle } from '../catalog/catalog.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { PrincipalUpstreams } from '../auth/upstream-pool.js';
import { canonical, describeDiff, diffServers, narrowedKeyGroups, reloadableApiKeys, reloadableGroups, reloadablePlugins, reloadablePolicy, restartOnlyChanges } from '../config/reload.js';
import type { ShownRoutes } from './shown-routes.js';
import { drained } from '../upstream/drained.js';

/** The parts of the running hub a reload changes; the hub hands in exactly these. */
export interface ReloadTarget {
  /** The running config: its servers are replaced, the rest is kept (see config/reload.ts). */
  readonly config: HubConfig;
  readonly handles: Map<string, ServerHandle>;
  readonly catalog: Pick<Catalog, 'forget'>;
  readonly upstreams: Pick<PrincipalUpstreams, 'forget' | 'retime'>;
  readonly routes: Pick<ShownRoutes, 'forgetServer'>;
  readonly auth: Pick<Authenticator, 'replaceKeys' | 'required'>;
  readonly log: Logger;
  /** Create a server's upstream and handle, with no effect on the hub; throws on a config it cannot use. */
  buildServer(s: ServerConfig): ServerHandle;
  /** Register a built handle and watch it (not started). */
  addServer(h: ServerHandle): void;
  /** Start a registered server's connection (a failure is logged; its own retries go on). */
  startServer(h: ServerHandle): void;
  /** Put a reloaded policy in place: rate limits, confirmation, pinning and poisoning. */
  applyPolicy(policy: PolicyConfig): void;
  /** Put reloaded groups in place: what `/mcp/<group>` shows and lets be called. */
  applyGroups(groups: NonNullable<HubConfig['groups']>): void;
  /** The page size of aggregated lists, from the next list on. */
  applyPageSize(n: number): void;
  /** Load the plugins of a reloaded config and put them in place of the running ones; those that could not be loaded ("<file>: <why>"). */
  applyPlugins(plugins: NonNullable<HubConfig['plugins']>): Promise<string[]>;
  /** Whether the plugin files this section names were edited, added or removed since the last load. */
  pluginFilesChanged(plugins: HubConfig['plugins']): boolean;
  /**
   * API keys were replaced: what the revoked ones opened (sessions, streams, the live feed)
   * ends. `principals`: those left with no key; `keys`: the hashes of the keys removed;
   * `narrowed`: kept keys' hashes → the groups left to them (what they opened elsewhere ends).
   */
  credentialsRevoked(principals: ReadonlySet<string>, keys: ReadonlySet<string>, narrowed: ReadonlyMap<string, ReadonlySet<string>>): void;
  /** The servers section was replaced: what the hub kept of servers no longer in it goes. */
  forgetUnconfigured(): void;
}

/** What a reload did: the servers by how they changed, the sections put in place, and those left for a restart. */
export interface ReloadReport extends Omit<ReturnType<typeof describeDiff>, 'disabled'> {
  /** Disabled entries this reload added or changed (ServerDiff.disabled); an older daemon's report has none. */
  disabled?: string[];
  /** Sections that took effect: `auth.apiKeys`, `policy`, `groups`, `pageSize`, `plugins`. */
  applied: string[];
  /** Sections that differ but change only on a restart (the running ones are kept). */
  restartOnly: string[];
  /** Plugins of the reloaded section that could not be loaded ("<file>: <why>"); the hub runs without them. */
  pluginsFailed: string[];
  /**
   * Plugins the hub runs without now because they could not be loaded ("<file>: <why>"), at its
   * start or at the last load, this reload's or an earlier one's (set by the hub).
   */
  pluginsNotLoaded?: string[];
  /**
   * When this reload changed nothing, not even what waits for a restart: the last one that did,
   * and when (ISO time). The file watch, SIGHUP or an earlier request may have applied the file
   * already (set by the hub).
   */
  earlier?: { at: string; report: ReloadReport };
}

/** Whether a reload changed anything that runs (servers, or a section put in place). */
export function changedAnything(r: ReloadReport): boolean {
  return r.added.length + r.removed.length + r.restarted.length + r.updated.length + (r.disabled?.length ?? 0) + r.applied.length > 0;
}

/**
 * Apply a new config to the running hub: servers added, removed or changed start and stop
 * without touching the others (see config/reload.ts). A removed or restarted server leaves
 * the routing at once; its calls in flight may finish (up to listen.drainTimeoutMs) before
 * its connection closes. All or nothing: the new servers are built before anything changes,
 * and a server that cannot be built fails the reload with the running hub untouched.
 */
export async function applyReload(hub: ReloadTarget, next: HubConfig): Promise<ReloadReport> {
  const d = diffServers(hub.config.servers, next.servers);
  const fresh: ServerHandle[] = [];
  for (const s of [...d.added, ...d.restarted]) {
    try {
      fresh.push(hub.buildServer(s));
    } catch (err) {
      for (const h of fresh) void h.upstream.close().catch(() => undefined);
      throw new Error(`servers.${s.id}: ${(err as Error).message}`);
    }
  }
  const ignored = restartOnlyChanges(hub.config, next, hub.auth.required);
  const applied: string[] = [];
  if (ignored.length) hub.log.warn({ sections: ignored }, 'config reload: these sections change only on a restart; the running ones are kept');
  const keys = reloadableApiKeys(hub.config, next, hub.auth.required);
  if (keys) {
    const kept = new Set(keys.map((k) => k.principal));
    const old = hub.config.auth?.apiKeys ?? [];
    const gone = new Set(old.map((k) => k.principal).filter((p) => !kept.has(p)));
    // A key rotated for the same principal is revoked too: what a leaked key opened must end.
    // So is a key given to another principal: what it opened was the first one's.
    const holder = new Map(keys.map((k) => [k.sha256.toLowerCase(), k.principal]));
    const removed = new Set(old.filter((k) => holder.get(k.sha256.toLowerCase()) !== k.principal).map((k) => k.sha256.toLowerCase()));
    hub.auth.replaceKeys(keys);
    applied.push('auth.apiKeys');
    hub.credentialsRevoked(gone, removed, narrowedKeyGroups(old, keys));
    // The keys in force, with the rest of the running auth: a change there (OAuth settings) is
    // not in force until a restart, and the next reload must still see it, and see key changes
    // against these keys.
    hub.config.auth = { ...hub.config.auth, apiKeys: keys };
    hub.log.info({ principals: [...new Set(keys.map((k) => k.principal))] }, 'config reload: API keys replaced');
    // The running OAuth settings decide whether anything is still let in (the file's wait for a restart).
    if (keys.length === 0 && !hub.config.auth.oauth)
      hub.log.warn('config reload: the last API key is gone: every request is refused until a restart, which turns authentication off (loopback only)');
  }
  const policy = reloadablePolicy(hub.config, next);
  if (policy) {
    hub.applyPolicy(policy);
    applied.push('policy');
    hub.config.policy = policy;
    hub.log.info({ sections: Object.keys(policy) }, 'config reload: policy replaced');
  }
  const groups = reloadableGroups(hub.config, next);
  if (groups) {
    hub.applyGroups(groups);
    applied.push('groups');
    hub.config.groups = next.groups;
    hub.log.info({ groups: Object.keys(groups) }, 'config reload: groups replaced');
  }
  if (next.pageSize !== hub.config.pageSize) {
    hub.applyPageSize(next.pageSize);
    applied.push('pageSize');
    hub.log.info({ pageSize: next.pageSize }, 'config reload: page size replaced');
    hub.config.pageSize = next.pageSize;
  }
  const section = reloadablePlugins(hub.config, next);
  if (section) hub.config.plugins = next.plugins;
  // A reload with the section unchanged (SIGHUP after editing a plugin) still picks up its files.
  const plugins = section ?? (hub.pluginFilesChanged(next.plugins) ? (next.plugins ?? {}) : undefined);
  const retiring: ServerHandle[] = [];
  for (const id of d.removed) {
    const h = takeOut(hub, id);
    if (h) retiring.push(h);
  }
  for (const s of d.restarted) {
    // Names that stay as they were stay known: a call while it starts again is "unavailable".
    const h = takeOut(hub, s.id, { keepRoutes: sameNames(hub.handles.get(s.id)?.config, s) });
    if (h) retiring.push(h);
  }
  for (const h of fresh) hub.addServer(h);
  for (const s of d.updated) {
    const h = hub.handles.get(s.id);
    if (!h) continue;
    hub.handles.set(s.id, { ...h, config: s });
    // The connection keeps going; its own limits are the new ones (the breaker judges by them).
    const limits = { timeoutMs: s.timeoutMs, maxTotalTimeoutMs: s.maxTotalTimeoutMs };
    // A url server's idle check is its main connection's alone; a principal's own process has one too.
    h.upstream.retime({ ...limits, healthCheckMs: s.healthCheckMs });
    hub.upstreams.retime(s.id, s.url ? limits : { ...limits, healthCheckMs: s.healthCheckMs });
    hub.catalog.forget(s.id);
    hub.routes.forgetServer(s.id);
  }
  inConfigOrder(hub.handles, next);
  hub.config.servers = next.servers;
  if (d.removed.length + d.removedDisabled.length > 0) hub.forgetUnconfigured();
  for (const h of fresh) hub.startServer(h);
  for (const h of retiring) void retire(h, hub.config.listen.drainTimeoutMs);
  // Last: loading may take a while (a plugin's import and factory), and nothing above waits for it.
  let pluginsFailed: string[] = [];
  if (plugins) {
    pluginsFailed = await hub.applyPlugins(plugins);
    applied.push('plugins');
    hub.log.info({ because: section ? 'the plugins section changed' : 'plugin files changed' }, 'config reload: plugins replaced');
  }
  const report: ReloadReport = { ...describeDiff(d), applied, restartOnly: ignored, pluginsFailed };
  hub.log.info(report, 'config reloaded');
  return report;
}

/**
 * Give one running server a fresh connection, as a reload does for a server whose connection
 * settings changed, with its config as it is: the old connection leaves the routing at once and
 * closes once its calls in flight are done (bounded by the drain timeout); the new one starts,
 * and a server the crash-loop limit had marked `failed` gets a new set of attempts. Nothing
 * changes when the new connection cannot be built (that error is thrown).
 */
export function restartServer(hub: ReloadTarget, id: string): void {
  const s = hub.config.servers[id];
  if (s === undefined || !hub.handles.has(id)) throw new Error(`no server "${id}" is running`);
  const fresh = hub.buildServer(s);
  // Its names stay known: a client's call while it starts is "unavailable", not "unknown tool".
  const old = takeOut(hub, id, { keepRoutes: true });
  hub.addServer(fresh);
  inConfigOrder(hub.handles, hub.config);
  hub.startServer(fresh);
  if (old) void retire(old, hub.config.listen.drainTimeoutMs);
  hub.log.info({ server: id }, 'server restarted on request');
}

/**
 * A server leaves the routing, the catalog and the per-principal pool; its handle, to retire.
 * The names clients were shown for it are forgotten unless it comes back as it was (`keepRoutes`).
 */
function takeOut(hub: ReloadTarget, id: string, opts: { keepRoutes?: boolean } = {}): ServerHandle | undefined {
  const h = hub.handles.get(id);
  if (!opts.keepRoutes) hub.routes.forgetServer(id);
  if (!h) return undefined;
  hub.handles.delete(id);
  hub.catalog.forget(id);
  // Each principal's own connection too is closed once its calls in flight are done (bounded).
  void hub.upstreams.forget(id, hub.config.listen.drainTimeoutMs);
  return h;
}

/** The settings that decide the names a server's tools are shown under are the same. */
function sameNames(before: ServerConfig | undefined, after: ServerConfig): boolean {
  return before !== undefined && before.prefix === after.prefix && canonical(before.tools) === canonical(after.tools);
}

/** Config order decides who keeps a contested name: keep the map in the file's order. */
function inConfigOrder(handles: Map<string, ServerHandle>, config: HubConfig): void {
  const order = Object.keys(config.servers);
  const sorted = [...handles.entries()].sort((a, b) => order.indexOf(a[0]) - order.indexOf(b[0]));
  handles.clear();
  for (const [id, h] of sorted) handles.set(id, h);
}

/** Close a server taken out of routing once its calls in flight are done (bounded). */
async function retire(h: ServerHandle, drainMs: number): Promise<void> {
  await drained(h.upstream, drainMs);
  await h.upstream.close();
  h.upstream.removeAllListeners('notification');
}
