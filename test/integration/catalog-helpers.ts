/** Shared pieces of the catalog tests: the mutable fixture upstream, started for real. */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerConfig } from '../../src/config/types.js';
import { silentLogger, type Logger } from '../../src/log.js';
import { createUpstream, type UpstreamOptions } from '../../src/upstream/index.js';
import type { Upstream, UpstreamSpec } from '../../src/upstream/types.js';

export const MUTABLE = fileURLToPath(new URL('../fixtures/catalog/mutable-server.mjs', import.meta.url));

export function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'sy-catalog-'));
}

export interface Fixture {
  upstream: Upstream;
  statsFile: string;
  /** Request counts by method, as the fixture wrote them. */
  stats(): Record<string, number>;
}

export async function startMutable(id: string, env: Record<string, string> = {}, log: Logger = silentLogger, spec: Partial<UpstreamSpec> = {}, opts?: UpstreamOptions): Promise<Fixture> {
  const statsFile = join(tmp(), 'stats.json');
  const upstream = createUpstream(
    {
      id,
      command: process.execPath,
      args: [MUTABLE],
      env: { STATS_FILE: statsFile, ...env },
      era: 'auto',
      timeoutMs: 5000,
      probeTimeoutMs: 1500,
      maxFrameBytes: 1 << 20,
      ...spec,
    },
    log,
    opts,
  );
  await upstream.start();
  return {
    upstream,
    statsFile,
    stats: () => (existsSync(statsFile) ? (JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>) : {}),
  };
}

/** A ServerConfig as the loader would produce it, with overrides. */
export function serverConfig(id: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return {
    id,
    command: process.execPath,
    args: [MUTABLE],
    env: {},
    headers: {},
    prefix: id,
    trust: 'untrusted',
    enabled: true,
    timeoutMs: 5000,
    era: 'auto',
    probeTimeoutMs: 1500,
    maxFrameBytes: 1 << 20,
    tools: { byName: {} },
    ...over,
  } as ServerConfig;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
