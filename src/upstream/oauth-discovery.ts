/**
 * Finding an HTTP upstream's authorization server (digest §7), shared by the hub's two OAuth
 * clients: the client-credentials grant (oauth-client.ts) and the authorization-code login
 * (oauth-login.ts). The Protected Resource Metadata (RFC 9728: the challenge's
 * `resource_metadata`, else the well-known paths, path-specific first) names the authorization
 * servers; their metadata is read by RFC 8414 then OpenID discovery, and its `issuer` must be the
 * one asked about. These requests carry no credential, and go only where the URL policy lets
 * what the upstream names send them (oauth-url-policy.ts), redirects included.
 */
import { redactConfigSecrets } from '../policy/config-secrets.js';
import { TransportError } from '../protocol/errors.js';
import type { BearerChallenge } from './oauth-challenge.js';
import type { OAuthUrlPolicy } from './oauth-url-policy.js';

/** How long one metadata or token request may take. */
export const OAUTH_REQUEST_TIMEOUT_MS = 10_000;
/** The longest metadata document (or token answer) read. */
export const MAX_METADATA_BYTES = 256 * 1024;
/** Redirects a metadata request follows (each checked as the URL it came from). */
const MAX_REDIRECTS = 3;

/** A failure of an OAuth client: what failed and what the other side said, never a credential. */
export class OAuthError extends TransportError {
  constructor(message: string, status?: number) {
    // Nothing reached the upstream with this request (it was refused, or never sent): safe to send again.
    super(redactConfigSecrets(`OAuth: ${message}`), status, true);
  }
}

/** The server's canonical URI (RFC 8707, digest §7): lower-case scheme and host, no query, fragment or trailing slash. */
export function canonicalResource(url: string): string {
  const u = new URL(url);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/+$/, '');
  return `${u.protocol}//${u.host}${path}`;
}

/** Whether a PRM `resource` names this server: the same origin, and a path that is the server's or one of its parents. */
function resourceCovers(resource: string, serverUrl: string): boolean {
  let r: URL;
  let s: URL;
  try {
    r = new URL(resource);
    s = new URL(serverUrl);
  } catch {
    return false;
  }
  if (r.origin !== s.origin || r.hash !== '' || r.search !== '') return false;
  const rp = r.pathname.replace(/\/+$/, '');
  const sp = s.pathname.replace(/\/+$/, '');
  return rp === '' || sp === rp || sp.startsWith(`${rp}/`);
}

/** Where a URL points, for a message: origin and path (a query may hold what is not ours to show). */
export function where(url: string): string {
  try {
    const u = new URL(url);
    // Not http(s) (file:, data:, javascript:): its path may be anything, its contents even.
    if (u.origin === 'null') return `(a ${u.protocol} URL)`;
    return `${u.origin}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/**
 * The authorization server to use of those a resource's metadata names (`named`): `want` (the
 * configured oauth.issuer, or the one a client first used), which must be among them, the
 * client's credentials going nowhere else (digest §7); without one, the first named.
 * `why` says where `want` came from, for the refusal.
 */
export function pickIssuer(named: string[], want: string | undefined, why: string, prmUrl: string): string {
  if (want === undefined) return named[0]!;
  if (named.includes(want)) return want;
  throw new OAuthError(`discovery: the protected resource metadata at ${where(prmUrl)} names ${named.map(where).join(', ')} as authorization server, not ${where(want)} (${why}); the client credentials are not sent elsewhere`);
}

/** What the server's Protected Resource Metadata says. */
export interface ProtectedResource {
  /** The `resource` a token is asked for (the PRM's, which covers this server). */
  resource: string;
  /** The PRM URL it came from. */
  prmUrl: string;
  /** Its authorization_servers (http(s) URLs only), at least one. */
  authorizationServers: string[];
  scopesSupported?: string[];
  /**
   * The challenge's resource_metadata when the URL policy refused it (the well-known locations
   * served instead): a clause for any later error, which may come of that fallback.
   */
  refusedNamed?: string;
}

/**
 * RFC 9728 (digest §7): the challenge's PRM, else the path-specific then the root well-known one.
 * A challenge's `resource_metadata` that the URL policy refuses is told to `onRefused` at once
 * (where it points, without its query, and why), not only in the error of a discovery that
 * fails: the fallback may find other metadata, and what comes of it should not be a mystery.
 */
export async function protectedResource(
  serverUrl: string,
  challenge: BearerChallenge | undefined,
  policy: OAuthUrlPolicy,
  onRefused?: (where: string, why: string) => void,
): Promise<ProtectedResource> {
  const u = new URL(serverUrl);
  const path = u.pathname.replace(/\/+$/, '');
  const candidates: string[] = [];
  // Taken as it is (a URL that is not http(s), or none, is the policy's refusal to say).
  const named = challenge?.resourceMetadata;
  if (named !== undefined) candidates.push(named);
  if (path !== '') candidates.push(`${u.origin}/.well-known/oauth-protected-resource${path}`);
  candidates.push(`${u.origin}/.well-known/oauth-protected-resource`);
  const tried: string[] = [];
  let prm: Record<string, unknown> | undefined;
  let prmUrl = '';
  let refusedNamed: string | undefined;
  for (const [i, c] of candidates.entries()) {
    const r = await getJson(c, policy);
    if ('doc' in r) {
      prm = r.doc;
      prmUrl = c;
      break;
    }
    if (i === 0 && named !== undefined && r.refused) {
      refusedNamed = `the resource_metadata of the server's challenge, ${where(c)}, was not asked: ${r.why}`;
      onRefused?.(where(c), r.why);
    }
    tried.push(`${where(c)} (${r.why})`);
  }
  if (!prm) throw new OAuthError(`discovery: no protected resource metadata for ${where(serverUrl)}; tried ${tried.join(', ')}`);
  try {
    const resource = typeof prm.resource === 'string' ? prm.resource : canonicalResource(serverUrl);
    if (!resourceCovers(resource, serverUrl))
      throw new OAuthError(`discovery: the protected resource metadata at ${where(prmUrl)} is for ${where(resource)}, not for this server (${where(serverUrl)}); no token is asked for it`);
    const servers = Array.isArray(prm.authorization_servers) ? prm.authorization_servers.filter((s): s is string => typeof s === 'string' && /^https?:\/\//i.test(s)) : [];
    if (servers.length === 0) throw new OAuthError(`discovery: the protected resource metadata at ${where(prmUrl)} names no authorization server`);
    return { resource, prmUrl, authorizationServers: servers, scopesSupported: strings(prm.scopes_supported), ...(refusedNamed !== undefined ? { refusedNamed } : {}) };
  } catch (err) {
    throw noted(err, refusedNamed);
  }
}

/**
 * `err` with `note` added (an OAuthError; anything else as it is): a discovery that went on past
 * a refused resource_metadata says so in whatever error comes of it.
 */
export function noted(err: unknown, note: string | undefined): unknown {
  if (note === undefined || !(err instanceof OAuthError) || err.message.includes(note)) return err;
  const e = new OAuthError(`${err.message.replace(/^OAuth: /, '')} (${note})`, err.status);
  const oauthError = (err as OAuthError & { oauthError?: string }).oauthError;
  if (oauthError !== undefined) (e as OAuthError & { oauthError?: string }).oauthError = oauthError;
  return e;
}

/** RFC 8414 §3.1 and OpenID Connect discovery, in the digest's order; the `issuer` must be the one asked about. */
export async function authServerMetadata(issuer: string, policy: OAuthUrlPolicy): Promise<Record<string, unknown>> {
  const refused = await policy.refusal(issuer);
  if (refused !== undefined) throw new OAuthError(`discovery: the authorization server ${where(issuer)} is not asked: ${refused}`);
  const u = new URL(issuer);
  const path = u.pathname.replace(/\/+$/, '');
  const candidates = [`${u.origin}/.well-known/oauth-authorization-server${path}`, `${u.origin}/.well-known/openid-configuration${path}`];
  if (path !== '') candidates.push(`${u.origin}${path}/.well-known/openid-configuration`);
  const tried: string[] = [];
  for (const c of candidates) {
    const r = await getJson(c, policy);
    if (!('doc' in r)) {
      tried.push(`${where(c)} (${r.why})`);
      continue;
    }
    if (r.doc.issuer !== issuer) {
      tried.push(`${where(c)} (names issuer ${typeof r.doc.issuer === 'string' ? where(r.doc.issuer) : 'none'})`);
      continue;
    }
    return r.doc;
  }
  throw new OAuthError(`discovery: no authorization server metadata for ${where(issuer)}; tried ${tried.join(', ')}`);
}

/** `url`, an endpoint the authorization server's metadata names (`name`), if the policy lets the hub use it (it sends credentials there). */
export async function allowedEndpoint(url: string, name: string, issuer: string, policy: OAuthUrlPolicy): Promise<string> {
  const refused = await policy.refusal(url);
  if (refused !== undefined) throw new OAuthError(`discovery: the ${name} ${where(url)} of the authorization server ${where(issuer)} is not used: ${refused}`);
  return url;
}

/** The strings of a metadata array, or undefined when it is none. */
export function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : undefined;
}

/**
 * A JSON object at `url`, or why not. Redirects are followed a few times, each target held to the
 * policy as the URL itself (the request carries no credential, but may be pointed anywhere).
 */
async function getJson(url: string, policy: OAuthUrlPolicy): Promise<{ doc: Record<string, unknown> } | { why: string; refused?: true }> {
  let res: Response | undefined;
  let at = url;
  for (let hops = 0; ; hops++) {
    const refused = await policy.refusal(at);
    if (refused !== undefined) return { why: at === url ? `not asked: ${refused}` : `redirected to ${where(at)}, not followed: ${refused}`, refused: true };
    try {
      res = await policy.fetch(at, { headers: { accept: 'application/json' }, redirect: 'manual', signal: AbortSignal.timeout(OAUTH_REQUEST_TIMEOUT_MS) });
    } catch (err) {
      return { why: netWhy(err) };
    }
    const next = res.status >= 300 && res.status < 400 ? res.headers.get('location') : null;
    if (next === null) break;
    await res.body?.cancel().catch(() => undefined);
    if (hops === MAX_REDIRECTS) return { why: `more than ${MAX_REDIRECTS} redirects` };
    try {
      at = new URL(next, at).toString();
    } catch {
      return { why: `HTTP ${res.status} to a Location that is not a URL` };
    }
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    return { why: `HTTP ${res.status}` };
  }
  const text = await readLimited(res, MAX_METADATA_BYTES);
  if (text === undefined) return { why: `larger than ${MAX_METADATA_BYTES} bytes` };
  const doc = jsonObject(text);
  return doc ? { doc } : { why: 'not a JSON object' };
}

/** `text` as a JSON object, or undefined. */
export function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return undefined;
}

export function netWhy(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${OAUTH_REQUEST_TIMEOUT_MS} ms`;
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

/** The body as text, or undefined past `limit` bytes. */
export async function readLimited(res: Response, limit: number): Promise<string | undefined> {
  if (!res.body) return '';
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}
