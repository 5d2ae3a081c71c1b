/**
 * One request to an authorization server's token endpoint, for every grant the hub uses: client
 * credentials (oauth-client.ts, OAuth 2.1 §4.2), the code exchange of `switchyard login` and the
 * daemon's refresh (oauth-stored-client.ts, §4.1.3, §4.3). Never redirected (a client secret or a
 * code would go along); errors name the endpoint, the HTTP status and the OAuth `error`, never a
 * token.
 */
import { isLoopbackHost } from '../downstream/origin.js';
import { MAX_METADATA_BYTES, OAUTH_REQUEST_TIMEOUT_MS, OAuthError, jsonObject, netWhy, readLimited, where } from './oauth-discovery.js';
import { redactSecretValues } from '../policy/config-secrets.js';
import type { ClientAuth } from './oauth-token-store.js';
import type { OAuthUrlPolicy } from './oauth-url-policy.js';

export interface TokenClient {
  clientId: string;
  clientSecret?: string;
  /** `private_key_jwt`: the assertion is in the params, and no client_id (its `sub` names the client, RFC 7523 §3). */
  clientAuth: ClientAuth | 'private_key_jwt';
}

/** A token is replaced this long before it expires at most (and at 90 % of its life at least). */
const EXPIRY_MARGIN_MS = 60_000;
/** After a failed token request, the same request fails with its error for this long (no storm on the authorization server). */
export const FAILURE_COOLDOWN_MS = 1_000;

/** When a token of `lifeMs` that expires at `expiresAt` is replaced before use. */
export function renewTime(expiresAt: number, lifeMs: number): number {
  return expiresAt - Math.min(EXPIRY_MARGIN_MS, lifeMs / 10);
}

export interface TokenAnswer {
  accessToken: string;
  refreshToken?: string;
  /** Epoch ms, when the answer said a lifetime. */
  expiresAt?: number;
  /** The granted scopes, when the answer said them. */
  scopes?: string[];
}

/** A token endpoint the hub may send a code, a refresh token or a secret to: https, or plain http on loopback. */
export function checkTokenEndpoint(url: string, what = 'token endpoint'): void {
  const u = new URL(url);
  if (u.protocol !== 'https:' && !isLoopbackHost(u.hostname))
    throw new OAuthError(`the ${what} ${where(url)} is plain http on a host that is not loopback: the hub sends codes and tokens over https only`);
}

/** `said`: how the refusal names the request (default: the grant and the client). */
export async function tokenRequest(
  endpoint: string,
  params: Record<string, string>,
  client: TokenClient,
  said = `${params.grant_type}, client ${client.clientId}`,
  urls?: OAuthUrlPolicy,
): Promise<TokenAnswer> {
  const { res, json } = await clientPost(endpoint, params, client, said, 'token endpoint', urls);
  const access = json.access_token;
  if (typeof access !== 'string' || access.length === 0) throw new OAuthError(`token endpoint ${where(endpoint)} answered without an access_token`, res.status);
  const type = typeof json.token_type === 'string' ? json.token_type : '';
  if (type.toLowerCase() !== 'bearer') throw new OAuthError(`token endpoint ${where(endpoint)} issued a token of type ${JSON.stringify(type.slice(0, 40))}; the hub sends Bearer tokens only`, res.status);
  const expiresIn = typeof json.expires_in === 'number' ? json.expires_in : typeof json.expires_in === 'string' ? Number(json.expires_in) : NaN;
  const out: TokenAnswer = { accessToken: access };
  if (typeof json.refresh_token === 'string' && json.refresh_token.length > 0) out.refreshToken = json.refresh_token;
  // A lifetime past what a number holds (Infinity, which JSON stores as null) is no lifetime said.
  const expiresAt = Date.now() + expiresIn * 1000;
  if (expiresIn > 0 && Number.isFinite(expiresAt)) out.expiresAt = expiresAt;
  if (typeof json.scope === 'string') out.scopes = json.scope.split(' ').filter((s) => s.length > 0);
  return out;
}

/**
 * A form POST to one of the authorization server's endpoints that take the client's
 * authentication (the token endpoint; the revocation endpoint, RFC 7009 §2.1): its JSON answer
 * when 2xx, else an OAuthError naming the endpoint (`what`), the status and the OAuth `error`.
 */
export async function clientPost(
  endpoint: string,
  params: Record<string, string>,
  client: TokenClient,
  said: string,
  what: string,
  /** The discovery's URL policy, whose fetch connects only to allowed addresses (none: an endpoint a login stored). */
  urls?: OAuthUrlPolicy,
): Promise<{ res: Response; json: Record<string, unknown> }> {
  checkTokenEndpoint(endpoint, what);
  const body = new URLSearchParams(params);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (client.clientAuth === 'client_secret_basic' && client.clientSecret !== undefined) {
    // RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
    const pair = `${formEncode(client.clientId)}:${formEncode(client.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
  } else if (client.clientAuth !== 'private_key_jwt') {
    body.set('client_id', client.clientId);
    if (client.clientAuth === 'client_secret_post' && client.clientSecret !== undefined) body.set('client_secret', client.clientSecret);
  }
  let res: Response;
  try {
    const init: RequestInit = { method: 'POST', headers, body: body.toString(), redirect: 'manual', signal: AbortSignal.timeout(OAUTH_REQUEST_TIMEOUT_MS) };
    res = await (urls !== undefined ? urls.fetch(endpoint, init) : fetch(endpoint, init));
  } catch (err) {
    throw new OAuthError(`${what} ${where(endpoint)}: ${netWhy(err)}`);
  }
  const json = jsonObject((await readLimited(res, MAX_METADATA_BYTES)) ?? '') ?? {};
  if (!res.ok) {
    // What the server says may quote what it was sent (the form, the Basic authorization, each
    // in any encoding): every secret of this request is taken out of its words before they are
    // cut, as a cut would leave the rest of one that no redaction knows any more.
    const sent: (string | undefined)[] = [...SECRET_PARAMS].map((k) => params[k]);
    sent.push(client.clientSecret, headers.authorization?.slice('Basic '.length));
    const quoted = (x: unknown, max: number): string | undefined => (typeof x === 'string' ? redactSecretValues(x, sent).slice(0, max) : undefined);
    const oauthError = quoted(json.error, 100);
    const description = quoted(json.error_description, 300);
    const error = oauthError !== undefined ? ` ${oauthError}` : '';
    const desc = description !== undefined ? `: ${description}` : '';
    const redirect = res.status >= 300 && res.status < 400 ? ' (a redirect, not followed)' : '';
    const e = new OAuthError(`${what} ${where(endpoint)} answered HTTP ${res.status}${redirect}${error}${desc} (${said})`, res.status);
    (e as OAuthError & { oauthError?: string }).oauthError = typeof json.error === 'string' ? redactSecretValues(json.error, sent) : undefined;
    throw e;
  }
  return { res, json };
}

/** The parameters of a request to the token or revocation endpoint that carry a credential. */
const SECRET_PARAMS = new Set(['client_secret', 'client_assertion', 'assertion', 'code', 'code_verifier', 'refresh_token', 'token', 'password', 'subject_token', 'actor_token']);

/** application/x-www-form-urlencoded, as RFC 6749 §2.3.1 asks of a Basic client id and secret. */
export function formEncode(s: string): string {
  return encodeURIComponent(s).replace(/%20/g, '+');
}
