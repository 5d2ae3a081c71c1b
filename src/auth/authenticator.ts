import type { ApiKeyConfig, AuthConfig } from '../config/types.js';
import { GROUP_NAME } from '../catalog/filters.js';
import { isLoopbackHost } from '../downstream/origin.js';
import type { Logger } from '../log.js';
import { ANONYMOUS } from './principals.js';
import { ToolScopes, missingScopes } from '../policy/scopes.js';
import type { OtherNames } from '../policy/glob.js';
import { ApiKeyStore } from './api-keys.js';
import { bearerChallenge, PRM_PATH, protectedResourceMetadata, resourceMetadataUrl } from './challenge.js';
import type { Lapse, OAuthVerifier } from './oauth.js';
import { fieldLines } from '../transport/http1/field-lines.js';
import { firstHeaderValue } from '../protocol/header-value.js';

/** The scope that opens the operator routes (/admin/…, /metrics) once authentication is on. */
export const ADMIN_SCOPE = 'switchyard:admin';

/** Who is calling, established from the credential alone (never from arguments or `_meta`). */
export interface Identity {
  principal: string;
  scopes: readonly string[];
  /** Partition of everything per-user: private caches, upstream connections. */
  authContext: string;
  via: 'none' | 'apiKey' | 'oauth';
  /**
   * When the credential stops working (epoch ms; OAuth tokens). Each request is checked anew;
   * a stream the credential opened (a legacy GET stream, a modern listen stream, the live feed)
   * is ended then, so the client must come back with a fresh one.
   */
  expiresAt?: number;
  /** An OAuth token's: ends such a stream sooner, if the token stops verifying (its key left the key set). */
  lapse?: Lapse;
  /**
   * The API key that authenticated (its configured hash): a session or stream it opened ends
   * when a reload removes that key, even if the principal keeps another (a rotated key).
   */
  key?: string;
  /**
   * The key set version (keysVersion) `key` was let in under: a call held after it (its body
   * still on its way, a plugin, the user's confirmation) looks the key up again if a reload
   * came since, whenever that was.
   */
  keysAt?: number;
  /**
   * The tool groups whose endpoints alone this credential may use (`auth.apiKeys[].groups`, or
   * a token issued for group resources alone, `auth.oauth.groupResources`); undefined: every endpoint.
   */
  groups?: ReadonlySet<string>;
}

/** A refusal to send as is: status, headers (WWW-Authenticate) and a short reason for the body. */
export interface Refusal {
  /** 400 for a malformed Bearer header (RFC 6750 §3.1 invalid_request), 401, 403, or 503 (a token that cannot be checked now). */
  status: 400 | 401 | 403 | 503;
  headers: Record<string, string>;
  message: string;
  /** A valid credential refused for its scopes still names who presented it (for the ledger's row). */
  principal?: string;
}

export type AuthOutcome = ({ ok: true } & Identity) | ({ ok: false } & Refusal);

/**
 * Lower-case request headers, as node:http gives them. `repeatedAuthorization`: the request had
 * several Authorization lines, which make one malformed header whatever they say (it is not a
 * list field, RFC 9110 §5.3: a client sending two is confused or probing).
 */
export type HeaderLookup = ((name: string) => string | undefined) & { readonly repeatedAuthorization?: boolean };

/** What `credentialHeaders` reads of a request: node:http's IncomingMessage, or the edge's fast path. */
export interface HeaderSource {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly rawHeaders?: readonly string[];
}

/**
 * The lookup `authenticate` reads a request with. node:http keeps only the first of repeated
 * Authorization lines, so `Bearer good` then `Bearer bad` would pass on the first; here a
 * repeat is seen in `rawHeaders` and marks the lookup (400). The edge's fast path sends a
 * request with a repeated header to node:http, so it has no repeats.
 */
export function credentialHeaders(req: HeaderSource): HeaderLookup {
  const lookup = (name: string) => firstHeaderValue(req.headers[name]);
  const lines = req.headers.authorization === undefined ? undefined : fieldLines(req.rawHeaders, 'authorization');
  return lines !== undefined && lines.length > 1 ? Object.assign(lookup, { repeatedAuthorization: true }) : lookup;
}

/** The 401 reason for an Authorization header that is no Bearer credential (names no part of it). */
const NOT_BEARER = 'authentication required: the Authorization header is not a Bearer credential (send the API key or token as "Authorization: Bearer <credential>", or the key as X-API-Key; Basic is not taken)';

/** Whether `auth` asks for credentials (API keys or OAuth); otherwise the hub is loopback-only. */
export function authRequired(auth: AuthConfig | undefined): boolean {
  return (auth?.apiKeys?.length ?? 0) > 0 || auth?.oauth !== undefined;
}

export function authContextOf(principal: string): string {
  return `principal:${principal}`;
}

/**
 * Every request's outcome on a hub without keys or OAuth, made once: one made per request was
 * built by the runtime each time (CreateObjectLiteral, ~2.7k instructions a call under callgrind,
 * docs/BENCHMARKS.md, seventieth session). Frozen, so nothing can change it for the next request.
 */
const NO_AUTH: AuthOutcome = Object.freeze({ ok: true, principal: ANONYMOUS, scopes: Object.freeze([]), authContext: authContextOf(ANONYMOUS), via: 'none' });

/**
 * The credential a request carries: a Bearer token, else an `X-Api-Key`; '' for a Bearer header
 * that is malformed; undefined for none (another scheme, such as Basic, is none: RFC 6750 §3.1).
 */
function bearerToken(h: HeaderLookup): string | undefined {
  if (h.repeatedAuthorization) return '';
  const a = h('authorization');
  if (a && /^Bearer(?:[ \t]|$)/i.test(a)) {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(a);
    return m ? m[1] : '';
  }
  const k = h('x-api-key');
  return k === undefined ? undefined : k.trim();
}

/**
 * The authentication seam of the HTTP edge: `authenticate(headers)` gives an Identity or a
 * Refusal to send. Modes: none (loopback only), API keys, OAuth bearer JWTs, or both.
 */
export class Authenticator {
  readonly toolScopes: ToolScopes;
  private keys: ApiKeyStore;
  private oauth: OAuthVerifier | undefined;
  /** The verifier's class, loaded by prepare() for a config with OAuth (jose is ~175 modules). */
  private Verifier: typeof OAuthVerifier | undefined;
  private readonly baseScopes: string[];
  private readonly requiredAtStart: boolean;

  constructor(
    private cfg: AuthConfig | undefined,
    private readonly baseDir: string,
    private readonly log: Logger,
  ) {
    this.keys = new ApiKeyStore(cfg?.apiKeys ?? []);
    this.requiredAtStart = authRequired(cfg);
    this.toolScopes = new ToolScopes(cfg?.oauth?.toolScopes);
    this.baseScopes = cfg?.oauth?.scopes ?? [];
  }

  /** Loads the OAuth verifier of a config with `auth.oauth`, and makes it when `audience` is set (a broken `jwksFile` throws here). Before any authenticate(). */
  async prepare(): Promise<void> {
    if (!this.cfg?.oauth || this.Verifier) return;
    this.Verifier = (await import('./oauth.js')).OAuthVerifier;
    const audience = this.cfg.oauth.audience;
    // Without `audience` the verifier is made once the listener's address is known (bindAudience):
    // this one says now, as the config's error, what is wrong with the key set or algorithms.
    const verifier = new this.Verifier(this.cfg.oauth, audience ?? 'http://127.0.0.1/mcp', this.baseDir, this.log);
    if (audience) this.oauth = verifier;
  }

  /**
   * The API keys from a reloaded config (config/reload.ts, reloadableApiKeys, which keeps
   * authentication on): the next request is checked against these, so a removed key stops
   * working at once, for calls and for sessions it opened.
   */
  replaceKeys(keys: readonly ApiKeyConfig[]): void {
    this.keys = new ApiKeyStore(keys);
    this.keysVersion++;
    this.cfg = { ...this.cfg, apiKeys: [...keys] };
  }

  /**
   * Bumped by every replaceKeys: a call held after it was let in (a plugin, the row's write)
   * looks its key up again only when this moved (revokedRefusal).
   */
  keysVersion = 0;

  /**
   * null while the API key `key` (its configured hash) still lets `principal` in at `group`'s
   * endpoint; otherwise what a request with it is answered now: 401 for a key removed or given to
   * another principal, 403 for one whose groups no longer take the endpoint (as authenticate and
   * the edge answer them, the reason saying the call was held and not sent), and 403
   * insufficient_scope for one that lost a scope `hubName` (`other`: its upstream name and its name before any renaming) needs,
   * when `hubName` is a tool's (undefined for a request that calls no tool: no scope is looked at).
   */
  revokedRefusal(key: string, principal: string, group: string | undefined, hubName?: string, other?: OtherNames): Refusal | null {
    const holder = this.keys.holderOf(key);
    const held = 'revoked while the call was held; it was not sent';
    if (!holder || holder.principal !== principal) return this.unauthorized('invalid_token', `unknown API key (${held})`, group);
    if (holder.groups && !(group !== undefined && holder.groups.has(group)))
      return { status: 403, headers: {}, message: `Forbidden: this API key may use only ${[...holder.groups].map((g) => `/mcp/${g}`).join(', ')} (${held})`, principal };
    if (hubName === undefined) return null;
    // Its scopes narrowed: refused as checkToolScopes refuses the key at the edge now.
    const needed = this.toolScopes.required(hubName, other);
    if (needed.length > 0 && missingScopes(holder.scopes, needed).length > 0)
      return { ...this.insufficientScope([...new Set([...this.baseScopes, ...needed])], `calling ${hubName} needs scope ${needed.join(' ')} (the key lost it while the call was held; it was not sent)`, group), principal };
    return null;
  }

  /**
   * null while the OAuth token `token` a held call came with still works; otherwise what a
   * request with it is answered now: 401 invalid_token, the reason saying the call was held and
   * not sent. A token that cannot be checked now (the issuer's keys unavailable) is no refusal:
   * that says nothing of the token, and its call goes on, as its streams do.
   */
  lapsedRefusal(token: Lapse, principal: string, group: string | undefined): Refusal | null | Promise<Refusal | null> {
    const now = token.recheck();
    if (now === null) return null;
    return now.then((v) => (v.ok || v.retryAfterMs !== undefined ? null : { ...this.unauthorized('invalid_token', `${v.description} (it stopped working while the call was held; it was not sent)`, group), principal }));
  }

  /**
   * Without keys and OAuth anyone who reaches the listener is served. Decided at start: a
   * reload that removes the last key leaves it on, with no key that works, until a restart.
   */
  get required(): boolean {
    return this.requiredAtStart;
  }

  get mode(): string {
    const m = [this.keys.size > 0 ? 'apiKeys' : '', this.cfg?.oauth ? 'oauth' : ''].filter(Boolean);
    return m.length ? m.join('+') : 'none';
  }

  /** The hub's canonical URI once the listener is bound, for an OAuth config without `audience`. */
  bindAudience(listenUrl: string): void {
    if (!this.cfg?.oauth || this.oauth || !this.Verifier) return;
    this.oauth = new this.Verifier(this.cfg.oauth, listenUrl, this.baseDir, this.log);
    if (!isLoopbackHost(new URL(listenUrl).hostname.replace(/^\[|\]$/g, '')))
      this.log.warn({ audience: listenUrl }, 'auth.oauth.audience is not set: tokens must name the listen address; set it to the URI clients use');
  }

  get resource(): string | undefined {
    return this.oauth?.audience;
  }

  /**
   * The resource a client of `group`'s endpoint authorises for: the group's own with
   * `auth.oauth.groupResources` (RFC 8707: each endpoint a client connects to is a resource),
   * otherwise the hub's.
   */
  resourceOf(group: string | undefined): string | undefined {
    const resource = this.resource;
    return resource && group !== undefined && this.cfg?.oauth?.groupResources ? `${resource.replace(/\/+$/, '')}/${group}` : resource;
  }

  /** `group`: the tool group whose endpoint was asked (`/mcp/<group>`), which a challenge names the resource of. */
  authenticate(h: HeaderLookup, group?: string): AuthOutcome | Promise<AuthOutcome> {
    // Answered at once but for an OAuth token's verification, so a request with no credential
    // to verify (no auth, an API key) waits no turn for it.
    if (!this.required) return NO_AUTH;
    const token = bearerToken(h);
    // Another scheme (Basic), or a key with no scheme before it: no credential (RFC 6750 §3.1),
    // but said, since a client configured so is sure it sent one.
    if (token === undefined) return this.unauthorized(undefined, h('authorization') === undefined ? 'authentication required' : NOT_BEARER, group);
    if (token === '') return this.malformed('malformed Authorization header', group);
    if (this.keys.size > 0) {
      const holder = this.keys.lookup(token);
      if (holder) return { ok: true, principal: holder.principal, scopes: holder.scopes, authContext: authContextOf(holder.principal), via: 'apiKey', key: holder.key, keysAt: this.keysVersion, groups: holder.groups };
    }
    if (this.cfg?.oauth && token.split('.').length === 3) {
      if (!this.oauth) return this.unauthorized('invalid_token', 'the hub does not know its own address yet', group);
      return this.verified(this.oauth, token, group);
    }
    return this.unauthorized('invalid_token', this.cfg?.oauth ? 'the token is not valid' : 'unknown API key', group);
  }

  /** An OAuth token's outcome, once its verifier has checked it. */
  private async verified(oauth: NonNullable<typeof this.oauth>, token: string, group: string | undefined): Promise<AuthOutcome> {
    const v = await oauth.verify(token);
    // Not invalid_token: a client told so drops its token and has its user log in again, for a
    // token that may be good; the issuer's keys are what the hub lacks.
    if (!v.ok && v.retryAfterMs !== undefined) return { ok: false, status: 503, headers: { 'retry-after': String(Math.ceil(v.retryAfterMs / 1000)) }, message: `Service Unavailable: ${v.description}` };
    if (!v.ok) return this.unauthorized('invalid_token', v.description, group);
    const missing = missingScopes(v.scopes, this.baseScopes);
    if (missing.length) return { ...this.insufficientScope(this.baseScopes, 'the token lacks scopes the hub requires', group), principal: v.principal };
    return { ok: true, principal: v.principal, scopes: v.scopes, authContext: authContextOf(v.principal), via: 'oauth', expiresAt: v.expiresAt, lapse: v.lapse, groups: v.groups };
  }

  /**
   * null when `identity` may call `hubName`; otherwise the 403 step-up challenge naming every scope
   * needed (for `group`'s resource). `other`: the tool's upstream name and its name before the hub renamed it (ToolScopes.required).
   */
  checkToolScopes(identity: Identity, hubName: string, group?: string, other?: OtherNames): Refusal | null {
    const needed = this.toolScopes.required(hubName, other);
    if (needed.length === 0 || missingScopes(identity.scopes, needed).length === 0) return null;
    return this.insufficientScope([...new Set([...this.baseScopes, ...needed])], `calling ${hubName} needs scope ${needed.join(' ')}`, group);
  }

  /** null when `identity` may use the operator routes; otherwise a 403 naming the admin scope. */
  checkAdmin(identity: Identity): Refusal | null {
    // A key limited to tool groups sees those groups only; the operator routes show every server.
    if (identity.groups) return { status: 403, message: `a ${identity.via === 'oauth' ? 'token' : 'key'} limited to tool groups cannot use the operator routes`, headers: {} };
    if (!this.required || identity.scopes.includes(ADMIN_SCOPE)) return null;
    return this.insufficientScope([ADMIN_SCOPE], 'the operator routes need the admin scope');
  }

  /**
   * The PRM document for a well-known path, or undefined when the path is not one of ours. With
   * group resources, a configured group's (`hasGroup`) under the hub's own path names the group's.
   */
  metadataFor(path: string, hasGroup: (group: string) => boolean = () => false): Record<string, unknown> | undefined {
    let resource = this.resource;
    if (!this.cfg?.oauth || !resource) return undefined;
    const own = new URL(resourceMetadataUrl(resource)).pathname;
    if (path !== PRM_PATH && path !== `${PRM_PATH}/mcp` && path !== own) {
      const group = this.cfg.oauth.groupResources ? groupUnder(path, [`${PRM_PATH}/mcp/`, `${own.replace(/\/+$/, '')}/`]) : undefined;
      if (group === undefined || !hasGroup(group)) return undefined;
      resource = this.resourceOf(group)!;
    }
    return protectedResourceMetadata({
      resource,
      issuer: this.cfg.oauth.issuer,
      scopes: [...new Set([...this.baseScopes, ...this.toolScopes.all()])],
    });
  }

  private challengeParams(group: string | undefined): Record<string, string | undefined> {
    const resource = this.resourceOf(group);
    // The realm in both: the CLI tells the hub's own refusal from another program's by it.
    return resource ? { resource_metadata: resourceMetadataUrl(resource), realm: 'switchyard' } : { realm: 'switchyard' };
  }

  private unauthorized(error: string | undefined, description: string, group: string | undefined): { ok: false } & Refusal {
    const scope = this.baseScopes.length ? this.baseScopes.join(' ') : undefined;
    const header = bearerChallenge({ ...this.challengeParams(group), scope, error, error_description: error ? description : undefined });
    return { ok: false, status: 401, headers: { 'www-authenticate': header }, message: `Unauthorized: ${description}` };
  }

  /** A Bearer header that is not one token: 400 with an invalid_request challenge (RFC 6750 §3.1, digest §7). */
  private malformed(description: string, group: string | undefined): { ok: false } & Refusal {
    const header = bearerChallenge({ ...this.challengeParams(group), error: 'invalid_request', error_description: description });
    return { ok: false, status: 400, headers: { 'www-authenticate': header }, message: `Bad Request: ${description}` };
  }

  private insufficientScope(scopes: string[], description: string, group?: string): { ok: false } & Refusal {
    const header = bearerChallenge({ error: 'insufficient_scope', scope: scopes.join(' '), ...this.challengeParams(group), error_description: description });
    return { ok: false, status: 403, headers: { 'www-authenticate': header }, message: `Forbidden: ${description}` };
  }
}

/** The group name a well-known path ends with under one of `prefixes` (one path segment), if any. */
function groupUnder(path: string, prefixes: readonly string[]): string | undefined {
  for (const prefix of prefixes) {
    const rest = path.startsWith(prefix) ? path.slice(prefix.length) : undefined;
    if (rest && GROUP_NAME.test(rest)) return rest;
  }
  return undefined;
}
