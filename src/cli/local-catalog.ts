/**
 * When no daemon runs, `doctor` and `tools export` connect to the configured upstreams
 * themselves: start each (bounded), build a catalog with in-memory names (the ledger is
 * never written), look, and close everything again. What the daemon would hold back stays held
 * back: the plugins run (a poisoned description under `policy.poisoning: "block"` is hidden)
 * and the tools are judged against the pins in the ledger (a changed definition waiting for
 * `tools approve` is quarantined), so an export made while the daemon is down never hands a
 * model what the daemon refuses to show.
 */
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { Catalog, type ServerHandle } from '../catalog/catalog.js';
import { MemoryNameStore, NameAssigner } from '../catalog/names.js';
import { MemoryPinStore } from '../catalog/pins.js';
import { openLedgerDb } from '../ledger/db.js';
import { readPins } from '../ledger/pins.js';
import { loadPlugins } from '../plugins/loader.js';
import { PluginRunner } from '../plugins/runner.js';
import { configSecretValues } from '../config/secret-values.js';
import { ledgerDbPath } from './ledger-lock.js';
import { specOf } from '../hub/upstream-spec.js';
import type { HubConfig } from '../config/types.js';
import { serverViews, toolViews, type ServerView, type ToolView } from '../downstream/admin-views.js';
import { silentLogger } from '../log.js';
import { useConfigSecrets } from '../policy/config-secrets.js';
import { createUpstream } from '../upstream/index.js';
import { Progress } from './progress.js';

export interface LocalLook {
  servers: ServerView[];
  tools: ToolView[];
}

/** How long a look waits for each upstream to start (a command's first run may be installing it). */
export const LOCAL_START_MS = 15_000;

/** The ledger's pins could not be read: an export would not know what the daemon holds back. */
export class PinsUnreadError extends Error {}

/**
 * Starts every enabled upstream (at most `startMs` each), lists the tools, closes them.
 * `all`: held-back (quarantined, hidden) tools too, as the daemon's `/admin/tools?all=1`.
 * `unreadPins: "ignore"` (doctor, which checks the ledger itself): a ledger that cannot be read
 * is taken as no pins; otherwise PinsUnreadError.
 */
export async function lookLocally(config: HubConfig, opts: { startMs?: number; server?: string; unreadPins?: 'ignore'; all?: boolean } = {}): Promise<LocalLook> {
  const base = config.file ? dirname(config.file) : process.cwd();
  // What the upstreams say (lastError, stderr) is printed: the config's secrets are redacted
  // there as a hub would (policy/config-secrets.ts); kept for the rest of this short command.
  useConfigSecrets(config, configSecretValues(config));
  const handles: ServerHandle[] = [];
  for (const s of Object.values(config.servers)) {
    if (!s.enabled || (opts.server && s.id !== opts.server)) continue;
    const upstream = createUpstream(specOf(s, base), silentLogger);
    handles.push({ id: s.id, config: s, upstream });
  }
  const plugins = new PluginRunner(loadPlugins(config.plugins, config.file, silentLogger, () => undefined), silentLogger, () => undefined);
  const progress = new Progress('connecting upstreams', handles.length);
  try {
    await Promise.all(
      handles.map(async (h) => {
        let timer: NodeJS.Timeout | undefined;
        const limit = new Promise<void>((r) => (timer = setTimeout(r, opts.startMs ?? LOCAL_START_MS)));
        await Promise.race([h.upstream.start().catch(() => undefined), limit]);
        clearTimeout(timer);
        progress.tick(h.id);
      }),
    );
    progress.end();
    const catalog = new Catalog(() => handles, new NameAssigner({ mode: config.names.mode, store: new MemoryNameStore() }), silentLogger, {
      pins: ledgerPins(config, opts.unreadPins === 'ignore'),
      plugins,
      policy: { pinning: config.policy?.pinning, poisoning: config.policy?.poisoning },
    });
    const tools = await toolViews(catalog, config.names.mode, { all: opts.all });
    const counts = new Map<string, number>();
    for (const t of tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
    return { servers: serverViews(handles, (id) => counts.get(id)), tools };
  } finally {
    progress.end();
    await Promise.allSettled([...handles.map((h) => h.upstream.close()), plugins.close()]);
  }
}

/**
 * The daemon's pins, read once (a reader never blocks a running hub), kept in memory: tools seen
 * for the first time are pinned here only, the ledger is not written. No ledger (none yet, or
 * `ledger.enabled: false`): every tool is new, as it would be to a hub starting now.
 */
function ledgerPins(config: HubConfig, ignoreUnread: boolean): MemoryPinStore {
  const store = new MemoryPinStore();
  if (!config.ledger.enabled) return store;
  const path = ledgerDbPath(config);
  if (!existsSync(path)) return store;
  try {
    // An older Switchyard's ledger (before the daemon's first start on this version) is read as
    // it is: its pins hold back what that start would; before migration 0004 there are none.
    const db = openLedgerDb({ path, readonly: true, readsOlder: true });
    try {
      for (const r of readPins(db)) store.put(r);
    } finally {
      db.close();
    }
  } catch (err) {
    if (ignoreUnread) return new MemoryPinStore();
    throw new PinsUnreadError(`cannot read the tool pins of ${path} (${(err as Error).message}): without them, changed tool definitions the daemon holds back would be exported`);
  }
  return store;
}
