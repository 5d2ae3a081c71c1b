/**
 * The hub as an OAuth 2.1 client of one HTTP upstream, client-credentials grant (digest §7;
 * the MCP extension io.modelcontextprotocol/oauth-client-credentials, SEP-1046): machine to
 * machine, no browser.
 *
 * Driven by the server's 401: its `WWW-Authenticate: Bearer resource_metadata=…, scope=…` leads
 * to the Protected Resource Metadata (RFC 9728; else the well-known paths, path-specific
 * first), whose `authorization_servers[0]` leads to the authorization server's metadata
 * (RFC 8414, then OpenID discovery), whose `token_endpoint` is asked for a token with
 * `grant_type=client_credentials`, `resource=<the server's URI>` (RFC 8707) and the scopes (the
 * config's, else the challenge's, else the metadata's `scopes_supported`). The token is kept in
 * memory only, sent as `Authorization: Bearer` on every request, replaced shortly before it
 * expires, once after a 401 that names it, and with more scopes after a 403
 * `insufficient_scope` (a bounded number of times per request).
 *
 * The secret, the private key and every token are secret values of the process
 * (policy/config-secrets.ts): an upstream or authorization server that echoes one has it
 * redacted in logs, errors and the ledger. Errors say which step failed and what the other side
 * answered (status, OAuth `error`), never a credential.
 */
import { randomUUID } from 'node:crypto';
import type { UpstreamOAuthConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import { dropConfigSecrets, useConfigSecrets } from '../policy/config-secrets.js';
import { isLoopbackHost } from '../downstream/origin.js';
import { parseBearerChallenge, type BearerChallenge } from './oauth-challenge.js';
import { OAuthError, allowedEndpoint, authServerMetadata, noted, pickIssuer, protectedResource, strings, where, type ProtectedResource } from './oauth-discovery.js';
import { OAuthUrlPolicy } from './oauth-url-policy.js';
import { FAILURE_COOLDOWN_MS, renewTime, tokenRequest } from './oauth-token-request.js';

export { canonicalResource, OAuthError } from './oauth-discovery.js';
export { parseBearerChallenge, type BearerChallenge } from './oauth-challenge.js';
import type { HttpAnswer, HttpExchangeOptions } from '../transport/http-client.js';

/** Scope step-ups one request may cause (each must ask for a scope not asked for before). */
export const MAX_STEP_UPS = 2;
/**
 * The most scopes a step-up asks for: a server naming a new scope at each 403 (and an
 * authorization server that grants whatever is asked) would otherwise grow the set, and every
 * token request with it, for as long as the hub runs.
 */
export const MAX_SCOPES = 64;
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Algorithms a client assertion may use (the schema's enum). */
const KNOWN_ALGS = new Set(['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']);

interface Discovered {
  /** The `resource` the token is asked for (the PRM's, which covers this server). */
  resource: string;
  issuer: string;
  tokenEndpoint: string;
  /** The PRM's scopes_supported. */
  scopesSupported?: string[];
  authMethods?: string[];
  signingAlgs?: string[];
  grantTypes?: string[];
  /** The PRM URL the discovery came from (a 401 naming another one discovers again). */
  prmUrl: string;
  /** The challenge's resource_metadata the discovery was made for (refused, when not prmUrl: a 401 naming it again is no news). */
  named?: string;
  /** Said in the errors of this discovery's token requests: the challenge's resource_metadata was refused, and the fallback used. */
  refusedNamed?: string;
}

interface Token {
  value: string;
  /**
   * monotonicNow() after which it is replaced before use (Infinity: until a 401). Monotonic: the
   * token lives in memory only, its lifetime a duration (expires_in); on the wall clock a step
   * back had it sent for the step past its expiry (refused), a step forward replaced it early.
   */
  renewAt: number;
  /** monotonicNow() at which it expires (Infinity: not said). */
  expiresAt: number;
  /** The scopes it was asked with. */
  scopes: string[];
}

/** Anything with the HttpClient's exchanges: the client itself, or OAuthHttp around it. */
export interface HttpExchanges {
  post(body: string, o?: HttpExchangeOptions): Promise<HttpAnswer>;
  get(o?: HttpExchangeOptions): Promise<HttpAnswer>;
  delete(o?: HttpExchangeOptions): Promise<HttpAnswer>;
  close(): void;
}

/** Where OAuthHttp gets its tokens: the client-credentials client, or a login's stored tokens (oauth-stored-client.ts). */
export interface TokenSource {
  /** The token to send now, if there is one that is not about to expire. */
  current(): string | undefined;
  /** A token about to expire (or unusable otherwise), while it still works: what a request may use when no new one can be had. */
  lastResort(): string | undefined;
  /** Get a token before sending (the one held is about to expire, or none is held yet and sending without one is pointless). */
  readonly due: boolean;
  /** A token in place of `used` (a 401 or an expiry condemned it). */
  renew(used: string | undefined, challenge?: BearerChallenge): Promise<string>;
  /** After a 403 insufficient_scope: a token with more scopes, or undefined when none can be had. */
  stepUp(used: string | undefined, challenge: BearerChallenge): Promise<string | undefined>;
  release(): void;
}

/** One client per `servers.<id>.oauth` object: every connection to that server (per-principal ones too) shares its token. */
const clients = new WeakMap<UpstreamOAuthConfig, OAuthClient>();

export class OAuthClient implements TokenSource {
  private token: Token | undefined;
  private discovered: Discovered | undefined;
  /** The scopes of the last token obtained: the first choice, and every scope a challenge added since. */
  private scopes: string[] | undefined;
  private inflight: Promise<string> | undefined;
  /** Without oauth.issuer: the issuer of the first discovery (see pickIssuer). */
  private boundIssuer: string | undefined;
  /** The last failed token request (`at`: monotonicNow()), and the scopes it asked for (undefined: the first choice). */
  private failure: { err: OAuthError; at: number; scopes: string | undefined } | undefined;
  private refs = 0;
  /** Where what the server names may send this client (oauth-url-policy.ts). */
  private readonly urls: OAuthUrlPolicy;

  /** The client of this server's `oauth` settings (one per config object), with one more user. */
  static acquire(config: UpstreamOAuthConfig, serverUrl: string, log: Logger): OAuthClient {
    let c = clients.get(config);
    if (!c) {
      c = new OAuthClient(config, serverUrl, log);
      clients.set(config, c);
    }
    c.refs++;
    return c;
  }

  private constructor(
    private readonly config: UpstreamOAuthConfig,
    private readonly serverUrl: string,
    private readonly log: Logger,
  ) {
    this.urls = new OAuthUrlPolicy(serverUrl, config.issuer);
  }

  /** One user fewer; the last one forgets the token (and stops redacting it). */
  release(): void {
    if (this.refs === 0 || --this.refs > 0) return;
    if (clients.get(this.config) === this) clients.delete(this.config);
    this.token = undefined;
    dropConfigSecrets(this);
  }

  /** The token to send now, if there is one that is not about to expire. */
  current(): string | undefined {
    const t = this.token;
    return t !== undefined && monotonicNow() < t.renewAt ? t.value : undefined;
  }

  /**
   * The token about to expire, while it has not: what a request may still use when its
   * replacement cannot be had now (the authorization server down for a moment).
   */
  lastResort(): string | undefined {
    const t = this.token;
    return t !== undefined && monotonicNow() < t.expiresAt ? t.value : undefined;
  }

  /** A token was obtained once and is now about to expire: get the next one before sending. */
  get due(): boolean {
    return this.token !== undefined && monotonicNow() >= this.token.renewAt;
  }

  /**
   * A token in place of `used` (the one a 401 or an expiry condemned, or none), asked once
   * however many requests need it; resolves at once when another request replaced it already.
   */
  renew(used: string | undefined, challenge?: BearerChallenge): Promise<string> {
    const now = this.current();
    if (now !== undefined && now !== used) return Promise.resolve(now);
    if (this.inflight) return this.inflight;
    // A later challenge may name scopes the first choice lacked; the first choice is made in obtain().
    return this.fetchToken(challenge, challenge?.scope && this.scopes !== undefined ? union(this.scopes, challenge.scope) : this.scopes);
  }

  /**
   * After a 403 `insufficient_scope` to a request sent with `used`: a token with the scopes asked
   * for so far and the challenged ones (digest §7: the union), or undefined when the challenge
   * adds no scope (asking again would be refused again).
   */
  stepUp(used: string | undefined, challenge: BearerChallenge): Promise<string | undefined> {
    const now = this.current();
    if (now !== undefined && now !== used) return Promise.resolve(now);
    if (this.inflight) return this.inflight;
    const had = this.scopes ?? this.token?.scopes ?? [];
    const wanted = union(had, challenge.scope ?? []);
    if (wanted.length === had.length) return Promise.resolve(undefined);
    if (wanted.length > MAX_SCOPES) {
      this.log.warn({ asked: wanted.length, max: MAX_SCOPES }, 'OAuth: the upstream asks for more scopes than the hub asks for in one token (403 insufficient_scope); not stepping up');
      return Promise.resolve(undefined);
    }
    this.log.info({ scopes: wanted }, 'OAuth: the upstream asked for more scopes (403 insufficient_scope); asking for a new token');
    return this.fetchToken(challenge, wanted);
  }

  /** A new token with `scopes` (undefined: the first choice, see obtain), asked once for every waiter. */
  private fetchToken(challenge: BearerChallenge | undefined, scopes: string[] | undefined): Promise<string> {
    const key = scopes?.join(' ');
    const f = this.failure;
    // The same request failed a moment ago: its answer stands (no storm on the authorization server).
    if (f && f.scopes === key && monotonicNow() - f.at < FAILURE_COOLDOWN_MS) return Promise.reject(f.err);
    const p = this.obtain(challenge, scopes).then(
      (t) => {
        this.failure = undefined;
        return t;
      },
      (err: unknown) => {
        const e = err instanceof OAuthError ? err : new OAuthError(String((err as Error)?.message ?? err));
        this.failure = { err: e, at: monotonicNow(), scopes: key };
        // What was found may be what failed (an AS that moved): the next attempt looks again.
        this.discovered = undefined;
        throw e;
      },
    );
    this.inflight = p.finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async obtain(challenge: BearerChallenge | undefined, scopes: string[] | undefined): Promise<string> {
    const named = challenge?.resourceMetadata;
    if (!this.discovered || (named !== undefined && named !== this.discovered.prmUrl && named !== this.discovered.named)) {
      this.discovered = await this.discover(challenge);
    }
    const d = this.discovered;
    const ask = scopes ?? this.config.scopes ?? challenge?.scope ?? d.scopesSupported ?? [];
    let value: string;
    try {
      value = await this.requestToken(d, ask);
    } catch (err) {
      throw noted(err, d.refusedNamed);
    }
    // Kept only once granted: a scope the authorization server refuses (a challenge may name
    // one the client was never allowed) would otherwise be asked for, and refused, for good.
    this.scopes = ask;
    return value;
  }

  /** RFC 9728 then RFC 8414 / OpenID discovery (digest §7). */
  private async discover(challenge: BearerChallenge | undefined): Promise<Discovered> {
    const prm = await protectedResource(this.serverUrl, challenge, this.urls, (url, why) =>
      this.log.warn(
        { resourceMetadata: url, reason: why },
        "OAuth: the upstream's challenge names a resource_metadata URL the hub does not ask (the URL policy refused it); the well-known locations are tried instead",
      ),
    );
    try {
      return await this.discoverFrom(prm, challenge?.resourceMetadata);
    } catch (err) {
      throw noted(err, prm.refusedNamed);
    }
  }

  /** The authorization server of the protected resource metadata found. */
  private async discoverFrom({ resource, prmUrl, authorizationServers, scopesSupported, refusedNamed }: ProtectedResource, named: string | undefined): Promise<Discovered> {
    const issuer = this.pickIssuer(authorizationServers, prmUrl);
    const as = await authServerMetadata(issuer, this.urls);
    const tokenEndpoint = as.token_endpoint;
    if (typeof tokenEndpoint !== 'string' || !/^https?:\/\//i.test(tokenEndpoint)) throw new OAuthError(`discovery: the authorization server ${where(issuer)} names no token endpoint`);
    const te = new URL(tokenEndpoint);
    if (te.protocol !== 'https:' && !isLoopbackHost(te.hostname))
      throw new OAuthError(`the token endpoint ${where(tokenEndpoint)} is plain http on a host that is not loopback: the hub sends client credentials over https only`);
    await allowedEndpoint(tokenEndpoint, 'token endpoint', issuer, this.urls);
    const d: Discovered = {
      resource,
      issuer,
      tokenEndpoint,
      prmUrl,
      named,
      refusedNamed,
      scopesSupported,
      authMethods: strings(as.token_endpoint_auth_methods_supported),
      signingAlgs: strings(as.token_endpoint_auth_signing_alg_values_supported),
      grantTypes: strings(as.grant_types_supported),
    };
    if (d.grantTypes && !d.grantTypes.includes('client_credentials'))
      throw new OAuthError(`the authorization server ${where(issuer)} does not offer the client_credentials grant (grant_types_supported: ${d.grantTypes.join(', ') || 'none'})`);
    this.log.info({ issuer: where(issuer), tokenEndpoint: where(tokenEndpoint), resource: where(resource) }, 'OAuth: discovered the authorization server');
    return d;
  }

  /**
   * The authorization server to send the credentials to. They were registered with one (digest
   * §7: credentials are bound to their issuer), and the upstream names it: a server that named
   * another would have the secret sent wherever it pointed. So the configured `issuer` must be
   * among those named; without one, the first issuer found is kept for the life of this client,
   * and a later discovery naming another is refused.
   */
  private pickIssuer(named: string[], prmUrl: string): string {
    const why = this.config.issuer !== undefined ? 'oauth.issuer' : 'the issuer this client first used';
    return (this.boundIssuer = pickIssuer(named, this.config.issuer ?? this.boundIssuer, why, prmUrl));
  }

  /** The client-credentials token request (OAuth 2.1 §4.2, RFC 8707 `resource`). */
  private async requestToken(d: Discovered, scopes: string[]): Promise<string> {
    const params: Record<string, string> = { grant_type: 'client_credentials', resource: d.resource };
    if (scopes.length > 0) params.scope = scopes.join(' ');
    const method = this.authMethod(d);
    if (method === 'private_key_jwt') {
      params.client_assertion_type = ASSERTION_TYPE;
      params.client_assertion = await this.assertion(d);
    }
    const clientId = this.config.clientId!;
    const a = await tokenRequest(d.tokenEndpoint, params, { clientId, clientSecret: this.config.clientSecret, clientAuth: method }, `client ${clientId}, ${method}`, this.urls);
    const lifeMs = a.expiresAt === undefined ? undefined : a.expiresAt - Date.now();
    const expiresAt = lifeMs === undefined ? Infinity : monotonicNow() + lifeMs;
    const renewAt = lifeMs === undefined ? Infinity : renewTime(expiresAt, lifeMs);
    this.token = { value: a.accessToken, renewAt, expiresAt, scopes };
    // Redacted wherever it might be echoed (an upstream's error, a log line).
    useConfigSecrets(this, [a.accessToken]);
    this.log.info({ expiresInSec: lifeMs === undefined ? undefined : Math.round(lifeMs / 1000), scopes, method }, 'OAuth: obtained an access token');
    return a.accessToken;
  }

  /** The configured method, else private_key_jwt with a key, else basic unless the AS lists only post (RFC 8414's default is basic). */
  private authMethod(d: Discovered): 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' {
    // The schema leaves "none" to the authorization-code grant.
    const set = this.config.tokenEndpointAuth;
    if (set !== undefined && set !== 'none') return set;
    if (this.config.privateKey !== undefined && this.config.clientSecret === undefined) return 'private_key_jwt';
    const listed = d.authMethods;
    if (listed && !listed.includes('client_secret_basic') && listed.includes('client_secret_post')) return 'client_secret_post';
    return 'client_secret_basic';
  }

  /**
   * A client assertion (RFC 7523 §2.2): iss = sub = client id, one minute, single use. Its aud is
   * the issuer, as RFC 7523bis and the SDK have it (the token endpoint URL was the older reading,
   * which some servers still want: oauth.assertionAudience "token_endpoint").
   */
  private async assertion(d: Discovered): Promise<string> {
    const alg = this.config.signingAlgorithm ?? d.signingAlgs?.find((a) => KNOWN_ALGS.has(a)) ?? 'RS256';
    // Loaded here, by the one grant that signs: a hub whose upstreams use no private_key_jwt (an
    // IDE's stdio hub above all) never loads jose.
    const { importPKCS8, SignJWT } = await import('jose');
    let key: Awaited<ReturnType<typeof importPKCS8>>;
    try {
      key = await importPKCS8(this.config.privateKey!, alg);
    } catch (err) {
      // jose's message names the problem (not PKCS#8, wrong key type for alg), never the key.
      throw new OAuthError(`oauth.privateKey cannot sign ${alg} client assertions: ${(err as Error).message}`);
    }
    return new SignJWT({})
      .setProtectedHeader({ alg, typ: 'JWT' })
      .setIssuer(this.config.clientId!)
      .setSubject(this.config.clientId!)
      .setAudience(this.config.assertionAudience === 'token_endpoint' ? d.tokenEndpoint : d.issuer)
      .setJti(randomUUID())
      .setIssuedAt()
      .setExpirationTime('60s')
      .sign(key);
  }
}

/**
 * The HttpClient's exchanges with the server's OAuth token on each (`Authorization: Bearer`):
 * one about to expire is replaced first; a 401 has a new token asked for and the exchange sent
 * again once (the refused request did not run); a 403 `insufficient_scope` has the scopes
 * stepped up, at most MAX_STEP_UPS times. An answer that is still 401 or 403 is returned as it
 * is (the upstream then says the server refused the hub's credentials). A token that cannot be
 * obtained fails the exchange with an OAuthError saying why.
 */
export class OAuthHttp implements HttpExchanges {
  constructor(
    private readonly http: HttpExchanges,
    private readonly oauth: TokenSource,
  ) {}

  post(body: string, o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.run((h) => this.http.post(body, h === o.headers ? o : { ...o, headers: h }), o);
  }

  get(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.run((h) => this.http.get(h === o.headers ? o : { ...o, headers: h }), o);
  }

  delete(o: HttpExchangeOptions = {}): Promise<HttpAnswer> {
    return this.run((h) => this.http.delete(h === o.headers ? o : { ...o, headers: h }), o);
  }

  close(): void {
    this.oauth.release();
    this.http.close();
  }

  /** The next token for one about to expire; that one still, if it has not expired and no next one can be had now. */
  private async renewDue(): Promise<string> {
    try {
      return await this.oauth.renew(undefined);
    } catch (err) {
      const old = this.oauth.lastResort();
      if (old === undefined) throw err;
      return old;
    }
  }

  private async run(send: (headers: Record<string, string> | undefined) => Promise<HttpAnswer>, o: HttpExchangeOptions): Promise<HttpAnswer> {
    const withToken = (t: string | undefined): Record<string, string> | undefined => (t === undefined ? o.headers : { ...o.headers, authorization: `Bearer ${t}` });
    let token = this.oauth.current() ?? (this.oauth.due ? await this.renewDue() : undefined);
    let a = await send(withToken(token));
    if (a.status === 401) {
      token = await this.oauth.renew(token, parseBearerChallenge(a.headers['www-authenticate']));
      a = await send(withToken(token));
    }
    for (let n = 0; n < MAX_STEP_UPS && a.status === 403; n++) {
      const c = parseBearerChallenge(a.headers['www-authenticate']);
      if (c?.error !== 'insufficient_scope') break;
      const next = await this.oauth.stepUp(token, c);
      if (next === undefined) break;
      token = next;
      a = await send(withToken(token));
    }
    return a;
  }
}

function union(a: readonly string[], b: readonly string[]): string[] {
  return [...new Set([...a, ...b])];
}

