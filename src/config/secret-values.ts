import type { KeySegments } from './keypath.js';
import type { HubConfig } from './types.js';

/**
 * The values of a config the hub must never let out (src/policy/config-secrets.ts redacts
 * them in logs, errors, the ledger and the admin views). A value counts by where it sits, the
 * same whether it was written literally or brought in by `${env:NAME}`:
 * - each string of `servers.<id>.credentials`;
 * - a server's `oauth.clientSecret` and `oauth.privateKey` (the access tokens the hub obtains
 *   with them are added at run time by src/upstream/oauth-client.ts);
 * - a server's `headers`: the value of a header whose name says it is a credential
 *   (SECRET_NAME), and what `${env:…}` brought into any header;
 * - a server's `env`: the value of a variable whose name says it is a credential, and in any
 *   variable's value, the password of a URL's user info (`DATABASE_URL=postgres://app:pw@db/…`)
 *   and the values of its query parameters whose name says so;
 * - a server's `args`: the value a flag whose last word names a credential takes (`--api-key
 *   K`, `--github-token=K`, `--password K`; SECRET_FLAG), and in any argument, a URL's password
 *   and secret-named query values as in `env`: a server that prints its command line or its
 *   options on stderr would give them to the log and `/admin/servers` otherwise;
 * - in a server's `url`, the password of the user info (or the user info itself when it has no
 *   password) and the values of query parameters whose name says so;
 * - `policy.requestStateKey`;
 * - a plugin's options under a key whose name says it is a credential
 *   (`plugins.options.<name>.apiKey`, `plugins.paths[i].options.token`), literal or brought in
 *   by `${env:…}`, every string beneath such a key: a plugin that says its key in a deny
 *   reason, an error or a log line would give it to the client, the ledger and the log.
 * Where a value was interpolated into such a place, what the environment brought counts too
 * (`"DB_PASSWORD": "pw-${env:PW}"`: the whole value and PW's). Nothing else counts, interpolated
 * or not: a host or path in a `url`, any other argument in `args`, `cwd`, an `env` entry with an
 * ordinary name (HOME, PATH, NODE_ENV, REGION), the listener, the ledger: redacting those would
 * only blank host names and paths in errors and log lines. The config holds no other secret: `auth.apiKeys`
 * keeps only each key's SHA-256, and `auth.oauth` only public settings.
 * A header value with an auth scheme (`Bearer <token>`) counts whole and without the scheme.
 * Values shorter than MIN_SECRET_LENGTH (8) and purely numeric values are left out
 * (src/policy/config-secrets.ts).
 */

/** A header, variable or query parameter whose name says its value is a credential. */
export const SECRET_NAME = /pass|secret|token|key|auth|cookie|credential|session|signature/i;

/**
 * A command-line flag whose last word says the value it takes is a credential (`--api-key`,
 * `--github-token`, `--client-secret`, `--password`, `--auth`): the last word, so that
 * `--keyfile`, `--tokenizer`, `--passthrough` or `--allow-secrets` take ordinary values.
 */
export const SECRET_FLAG = /^--?(?:[A-Za-z0-9]+[-_.])*(?:api[-_]?key|apikey|key|token|secret|password|passwd|pass|pwd|passphrase|auth|credentials?|cookie|signature)$/i;

/** A URL's user info with a password, wherever it sits in a value (`--db=postgres://u:pw@h/x`). */
const URL_PASSWORD = /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/\s:@]+:([^@\s/]+)@/g;
/** A query parameter of a URL (or a form), wherever it sits in a value. */
const QUERY_PARAM = /[?&]([^=&\s#]+)=([^&\s#]+)/g;

const interpolatedOf = new WeakMap<HubConfig, ReadonlySet<string>>();

/** Whether a value `${env:…}` brought in at `at` is a secret by where it sits (see above). */
function secretAt(config: HubConfig, at: KeySegments, value: string): boolean {
  const [top, second, third, fourth] = at;
  if (top === 'servers' || top === 'mcpServers') {
    if (third === 'credentials' || third === 'headers') return true;
    if (third === 'oauth') return fourth === 'clientSecret' || fourth === 'privateKey';
    if (third === 'env') return typeof fourth === 'string' && SECRET_NAME.test(fourth);
    if (third === 'args' && typeof second === 'string' && typeof fourth === 'number') return secretArgAt(config.servers[second]?.args, fourth);
    if (third === 'url' && at.length === 3 && typeof second === 'string') {
      const url = config.servers[second]?.url;
      if (typeof url !== 'string') return false;
      const parts = new Set<string>();
      urlSecrets(url, parts);
      for (const p of parts) if (p.includes(value)) return true;
    }
    return false;
  }
  if (top === 'policy') return second === 'requestStateKey';
  if (top === 'plugins') {
    // plugins.options.<plugin>.<key>… and plugins.paths[i].options.<key>…: the keys under options
    const keys = second === 'options' ? at.slice(3) : second === 'paths' && fourth === 'options' ? at.slice(4) : [];
    return keys.some((k) => typeof k === 'string' && SECRET_NAME.test(k));
  }
  return false;
}

/** Keep what `${env:…}` brought into this config where a secret sits (set by parseConfig). */
export function noteInterpolated(config: HubConfig, values: readonly { at: KeySegments; value: string }[]): void {
  interpolatedOf.set(config, new Set(values.filter((v) => secretAt(config, v.at, v.value)).map((v) => v.value)));
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
    for (const v of Object.values(s.env ?? {})) if (typeof v === 'string') embeddedSecrets(v, out);
    argSecrets(s.args, out);
    strings(s.credentials);
    if (s.oauth?.clientSecret !== undefined) out.add(s.oauth.clientSecret);
    if (s.oauth?.privateKey !== undefined) out.add(s.oauth.privateKey);
    if (typeof s.url === 'string') urlSecrets(s.url, out);
  }
  const pluginOptions = (v: unknown, secret: boolean, depth = 0): void => {
    if (typeof v === 'string') {
      if (secret) out.add(v);
    } else if (v !== null && typeof v === 'object' && depth < 8) {
      for (const [k, x] of Object.entries(v)) pluginOptions(x, secret || (!Array.isArray(v) && SECRET_NAME.test(k)), depth + 1);
    }
  };
  for (const o of Object.values(config.plugins?.options ?? {})) pluginOptions(o, false);
  for (const p of config.plugins?.paths ?? []) if (typeof p === 'object' && p !== null) pluginOptions(p.options, false);
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

/** Whether the argument at `i` is a value a secret flag takes (`--api-key K`, `--api-key=K`). */
function secretArgAt(args: unknown, i: number): boolean {
  if (!Array.isArray(args) || typeof args[i] !== 'string') return false;
  const a = args[i] as string;
  const eq = a.indexOf('=');
  if (a.startsWith('-') && eq > 0) return SECRET_FLAG.test(a.slice(0, eq));
  const before: unknown = args[i - 1];
  return typeof before === 'string' && SECRET_FLAG.test(before);
}

/** The values secret flags take, and URL passwords and secret query values in any argument. */
function argSecrets(args: unknown, out: Set<string>): void {
  if (!Array.isArray(args)) return;
  args.forEach((a: unknown, i) => {
    if (typeof a !== 'string') return;
    embeddedSecrets(a, out);
    const eq = a.indexOf('=');
    if (a.startsWith('-') && eq > 0) {
      if (SECRET_FLAG.test(a.slice(0, eq))) out.add(a.slice(eq + 1));
      return;
    }
    const next: unknown = args[i + 1];
    if (SECRET_FLAG.test(a) && typeof next === 'string' && !next.startsWith('-')) out.add(next);
  });
}

/**
 * A URL's password and the values of its secret-named query parameters, wherever they sit in a
 * value that is not a server's `url` (an env value, an argument). A URL's user name alone is not
 * taken, as it is for a server's `url`: `postgres://postgres@db` would blank the word everywhere.
 */
function embeddedSecrets(v: string, out: Set<string>): void {
  if (!v.includes('://') && !v.includes('=')) return;
  for (const m of v.matchAll(URL_PASSWORD)) {
    out.add(m[1]!);
    try {
      out.add(decodeURIComponent(m[1]!));
    } catch {
      // not URL-encoded text: the value as written is taken
    }
  }
  for (const m of v.matchAll(QUERY_PARAM)) if (SECRET_NAME.test(m[1]!)) out.add(m[2]!);
}
