/**
 * When no daemon runs, `doctor` and `tools export` connect to the configured upstreams
 * themselves: start each (bounded), build a catalog with in-memory names (the ledger is
 * neither written nor needed), look, and close everything again.
 */
import { dirname, resolve } from 'node:path';
import { Catalog, type ServerHandle } from '../catalog/catalog.js';
import { MemoryNameStore, NameAssigner } from '../catalog/names.js';
import { configSecretValues } from '../config/secret-values.js';
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

/** Starts every enabled upstream (at most `startMs` each), lists the tools, closes them. */
export async function lookLocally(config: HubConfig, opts: { startMs?: number; server?: string } = {}): Promise<LocalLook> {
  const base = config.file ? dirname(config.file) : process.cwd();
  // What the upstreams say (lastError, stderr) is printed: the config's secrets are redacted
  // there as a hub would (policy/config-secrets.ts); kept for the rest of this short command.
  useConfigSecrets(config, configSecretValues(config));
  const handles: ServerHandle[] = [];
  for (const s of Object.values(config.servers)) {
    if (!s.enabled || (opts.server && s.id !== opts.server)) continue;
    const upstream = createUpstream(
      {
        id: s.id,
        command: s.command,
        args: s.args,
        env: s.env,
        inheritEnv: s.inheritEnv,
        cwd: s.command ? resolve(base, s.cwd ?? '.') : undefined,
        url: s.url,
        headers: s.headers,
        era: s.era,
        timeoutMs: s.timeoutMs,
        probeTimeoutMs: s.probeTimeoutMs,
        maxFrameBytes: s.maxFrameBytes,
      },
      silentLogger,
    );
    handles.push({ id: s.id, config: s, upstream });
  }
  const progress = new Progress('connecting upstreams', handles.length);
  try {
    await Promise.all(
      handles.map(async (h) => {
        let timer: NodeJS.Timeout | undefined;
        const limit = new Promise<void>((r) => (timer = setTimeout(r, opts.startMs ?? 15_000)));
        await Promise.race([h.upstream.start().catch(() => undefined), limit]);
        clearTimeout(timer);
        progress.tick(h.id);
      }),
    );
    progress.end();
    const catalog = new Catalog(() => handles, new NameAssigner({ mode: config.names.mode, store: new MemoryNameStore() }), silentLogger);
    const tools = await toolViews(catalog, config.names.mode);
    const counts = new Map<string, number>();
    for (const t of tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
    return { servers: serverViews(handles, (id) => counts.get(id)), tools };
  } finally {
    progress.end();
    await Promise.allSettled(handles.map((h) => h.upstream.close()));
  }
}
