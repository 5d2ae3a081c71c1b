/**
 * What `switchyard logout <id>` does (the command itself is in login.ts): revoke the stored
 * tokens where the authorization server offers it, remove them, and keep or forget the client
 * the login registered. Taken apart from the command so that its turns with the refresh lock
 * can be tested with a short wait.
 */
import { existsSync } from 'node:fs';
import type { UpstreamOAuthConfig } from '../config/types.js';
import { screenText } from '../ledger/format.js';
import { LOCK_STALE_MS, lockHolderText, lockTokenFile } from '../upstream/oauth-token-lock.js';
import { clientFileOf, readStoredClient, readTokenFile, removeStoredClient, removeTokenFile, writeStoredClient, type StoredClient, type StoredTokens } from '../upstream/oauth-token-store.js';

/**
 * How long a logout waits for another process's hold of the refresh lock: past LOCK_STALE_MS,
 * so that a holder gone (or hung) is taken over; one still at work after that (it touches the
 * lock) is said, and the logout stops.
 */
export const LOGOUT_LOCK_WAIT_MS = LOCK_STALE_MS + 5_000;

export interface LogoutOptions {
  id: string;
  /** The token file of the login. */
  file: string;
  /** The server's url and oauth settings as configured now; undefined when it no longer logs in (the login was stored before). */
  serverUrl?: string;
  oauth?: UpstreamOAuthConfig;
  revoke: boolean;
  forgetClient: boolean;
  say: (line: string) => void;
  lockWaitMs?: number;
}

/** The exit code: 0 done (or nothing stored), 1 another process kept the login's lock. */
export async function logout(o: LogoutOptions): Promise<number> {
  const { file, id } = o;
  // Revoked before the file goes (a logout cut short leaves them to revoke at the next one), under
  // the refresh lock: a daemon refreshing meanwhile would write a refresh token the revocation
  // never saw, and the removal would leave it valid and unknown. Without revocation too: a
  // refresh writing its tokens as the file is removed would put the login back after the logout.
  // A file there that holds no tokens (not JSON, edited by hand) too: a login storing its tokens
  // under the lock meanwhile replaced it, and the removal, unlocked, took the new login with it
  // (never revoked, and "logged out" said of a login made after the logout began).
  // A client to forget alone (a logout before kept it) under the lock too: a login storing its
  // tokens and that client under it meanwhile would otherwise be left half, its client forgotten.
  let release: (() => void) | undefined;
  let revoked = '';
  if (readTokenFile(file).stamp !== '' || (o.forgetClient && existsSync(clientFileOf(file)))) {
    release = await lockTokenFile(file, 0, 'logout');
    if (release === undefined) {
      o.say(`another switchyard process${lockHolderText(file)} is refreshing or storing this login (it holds ${file}.lock); waiting for it…`);
      release = await lockTokenFile(file, o.lockWaitMs ?? LOGOUT_LOCK_WAIT_MS, 'logout');
    }
    if (release === undefined) {
      // Still at work (a holder gone or hung stops touching the lock, and is taken over): going
      // ahead would race its write, and could leave a refresh token it obtained valid and unknown.
      o.say(
        `logout of "${id}" stopped: another switchyard process${lockHolderText(file)} still holds ${file}.lock; nothing was revoked or removed. Run the logout again once it is done, or end that process`,
      );
      return 1;
    }
    const tokens = readTokenFile(file).tokens;
    try {
      if (o.revoke && tokens !== undefined) {
        const { revokeLogin } = await import('../upstream/oauth-revoke.js');
        revoked = `; ${screenText(await revokeLogin(tokens, o.serverUrl ?? tokens.serverUrl, configuredFor(tokens, o.oauth)))}`;
      }
    } catch (err) {
      release();
      throw err;
    }
  }
  // A login made before the registration was kept apart has it in the token file only: kept
  // apart now, so that the next login is that client again rather than a new registration.
  // Read, kept or forgotten under the lock, as a login writes it: forgotten after the release, a
  // login storing in between lost its client file, or (its write landing after the removal) kept
  // one this logout said it forgot, its tokens removed.
  let had: boolean;
  let client: StoredClient | undefined;
  let forgot = false;
  try {
    client = readStoredClient(file);
    if (client !== undefined && !o.forgetClient && !existsSync(clientFileOf(file))) writeStoredClient(file, client);
    had = removeTokenFile(file);
    if (o.forgetClient) forgot = removeStoredClient(file);
  } finally {
    release?.();
  }
  const about =
    client === undefined
      ? ''
      : forgot || o.forgetClient
        ? `; forgot the client registered with ${screenText(client.issuer)} (the next login registers a new one)`
        : `; kept the client registered with ${screenText(client.issuer)} for the next login (--forget-client forgets it)`;
  if (had) o.say(`logged out of "${id}": removed ${file}${revoked}${about}`);
  else o.say(`no login stored for "${id}"${about}`);
  return 0;
}

/**
 * The settings the revocation may use with the login's client: the configured secret only for
 * the client and issuer of the login (a config changed since may hold another client's secret,
 * perhaps of another authorization server, which must not go to this one).
 */
function configuredFor(t: StoredTokens, oauth: UpstreamOAuthConfig | undefined): UpstreamOAuthConfig {
  if (oauth === undefined) return {};
  const same = oauth.clientId === t.clientId && (oauth.issuer === undefined || oauth.issuer === t.issuer);
  return { ...(oauth.issuer === t.issuer ? { issuer: oauth.issuer } : {}), ...(same && oauth.clientSecret !== undefined ? { clientSecret: oauth.clientSecret } : {}) };
}
