/**
 * Keys, JWKS and bearer tokens for the security tests, made with jose: a local issuer whose
 * JWKS is written to a file or served by a tiny loopback server (which counts its fetches).
 */
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { exportJWK, generateKeyPair, SignJWT, base64url, type CryptoKey, type JWK } from 'jose';

export const ISSUER = 'https://issuer.test';
export const AUDIENCE = 'https://hub.test/mcp';

export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function signingKey(kid: string, alg = 'ES256'): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicJwk };
}

export function jwksOf(keys: SigningKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => k.publicJwk) };
}

export function writeJwks(file: string, keys: SigningKey[]): void {
  writeFileSync(file, JSON.stringify(jwksOf(keys)));
}

export interface TokenOptions {
  iss?: string;
  aud?: string | string[];
  sub?: string;
  scope?: string;
  /** Seconds from now; negative = already expired. */
  expiresIn?: number;
  notBefore?: number;
  extra?: Record<string, unknown>;
  /** The header's typ; default at+jwt, null for none. */
  typ?: string | null;
}

export async function token(key: SigningKey, o: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = { ...o.extra };
  if (o.scope !== undefined) claims.scope = o.scope;
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...(o.typ === null ? {} : { typ: o.typ ?? 'at+jwt' }) })
    .setIssuer(o.iss ?? ISSUER)
    .setAudience(o.aud ?? AUDIENCE)
    .setSubject(o.sub ?? 'alice')
    .setIssuedAt(now)
    .setExpirationTime(now + (o.expiresIn ?? 300));
  if (o.notBefore !== undefined) jwt.setNotBefore(now + o.notBefore);
  return jwt.sign(key.privateKey);
}

/** An unsigned token (`alg: none`), as an attacker would send it. */
export function unsignedToken(claims: Record<string, unknown>): string {
  const enc = (o: unknown) => base64url.encode(JSON.stringify(o));
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc(claims)}.`;
}

/** HS256 over the issuer's *public* key bytes: the classic algorithm-confusion forgery. */
export async function confusedToken(key: SigningKey, claims: Record<string, unknown>): Promise<string> {
  const secret = new TextEncoder().encode(JSON.stringify(key.publicJwk));
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: key.kid }).sign(secret);
}

export function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export interface JwksServer {
  url: string;
  fetches: number;
  setKeys(keys: SigningKey[]): void;
  /** How it answers from now on: the key set, an HTTP status with no set, or a connection cut unanswered. */
  answer(how: 'keys' | number | 'cut'): void;
  close(): Promise<void>;
}

/** Serves a JWKS on 127.0.0.1 and counts how often it is fetched. */
export async function jwksServer(initial: SigningKey[]): Promise<JwksServer> {
  let keys = initial;
  let how: 'keys' | number | 'cut' = 'keys';
  const state = { fetches: 0 };
  const server: Server = createServer((req, res) => {
    if (req.url !== '/jwks.json') return res.writeHead(404).end();
    state.fetches++;
    if (how === 'cut') return req.socket.destroy();
    if (typeof how === 'number') return res.writeHead(how, { 'content-type': 'text/plain' }).end('unavailable');
    const body = JSON.stringify(jwksOf(keys));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    get fetches() {
      return state.fetches;
    },
    setKeys: (k) => {
      keys = k;
    },
    answer: (h) => {
      how = h;
    },
    close: () =>
      new Promise((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** Raw `WWW-Authenticate: Bearer a="b", …` → {a: 'b', …}. */
export function challengeParams(header: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const m of header.matchAll(/([a-z_]+)="([^"]*)"/g)) out[m[1]] = m[2];
  return out;
}

/** Poll /healthz with a credential until every named upstream is ready. */
export async function waitForReadyWith(mcpUrl: string, ids: string[], bearer: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    const res = await fetch(new URL('/healthz', mcpUrl), { headers: { authorization: `Bearer ${bearer}` } });
    last = await res.json();
    const servers = (last as { servers?: { id: string; state: string }[] }).servers ?? [];
    if (ids.every((id) => servers.some((s) => s.id === id && s.state === 'ready'))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`upstreams not ready after ${timeoutMs} ms: ${JSON.stringify(last)}`);
}
