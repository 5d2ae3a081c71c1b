/**
 * A credential checked again before a held call is sent: a call let in, then held (a plugin's
 * beforeCall, its row's write, its connection), is not sent once a reload revoked the API key
 * it came with. The edge checked the key when the request came; nothing did after.
 */
import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import type { Refusal } from './authenticator.js';

/** What the router asks of the hub's Authenticator: cheap until the key set changes. */
export interface HeldCredentials {
  readonly keysVersion: number;
  revokedRefusal(key: string, principal: string, group: string | undefined): Refusal | null;
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

/** The refusal for a call held since `versionAt`, or null when its key (if any) still holds. */
export function heldKeyRefusal(creds: HeldCredentials | undefined, versionAt: number, key: string | undefined, principal: string, group: string | undefined): Refusal | null {
  if (creds === undefined || key === undefined || creds.keysVersion === versionAt) return null;
  return creds.revokedRefusal(key, principal, group);
}
