/**
 * The tokens a user's `switchyard login <id>` obtained for one upstream (grant
 * authorization_code), kept in the hub's state directory (paths.ts, oauthTokenFile): one JSON
 * file per server, mode 0600 in a folder of mode 0700, replaced whole (a temporary file in the
 * same folder, fsync'ed, renamed over it) so a reader never sees half a file and a crash never
 * leaves none. The daemon reads it when it needs a token and writes refreshed tokens back;
 * `switchyard logout <id>` removes it. A client the login registered is kept beside it as well
 * (`<id>.client.json`), which a logout leaves unless told to forget it: the next login is that
 * client again rather than one more registration at the authorization server. Refreshes by
 * several processes over one file (a daemon and a `switchyard stdio` hub) take turns through a
 * lock file (oauth-token-lock.ts), so one rotating refresh token is spent once. Nothing here logs: the
 * files hold bearer and refresh tokens (and a dynamically registered client's secret).
 */
import { closeSync, fchmodSync, fstatSync, fsyncSync, lstatSync, openSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { makeStateDir } from '../paths.js';
import { randomBytes } from 'node:crypto';

/** How the client authenticates at the token endpoint (RFC 7591 token_endpoint_auth_method). */
export type ClientAuth = 'none' | 'client_secret_basic' | 'client_secret_post';

export interface StoredTokens {
  /** The server URL the login was for: a config that now names another URL needs a new login. */
  serverUrl: string;
  /** The RFC 8707 resource the tokens were asked for. */
  resource: string;
  issuer: string;
  tokenEndpoint: string;
  clientId: string;
  /** A dynamically registered confidential client's secret (a configured one stays in the config). */
  clientSecret?: string;
  clientAuth: ClientAuth;
  /** A client the login registered (RFC 7591): the redirect URI it was registered with, so the next login can be it again. */
  registeredRedirectUri?: string;
  accessToken: string;
  refreshToken?: string;
  /** Epoch ms; absent: the authorization server said no lifetime. */
  expiresAt?: number;
  scopes: string[];
  /** Epoch ms of the login (or of the last refresh). */
  obtainedAt: number;
}

/** The file's identity and contents as last read, so a changed file (a new login) is read again. */
export interface TokenFileRead {
  tokens: StoredTokens | undefined;
  /** mtime and size: what tells a rewritten file. */
  stamp: string;
  /** Why the file is there but unusable (not JSON, fields missing). */
  problem?: string;
}

/** The file's stamp, or '' when there is none. */
export function tokenFileStamp(file: string): string {
  try {
    return stampOf(statSync(file));
  } catch {
    return '';
  }
}

function stampOf(st: Stats): string {
  return `${st.mtimeMs}:${st.size}:${st.ino}`;
}

export function readTokenFile(file: string): TokenFileRead {
  // The stamp of the file whose text is read (one open: a file replaced between a stat and a
  // read would pair the new text with the old stamp, or the other way round).
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { tokens: undefined, stamp: '' };
    return { tokens: undefined, stamp: tokenFileStamp(file), problem: `${file} cannot be read as JSON (${code ?? 'not readable'})` };
  }
  let stamp = '';
  let v: unknown;
  try {
    stamp = stampOf(fstatSync(fd));
    v = JSON.parse(readFileSync(fd, 'utf8'));
  } catch (err) {
    return { tokens: undefined, stamp, problem: `${file} cannot be read as JSON (${(err as NodeJS.ErrnoException).code ?? 'not JSON'})` };
  } finally {
    closeSync(fd);
  }
  const t = v as Partial<StoredTokens> | null;
  const str = (x: unknown): boolean => typeof x === 'string' && x.length > 0;
  if (!t || typeof t !== 'object' || !str(t.accessToken) || !str(t.tokenEndpoint) || !str(t.clientId) || !str(t.serverUrl) || !str(t.resource))
    return { tokens: undefined, stamp, problem: `${file} is not a token file of switchyard login` };
  // Times that are no finite number (a file edited by hand; null, as JSON wrote an Infinity) would
  // make the token never current, and every request refresh it: no lifetime said, instead.
  if (t.expiresAt !== undefined && !(typeof t.expiresAt === 'number' && Number.isFinite(t.expiresAt))) delete t.expiresAt;
  if (!(typeof t.obtainedAt === 'number' && Number.isFinite(t.obtainedAt))) t.obtainedAt = 0;
  if (!Array.isArray(t.scopes) || !t.scopes.every((s) => typeof s === 'string')) t.scopes = [];
  return { tokens: t as StoredTokens, stamp };
}

/** Writes the tokens in place of the file's; returns the stamp the file now has. */
export function writeTokenFile(file: string, tokens: StoredTokens): string {
  return writeJsonFile(file, tokens);
}

/**
 * Replaces `file` whole: a temporary file in the same folder, created 0600 (not chmod'ed after:
 * no moment when another user could read it), written and fsync'ed, then renamed over the file,
 * and the folder fsync'ed, so that neither a crash nor a full disk leaves a torn or empty file.
 * A failed write leaves the old file as it was and no temporary one behind. Returns the stamp
 * (the rename keeps the inode and its mtime).
 */
function writeJsonFile(name: string, value: unknown): string {
  makeStateDir(dirname(name), 0o700);
  const file = realFile(name);
  const dir = dirname(file);
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  let fd: number | undefined;
  try {
    fd = openSync(tmp, 'wx', 0o600);
    writeFileSync(fd, `${JSON.stringify(value, null, 2)}\n`);
    fchmodSync(fd, 0o600); // a umask cannot widen it, but an odd filesystem may have set other bits
    fsyncSync(fd);
    const stamp = stampOf(fstatSync(fd));
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, file);
    syncFolder(dir);
    removeLeftovers(file, LEFTOVER_AGE_MS);
    return stamp;
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * The file a symlink by this name points to, else the name itself. A token file kept elsewhere
 * through a symlink (shared by the state folders of two configs, or a dotfile manager's) is
 * written in place of its target: the rename replaced the symlink by a file, the target kept the
 * refresh token the refresh had spent, and a process reading it was refused (invalid_grant).
 * The lock is the target's too, so that processes over either name take turns.
 */
export function realFile(name: string): string {
  try {
    return realpathSync(name);
  } catch {
    return name;
  }
}

/** The rename made durable; a filesystem that cannot fsync a folder has the rename all the same. */
function syncFolder(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // EISDIR/EINVAL on some platforms: nothing more to do.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** How old another write's temporary file must be to be taken for a dead process's: a write takes milliseconds. */
const LEFTOVER_AGE_MS = 60_000;

/**
 * Removes the temporary files of `file` that writes left when their process died before the
 * rename (a kill, a power cut): each holds tokens, which a logout left behind and which stayed
 * for good. Only those older than `ageMs`, a younger one being perhaps another process's write.
 */
function removeLeftovers(file: string, ageMs: number): void {
  const dir = dirname(file);
  const prefix = `${basename(file)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !/^[0-9a-f]{12}\.tmp$/.test(name.slice(prefix.length))) continue;
    try {
      const tmp = join(dir, name);
      if (Date.now() - lstatSync(tmp).mtimeMs >= ageMs) unlinkSync(tmp);
    } catch {
      // Gone meanwhile, or not ours to remove: nothing more to do.
    }
  }
}

/** Removes the file (and what writes of it left behind); whether there was one. */
export function removeTokenFile(file: string): boolean {
  removeLeftovers(realFile(file), 0);
  try {
    // unlink, not rm: a folder that does not let it go (read-only, immutable) is said as such;
    // rm took EPERM for a folder to empty and said "ENOTDIR: not a directory, scandir".
    unlinkSync(file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** A client a login registered (RFC 7591), kept across logouts so that the next login is it again. */
export interface StoredClient {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  clientAuth: ClientAuth;
  registeredRedirectUri: string;
}

/** Where the registration of the login whose tokens are in `tokenFile` is kept (server ids have no dot: no clash with a token file). */
export function clientFileOf(tokenFile: string): string {
  return tokenFile.replace(/(\.json)?$/, '.client.json');
}

/** The registered client kept for this login; else the one in its token file (a login made before the two were kept apart). */
export function readStoredClient(tokenFile: string): StoredClient | undefined {
  const str = (x: unknown): x is string => typeof x === 'string' && x.length > 0;
  for (const file of [clientFileOf(tokenFile), tokenFile]) {
    let v: Partial<StoredClient> | null;
    try {
      v = JSON.parse(readFileSync(file, 'utf8')) as Partial<StoredClient> | null;
    } catch {
      continue;
    }
    if (v && typeof v === 'object' && str(v.issuer) && str(v.clientId) && str(v.registeredRedirectUri) && str(v.clientAuth))
      return { issuer: v.issuer, clientId: v.clientId, clientAuth: v.clientAuth, registeredRedirectUri: v.registeredRedirectUri, ...(str(v.clientSecret) ? { clientSecret: v.clientSecret } : {}) };
  }
  return undefined;
}

export function writeStoredClient(tokenFile: string, client: StoredClient): void {
  writeJsonFile(clientFileOf(tokenFile), client);
}

/** Forgets the registered client kept for this login; whether there was one. */
export function removeStoredClient(tokenFile: string): boolean {
  return removeTokenFile(clientFileOf(tokenFile));
}
