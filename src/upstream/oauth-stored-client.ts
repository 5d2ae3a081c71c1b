/**
 * The daemon's side of the authorization-code grant: the tokens `switchyard login <id>` stored
 * (oauth-token-store.ts) as a TokenSource for OAuthHttp. The file is read again whenever it
 * changed (a new login is used by the next request, no restart; one stat per request tells),
 * the access token is refreshed with the refresh token shortly before it expires or after a
 * 401, and the refreshed tokens are written back. Other processes may hold the same login (a
 * daemon and a `switchyard stdio` hub): a refresh takes the file's lock and reads the file again
 * first, and tokens another process refreshed meanwhile are used as they are, so a rotating
 * refresh token is spent once. Refreshed tokens that cannot be written (a full disk, a read-only
 * folder) are used from memory and written at a later request: with rotation, the old refresh
 * token in the file is spent already, and losing the new one would end the login. No stored
 * token, or one that can no longer be refreshed, fails the request with an OAuthError that says
 * to run `switchyard login <id>`: a user must consent again, which the daemon cannot do.
 */
import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';
import { dropConfigSecrets, useConfigSecrets } from '../policy/config-secrets.js';
import type { TokenSource } from './oauth-client.js';
import { OAuthError, canonicalResource, where } from './oauth-discovery.js';
import { FAILURE_COOLDOWN_MS, renewTime, tokenRequest } from './oauth-token-request.js';
import { readTokenFile, tokenFileStamp, writeTokenFile, type StoredTokens } from './oauth-token-store.js';
import { lockHolder, lockHolderText, lockTokenFile } from './oauth-token-lock.js';


/** The errors that only a new login can end (made by StoredTokenSource.login). */
const NEEDS_LOGIN = new WeakSet<OAuthError>();

/** One per token file: every connection to the server (per-principal ones too) shares it, and one refresh serves them all. */
const sources = new Map<string, StoredTokenSource>();

export class StoredTokenSource implements TokenSource {
  private read: { tokens: StoredTokens | undefined; stamp: string; problem?: string } = { tokens: undefined, stamp: '' };
  /** Set while this run of synchronous code has looked at the file already: one stat per request, however many questions it asks. */
  private looked = false;
  /**
   * Refreshed tokens the file could not take (`base`: the file's stamp then). They stand while
   * the file is unchanged, and are written at the next request; a file changed since (a new
   * login, a logout, another process's refresh) stands instead.
   */
  private unsaved: { tokens: StoredTokens; base: string; warned: boolean } | undefined;
  private inflight: Promise<string> | undefined;
  /** The last failed refresh; `final` when only a new login helps (it answers until the file changes). */
  private failure: { err: OAuthError; at: number; stamp: string; final: boolean } | undefined;
  private refs = 0;

  static acquire(file: string, serverId: string, serverUrl: string, clientSecret: string | undefined, log: Logger): StoredTokenSource {
    let s = sources.get(file);
    if (!s) {
      s = new StoredTokenSource(file, serverId, serverUrl, clientSecret, log);
      sources.set(file, s);
    } else if (s.serverUrl !== serverUrl || s.clientSecret !== clientSecret) {
      // A reload builds the new connection before the old one closes, and finds this source:
      // the settings in force are the new ones (a url moved, a secret rotated), and a failure of
      // the old ones says nothing of them.
      s.serverUrl = serverUrl;
      s.clientSecret = clientSecret;
      s.failure = undefined;
    }
    s.refs++;
    return s;
  }

  private constructor(
    private readonly file: string,
    private readonly serverId: string,
    private serverUrl: string,
    /** The configured secret of a pre-registered confidential client (the file holds only a registered one's). */
    private clientSecret: string | undefined,
    private readonly log: Logger,
  ) {}

  release(): void {
    if (this.refs === 0 || --this.refs > 0) return;
    // Tokens the file could not take outlive the connection (a restart of the server closes it
    // before the next one acquires): the file's refresh token is spent, and a new source reading
    // it would end the login.
    if (this.unsaved !== undefined) return;
    if (sources.get(this.file) === this) sources.delete(this.file);
    dropConfigSecrets(this);
  }

  /** The stored tokens as the file holds them now (read again when it changed), or the refreshed ones it could not take yet. */
  private tokens(): StoredTokens | undefined {
    this.look();
    return this.held();
  }

  /** The tokens as last looked at. */
  private held(): StoredTokens | undefined {
    const t = this.unsaved?.tokens ?? this.read.tokens;
    // A login for another URL (the config changed since) is not this server's.
    return t !== undefined && t.serverUrl === canonicalResource(this.serverUrl) ? t : undefined;
  }

  /** Reads the file again if it changed (at most once per run of synchronous code, unless `fresh`), and writes tokens it could not take before. */
  private look(fresh = false): void {
    if (this.looked && !fresh) return;
    this.looked = true;
    queueMicrotask(() => (this.looked = false));
    const stamp = tokenFileStamp(this.file);
    if (this.unsaved !== undefined) {
      if (stamp === this.unsaved.base) return this.save(this.unsaved.tokens, stamp);
      this.unsaved = undefined;
    }
    if (stamp !== this.read.stamp) {
      this.read = readTokenFile(this.file);
      this.redact();
    }
  }

  /** The tokens held are redacted wherever an upstream or an authorization server might echo one. */
  private redact(): void {
    const held = [this.read.tokens, this.unsaved?.tokens].filter((t): t is StoredTokens => t !== undefined);
    useConfigSecrets(
      this,
      held.flatMap((t) => [t.accessToken, ...(t.refreshToken ? [t.refreshToken] : []), ...(t.clientSecret ? [t.clientSecret] : [])]),
    );
  }

  /**
   * Writes refreshed tokens over the file whose stamp is `base`; kept in memory when that fails,
   * and tried again at the next request. Warned of once per failing spell, without a secret.
   */
  private save(tokens: StoredTokens, base: string): void {
    try {
      const stamp = writeTokenFile(this.file, tokens);
      if (this.unsaved?.warned) this.log.info({ file: this.file }, 'OAuth: the refreshed tokens are stored now');
      this.unsaved = undefined;
      this.read = { tokens, stamp };
    } catch (err) {
      const warned = this.unsaved?.warned === true;
      this.unsaved = { tokens, base, warned: true };
      if (!warned)
        this.log.warn(
          { file: this.file, code: (err as NodeJS.ErrnoException).code },
          'OAuth: the refreshed tokens could not be written to the token file; they are used from memory and written at a later request (until then another process holding this login has only the old ones)',
        );
    }
    this.redact();
  }

  current(): string | undefined {
    const t = this.tokens();
    return t !== undefined && Date.now() < renewAt(t) ? t.accessToken : undefined;
  }

  /** Asked after renew() failed, which looked at the file just now: no second look. */
  lastResort(): string | undefined {
    const t = this.held();
    return t !== undefined && (t.expiresAt === undefined || Date.now() < t.expiresAt) ? t.accessToken : undefined;
  }

  /** No usable token held: ask renew() before sending, which refreshes or says to log in. */
  get due(): boolean {
    return this.current() === undefined;
  }

  renew(used: string | undefined): Promise<string> {
    const now = this.current();
    if (now !== undefined && now !== used) return Promise.resolve(now);
    if (this.inflight) return this.inflight;
    const stamp = this.read.stamp;
    const f = this.failure;
    // Monotonic: a wall clock stepped back would put the failure ahead, and its error would answer until then.
    // A refresh token refused (invalid_grant), or none: the same file never does better, and the
    // authorization server is not asked again with it; a new login (or logout) changes the stamp.
    if (f && f.stamp === stamp && (f.final || monotonicNow() - f.at < FAILURE_COOLDOWN_MS)) return Promise.reject(f.err);
    const p = this.refresh(used).catch((err: unknown) => {
      const e = err instanceof OAuthError ? err : new OAuthError(String((err as Error)?.message ?? err));
      this.failure = { err: e, at: monotonicNow(), stamp, final: NEEDS_LOGIN.has(e) };
      throw e;
    });
    this.inflight = p.finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /** More scopes need the user's consent: a new login, not something the daemon can get. */
  stepUp(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  /** An error only the user can end (`fix`: what to do, by default a new login); the same file's refresh is not tried again. */
  private login(why: string, fix = `run \`switchyard login ${this.serverId}\``): OAuthError {
    const e = new OAuthError(`servers.${this.serverId}: ${why}; ${fix}`);
    NEEDS_LOGIN.add(e);
    return e;
  }

  private async refresh(used: string | undefined): Promise<string> {
    this.needsRefresh(used);
    const release = await this.refreshLock();
    try {
      // Read again under the lock: another process may have refreshed while this one waited, and
      // its tokens are the ones to use (its refresh may have spent the refresh token held here).
      this.look(true);
      const t = this.needsRefresh(used);
      const fresh = Date.now() < renewAt(t) ? t.accessToken : undefined;
      if (fresh !== undefined && fresh !== used) return fresh;
      // The file as this refresh read it: a request meanwhile may read a newer login (or find a
      // logout) into this.read, and that must not make the refresh of the old login look current.
      const readStamp = this.unsaved?.base ?? this.read.stamp;
      const params: Record<string, string> = { grant_type: 'refresh_token', refresh_token: t.refreshToken!, resource: t.resource };
      let a;
      try {
        a = await tokenRequest(t.tokenEndpoint, params, { clientId: t.clientId, clientSecret: t.clientSecret ?? this.clientSecret, clientAuth: t.clientAuth });
      } catch (err) {
        // invalid_grant: the refresh token expired or was revoked; only a new login helps.
        const code = (err as { oauthError?: string }).oauthError;
        const said = (err as Error).message.replace(/^OAuth: /, '');
        if (code === 'invalid_grant') throw this.login(`the refresh token was refused (${said})`);
        // The client itself refused: the fix is the user's, and the error says which. A client a
        // login registered that the authorization server forgot is refused for good (not asked
        // again every second, as after a passing failure), and the next login would use it again:
        // it must be forgotten first. A configured one may be put right at the authorization
        // server, with nothing changed here: asked again after the cool-down.
        if (code === 'invalid_client' || code === 'unauthorized_client') {
          if (t.registeredRedirectUri !== undefined)
            throw this.login(
              `the authorization server refused the client an earlier login registered (${said})`,
              `run \`switchyard logout ${this.serverId} --forget-client\`, then \`switchyard login ${this.serverId}\``,
            );
          throw new OAuthError(
            `servers.${this.serverId}: the authorization server refused the client ${t.clientId} (${said}); ${this.clientCheck(t)}, or run \`switchyard login ${this.serverId}\` with the client now configured`,
          );
        }
        throw err;
      }
      const next: StoredTokens = {
        ...t,
        accessToken: a.accessToken,
        // Without a new one (no rotation) the old refresh token stays good.
        refreshToken: a.refreshToken ?? t.refreshToken,
        expiresAt: a.expiresAt,
        scopes: a.scopes ?? t.scopes,
        obtainedAt: Date.now(),
      };
      if (next.expiresAt === undefined) delete next.expiresAt;
      this.log.info({ expiresInSec: next.expiresAt === undefined ? undefined : Math.round((next.expiresAt - Date.now()) / 1000), scopes: next.scopes }, 'OAuth: refreshed the stored access token');
      // A login that replaced the file meanwhile wins: its tokens are newer than this refresh.
      if (tokenFileStamp(this.file) !== readStamp) {
        this.log.info('OAuth: a new login (or a logout) was stored during the refresh; it stands');
        this.unsaved = undefined;
        this.look(true);
        const now = this.tokens();
        if (now !== undefined) return now.accessToken;
        // A logout: the user is logged out here, and the request waiting for this refresh is not
        // sent with its token (it went through before, and the login seemed to outlive the logout).
        throw this.missing();
      }
      this.save(next, readStamp);
      return next.accessToken;
    } finally {
      release();
    }
  }

  /**
   * The file's lock for a refresh. A `switchyard logout` holding it ends with the login removed
   * (after revoking it, which can take three requests of up to 10 s each at a slow authorization
   * server): no refresh follows it, and one that waited LOCK_WAIT_MS for it then failed saying
   * another process was refreshing, "try again", which a retry after the logout contradicted.
   * Said at once, as the logout it is, with what to do. Another refresh, or a login storing its
   * tokens, is waited for (LOCK_WAIT_MS: its token request gives up before).
   */
  private async refreshLock(): Promise<() => void> {
    const now = await lockTokenFile(this.file, 0);
    if (now !== undefined) return now;
    if (lockHolder(this.file)?.doing !== 'logout') {
      const later = await lockTokenFile(this.file);
      if (later !== undefined) return later;
    }
    const who = lockHolderText(this.file);
    const lock = `it holds ${this.file}.lock`;
    switch (lockHolder(this.file)?.doing) {
      case 'logout':
        throw new OAuthError(`servers.${this.serverId}: \`switchyard logout ${this.serverId}\`${who} is removing this login (${lock}); once it is done, run \`switchyard login ${this.serverId}\` to log in again`);
      case 'login':
        throw new OAuthError(`servers.${this.serverId}: \`switchyard login ${this.serverId}\`${who} is storing a new login (${lock}); try again`);
      default:
        throw new OAuthError(`servers.${this.serverId}: another switchyard process${who} is refreshing this login (${lock}); try again`);
    }
  }

  /**
   * What to check of a refused client the config gave (not one a login registered): its secret
   * only when it has one. A public client (a configured clientId without a secret, or the
   * metadata document's URL as its id) was told to check a clientSecret it never had.
   */
  private clientCheck(t: StoredTokens): string {
    const id = `servers.${this.serverId}.oauth`;
    if ((t.clientSecret ?? this.clientSecret) !== undefined) return `check ${id}.clientSecret (a reload takes a new one)`;
    if (/^https:\/\//i.test(t.clientId)) return `check that the authorization server can fetch the client metadata document ${where(t.clientId)} (${id}.clientMetadataUrl) and takes what it says`;
    return `check ${id}.clientId (a public client: no secret is sent)`;
  }

  /** Why no stored tokens are this server's (none, unusable, another url's), saying to log in. */
  private missing(): OAuthError {
    if (this.read.problem !== undefined) return this.login(`the stored login is unusable (${this.read.problem})`);
    if (this.read.tokens !== undefined) return this.login(`the stored login is for ${this.read.tokens.serverUrl}, not for this server's url`);
    return this.login('no login stored for this server (grant authorization_code)');
  }

  /** The stored tokens, if they have a refresh token; else the error that says to log in. */
  private needsRefresh(used: string | undefined): StoredTokens {
    const t = this.tokens();
    if (t === undefined) throw this.missing();
    if (t.refreshToken === undefined)
      throw this.login(used === t.accessToken || used === undefined ? 'the stored access token expired or was refused, and there is no refresh token' : 'the access token was refused');
    return t;
  }
}

function renewAt(t: StoredTokens): number {
  if (t.expiresAt === undefined) return Infinity;
  return renewTime(t.expiresAt, Math.max(0, t.expiresAt - t.obtainedAt));
}
