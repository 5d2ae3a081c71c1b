import type { Era } from '../protocol/era.js';

/** hub.config.json after validation, alias folding (`mcpServers`), defaults and `${env:…}` interpolation. */
export interface HubConfig {
  /** Absolute path of the file it came from (relative paths in it resolve against its folder). */
  file?: string;
  listen: {
    host: string;
    port: number;
    allowedOrigins: string[];
    maxBodyBytes: number;
    /** Most client connections open at once (unset: from the open-file limit, connection-cap.ts). */
    maxConnections?: number;
    /** The operator's own listener (admin routes and /healthz), counted apart from maxConnections. */
    admin?: AdminListen;
    /** Requests one legacy session may have in flight; more are refused at once. */
    maxPendingPerSession: number;
    /** A legacy HTTP session idle this long (no request, stream or call in flight) ends. */
    sessionIdleTimeoutMs: number;
    /** Most legacy HTTP sessions at once (the idlest one ends for a new one). */
    maxSessions: number;
    /** Most legacy HTTP sessions one principal holds (its own idlest one ends for a new one). */
    maxSessionsPerPrincipal: number;
    /** Time a client has to send a request's head and body (both HTTP readers). */
    requestTimeoutMs: number;
    /** On SIGTERM, how long calls in flight may take before the upstreams are closed under them. */
    drainTimeoutMs: number;
    /** A tools/call quiet this long (up to twice) is answered as an SSE stream; 0: never. */
    quietCallStreamMs: number;
  };
  ledger: {
    path: string;
    enabled: boolean;
    storeBodies: boolean;
    /** Regex source for keys whose values are redacted; absent: the credential words (ledger/redact.ts DEFAULT_REDACT_KEYS). */
    redactKeys?: string;
    idempotencyTtlMs: number;
  };
  names: {
    /** 'strict' = ^[A-Za-z0-9_-]{1,64}$ (Anthropic/OpenAI); 'spec' = 1-128 chars of [A-Za-z0-9_.-]. */
    mode: 'strict' | 'spec';
  };
  /** Largest page of an aggregated list the hub returns. */
  pageSize: number;
  servers: Record<string, ServerConfig>; // insertion order = config order
  /** Authentication of downstream clients; absent (or no keys and no oauth) = none, loopback only. */
  auth?: AuthConfig;
  policy?: PolicyConfig;
  /** Plugins to load and their options (src/plugins). */
  plugins?: PluginsConfig;
  /** Named tool groups, selected by the endpoint path `/mcp/<group>`. */
  groups?: Record<string, GroupConfig>;
}

/**
 * `listen.admin`: a unix socket (`path`, absolute once loaded; mode 0600) or a TCP address
 * (`port`, `host` default 127.0.0.1) for the admin routes alone; `exclusive`: the main listener
 * no longer serves them (only /healthz and MCP there).
 */
export type AdminListen = ({ path: string } | { host?: string; port: number }) & { exclusive?: boolean };

/** `plugins`: bundled plugins run first, then the folder's files in name order, then `paths` in order. */
export interface PluginsConfig {
  /** Folder whose .js/.mjs files are loaded (default "plugins", next to the config file). */
  dir?: string;
  /** More plugin files, relative to the config file's folder, loaded in this order. */
  paths?: (string | { path: string; options?: Record<string, unknown> })[];
  /** Options per plugin name. */
  options?: Record<string, Record<string, unknown>>;
  /** Plugin names not to run ("description-checks" and "redact-secrets" are bundled). */
  disable?: string[];
}

/** `groups.<name>`: what a client connected to `/mcp/<name>` sees. */
export interface GroupConfig {
  /** Server ids (default: all). */
  servers?: string[];
  /** Tool globs on the hub or upstream name (default: every tool of the servers). */
  tools?: string[];
  /** Prompt globs (default: every prompt of the servers). */
  prompts?: string[];
  /** Tool or prompt globs the group hides. */
  deny?: string[];
}

export interface AuthConfig {
  /** API keys; only the sha256 (hex) of each key is stored. */
  apiKeys: ApiKeyConfig[];
  oauth?: OAuthConfig;
}

export interface ApiKeyConfig {
  principal: string;
  sha256: string;
  /** Scopes the key grants (for `auth.oauth.toolScopes`); none by default. */
  scopes?: string[];
  /** The tool groups whose endpoints (`/mcp/<group>`) alone the key may use; unset: every endpoint. */
  groups?: string[];
}

/** The hub as an OAuth 2.1 resource server (digest §7). */
export interface OAuthConfig {
  issuer: string;
  /** The hub's canonical URI, the audience tokens must name; default http://<listen host>:<port>/mcp. */
  audience?: string;
  jwksUri?: string;
  /** A local JWKS file (relative to the config file's folder); re-read when it changes (looked at once a second at most) or a token names an unknown kid. */
  jwksFile?: string;
  /** Scopes every token needs. */
  scopes: string[];
  /** Hub tool name glob → the scope (or scopes) a call to it needs. */
  toolScopes: Record<string, string | string[]>;
  /** Accepted signature algorithms (asymmetric only). */
  algorithms: string[];
  /** The claim naming the principal. */
  principalClaim: string;
  /** `/mcp/<group>` is a resource of its own, `<audience>/<group>`; a token for such resources alone is limited to them. */
  groupResources: boolean;
  clockToleranceSec: number;
  /** Least time between JWKS fetches (or jwksFile reads) caused by an unknown kid. */
  jwksCooldownMs: number;
}

/** policy.inputTimeoutMs when the config leaves it out: how long a client has to answer a question. */
export const DEFAULT_INPUT_TIMEOUT_MS = 60_000;
/** policy.requestStateTtlMs when the config leaves it out: a sealed requestState's lifetime. */
export const DEFAULT_REQUEST_STATE_TTL_MS = 10 * 60_000;

export interface PolicyConfig {
  rateLimit?: RateLimitConfig;
  /** A tool whose definition changed since it was approved: hidden ("block", default) or shown with a warning. */
  pinning?: 'block' | 'warn';
  /** A description (or a server's instructions) with signs of poisoning: shown with a flag ("warn", default) or hidden ("block"). */
  poisoning?: 'warn' | 'block';
  [key: string]: unknown;
}

export interface BucketConfig {
  burst: number;
  perSecond: number;
}

/** Token buckets; over the limit → HTTP 429 with Retry-After, audited as denied. */
export interface RateLimitConfig {
  /** Every request of one principal. */
  perPrincipal?: BucketConfig;
  /** tools/call of one principal to one tool. */
  perTool?: BucketConfig;
  /** Hub tool name glob → bucket, instead of perTool (first match wins). */
  tools?: Record<string, BucketConfig>;
}

/** `servers.<id>.credentials.<principal>`: what that principal's connection sends instead of `headers`. */
export interface PrincipalCredentials {
  headers: Record<string, string>;
}

/**
 * `servers.<id>.oauth`: the hub as an OAuth 2.1 client of an HTTP upstream. The default grant,
 * client credentials (src/upstream/oauth-client.ts), needs clientId and clientSecret or
 * privateKey (the schema sees to it). `grant: "authorization_code"` is a user's login
 * (`switchyard login <id>`, src/upstream/oauth-login.ts): the client is pre-registered (clientId,
 * clientSecret for a confidential one), a Client ID Metadata Document (clientMetadataUrl), or
 * registered dynamically; the tokens are kept in the state directory (oauth-token-store.ts).
 */
export interface UpstreamOAuthConfig {
  /** Default client_credentials. */
  grant?: 'client_credentials' | 'authorization_code';
  /** Required for client_credentials; for authorization_code, a pre-registered client. */
  clientId?: string;
  /** The authorization server the client is registered with; the credentials go to no other. */
  issuer?: string;
  clientSecret?: string;
  /** PKCS#8 PEM, for private_key_jwt. */
  privateKey?: string;
  signingAlgorithm?: string;
  /** private_key_jwt: the client assertion's `aud` (default the issuer; some older servers want the token endpoint URL). */
  assertionAudience?: 'issuer' | 'token_endpoint';
  /** Asked for instead of the challenge's or the metadata's scopes. */
  scopes?: string[];
  tokenEndpointAuth?: 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' | 'none';
  /** authorization_code: an https URL of the hub's Client ID Metadata Document, used as client_id where the AS supports it. */
  clientMetadataUrl?: string;
  /** authorization_code: the loopback port of the redirect (default: any free port). */
  redirectPort?: number;
}

export interface ServerConfig {
  id: string;
  command?: string;
  args: string[];
  env: Record<string, string>;
  /** What of the hub's own environment the process gets: a baseline (undefined), all (true), only `env` (false), or the baseline and these names (`PREFIX*`). */
  inheritEnv?: boolean | string[];
  /** A stdio server: each principal's calls go to a process of its own (auth/upstream-pool.ts); authentication on only. */
  processPerPrincipal?: boolean;
  cwd?: string;
  url?: string;
  headers: Record<string, string>;
  /** HTTP servers: tokens the hub obtains itself (client credentials) instead of a static Authorization header. */
  oauth?: UpstreamOAuthConfig;
  /** oauth.grant authorization_code: the file of the tokens `switchyard login` stored (derived from the state directory, not configured). */
  oauthTokenFile?: string;
  /** Per-principal upstream credentials (HTTP servers); each such principal gets its own connection. */
  credentials?: Record<string, PrincipalCredentials>;
  prefix: string; // defaults to the id; '' exposes names unchanged
  trust: 'trusted' | 'untrusted';
  enabled: boolean;
  /** Idle timeout of one request: restarted by each progress notification. */
  timeoutMs: number;
  /** Hard cap on one request, progress or not (time spent waiting for the client excluded). */
  maxTotalTimeoutMs: number;
  /** 'closed': while this server is not ready, the hub refuses every call (see docs). */
  failMode: 'open' | 'closed';
  /** Requests in flight to this server at once; more wait in a queue of maxQueue, then are refused as busy. */
  maxConcurrent: number;
  maxQueue: number;
  /** Hub-side retries of calls the hub knows are safe to send again. */
  retry: { maxAttempts: number; budgetMs: number };
  /** HTTP only: consecutive failures that open the circuit, and the wait before the first probe. */
  circuitBreaker: { failures: number; cooldownMs: number };
  era: 'auto' | Era;
  probeTimeoutMs: number;
  /** url servers idle this long, stdio ones silent this long, are checked for an answer (0: never): see the schema. */
  healthCheckMs: number;
  maxFrameBytes: number;
  /**
   * List (and resources/read) freshness in ms, overriding the upstream's own ttlMs when set.
   * Unset: modern upstreams' ttlMs; legacy ones until list_changed if declared, else 30 s.
   */
  cacheTtlMs?: number;
  /** Trusted servers only: a changed tool definition is approved at once instead of quarantined. */
  autoApprove?: boolean;
  tools: ServerToolsConfig;
}

/** `servers.<id>.tools`: exposure filters and per-tool settings keyed by the upstream tool name. */
export interface ServerToolsConfig {
  allow?: string[];
  deny?: string[];
  /** Every other key of `tools`: a tool's settings by its upstream name (the schema allows objects only). */
  byName: Record<string, ToolSettings>;
}

export interface ToolSettings {
  annotations?: ToolAnnotationOverrides;
}

export interface ToolAnnotationOverrides {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
  [key: string]: unknown;
}
