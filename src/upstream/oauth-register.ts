/**
 * Which client `switchyard login` is (digest §7, in its order of preference): the pre-registered
 * one of the config (`oauth.clientId`, with `clientSecret` for a confidential client); else the
 * hub's Client ID Metadata Document (`oauth.clientMetadataUrl`, its URL is the client_id) when
 * the authorization server advertises `client_id_metadata_document_supported`; else one
 * registered now by Dynamic Client Registration (RFC 7591) as a native public client with the
 * loopback redirect.
 */
import type { UpstreamOAuthConfig } from '../config/types.js';
import { isLoopbackHost } from '../downstream/origin.js';
import { MAX_METADATA_BYTES, OAUTH_REQUEST_TIMEOUT_MS, OAuthError, allowedEndpoint, jsonObject, netWhy, readLimited, strings, where } from './oauth-discovery.js';
import type { ClientAuth, StoredClient } from './oauth-token-store.js';
import type { OAuthUrlPolicy } from './oauth-url-policy.js';

export interface LoginClient {
  clientId: string;
  clientSecret?: string;
  clientAuth: ClientAuth;
  how: 'configured' | 'metadata document' | 'registered' | 'registered before';
}

/**
 * The client an earlier login registered, when this login would otherwise register one: not when
 * the config names a client, nor when the hub's metadata document is the client (both come
 * first, and a registration kept from before they were set must not shadow them), nor at
 * another issuer (digest §7: a client is never taken to another).
 */
export function clientToReuse(oauth: UpstreamOAuthConfig, as: Record<string, unknown>, issuer: string, prior: StoredClient | undefined): StoredClient | undefined {
  if (prior === undefined || prior.issuer !== issuer || oauth.clientId !== undefined) return undefined;
  if (oauth.clientMetadataUrl !== undefined && as.client_id_metadata_document_supported === true) return undefined;
  return prior;
}

export async function loginClient(oauth: UpstreamOAuthConfig, as: Record<string, unknown>, issuer: string, redirectUri: string, urls: OAuthUrlPolicy): Promise<LoginClient> {
  if (oauth.clientId !== undefined) {
    const secret = oauth.clientSecret;
    const listed = strings(as.token_endpoint_auth_methods_supported);
    const auth: ClientAuth =
      oauth.tokenEndpointAuth === 'client_secret_basic' || oauth.tokenEndpointAuth === 'client_secret_post' || oauth.tokenEndpointAuth === 'none'
        ? oauth.tokenEndpointAuth
        : secret === undefined
          ? 'none'
          : listed && !listed.includes('client_secret_basic') && listed.includes('client_secret_post')
            ? 'client_secret_post'
            : 'client_secret_basic';
    return { clientId: oauth.clientId, clientSecret: secret, clientAuth: auth, how: 'configured' };
  }
  if (oauth.clientMetadataUrl !== undefined && as.client_id_metadata_document_supported === true)
    return { clientId: oauth.clientMetadataUrl, clientAuth: 'none', how: 'metadata document' };
  const endpoint = as.registration_endpoint;
  if (typeof endpoint !== 'string' || !/^https?:\/\//i.test(endpoint)) {
    const cimd = as.client_id_metadata_document_supported === true ? ' or oauth.clientMetadataUrl (it supports client ID metadata documents)' : '';
    throw new OAuthError(`the authorization server ${where(issuer)} offers no dynamic client registration: set oauth.clientId (a client registered there)${cimd}`);
  }
  // As the other endpoints of a login: a registration in clear off loopback could be answered by
  // anyone on the path (a client id and secret of theirs).
  const u = new URL(endpoint);
  if (u.protocol !== 'https:' && !isLoopbackHost(u.hostname))
    throw new OAuthError(`the registration endpoint ${where(endpoint)} is plain http on a host that is not loopback: refused`);
  await allowedEndpoint(endpoint, 'registration endpoint', issuer, urls);
  return register(endpoint, redirectUri, urls);
}

async function register(endpoint: string, redirectUri: string, urls: OAuthUrlPolicy): Promise<LoginClient> {
  const body = {
    client_name: 'Switchyard',
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    // 2026-07-28 asks for it (SEP-837): a CLI on the user's machine with a loopback redirect.
    application_type: 'native',
  };
  let res: Response;
  try {
    res = await urls.fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(OAUTH_REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    throw new OAuthError(`client registration at ${where(endpoint)}: ${netWhy(err)}`);
  }
  const json = jsonObject((await readLimited(res, MAX_METADATA_BYTES)) ?? '') ?? {};
  if (!res.ok) {
    const error = typeof json.error === 'string' ? ` ${json.error.slice(0, 100)}` : '';
    const desc = typeof json.error_description === 'string' ? `: ${json.error_description.slice(0, 300)}` : '';
    throw new OAuthError(`client registration at ${where(endpoint)} answered HTTP ${res.status}${error}${desc}`, res.status);
  }
  if (typeof json.client_id !== 'string' || json.client_id.length === 0) throw new OAuthError(`client registration at ${where(endpoint)} answered without a client_id`);
  const secret = typeof json.client_secret === 'string' && json.client_secret.length > 0 ? json.client_secret : undefined;
  const method = typeof json.token_endpoint_auth_method === 'string' ? json.token_endpoint_auth_method : secret === undefined ? 'none' : 'client_secret_basic';
  if (method !== 'none' && method !== 'client_secret_basic' && method !== 'client_secret_post')
    throw new OAuthError(`client registration at ${where(endpoint)} made a client that authenticates by ${JSON.stringify(method.slice(0, 40))}, which the login does not do`);
  if (method !== 'none' && secret === undefined) throw new OAuthError(`client registration at ${where(endpoint)} made a ${method} client without a client_secret`);
  return { clientId: json.client_id, clientSecret: secret, clientAuth: method, how: 'registered' };
}
