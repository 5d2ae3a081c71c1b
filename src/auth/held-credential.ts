/**
 * A credential checked again before a held call is sent: a call let in, then held (a plugin's
 * beforeCall, its row's write, its connection, the user's confirmation), is not sent once a
 * reload revoked the API key it came with, or took from it the scope its tool needs, nor once
 * the OAuth token it came with stopped working (its signing key left the key set, or it
 * expired). The edge checked the credential when the request came; nothing did after.
 */
import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { baseName } from '../catalog/names.js';
import type { Refusal } from './authenticator.js';
import type { Lapse } from './oauth.js';
import type { OtherNames } from '../policy/glob.js';

/** What the router asks of the hub's Authenticator: cheap until the key set changes. */
export interface HeldCredentials {
  readonly keysVersion: number;
  revokedRefusal(key: string, principal: string, group: string | undefined, hubName?: string, other?: OtherNames): Refusal | null;
  lapsedRefusal(token: Lapse, principal: string, group: string | undefined): Refusal | null | Promise<Refusal | null>;
}

/**
 * A held call whose key was revoked: -32600 with the refusal's status and challenge, as the
 * edge answers a request with that key now (authenticate, the key's groups).
 */
export class CredentialRevokedError extends RpcError {
  constructor(readonly refusal: Refusal) {
    super(INVALID_REQUEST, refusal.message);
  }
}

/**
 * The refusal for a call of `hubName` (its server's `prefix`, its `upstreamName`) held since
 * `versionAt`, or null when its key (if any) still holds, scopes included. The other names the
 * tool scopes' globs also meet are made only once the key set moved: nothing per call.
 */
export function heldKeyRefusal(
  creds: HeldCredentials | undefined,
  versionAt: number,
  key: string | undefined,
  principal: string,
  group: string | undefined,
  hubName: string,
  prefix: string,
  upstreamName: string,
): Refusal | null {
  if (creds === undefined || key === undefined || creds.keysVersion === versionAt) return null;
  return creds.revokedRefusal(key, principal, group, hubName, { base: baseName(prefix, upstreamName), upstream: upstreamName });
}

/**
 * The refusal for a call held with the OAuth token `token` (Identity.lapse), or null while it
 * still works. Cheap while the key set is the one it was verified under and it has not expired
 * (Lapse.recheck); verified again otherwise.
 */
export function heldTokenRefusal(creds: HeldCredentials | undefined, token: Lapse | undefined, principal: string, group: string | undefined): Refusal | null | Promise<Refusal | null> {
  return creds === undefined || token === undefined ? null : creds.lapsedRefusal(token, principal, group);
}

/**
 * heldKeyRefusal and heldTokenRefusal for a request that calls no tool (a prompts/get, a read, a
 * completion, a subscribe held as its row was written, or let in before its body arrived): its
 * credential revoked meanwhile, it is not sent either. No tool scope applies to it.
 */
export function heldCredentialRefusal(
  creds: HeldCredentials | undefined,
  versionAt: number | undefined,
  key: string | undefined,
  token: Lapse | undefined,
  principal: string,
  group: string | undefined,
): Refusal | null | Promise<Refusal | null> {
  if (creds === undefined) return null;
  if (token !== undefined) return creds.lapsedRefusal(token, principal, group);
  if (key === undefined || versionAt === undefined || creds.keysVersion === versionAt) return null;
  return creds.revokedRefusal(key, principal, group);
}

/**
 * Whether nothing moved since a request's credential was let in (the key set, its token's key
 * set and expiry): then no refusal can come of checking it again, and a read may be answered
 * from the cache. Otherwise the request goes where it is checked (Router.forward).
 */
export function credentialUnchanged(creds: HeldCredentials | undefined, versionAt: number | undefined, token: Lapse | undefined): boolean {
  if (creds === undefined) return true;
  if (token !== undefined) return token.recheck() === null;
  return versionAt === undefined || creds.keysVersion === versionAt;
}
