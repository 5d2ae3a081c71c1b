/**
 * `switchyard login <id>`: the authorization-code grant with PKCE (OAuth 2.1 §4.1, digest §7)
 * toward one HTTP upstream, run once by a user; the daemon then uses and refreshes the stored
 * tokens (oauth-stored-client.ts).
 *
 * The server is asked once without a token: its 401 challenge leads to the Protected Resource
 * Metadata and the authorization server's metadata as the client-credentials client finds them
 * (oauth-discovery.ts). The client is chosen (oauth-register.ts), a loopback redirect listens
 * (oauth-loopback.ts), and the authorization URL (S256 challenge, `state`, `resource` = the
 * PRM's resource, the scopes) is handed to `open` (the CLI prints it, and opens a browser when
 * asked). The redirect's `state` must be ours and its `iss` the issuer (RFC 9207); the code is
 * exchanged with the verifier and the same `resource`, and the tokens are written to the token
 * file (mode 0600). Nothing here logs a code, a verifier or a token.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { UpstreamOAuthConfig } from '../config/types.js';
import { isLoopbackHost } from '../downstream/origin.js';
import { dropConfigSecrets, useConfigSecrets } from '../policy/config-secrets.js';
import { parseBearerChallenge, type BearerChallenge } from './oauth-challenge.js';
import {
  OAUTH_REQUEST_TIMEOUT_MS,
  OAuthError,
  allowedEndpoint,
  authServerMetadata,
  canonicalResource,
  netWhy,
  noted,
  pickIssuer,
  protectedResource,
  strings,
  where,
  type ProtectedResource,
} from './oauth-discovery.js';
import { listenForRedirect, type LoopbackRedirect } from './oauth-loopback.js';
import { clientToReuse, loginClient, type LoginClient } from './oauth-register.js';
import { checkTokenEndpoint, tokenRequest } from './oauth-token-request.js';
import { LOCK_STALE_MS, lockHolderText, lockTokenFile } from './oauth-token-lock.js';
import { OAuthUrlPolicy } from './oauth-url-policy.js';
import { readStoredClient, readTokenFile, writeStoredClient, writeTokenFile, type StoredTokens } from './oauth-token-store.js';

export interface LoginOptions {
  serverId: string;
  serverUrl: string;
  oauth: UpstreamOAuthConfig;
  /** The server's configured headers (sent with the first, unauthenticated request). */
  headers?: Record<string, string>;
  tokenFile: string;
  /** Shows the user the authorization URL (and opens a browser when asked); the redirect is awaited meanwhile. */
  open: (url: string) => void | Promise<void>;
  /** How long the user has to authorize. */
  timeoutMs: number;
  /**
   * `--scope`: a step-up (digest §7): the login asks for these, and keeps the scopes the login
   * stored now has (the union, as a 403 insufficient_scope asks), besides the usual ones.
   */
  moreScopes?: string[];
  /** Progress for the user (stderr); never given a secret. */
  say: (line: string) => void;
  /** How long the storing of the tokens waits for another process's hold of the refresh lock, after the usual wait (default LOCK_STALE_MS and 5 s). */
  lockWaitMs?: number;
}

export interface LoginResult {
  tokens: StoredTokens;
  client: LoginClient['how'];
}

export async function login(o: LoginOptions): Promise<LoginResult> {
  const { status, challenge } = await firstChallenge(o.serverUrl, o.headers ?? {});
  const urls = new OAuthUrlPolicy(o.serverUrl, o.oauth.issuer);
  let prm: ProtectedResource;
  try {
    prm = await protectedResource(o.serverUrl, challenge, urls, (url, why) =>
      o.say(`warning: the server's challenge names resource_metadata ${url}, which is not asked (${why}); trying the well-known locations`),
    );
  } catch (err) {
    // No metadata, and a server that did not ask for a token: the list of URLs tried is not what the user needs to hear.
    throw noted(err, noTokenAsked(status, o.serverId));
  }
  // The login's own secrets (the client secret, the PKCE verifier, the code), redacted from its
  // errors while it runs: an authorization server that echoes one in its error_description had
  // it printed on the user's terminal (and whatever keeps its output).
  const secrets = {};
  try {
    return await loginWith(o, challenge, urls, prm, (more) => useConfigSecrets(secrets, [...(o.oauth.clientSecret ? [o.oauth.clientSecret] : []), ...more]));
  } catch (err) {
    // Whatever fails after the fallback may come of it: the error says what was refused.
    throw noted(err, prm.refusedNamed);
  } finally {
    dropConfigSecrets(secrets);
  }
}

/** The login, the server's protected resource metadata found; `secret` is told the values to redact from its errors. */
async function loginWith(
  o: LoginOptions,
  challenge: BearerChallenge | undefined,
  urls: OAuthUrlPolicy,
  prm: ProtectedResource,
  secret: (values: string[]) => void,
): Promise<LoginResult> {
  const issuer = pickIssuer(prm.authorizationServers, o.oauth.issuer, 'oauth.issuer', prm.prmUrl);
  const as = await authServerMetadata(issuer, urls);
  const authorizationEndpoint = endpoint(as, 'authorization_endpoint', issuer);
  const tokenEndpoint = endpoint(as, 'token_endpoint', issuer);
  checkTokenEndpoint(tokenEndpoint);
  await allowedEndpoint(tokenEndpoint, 'token endpoint', issuer, urls);
  const ae = new URL(authorizationEndpoint);
  if (ae.protocol !== 'https:' && !isLoopbackHost(ae.hostname))
    throw new OAuthError(`the authorization endpoint ${where(authorizationEndpoint)} is plain http on a host that is not loopback`);
  // Digest §7: PKCE is mandatory, and the client must see in the metadata that the server does it.
  const methods = strings(as.code_challenge_methods_supported) ?? [];
  if (!methods.includes('S256'))
    throw new OAuthError(`the authorization server ${where(issuer)} does not advertise PKCE S256 (code_challenge_methods_supported: ${methods.join(', ') || 'absent'}); the login needs it`);

  let scopes = o.oauth.scopes ?? challenge?.scope ?? prm.scopesSupported ?? [];
  if (o.moreScopes !== undefined && o.moreScopes.length > 0) {
    const now = readTokenFile(o.tokenFile).tokens;
    const had = now !== undefined && now.serverUrl === canonicalResource(o.serverUrl) ? now.scopes : [];
    scopes = [...new Set([...scopes, ...had, ...o.moreScopes])];
  }
  // Digest §7: offline_access may be asked for when the authorization server lists it (it is what gets a refresh token from some).
  if (!scopes.includes('offline_access') && (strings(as.scopes_supported) ?? []).includes('offline_access')) scopes = [...scopes, 'offline_access'];

  const state = b64url(randomBytes(24));
  const verifier = b64url(randomBytes(32));
  secret([verifier]);
  // The client an earlier login registered with this issuer is this login's too (a new
  // registration at each login would leave the authorization server a client per login), when
  // its redirect port can be had again; a client is never taken to another issuer (digest §7).
  // It is kept across a logout (oauth-token-store.ts: the client file).
  const reuse = clientToReuse(o.oauth, as, issuer, readStoredClient(o.tokenFile));
  const redirect = await listenAt(state, o.timeoutMs, o.oauth.redirectPort, reuse?.registeredRedirectUri);
  let reused = false;
  try {
    const client: LoginClient =
      reuse !== undefined && redirect.redirectUri === reuse.registeredRedirectUri
        ? { clientId: reuse.clientId, clientSecret: reuse.clientSecret, clientAuth: reuse.clientAuth, how: 'registered before' }
        : await loginClient(o.oauth, as, issuer, redirect.redirectUri, urls);
    if (client.clientSecret !== undefined) secret([verifier, client.clientSecret]);
    const how = { configured: 'from the config', registered: 'registered dynamically', 'registered before': 'registered by an earlier login', 'metadata document': 'by its metadata document' };
    o.say(`authorization server ${where(issuer)}; client ${how[client.how]}`);
    reused = client.how === 'registered before';
    const url = new URL(authorizationEndpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', client.clientId);
    url.searchParams.set('redirect_uri', redirect.redirectUri);
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', b64url(createHash('sha256').update(verifier).digest()));
    url.searchParams.set('code_challenge_method', 'S256');
    url.searchParams.set('resource', prm.resource);
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    await o.open(url.toString());
    const { params } = await redirect.callback;
    const error = params.get('error');
    if (error !== null) {
      const desc = params.get('error_description');
      throw new OAuthError(`the authorization server refused: ${error.slice(0, 100)}${desc ? `: ${desc.slice(0, 300)}` : ''}`);
    }
    // RFC 9207 (digest §7): the issuer recorded before redirecting, compared as a plain string.
    const iss = params.get('iss');
    if (iss !== null && iss !== issuer) throw new OAuthError(`the authorization response names issuer ${JSON.stringify(iss.slice(0, 200))}, not ${issuer}: refused (a mix-up attack, or a misconfigured server)`);
    if (iss === null && as.authorization_response_iss_parameter_supported === true)
      throw new OAuthError(`the authorization server ${where(issuer)} says it sends iss in its responses, and this one has none: refused`);
    const code = params.get('code');
    if (code === null || code === '') throw new OAuthError('the authorization response has no code');
    secret([verifier, code, ...(client.clientSecret !== undefined ? [client.clientSecret] : [])]);
    const a = await tokenRequest(
      tokenEndpoint,
      { grant_type: 'authorization_code', code, redirect_uri: redirect.redirectUri, code_verifier: verifier, resource: prm.resource },
      client,
      undefined,
      urls,
    );
    const tokens: StoredTokens = {
      serverUrl: canonicalResource(o.serverUrl),
      resource: prm.resource,
      issuer,
      tokenEndpoint,
      clientId: client.clientId,
      clientAuth: client.clientAuth,
      accessToken: a.accessToken,
      scopes: a.scopes ?? scopes,
      obtainedAt: Date.now(),
    };
    // A configured secret stays in the config (and its ${env:…}); a registered one is the login's own.
    if (client.how === 'registered' || client.how === 'registered before') {
      tokens.registeredRedirectUri = redirect.redirectUri;
      if (client.clientSecret !== undefined) tokens.clientSecret = client.clientSecret;
    }
    if (a.refreshToken !== undefined) tokens.refreshToken = a.refreshToken;
    if (a.expiresAt !== undefined) tokens.expiresAt = a.expiresAt;
    // Under the refresh lock: a daemon's refresh of the old login writing as this one is stored
    // (between its look at the file and its rename) would put the old login back over the new one.
    // The client kept apart too: written after the release, a `logout --forget-client` taking the
    // lock in between removed these tokens and then found no client to forget, and the client
    // file written next outlived the logout that said it was forgotten.
    const release = await storeLock(o);
    try {
      writeTokenFile(o.tokenFile, tokens);
      if (tokens.registeredRedirectUri !== undefined) {
        const kept = { issuer, clientId: client.clientId, clientAuth: client.clientAuth, registeredRedirectUri: tokens.registeredRedirectUri };
        try {
          writeStoredClient(o.tokenFile, client.clientSecret !== undefined ? { ...kept, clientSecret: client.clientSecret } : kept);
        } catch (err) {
          // The token file names the client too: a later login finds it there while the login lasts.
          o.say(`the registered client could not be kept apart from the tokens (${(err as NodeJS.ErrnoException).code ?? 'error'}); a logout forgets it`);
        }
      }
    } finally {
      release?.();
    }
    return { tokens, client: client.how };
  } catch (err) {
    throw reused ? forgottenClientHint(err, o.serverId) : err;
  } finally {
    redirect.close();
  }
}

/**
 * A login with a client an earlier one registered that got no authorization (an authorization
 * server that no longer knows a client shows the user an error page and redirects nowhere) or
 * had it refused: the error says how to register anew, which nothing else would tell.
 */
function forgottenClientHint(err: unknown, serverId: string): unknown {
  const message = (err as Error)?.message ?? '';
  if (!/no authorization arrived|invalid_client|unauthorized_client/.test(message)) return err;
  return new OAuthError(
    `${message.replace(/^OAuth: /, '')}; the client an earlier login registered was used again: if the authorization server no longer knows it, run \`switchyard logout ${serverId} --forget-client\` and log in again`,
  );
}

/** The redirect listener: on the port an earlier registration named when it is free, else as configured (a free port by default). */
async function listenAt(state: string, timeoutMs: number, configured: number | undefined, registered: string | undefined): Promise<LoopbackRedirect> {
  const port = registered !== undefined && configured === undefined ? Number(new URL(registered).port) : undefined;
  if (port !== undefined && port > 0) {
    try {
      return await listenForRedirect(state, timeoutMs, port);
    } catch {
      // Taken by now: a new registration with a new port.
    }
  }
  try {
    return await listenForRedirect(state, timeoutMs, configured);
  } catch (err) {
    if (configured === undefined) throw err;
    // The bare listen error named neither the setting nor what to do.
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    const why = code === 'EADDRINUSE' ? 'another program listens there (another login still waiting?): end it and try again' : 'choose another port';
    throw new OAuthError(
      `the redirect cannot listen on 127.0.0.1:${configured}, the port of oauth.redirectPort (${code}); ${why}, or register the client with another redirect port and set oauth.redirectPort to it`,
    );
  }
}

/** What the answer to a request without a token says of a server with no protected resource metadata (undefined: it asked for a token). */
function noTokenAsked(status: number, id: string): string | undefined {
  if (status === 401 || status === 403) return undefined;
  const answered = `the server answered a request without a token with HTTP ${status}`;
  if (status >= 200 && status < 300) return `${answered}: it may need no login (then servers.${id}.oauth can go)`;
  if (status === 404) return `${answered}: is servers.${id}.url right?`;
  return `${answered}, not 401`;
}

/** The status of the server's answer to a request without a token, and its Bearer challenge (undefined: it did not ask for one). */
async function firstChallenge(serverUrl: string, headers: Record<string, string>): Promise<{ status: number; challenge: BearerChallenge | undefined }> {
  let res: Response;
  try {
    res = await fetch(serverUrl, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      redirect: 'manual',
      signal: AbortSignal.timeout(OAUTH_REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    throw new OAuthError(`the server ${where(serverUrl)} could not be reached: ${netWhy(err)}`);
  }
  await res.body?.cancel().catch(() => undefined);
  return { status: res.status, challenge: res.status === 401 || res.status === 403 ? parseBearerChallenge(res.headers.get('www-authenticate') ?? undefined) : undefined };
}

function endpoint(as: Record<string, unknown>, name: string, issuer: string): string {
  const v = as[name];
  if (typeof v !== 'string' || !/^https?:\/\//i.test(v)) throw new OAuthError(`discovery: the authorization server ${where(issuer)} names no ${name}`);
  return v;
}

function b64url(b: Buffer): string {
  return b.toString('base64url');
}

/**
 * The refresh lock for storing the login's tokens. Another process holding it is said, and
 * waited for past LOCK_STALE_MS (a holder gone or hung is taken over by then). One still at
 * work after that (a logout revoking, which would remove the new login once done) is said too,
 * and the tokens are stored all the same: the user's consent is in them, and it is theirs to
 * check (`switchyard doctor`) rather than to give again.
 */
async function storeLock(o: LoginOptions): Promise<(() => void) | undefined> {
  const now = await lockTokenFile(o.tokenFile, 0, 'login');
  if (now !== undefined) return now;
  o.say(`another switchyard process${lockHolderText(o.tokenFile)} is refreshing, storing or logging out of this login (it holds ${o.tokenFile}.lock); waiting for it…`);
  const later = await lockTokenFile(o.tokenFile, o.lockWaitMs ?? LOCK_STALE_MS + 5_000, 'login');
  if (later === undefined)
    o.say(
      `warning: another switchyard process${lockHolderText(o.tokenFile)} still holds ${o.tokenFile}.lock; the tokens are stored without waiting longer (if it is a logout, it may remove them: \`switchyard doctor\` says whether the login is stored)`,
    );
  return later;
}
