/**
 * `switchyard logout <id>` at the authorization server (RFC 7009): the stored refresh token, then
 * the access token, are revoked at the `revocation_endpoint` the issuer's metadata advertises,
 * with the client's authentication as at the token endpoint. Deleting the file alone left both
 * valid (a refresh token for months) wherever a copy of it went: a backup, a shared state folder.
 * An authorization server without a revocation endpoint, or one that cannot be reached, is said
 * (the tokens then stay valid until they expire) and the logout goes on: the user asked to be
 * logged out here, and that never waits on the other side. Nothing here says a token.
 */
import type { UpstreamOAuthConfig } from '../config/types.js';
import { CONFIG_SECRET_MARK, redactSecretValues } from '../policy/config-secrets.js';
import { OAuthError, allowedEndpoint, authServerMetadata, where } from './oauth-discovery.js';
import { clientPost } from './oauth-token-request.js';
import type { StoredTokens } from './oauth-token-store.js';
import { OAuthUrlPolicy } from './oauth-url-policy.js';

/** What the logout tells the user of the revocation (one clause, no token). */
export async function revokeLogin(t: StoredTokens, serverUrl: string, oauth: UpstreamOAuthConfig): Promise<string> {
  let endpoint: string;
  // The issuer the login used was held to the policy then; it is trusted as the login's.
  const urls = new OAuthUrlPolicy(serverUrl, oauth.issuer ?? t.issuer);
  try {
    const as = await authServerMetadata(t.issuer, urls);
    const e = as.revocation_endpoint;
    if (typeof e !== 'string' || !/^https?:\/\//i.test(e)) return `the authorization server ${where(t.issuer)} offers no token revocation: the tokens stay valid until they expire`;
    endpoint = await allowedEndpoint(e, 'revocation endpoint', t.issuer, urls);
  } catch (err) {
    return `the tokens were not revoked (${reason(err, t, oauth.clientSecret)}): they stay valid until they expire`;
  }
  const client = { clientId: t.clientId, clientSecret: t.clientSecret ?? oauth.clientSecret, clientAuth: t.clientAuth };
  // The refresh token first: revoking it ends the grant's access tokens too at most servers (RFC 7009 §2.1).
  const tokens: [string, 'refresh_token' | 'access_token'][] = [...(t.refreshToken !== undefined ? [[t.refreshToken, 'refresh_token'] as [string, 'refresh_token']] : []), [t.accessToken, 'access_token']];
  const failed: string[] = [];
  for (const [token, hint] of tokens) {
    try {
      await clientPost(endpoint, { token, token_type_hint: hint }, client, `${hint}, client ${t.clientId}`, 'revocation endpoint', urls);
    } catch (err) {
      failed.push(`the ${hint.replace('_', ' ')} (${reason(err, t, oauth.clientSecret)})`);
    }
  }
  if (failed.length === 0) return `revoked the tokens at ${where(endpoint)}`;
  return `the authorization server did not revoke ${failed.join(' nor ')}: ${failed.length === 1 ? 'it stays valid until it expires' : 'they stay valid until they expire'}`;
}

/**
 * Why a step failed, without a token or the client's secret (a registered one's, or the
 * configured one) an authorization server echoed, in whatever encoding it quoted them
 * (policy/config-secrets.ts: URL- or form-encoded, JSON-escaped, base64 as in a Basic
 * authorization).
 */
function reason(err: unknown, t: StoredTokens, configuredSecret: string | undefined): string {
  const m = (err instanceof OAuthError ? err.message : String((err as Error)?.message ?? err)).replace(/^OAuth: /, '');
  return redactSecretValues(m, [t.accessToken, t.refreshToken, t.clientSecret, configuredSecret]).split(CONFIG_SECRET_MARK).join('[redacted]');
}
