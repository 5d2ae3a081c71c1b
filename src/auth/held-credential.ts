/**
 * A credential checked again before a held call is sent: a call let in, then held (a plugin's
 * beforeCall, its row's write, its connection), is not sent once a reload revoked the API key
 * it came with, or took from it the scope its tool needs. The edge checked the key when the
 * request came; nothing did after.
 */
import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { baseName } from '../catalog/names.js';
import type { Refusal } from './authenticator.js';

/** What the router asks of the hub's Authenticator: cheap until the key set changes. */
export interface HeldCredentials {
  readonly keysVersion: number;
  revokedRefusal(key: string, principal: string, group: string | undefined, hubName: string, base: string): Refusal | null;
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
 * `versionAt`, or null when its key (if any) still holds, scopes included. The base name the
 * tool scopes' globs also meet is made only once the key set moved: nothing per call.
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
  return creds.revokedRefusal(key, principal, group, hubName, baseName(prefix, upstreamName));
}
