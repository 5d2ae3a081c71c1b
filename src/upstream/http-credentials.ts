/**
 * An HTTP upstream's credentials: the exchanges that carry them (static headers from the
 * config, or OAuth tokens put on each request), and what a refusal of them (401/403) tells the
 * operator to do. Kept apart from the connection so the wording, which names commands and
 * config keys, can be read and tested without a server.
 */
import type { Logger } from '../log.js';
import { HttpClient, type HttpAnswer } from '../transport/http-client.js';
import { OAuthClient, OAuthHttp, parseBearerChallenge, type HttpExchanges, type TokenSource } from './oauth-client.js';
import { StoredTokenSource } from './oauth-stored-client.js';
import { shellArg } from '../shell-arg.js';
import { unauthorizedAdvice } from './http-answers.js';
import type { UpstreamOAuthConfig } from '../config/types.js';
import type { UpstreamSpec } from './types.js';

/** The server's tokens: a user's stored login (grant authorization_code), else the hub's own client credentials. */
function tokenSource(spec: UpstreamSpec, oauth: UpstreamOAuthConfig, url: string, log: Logger): TokenSource {
  if (oauth.grant !== 'authorization_code') return OAuthClient.acquire(oauth, url, log);
  if (spec.oauthTokenFile === undefined) throw new Error(`server "${spec.id}": oauth.grant authorization_code needs the token file (the config's state directory)`);
  return StoredTokenSource.acquire(spec.oauthTokenFile, spec.id, url, oauth.clientSecret, log);
}

/** The HttpClient to `url`, or OAuthHttp around it when the server has `oauth`. */
export function httpExchanges(spec: UpstreamSpec, url: string, log: Logger): HttpExchanges {
  const http = new HttpClient({ url, headers: spec.headers, maxFrameBytes: spec.maxFrameBytes, log });
  return spec.oauth ? new OAuthHttp(http, tokenSource(spec, spec.oauth, url, log)) : http;
}

/** What a 401 or 403 means, in words an operator can act on. */
export function refusalText(spec: Pick<UpstreamSpec, 'id' | 'oauth' | 'headers'>, a: Pick<HttpAnswer, 'status' | 'headers'>): string {
  const id = spec.id;
  // A 401 to a hub that sent no credential (or whose credential the challenge names refused):
  // said as the probe says it, not as "refused the hub's credentials" of none sent.
  if (!spec.oauth) return (a.status === 401 ? unauthorizedAdvice(parseBearerChallenge(a.headers['www-authenticate']), id, spec.headers) : undefined) ?? "the upstream refused the hub's credentials";
  const c = parseBearerChallenge(a.headers['www-authenticate']);
  if (spec.oauth.grant === 'authorization_code') {
    if (a.status === 401) return `the upstream refused the stored login's token, a refreshed one too; run \`switchyard login ${id}\``;
    // Digest §7: a step-up is a new authorization with the scopes held and the challenged ones,
    // which needs the user: `login --scope` asks for that union.
    if (c?.error === 'insufficient_scope' && c.scope !== undefined && c.scope.length > 0)
      return `the upstream wants scopes the login did not grant (it names: ${c.scope.join(' ')}); run \`switchyard login ${id} --scope ${shellArg(c.scope.join(' '))}\` (to ask for them at every login, add them to servers.${id}.oauth.scopes)`;
    const more = c?.error === 'insufficient_scope' ? ' wants scopes the login did not grant (it names none)' : " refused the stored login's token (403)";
    return `the upstream${more}; add what it needs to servers.${id}.oauth.scopes and run \`switchyard login ${id}\` again`;
  }
  if (a.status === 403 && c?.error === 'insufficient_scope')
    return `the upstream wants scopes the hub's OAuth token lacks even after asking for more${c.scope ? ` (it names: ${c.scope.join(' ')})` : ''}; set servers.${id}.oauth.scopes or grant the client those scopes`;
  return a.status === 401 ? "the upstream refused the hub's OAuth token, a freshly obtained one too" : "the upstream refused the hub's OAuth token (403)";
}
