import type { Era } from '../protocol/era.js';

/** hub.config.json after validation, alias folding (`mcpServers`), defaults and `${env:…}` interpolation. */
export interface HubConfig {
  /** Absolute path of the file it came from (relative paths in it resolve against its folder). */
  file?: string;
  listen: { host: string; port: number; allowedOrigins: string[]; maxBodyBytes: number };
  ledger: {
    path: string;
    enabled: boolean;
    storeBodies: boolean;
    redactKeys: string; // regex source for keys whose values are redacted
    idempotencyTtlMs: number;
  };
  names: {
    /** 'strict' = ^[A-Za-z0-9_-]{1,64}$ (Anthropic/OpenAI); 'spec' = 1-128 chars of [A-Za-z0-9_.-]. */
    mode: 'strict' | 'spec';
  };
  /** Largest page of an aggregated list the hub returns. */
  pageSize: number;
  servers: Record<string, ServerConfig>; // insertion order = config order
  /** Reserved sections, validated only as objects so later features can define them. */
  auth?: Record<string, unknown>;
  policy?: Record<string, unknown>;
  plugins?: Record<string, unknown>;
  groups?: Record<string, unknown>;
}

export interface ServerConfig {
  id: string;
  command?: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  url?: string;
  headers: Record<string, string>;
  prefix: string; // defaults to the id; '' exposes names unchanged
  trust: 'trusted' | 'untrusted';
  enabled: boolean;
  timeoutMs: number;
  era: 'auto' | Era;
  probeTimeoutMs: number;
  maxFrameBytes: number;
  /** Overrides the upstream's own list ttlMs when set. */
  cacheTtlMs?: number;
  tools: ServerToolsConfig;
}

/** `servers.<id>.tools`: exposure filters and per-tool settings keyed by the upstream tool name. */
export interface ServerToolsConfig {
  allow?: string[];
  deny?: string[];
  /** Every other key of `tools` whose value is an object (other values are reserved and ignored). */
  byName: Record<string, ToolSettings>;
}

export interface ToolSettings {
  annotations?: ToolAnnotationOverrides;
  [key: string]: unknown;
}

export interface ToolAnnotationOverrides {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
  [key: string]: unknown;
}
