/** How a configured server is reached: hub.config.json's entry as the upstream layer takes it. */
import { resolve } from 'node:path';
import type { ServerConfig } from '../config/types.js';
import type { UpstreamSpec } from '../upstream/types.js';

/** Relative paths in the config (a server's cwd) resolve against the config file's folder. */
export function specOf(s: ServerConfig, baseDir: string): UpstreamSpec {
  return {
    id: s.id,
    command: s.command,
    args: s.args,
    env: s.env,
    inheritEnv: s.inheritEnv,
    cwd: s.command ? resolve(baseDir, s.cwd ?? '.') : undefined,
    url: s.url,
    headers: s.headers,
    oauth: s.oauth,
    oauthTokenFile: s.oauthTokenFile,
    era: s.era,
    timeoutMs: s.timeoutMs,
    maxTotalTimeoutMs: s.maxTotalTimeoutMs,
    probeTimeoutMs: s.probeTimeoutMs,
    healthCheckMs: s.healthCheckMs,
    maxFrameBytes: s.maxFrameBytes,
    maxConcurrent: s.maxConcurrent,
    maxQueue: s.maxQueue,
    circuitBreaker: s.circuitBreaker,
  };
}
