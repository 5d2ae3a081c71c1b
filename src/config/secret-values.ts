import type { KeySegments } from './keypath.js';
import type { HubConfig } from './types.js';

/**
 * The values of a config the hub must never let out (src/policy/config-secrets.ts redacts
 * them in logs, errors, the ledger and the admin views):
 * - every value `${env:NAME}` brought into the config (a server's env, headers, url, args,
 *   credentials, plugin options, ...): the config took it from the environment, so it is kept
 *   out of the file for a reason; save where no secret goes (NOT_SECRET: the listener, the
 *   ledger, names, groups, the OAuth issuer's public settings, a server's command and cwd),
 *   where redacting it would only blank the hub's own log lines (`switchyard listening` with a
 *   `${env:HOST}`, a ledger path under `${env:HOME}`); a value that also went elsewhere counts;
 * - values written literally in the fields that carry credentials: each string of
 *   `servers.<id>.credentials`, the values of `servers.<id>.headers` and `servers.<id>.env`
 *   whose name says they are one (SECRET_NAME), and in `servers.<id>.url` the password of
 *   the user info (or the user info itself when it has no password) and the values of query
 *   parameters whose name says so; `policy.requestStateKey`.
 * A header value with an auth scheme (`Bearer <token>`) counts whole and without the scheme.
 * Values shorter than MIN_SECRET_LENGTH (8) and purely numeric values are left out
 * (src/policy/config-secrets.ts).
 */

/** A header, variable or query parameter whose name says its value is a credential. */
export const SECRET_NAME = /pass|secret|token|key|auth|cookie|credential|session|signature/i;

const interpolatedOf = new WeakMap<HubConfig, ReadonlySet<string>>();

/** Whether a key path holds no secret (see above): values interpolated there alone are not redacted. */
function notSecret(at: KeySegments): boolean {
  const [top, second, third] = at;
  if (top === 'listen' || top === 'ledger' || top === 'names' || top === 'pageSize' || top === 'groups' || top === '$schema') return true;
  if (top === 'auth' && second === 'oauth') return true; // issuer, audience, JWKS location, scopes: public
  if ((top === 'servers' || top === 'mcpServers') && (third === 'command' || third === 'cwd' || third === 'prefix' || third === 'tools')) return true;
  return false;
}

/** Keep what `${env:…}` brought into this config, and where (set by parseConfig). */
export function noteInterpolated(config: HubConfig, values: readonly { at: KeySegments; value: string }[]): void {
  interpolatedOf.set(config, new Set(values.filter((v) => !notSecret(v.at)).map((v) => v.value)));
}

/** The secret values of a config (see above), in no particular order, short ones included. */
export function configSecretValues(config: HubConfig): string[] {
  const out = new Set<string>(interpolatedOf.get(config) ?? []);
  const header = (v: unknown): void => {
    if (typeof v !== 'string') return;
    out.add(v);
    // "Bearer <token>", "Basic <base64>", "token <t>": the credential alone, as an upstream may echo it.
    const m = /^\s*[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*\s+(\S.*?)\s*$/.exec(v);
    if (m) out.add(m[1]!);
  };
  const named = (record: Record<string, unknown> | undefined, each: (v: unknown) => void): void => {
    for (const [k, v] of Object.entries(record ?? {})) if (SECRET_NAME.test(k)) each(v);
  };
  const strings = (v: unknown, depth = 0): void => {
    if (typeof v === 'string') header(v);
    else if (v !== null && typeof v === 'object' && depth < 8) for (const x of Object.values(v)) strings(x, depth + 1);
  };
  for (const s of Object.values(config.servers ?? {})) {
    named(s.headers, header);
    named(s.env, (v) => typeof v === 'string' && out.add(v));
    strings(s.credentials);
    if (typeof s.url === 'string') urlSecrets(s.url, out);
  }
  const key = (config.policy as { requestStateKey?: unknown } | undefined)?.requestStateKey;
  if (typeof key === 'string') out.add(key);
  return [...out];
}

function urlSecrets(url: string, out: Set<string>): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return;
  }
  const decoded = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const secret = u.password || u.username;
  if (secret) {
    out.add(secret);
    out.add(decoded(secret));
  }
  for (const [k, v] of u.searchParams) if (SECRET_NAME.test(k) && v) out.add(v);
}
