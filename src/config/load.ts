import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { oauthTokenFile } from '../paths.js';
import { classifyPattern } from '../policy/safe-regex.js';
import { adminSocketPathProblem } from '../socket-path.js';
import { duplicateKeys } from './duplicate-keys.js';
import { jsonErrorWhere } from './json-error.js';
import { durationMs } from './duration.js';
import { headerProblems } from './header-check.js';
import { interpolateEnv, type Env, type Interpolated } from './interpolate.js';
import { noteInterpolated } from './secret-values.js';
import { validateAgainstSchema } from './schema.js';
import { DEFAULT_INPUT_TIMEOUT_MS, DEFAULT_REQUEST_STATE_TTL_MS, type HubConfig, type ServerConfig, type ServerToolsConfig, type ToolSettings } from './types.js';
import { decodeStateKey } from './state-key.js';

/** An unusable config: one line per problem, each naming its key path. */
export class ConfigError extends Error {
  readonly problems: string[];
  /** The file is not there at all (a first run, or a wrong --config), not a file with problems. */
  readonly missing: boolean;
  constructor(problems: string[], file?: string, missing = false) {
    super(`invalid config${file ? ` ${file}` : ''}:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
    this.missing = missing;
  }
}

/** The document after interpolation and schema defaults, as the schema guarantees it. */
type RawServer = Omit<ServerConfig, 'id' | 'prefix' | 'enabled' | 'tools'> & {
  prefix?: string;
  enabled?: boolean;
  disabled?: boolean;
  tools?: Record<string, unknown>;
};

interface RawConfig extends Pick<HubConfig, 'listen' | 'names' | 'pageSize' | 'auth' | 'policy' | 'plugins' | 'groups'> {
  ledger: Omit<HubConfig['ledger'], 'idempotencyTtlMs'> & { idempotencyTtl: number | string };
  servers?: Record<string, RawServer>;
  mcpServers?: Record<string, RawServer>;
}

/** A key limited to a group the config has not could use no endpoint at all: a typo, said at once. */
function keyGroupProblems(value: unknown): string[] {
  const v = value as { auth?: { apiKeys?: unknown }; groups?: unknown } | null;
  if (!Array.isArray(v?.auth?.apiKeys)) return [];
  const groups = v.groups !== null && typeof v.groups === 'object' ? v.groups : {};
  const out: string[] = [];
  v.auth.apiKeys.forEach((k: unknown, i: number) => {
    const named = (k as { groups?: unknown } | null)?.groups;
    if (!Array.isArray(named)) return;
    for (const g of named)
      if (typeof g === 'string' && !Object.hasOwn(groups, g)) out.push(`auth.apiKeys[${i}].groups: "${g}" is not a configured group (${Object.keys(groups).join(', ') || 'the config has none'})`);
  });
  return out;
}

/** Interpolates, validates and fills defaults; `value` is meaningful only without problems. */
function check(json: unknown, env: Env, base = process.cwd()): { problems: string[]; value: unknown; interpolated: Interpolated['values'] } {
  const interpolated = interpolateEnv(json, env);
  const value = interpolated.value;
  const problems = [...interpolated.problems, ...validateAgainstSchema(value, interpolated.failedPaths)];
  problems.push(...urlProblems(value), ...headerProblems(value));
  // A client answering within inputTimeoutMs would have its requestState refused as expired.
  const policy = (value as { policy?: { inputTimeoutMs?: unknown; requestStateTtlMs?: unknown } } | null)?.policy;
  const inputMs = typeof policy?.inputTimeoutMs === 'number' ? policy.inputTimeoutMs : DEFAULT_INPUT_TIMEOUT_MS;
  const stateMs = typeof policy?.requestStateTtlMs === 'number' ? policy.requestStateTtlMs : DEFAULT_REQUEST_STATE_TTL_MS;
  if (Number.isInteger(stateMs) && Number.isInteger(inputMs) && stateMs >= 1 && stateMs < inputMs)
    problems.push(`policy.requestStateTtlMs (${stateMs}) is shorter than policy.inputTimeoutMs (${inputMs}): a client answering in time would have its requestState refused as expired while the call still waits`);
  // start refuses a key that is no 32 bytes (loadStateKey): a config it refuses is no valid one. Its value is a secret: not said.
  const key = (policy as { requestStateKey?: unknown } | undefined)?.requestStateKey;
  if (typeof key === 'string' && key !== '' && !interpolated.failedPaths.has('policy.requestStateKey') && !decodeStateKey(key))
    problems.push('policy.requestStateKey: must be 32 bytes, written as 64 hex characters or in base64 (such as the output of `openssl rand -base64 32`)');
  problems.push(...keyGroupProblems(value), ...idPrefixProblems(value));
  // Both listeners on one port: the second could never bind, and `start` would fail on it.
  const listen = (value as { listen?: { port?: unknown; admin?: { port?: unknown; path?: unknown } } } | null)?.listen;
  if (typeof listen?.admin?.port === 'number' && listen.admin.port === (listen.port ?? 7410))
    problems.push(`listen.admin.port: must differ from listen.port (${listen.admin.port}): the admin listener is a listener of its own`);
  // Over the limit, node binds a path cut short where no CLI finds it (socket-path.ts).
  if (typeof listen?.admin?.path === 'string' && listen.admin.path !== '') {
    const long = adminSocketPathProblem(resolve(base, listen.admin.path));
    if (long) problems.push(`listen.admin.path: ${long}`);
  }
  const ledger = (value as { ledger?: { path?: unknown; enabled?: unknown; idempotencyTtl?: unknown; redactKeys?: unknown } } | null)?.ledger;
  // The schema checks its shape only: "99999999999999d" (or an integer past 2^53) has no exact
  // millisecond count, and was taken silently as the default 24h.
  const ttl = ledger?.idempotencyTtl;
  if (ttl !== undefined && durationMs(ttl) === undefined && !problems.some((p) => p.startsWith('ledger.idempotencyTtl:')))
    problems.push(`ledger.idempotencyTtl: too long (at most ${Number.MAX_SAFE_INTEGER} ms)`);
  // SQLite's name for an in-memory database: the ledger keeps files beside its database (rows
  // pending commit, its lock, its owner), so it made real files named ":memory:…" in the working
  // folder and kept them, the opposite of what the name asks for.
  if (ledger?.path === ':memory:' && ledger.enabled !== false)
    problems.push('ledger.path: ":memory:" cannot hold the ledger (it keeps files beside its database: rows pending commit, its lock); give a file path, or set ledger.enabled to false for no ledger');
  const redact = ledger?.redactKeys;
  if (typeof redact === 'string') {
    try {
      new RegExp(redact, 'i');
      // It runs on every key of every call's arguments, which clients choose, of any length.
      const shape = classifyPattern(redact);
      if (shape.kind === 'reject') problems.push(`ledger.redactKeys: ${shape.why}, which can backtrack without end on a hostile key`);
    } catch (e) {
      problems.push(`ledger.redactKeys: not a valid regular expression (${(e as Error).message})`);
    }
  }
  return { problems, value, interpolated: interpolated.values };
}

/**
 * URLs the schema's pattern lets through but nothing can connect to (`http://exa mple.com`,
 * `https://`): found here, with their key path, instead of when an upstream is built (which
 * would stop a start, or a reload half-way). The URL itself is never repeated: it may hold
 * credentials.
 */
/** The longest prefix (the schema's `maxLength` of `prefix`): `<prefix>__` leaves 14 characters of a 64-character name. */
export const MAX_PREFIX_CHARS = 48;

/**
 * A server without `prefix` has its id as the prefix, and the schema bounds only a `prefix`
 * written out. A longer id left strict names no room: each was cut inside the id itself and
 * ended in a hash (`…-filesystem-to_7bf453`), so a model could not tell the tools apart and a
 * group's `<id>__*` matched none of them.
 */
function idPrefixProblems(value: unknown): string[] {
  const out: string[] = [];
  const root = (value ?? {}) as { servers?: unknown; mcpServers?: unknown };
  for (const key of ['servers', 'mcpServers'] as const) {
    const servers = root[key];
    if (!servers || typeof servers !== 'object') continue;
    for (const [id, s] of Object.entries(servers)) {
      if (id.length <= MAX_PREFIX_CHARS || !s || typeof s !== 'object' || (s as { prefix?: unknown }).prefix !== undefined) continue;
      out.push(
        `${key}.${id}: the id is its tool and prompt names' prefix when no "prefix" is given, and at ${id.length} characters it is longer than a prefix may be (${MAX_PREFIX_CHARS}: names are at most 64, and would be cut to a hash); give the server a shorter "prefix"`,
      );
    }
  }
  return out;
}

function urlProblems(value: unknown): string[] {
  const out: string[] = [];
  const check = (path: string, v: unknown): void => {
    if (typeof v !== 'string' || !/^https?:\/\//i.test(v)) return; // not a URL yet: the schema says so
    let ok = false;
    try {
      ok = new URL(v).hostname !== '';
    } catch {
      ok = false;
    }
    if (!ok) out.push(`${path}: not a valid http(s) URL`);
  };
  const root = (value ?? {}) as { servers?: unknown; mcpServers?: unknown; auth?: { oauth?: { audience?: unknown; jwksUri?: unknown } } };
  for (const key of ['servers', 'mcpServers'] as const) {
    const servers = root[key];
    if (servers && typeof servers === 'object') for (const [id, s] of Object.entries(servers)) check(`${key}.${id}.url`, (s as { url?: unknown } | null)?.url);
  }
  check('auth.oauth.audience', root.auth?.oauth?.audience);
  check('auth.oauth.jwksUri', root.auth?.oauth?.jwksUri);
  return out;
}

/** Every problem of a config document, one line each (empty when it is valid). */
export function configProblems(json: unknown, env: Env = process.env): string[] {
  return check(json, env).problems;
}

/**
 * The configured server named `id`, if there is one. The id may come from a command line, a
 * file name or a URL: `servers[id]` read `toString` or `constructor` off Object's prototype.
 */
export function configuredServer(config: Pick<HubConfig, 'servers'>, id: string): ServerConfig | undefined {
  return Object.hasOwn(config.servers, id) ? config.servers[id] : undefined;
}

/**
 * Turns a parsed hub.config.json into a HubConfig, or throws ConfigError.
 * `file` anchors relative paths (ledger.path, servers.*.cwd); without it they resolve
 * against the current directory.
 */
export function parseConfig(json: unknown, file?: string, env: Env = process.env): HubConfig {
  const base = file ? dirname(resolve(file)) : process.cwd();
  const { problems, value, interpolated } = check(json, env, base);
  if (problems.length > 0) throw new ConfigError(problems, file);
  const raw = value as RawConfig;

  const servers: Record<string, ServerConfig> = {};
  for (const [id, s] of Object.entries(raw.servers ?? raw.mcpServers ?? {})) servers[id] = buildServer(id, s, base);

  const config: HubConfig = {
    // The admin socket's path, as ledger.path, is relative to the config file's folder.
    listen: raw.listen.admin && 'path' in raw.listen.admin ? { ...raw.listen, admin: { ...raw.listen.admin, path: resolve(base, raw.listen.admin.path) } } : raw.listen,
    ledger: {
      path: raw.ledger.path === ':memory:' ? raw.ledger.path : resolve(base, raw.ledger.path),
      enabled: raw.ledger.enabled,
      storeBodies: raw.ledger.storeBodies,
      redactKeys: raw.ledger.redactKeys,
      idempotencyTtlMs: durationMs(raw.ledger.idempotencyTtl) as number, // check() refused any other
    },
    names: raw.names,
    pageSize: raw.pageSize,
    servers,
  };
  if (file) config.file = resolve(file);
  // Where `switchyard login` keeps a user's tokens; derived, so the CLI and the daemon agree.
  for (const s of Object.values(servers)) if (s.oauth?.grant === 'authorization_code') s.oauthTokenFile = oauthTokenFile(config.ledger.path, base, s.id);
  if (raw.auth) config.auth = raw.auth;
  if (raw.policy) config.policy = raw.policy;
  if (raw.plugins) config.plugins = raw.plugins;
  if (raw.groups) config.groups = raw.groups;
  // What the environment brought in where a secret sits is secret (config/secret-values.ts).
  noteInterpolated(config, interpolated);
  return config;
}

function buildServer(id: string, s: RawServer, base: string): ServerConfig {
  const server: ServerConfig = {
    id,
    args: s.args,
    env: s.env,
    headers: s.headers,
    prefix: s.prefix ?? id,
    trust: s.trust,
    enabled: s.enabled ?? !(s.disabled ?? false),
    timeoutMs: s.timeoutMs,
    maxTotalTimeoutMs: s.maxTotalTimeoutMs,
    failMode: s.failMode,
    maxConcurrent: s.maxConcurrent,
    maxQueue: s.maxQueue,
    retry: s.retry,
    circuitBreaker: s.circuitBreaker,
    era: s.era,
    probeTimeoutMs: s.probeTimeoutMs,
    healthCheckMs: s.healthCheckMs,
    maxFrameBytes: s.maxFrameBytes,
    tools: buildTools(s.tools),
  };
  if (s.command !== undefined) server.command = s.command;
  if (s.inheritEnv !== undefined) server.inheritEnv = s.inheritEnv;
  if (s.processPerPrincipal) server.processPerPrincipal = true;
  if (s.cwd !== undefined) server.cwd = resolve(base, s.cwd);
  if (s.url !== undefined) server.url = s.url;
  if (s.credentials !== undefined) server.credentials = s.credentials;
  if (s.oauth !== undefined) server.oauth = s.oauth;
  if (s.cacheTtlMs !== undefined) server.cacheTtlMs = s.cacheTtlMs;
  if (s.autoApprove !== undefined) server.autoApprove = s.autoApprove;
  return server;
}

function buildTools(tools: Record<string, unknown> = {}): ServerToolsConfig {
  // Keyed by upstream tool names, which may be `__proto__` or `constructor`: own keys only.
  const out: ServerToolsConfig = { byName: Object.create(null) as Record<string, ToolSettings> };
  for (const [k, v] of Object.entries(tools)) {
    if (k === 'allow' || k === 'deny') out[k] = v as string[];
    else if (v !== null && typeof v === 'object' && !Array.isArray(v)) out.byName[k] = v as ToolSettings;
  }
  return out;
}

/** Reads, parses and validates a hub.config.json file; throws ConfigError. */
export function loadConfig(file: string, env: Env = process.env): HubConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ConfigError([`config: cannot read ${file} (${code ?? 'error'})`], file, code === 'ENOENT');
  }
  let json: unknown;
  const body = text.replace(/^\uFEFF/, '');
  try {
    json = JSON.parse(body);
  } catch (e) {
    throw new ConfigError([`config: not valid JSON (${jsonErrorWhere(body, (e as Error).message)})`], file);
  }
  // JSON.parse keeps the last of two equal keys: a server pasted twice would replace the other
  // without a word.
  let twice: string[];
  try {
    twice = duplicateKeys(body);
    if (twice.length === 0) return parseConfig(json, file, env);
  } catch (e) {
    // No real config nests this deep; the walk (and the interpolation) would run out of stack.
    if (e instanceof RangeError) throw new ConfigError(['config: nested too deeply'], file);
    throw e;
  }
  throw new ConfigError(twice, file);
}


/**
 * A JSON document's text parsed, or an Error saying where it is broken without quoting it
 * (for the CLI's own readers of the config: keys, ledger path).
 */
export function parseJsonText(text: string): unknown {
  const body = text.replace(/^\uFEFF/, '');
  try {
    return JSON.parse(body);
  } catch (e) {
    throw new Error(`not valid JSON (${jsonErrorWhere(body, (e as Error).message)})`);
  }
}
