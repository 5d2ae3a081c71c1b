import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { createLocalJWKSet, createRemoteJWKSet, customFetch, errors, jwksCache, jwtVerify, type ExportedJWKSCache, type JWTVerifyGetKey } from 'jose';
import type { OAuthConfig } from '../config/types.js';
import { GROUP_NAME } from '../catalog/filters.js';
import { isLoopbackHost } from '../downstream/origin.js';
import type { Logger } from '../log.js';
import { RESERVED_PRINCIPALS } from './principals.js';
import { monotonicNow } from '../monotonic.js';

/** Larger bearer tokens are refused unread. */
const MAX_TOKEN_BYTES = 16 * 1024;
const JWKS_TIMEOUT_MS = 5_000;
const JWKS_MAX_AGE_MS = 10 * 60_000;
/**
 * After a JWKS fetch failed, how long the issuer is not asked again (tokens needing it are
 * answered 503 meanwhile, with this as Retry-After). jose asks again at each token whose key it
 * lacks, so an issuer that was down was asked once per request, as fast as clients sent them.
 */
const JWKS_RETRY_MS = 1_000;
/** How often a `jwksFile` is looked at (a stat, on a request) for a change. */
const JWKS_FILE_CHECK_MS = 1_000;
/** Never accepted, whatever the config says: symmetric keys would turn a public key into a shared secret. */
const FORBIDDEN_ALGS = /^(none|HS\d+)$/i;
/** Verified tokens remembered (by hash) so a client's every request is not a signature check. */
const VERIFIED_MAX = 2048;
/** How long one is remembered: on the monotonic clock, and never past the token's own `exp` (the wall clock's, as jose reads it). */
const VERIFIED_TTL_MS = 60_000;

/** A JWKS, and which version of it is current. */
interface KeySet {
  getKey: JWTVerifyGetKey;
  /**
   * Cheap, called on every request; a verified token remembered under another version is checked
   * again, so a key removed from the set stops working as soon as the set is read again, not a
   * minute later. Undefined: no version is known to be current (no token is taken from memory).
   */
  version(): number | undefined;
}

/**
 * A verified token, for what outlives its request's check: a stream it opened, a call held before
 * it is sent. One per request, as the closure it replaces was.
 */
export class Lapse {
  // Private fields (#), not TypeScript's `private`: an object holding the raw token must not
  // show it to JSON.stringify, a logger or util.inspect, as the closure it replaces did not.
  readonly #verifier: OAuthVerifier;
  readonly #id: string;
  readonly #token: string;
  /** The key set version it was verified under (KeySet.version). */
  readonly #version: number | undefined;
  readonly #expiresAt: number;

  constructor(verifier: OAuthVerifier, id: string, token: string, version: number | undefined, expiresAt: number) {
    this.#verifier = verifier;
    this.#id = id;
    this.#token = token;
    this.#version = version;
    this.#expiresAt = expiresAt;
  }

  /**
   * Has `end` run if the credential stops working before its expiry (its signing key gone from the
   * key set); the returned function forgets it (the stream ended first).
   */
  watch(end: () => void): () => void {
    return this.#verifier.watch(this.#id, this.#token, end);
  }

  /**
   * null while the token still works as it did when it was let in (the same key set, not expired:
   * a version read and a clock read, nothing else); otherwise its verdict now, as a request with
   * it would be answered: refused once its key left the key set or it expired.
   */
  recheck(): Promise<TokenVerdict> | null {
    const now = this.#verifier.keysVersion();
    if (now !== undefined && now === this.#version && Date.now() < this.#expiresAt) return null;
    return this.#verifier.verify(this.#token);
  }
}

export type TokenVerdict =
  /**
   * `expiresAt`: when the token stops verifying, epoch ms: its `exp` plus clockToleranceSec
   * (streams it opens end then, or at `lapse`).
   */
  | { ok: true; principal: string; scopes: string[]; expiresAt: number; groups?: ReadonlySet<string>; lapse: Lapse }
  /**
   * `description` is safe to send to the client (RFC 6750 error_description); it names no key or
   * secret. `retryAfterMs`: the token could not be checked (the issuer's keys could not be
   * fetched), which says nothing of the token: the client is to try again then, not to drop it.
   */
  | { ok: false; description: string; retryAfterMs?: number };

/** The issuer's JWKS could not be fetched (down, an error status, no key set in its answer). */
class KeysUnavailable extends Error {}

/** The scopes a token grants: `scope` (space-separated, RFC 9068) or `scp` (array or string). */
export function scopesOf(claims: Record<string, unknown>): string[] {
  const out = new Set<string>();
  const add = (v: unknown) => {
    const list = typeof v === 'string' ? v.split(' ') : Array.isArray(v) ? v : [];
    for (const s of list) if (typeof s === 'string' && s) out.add(s);
  };
  add(claims.scope);
  add(claims.scp);
  return [...out];
}

const MAX_PRINCIPAL_LENGTH = 256;
/**
 * What a reader cannot see or tell apart: controls (C0, DEL, C1), format characters (zero-width,
 * bidi overrides), line and paragraph separators, private use, lone surrogates, and the other
 * default-ignorable code points (variation selectors, fillers such as U+3164).
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cs}\p{Default_Ignorable_Code_Point}]/u;
/** How a name reads: `ＨＵＢ`, `Hub` and `hub` are the same name to whoever reads the ledger. */
const fold = (s: string) => s.normalize('NFKC').toLowerCase().normalize('NFKC');

/**
 * Why a claim cannot be a principal (an error_description), or undefined if it can. The
 * principal is what the ledger, logs and status page show, so it must read as itself: not empty
 * or huge, no white space at either end, nothing invisible, and none of the ledger's own names
 * however written (an API key principal is held to a narrow pattern by the config; a claim such
 * as `preferred_username` is whatever the user chose).
 */
export function principalProblem(v: unknown, claim: string): string | undefined {
  if (typeof v !== 'string' || v.length === 0) return `the token has no usable ${claim} claim`;
  if (v.length > MAX_PRINCIPAL_LENGTH) return `the token's ${claim} claim is too long`;
  if (INVISIBLE.test(v)) return `the token's ${claim} claim holds control or invisible characters`;
  if (/^\s|\s$/u.test(v)) return `the token's ${claim} claim starts or ends with white space`;
  // Folded here, not at load: authenticator.js (which holds the names) imports this module.
  const folded = fold(v).trim();
  if ([...RESERVED_PRINCIPALS].some((r) => fold(r) === folded)) return `the token's ${claim} claim names a principal the hub keeps for itself`;
  return undefined;
}

function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'the token has expired';
  if (err instanceof errors.JWTClaimValidationFailed) {
    // jose's reason 'invalid': the claim is there but of the wrong type (`exp: "1700000000"`);
    // "no expiry" or "not valid yet" would send the issuer's developer after the wrong bug.
    if (err.reason === 'invalid') return `the token's ${err.claim} claim is malformed`;
    switch (err.claim) {
      case 'iss':
        return 'the token was issued by another authorization server';
      case 'aud':
        return 'the token is not meant for this resource';
      case 'nbf':
        return 'the token is not valid yet';
      case 'exp':
        return 'the token has no expiry';
      default:
        return `the token's ${err.claim} claim is invalid`;
    }
  }
  if (err instanceof errors.JOSEAlgNotAllowed || err instanceof errors.JOSENotSupported) return 'the token is signed with an algorithm the hub does not accept';
  if (err instanceof errors.JWKSNoMatchingKey) return 'the token is signed with an unknown key';
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'the token signature is invalid';
  if (err instanceof errors.JWKSTimeout) return 'the signing keys could not be fetched';
  return 'the token is malformed';
}

/**
 * Verifies bearer JWTs as an OAuth 2.1 resource server (digest §7): signature against the
 * issuer's JWKS, `iss`, `aud` (the hub's canonical URI), `exp`/`nbf`, and a fixed list of
 * asymmetric algorithms, so neither `alg: none` nor an HMAC signature made with the public key
 * (algorithm confusion) can pass. Unknown `kid`s refresh the key set (rate-limited).
 */
export class OAuthVerifier {
  private readonly keys: KeySet;
  readonly algorithms: string[];
  /** How long past its `exp` a token still verifies (auth.oauth.clockToleranceSec). */
  readonly toleranceMs: number;
  private readonly verified = new Map<string, { principal: string; scopes: string[]; until: number; expiresAt: number; groups: ReadonlySet<string> | undefined; version: number | undefined }>();
  /**
   * The tokens of open streams (by id), and how to end each stream: checked again when the key
   * set changes, so a stream whose token's key was removed ends, as a removed API key's does.
   */
  private readonly streams = new Map<string, { token: string; ends: Set<() => void> }>();
  /** The key set version streams were last checked under; a timer looks for a new one while streams are open (a jwksFile's change). */
  private streamsAt: number | undefined;
  private watcher: NodeJS.Timeout | undefined;
  private rechecking: Promise<void> | undefined;
  private recheckAgain = false;

  constructor(
    private readonly cfg: OAuthConfig,
    readonly audience: string,
    baseDir: string,
    private readonly log: Logger,
  ) {
    this.toleranceMs = cfg.clockToleranceSec * 1000;
    this.algorithms = cfg.algorithms.filter((a) => !FORBIDDEN_ALGS.test(a));
    if (this.algorithms.length === 0) throw new Error('auth.oauth.algorithms: no acceptable algorithm left (none and HS* are never accepted)');
    if (cfg.jwksUri) {
      const url = new URL(cfg.jwksUri);
      if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname)))
        throw new Error('auth.oauth.jwksUri: must be https (plain http only on loopback)');
      // jose stamps this object with each fetch's time (uat): a new fetch is a new version.
      const fetched: Partial<ExportedJWKSCache> = {};
      const remote = createRemoteJWKSet(url, {
        cooldownDuration: cfg.jwksCooldownMs,
        timeoutDuration: JWKS_TIMEOUT_MS,
        cacheMaxAge: JWKS_MAX_AGE_MS,
        [jwksCache]: fetched as Record<string, never>,
        [customFetch]: jwksFetch(log),
      });
      this.keys = { getKey: remote, version: () => (remote.fresh ? fetched.uat : undefined) };
    } else if (cfg.jwksFile) {
      this.keys = fileKeySet(resolve(baseDir, cfg.jwksFile), cfg.jwksCooldownMs, log);
    } else throw new Error('auth.oauth: needs jwksUri or jwksFile');
  }

  async verify(token: string): Promise<TokenVerdict> {
    if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) return { ok: false, description: 'the token is too large' };
    const id = createHash('sha256').update(token).digest('base64url');
    // Read before verifying: if the set changes meanwhile, the token is checked again next time.
    const version = this.keys.version();
    if (version !== this.streamsAt) this.keysChanged(version);
    const known = this.verified.get(id);
    // `until` is monotonic: on the wall clock a step back kept a verdict for the step (an hour) past the minute.
    if (known && monotonicNow() < known.until && Date.now() < known.expiresAt && known.version !== undefined && known.version === version)
      return { ok: true, principal: known.principal, scopes: known.scopes, expiresAt: known.expiresAt, groups: known.groups, lapse: new Lapse(this, id, token, version, known.expiresAt) };
    if (known) this.verified.delete(id);
    try {
      const { payload, protectedHeader } = await jwtVerify(token, this.keys.getKey, {
        issuer: this.cfg.issuer,
        // With group resources the audience is checked below: jose takes a list, not a pattern.
        audience: this.cfg.groupResources ? undefined : this.audience,
        algorithms: this.algorithms,
        clockTolerance: this.cfg.clockToleranceSec,
        requiredClaims: ['exp'],
      });
      const groups = this.cfg.groupResources ? audienceGroups(payload.aud, this.audience) : undefined;
      if (groups === null) return { ok: false, description: 'the token is not meant for this resource' };
      if (!accessTokenType(protectedHeader.typ)) return { ok: false, description: `the token is typed ${JSON.stringify(protectedHeader.typ)}, not an access token` };
      const problem = principalProblem(payload[this.cfg.principalClaim], this.cfg.principalClaim);
      if (problem !== undefined) return { ok: false, description: problem };
      const principal = payload[this.cfg.principalClaim] as string; // a string, or it had a problem
      const scopes = scopesOf(payload);
      // Never past the token's own expiry (exp is required above), read as jose reads it, with
      // the tolerance: a token let in within it past exp is good until then, not already over
      // (its streams ended at once, and every request verified it again). Looked at with the
      // wall clock at each use.
      const expiresAt = (payload.exp as number) * 1000 + this.toleranceMs;
      const until = monotonicNow() + VERIFIED_TTL_MS;
      if (this.verified.size >= VERIFIED_MAX) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(id, { principal, scopes, until, expiresAt, groups, version });
      return { ok: true, principal, scopes, expiresAt, groups, lapse: new Lapse(this, id, token, version, expiresAt) };
    } catch (err) {
      if (err instanceof KeysUnavailable || err instanceof errors.JWKSTimeout)
        return { ok: false, retryAfterMs: JWKS_RETRY_MS, description: "the issuer's signing keys cannot be fetched now; try again shortly" };
      const description = describe(err);
      this.log.debug({ reason: description, code: (err as { code?: string })?.code }, 'bearer token refused');
      return { ok: false, description };
    }
  }

  /** The key set's version now (KeySet.version): cheap. */
  keysVersion(): number | undefined {
    const v = this.keys.version();
    if (v !== this.streamsAt) this.keysChanged(v);
    return v;
  }

  /** A stream opened with `token` (id: its hash) ends by `end` if the token stops verifying (Lapse). */
  watch(id: string, token: string, end: () => void): () => void {
    let w = this.streams.get(id);
    if (!w) this.streams.set(id, (w = { token, ends: new Set() }));
    const entry = w;
    entry.ends.add(end);
    // A jwksFile is looked at (a stat, at most once a second) while streams are open, not only at
    // a request: a key removed from it ends its streams even if no request comes.
    this.watcher ??= setInterval(() => {
      const v = this.keys.version();
      if (v !== this.streamsAt) this.keysChanged(v);
    }, JWKS_FILE_CHECK_MS).unref();
    return () => {
      entry.ends.delete(end);
      if (entry.ends.size === 0 && this.streams.get(id) === entry) this.streams.delete(id);
      if (this.streams.size === 0 && this.watcher) {
        clearInterval(this.watcher);
        this.watcher = undefined;
      }
    };
  }

  /**
   * The key set is another (a jwksFile re-read, a JWKS fetched again): each open stream's token is
   * checked under it, and the streams of one that no longer verifies end. One that cannot be
   * checked now (the issuer's keys unavailable) goes on. Undefined (a remote set gone stale) is no
   * new set yet.
   */
  private keysChanged(version: number | undefined): void {
    if (version === undefined) return;
    this.streamsAt = version;
    if (this.streams.size === 0) return;
    if (this.rechecking) {
      this.recheckAgain = true;
      return;
    }
    this.rechecking = (async () => {
      do {
        this.recheckAgain = false;
        for (const [id, w] of [...this.streams]) {
          const v = await this.verify(w.token);
          if (v.ok || v.retryAfterMs !== undefined || this.streams.get(id) !== w) continue;
          this.streams.delete(id);
          this.log.info({ streams: w.ends.size, reason: v.description }, "streams of a token that no longer verifies (its key left the key set) ended");
          for (const end of [...w.ends]) end();
        }
      } while (this.recheckAgain);
    })().finally(() => {
      this.rechecking = undefined;
    });
  }
}

/**
 * The fetch jose gets the issuer's JWKS with: an answer that is no key set (an error status, a
 * body that is not one) fails as the fetch does, and after a failure the issuer is not asked
 * again for JWKS_RETRY_MS (KeysUnavailable at once). The outage is logged once, and its end.
 */
function jwksFetch(log: Logger): typeof fetch {
  let failedAt = -Infinity;
  let failing = false;
  return async (input, init) => {
    if (monotonicNow() - failedAt < JWKS_RETRY_MS) throw new KeysUnavailable();
    let body: string;
    let res: Response;
    try {
      res = await fetch(input, init);
      if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
      body = await res.text();
      const set = JSON.parse(body) as { keys?: unknown } | null;
      if (!Array.isArray(set?.keys)) throw new Error('the answer is no JSON Web Key Set');
    } catch (err) {
      failedAt = monotonicNow();
      // Its URL is the config's (and may hold a secret): the reason alone.
      if (!failing) log.warn({ err: (err as Error)?.name === 'TimeoutError' ? 'timed out' : String((err as Error)?.message ?? err) }, "the issuer's signing keys could not be fetched (auth.oauth.jwksUri): tokens that need them are answered 503 until they can");
      failing = true;
      throw new KeysUnavailable();
    }
    if (failing) log.info("the issuer's signing keys fetched again (auth.oauth.jwksUri)");
    failing = false;
    return new Response(body, { status: 200, headers: res.headers });
  };
}

/**
 * The groups a token's `aud` limits it to, when `/mcp/<group>` is a resource of its own
 * (`<audience>/<group>`): undefined when it names the hub's audience itself (every endpoint),
 * null when it names neither (not meant for this hub). Exact strings, as RFC 8707 resources are.
 */
export function audienceGroups(aud: unknown, audience: string): ReadonlySet<string> | undefined | null {
  const named = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud.filter((a): a is string => typeof a === 'string') : [];
  if (named.includes(audience)) return undefined;
  const prefix = `${audience.replace(/\/+$/, '')}/`;
  const groups = new Set(named.filter((a) => a.startsWith(prefix) && GROUP_NAME.test(a.slice(prefix.length))).map((a) => a.slice(prefix.length)));
  return groups.size ? groups : null;
}

/**
 * Whether a JWT's `typ` may be an access token's: `at+jwt` (RFC 9068 §2.1), or the plain `JWT`
 * (or none) that many authorization servers still give access tokens. Any other type — an ID
 * token's `id_token+jwt`, `logout+jwt`, `dpop+jwt`, a security event — is a token of the same
 * issuer made for something else, refused (RFC 8725 §3.11). Media types compare without case and
 * with an optional `application/` (RFC 7515 §4.1.9).
 */
function accessTokenType(typ: unknown): boolean {
  if (typ === undefined) return true;
  if (typeof typ !== 'string') return false;
  const t = typ.toLowerCase().replace(/^application\//, '');
  return t === 'at+jwt' || t === 'jwt';
}

/**
 * A JWKS read from a file, read again when the file changes (its stat is looked at, on a request,
 * at most once per JWKS_FILE_CHECK_MS), so a key removed from it stops working within a second,
 * and at once (at most once per cooldown) when a token names a key it does not hold, so a key
 * added to it works at once. A file that cannot be read or is no JWKS keeps the old keys.
 */
function fileKeySet(file: string, cooldownMs: number, log: Logger): KeySet {
  let stamp = stampOf(); // before the read: a change during it is seen next time
  let set = load();
  let version = 0;
  // On the monotonic clock: a wall clock stepped back an hour left the file unlooked-at that hour
  // (a key removed from it, a revoked key, kept working) and a new key unread (its tokens refused).
  let checkedAt = monotonicNow();
  let reReadAt = monotonicNow();
  let warnedFor: string | undefined;
  /** Changes when the file is written or replaced (mtime alone could miss a same-tick rewrite). */
  function stampOf(): string {
    try {
      const s = statSync(file);
      return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
    } catch {
      return 'none';
    }
  }
  function load(): JWTVerifyGetKey {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new Error(`auth.oauth.jwksFile: cannot read a JSON Web Key Set from ${file} (${(e as NodeJS.ErrnoException).code ?? 'not JSON'})`);
    }
    return createLocalJWKSet(json as Parameters<typeof createLocalJWKSet>[0]);
  }
  /** Reads the file again if it changed; whether the keys are new. */
  function reread(why: string): boolean {
    const now = stampOf();
    if (now === stamp) return false;
    try {
      set = load();
    } catch (e) {
      // Left unstamped, so the next look tries again (a file caught half-written); warned once.
      if (warnedFor !== now) log.warn({ err: (e as Error).message }, 'JWKS file could not be re-read; keeping the old keys');
      warnedFor = now;
      return false;
    }
    stamp = now;
    version++;
    log.info(`JWKS file re-read ${why}`);
    return true;
  }
  return {
    version() {
      if (monotonicNow() - checkedAt >= JWKS_FILE_CHECK_MS) {
        checkedAt = monotonicNow();
        reread('after it changed');
      }
      return version;
    },
    async getKey(header, token) {
      try {
        return await set(header, token);
      } catch (err) {
        if (!(err instanceof errors.JWKSNoMatchingKey) || monotonicNow() - reReadAt < cooldownMs) throw err;
        reReadAt = monotonicNow();
        if (!reread('after an unknown key id')) throw err;
        return set(header, token);
      }
    },
  };
}
