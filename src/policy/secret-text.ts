import { redactConfigSecrets } from './config-secrets.js';
import { DEFAULT_REDACT_KEYS } from './secret-keys.js';

/**
 * Credentials recognisable by their shape (well-known token formats, bearer tokens, passwords
 * in URLs), found in free text and replaced by "[redacted:<kind>]". Used wherever text from an
 * upstream or a client leaves the hub or is kept: tool results (the bundled redact-secrets
 * plugin), upstream errors (src/upstream/upstream-error.ts) and ledger rows (src/ledger/redact.ts).
 */

export interface SecretRule {
  kind: string;
  /** What to redact (a global expression); with `within`, the regions to look inside. */
  re: RegExp;
  /** Keep this capture group (a label such as "Bearer ") and redact the rest of the match. */
  keep?: number;
  /** A region `re` matched, with this rule's secrets in it replaced by `mark`. */
  within?: (region: string, mark: string) => string;
  /**
   * Text present wherever the rule matches: a text without it is passed over at the cost of a
   * substring search. For expressions that begin with a lookbehind, which the engine must try
   * at every position.
   */
  hint?: string;
  /**
   * A regular expression source (read case-insensitively) that every match of `re` contains.
   * The leading rules of a list that all have one are passed over together, by one search for
   * any of them: most text (a tool's ordinary output) holds none.
   */
  gate?: string;
}

/*
 * Every rule runs in time linear in the text: it comes from upstreams (results, errors, stderr)
 * and may be large and hostile. An expression may not start at a word boundary inside a run
 * that its own repetition then scans to the end: each such start rescans the rest of the run
 * (`\beyJ[A-Za-z0-9_-]{8,}\.` over "eyJaaaaaaaaa-" repeated took 0.45 s for 52 KB, growing with
 * the square). Such rules start only where their run starts (a lookbehind), or find their
 * regions first and look inside them in code (`within`).
 */
export const SECRET_RULES: readonly SecretRule[] = [
  { kind: 'private-key', re: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*/g, within: privateKeys, gate: '-----BEGIN ' },
  { kind: 'aws-access-key', re: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, gate: 'AKIA|ASIA' },
  { kind: 'aws-secret-key', re: /(aws_secret_access_key\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}/gi, keep: 1, gate: 'aws_secret_access_key' },
  { kind: 'github-token', re: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g, gate: 'gh[pousr]_|github_pat_' },
  { kind: 'slack-token', re: /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/g, gate: 'xox[abposr]-' },
  { kind: 'stripe-key', re: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b/g, gate: '[sr]k_(?:live|test)_' },
  { kind: 'api-key', re: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b/g, gate: 'sk-' },
  { kind: 'google-api-key', re: /\bAIza[0-9A-Za-z_-]{35}\b/g, gate: 'AIza' },
  // Whole runs of base64url characters and dots that hold an `eyJ`.
  { kind: 'jwt', re: /(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*eyJ[A-Za-z0-9_.-]*/g, within: jwts, hint: 'eyJ', gate: 'eyJ' },
  { kind: 'bearer-token', re: /(\bBearer\s+)[A-Za-z0-9._~+/-]{16,}=*/gi, keep: 1, gate: 'bearer\\s' },
  // `Basic <base64 of user:password>` with no `Authorization:` before it (a header value quoted
  // alone, a config's headers echoed): "Basic" is an English word, so only a credential that
  // decodes to `user:password` counts ("Basic auth", "basic setup" do not). Not one that is the
  // word again: "Basic Basic <credential>" would hide the credential behind it. At most 1 KiB,
  // whole (no credential is longer): a long base64 run after the word is decoded no further.
  { kind: 'basic-credentials', re: /\bBasic[ \t]+(?!basic[ \t])[A-Za-z0-9+/_-]{4,1024}={0,2}(?![A-Za-z0-9+/=_-])/gi, within: basicCredentials, gate: 'basic[ \t]' },
  // The scheme is the whole run of scheme characters before "://", whatever it starts with: a
  // run that began with "-", "+", "." or a digit was passed over ("-https://me:pw@host").
  { kind: 'url-credentials', re: /((?<![a-z0-9+.-])[a-z0-9+.-]+:\/\/[^/\s:@]+:)[^@\s/]+(?=@)/gi, keep: 1, hint: '@', gate: '://' },
];

/** A base64 credential (standard or URL-safe) that decodes to visible `user:password` text. */
const BASIC_PAIR = /^[^\x00-\x1f\x7f\ufffd]*:[^\x00-\x1f\x7f\ufffd]*$/;

/** `Basic <credential>` with its credential replaced by `mark` when it is one (BASIC_PAIR). */
function basicCredentials(region: string, mark: string): string {
  const at = region.search(/[ \t][^ \t]/) + 1;
  const cred = region.slice(at);
  const b64 = cred.replace(/-/g, '+').replace(/_/g, '/');
  const bytes = Buffer.from(b64, 'base64');
  // Only base64 that says exactly these bytes (Buffer.from skips what is not base64).
  if (bytes.toString('base64').replace(/=+$/, '') !== b64.replace(/=+$/, '')) return region;
  return BASIC_PAIR.test(bytes.toString('utf8')) ? region.slice(0, at) + mark : region;
}

const PEM_END = /-----END [A-Z0-9 ]*PRIVATE KEY-----/g;
const PEM_BEGIN = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/g;

/**
 * Each BEGIN line through the first END line after it, as `BEGIN…[\s\S]*?…END` would match
 * (the search goes on after that END), with a single pass over the text for each kind of line:
 * the expression rescanned the rest of the text from every BEGIN that has no END.
 */
function privateKeys(region: string, mark: string): string {
  let out = '';
  let from = 0;
  for (;;) {
    PEM_BEGIN.lastIndex = from;
    const begin = PEM_BEGIN.exec(region);
    if (begin === null) break;
    PEM_END.lastIndex = begin.index + begin[0].length;
    const end = PEM_END.exec(region);
    if (end === null) break;
    out += region.slice(from, begin.index) + mark;
    from = end.index + end[0].length;
  }
  return out + region.slice(from);
}

/**
 * The JWTs in a run of base64url characters and dots, as `\beyJ[B]{8,}\.eyJ[B]{8,}\.[B]{8,}`
 * would find them (B: base64url): a first segment that starts at `eyJ` at a word boundary and
 * runs to its dot, a second that is `eyJ` and 8 more, and a third of 8 or more, taken whole.
 */
function jwts(region: string, mark: string): string {
  const segs = region.split('.');
  let out = '';
  let j = 0;
  while (j < segs.length) {
    const start = j + 2 < segs.length ? jwtStart(segs[j]) : -1;
    if (start >= 0 && segs[j + 1].length >= 11 && segs[j + 1].startsWith('eyJ') && segs[j + 2].length >= 8) {
      out += segs[j].slice(0, start) + mark;
      j += 3;
    } else {
      out += segs[j];
      j += 1;
    }
    if (j < segs.length) out += '.';
  }
  return out;
}

/**
 * Where a JWT's first segment starts in `seg`: the first `eyJ` at a word boundary (the run's
 * start, or after a "-", the one non-word character of base64url) with 8 more after it; -1
 * for none.
 */
function jwtStart(seg: string): number {
  for (let i = seg.indexOf('eyJ'); i >= 0 && seg.length - i >= 11; i = seg.indexOf('eyJ', i + 1)) {
    if (i === 0 || seg.charCodeAt(i - 1) === 0x2d /* - */) return i;
  }
  return -1;
}

/**
 * For text the hub writes out of what an upstream or a client said (log lines, an upstream's
 * error passed to a client, a ledger row), never for tool results:
 * - a bearer token too short for the shared rule (`Bearer abc123def`);
 * - an Authorization header written out in text (a curl line, a request dump), whatever its
 *   scheme: `Basic <user:password in base64>`, `Token …`, a short bearer token carry
 *   credentials no shape rule knows; the scheme is kept;
 * - a value assigned to a name that says it is a credential (`password=…`, `DB_PASSWORD: …`,
 *   `"apiKey": "…"`), a signed URL's signature included (`&sig=…` of an Azure SAS,
 *   `X-Goog-Signature=…`, `X-Amz-Signature=…`): the URL is the credential while it is valid.
 * Not in SECRET_RULES, which also rewrite tool results, where the second would blank
 * `token: string` in code a filesystem tool returns; in an error or a log line a false positive
 * costs a word, a real one the credential. Both gated, so text with none of the names costs one
 * search with the shapes' gate.
 */
export const LOG_SECRET_RULES: readonly SecretRule[] = [
  ...SECRET_RULES,
  {
    // A bearer token shorter than the shared rule's 16 characters: 8 or more, a digit among
    // them, so that prose ("Bearer authentication failed") keeps its words.
    kind: 'bearer-token',
    re: /(\bBearer\s+)(?!\[redacted)(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*/gi,
    keep: 1,
    gate: 'bearer\\s',
  },
  {
    kind: 'authorization',
    // What a shape rule already marked (`Bearer [redacted:bearer-token]`) is left as it is.
    re: /(\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?(?!(?:[A-Za-z][\w.~+-]*[ \t]+)?\[redacted)(?:[A-Za-z][\w.~+-]*[ \t]+)?)[^\s"',;]+/gi,
    keep: 1,
    gate: 'authorization',
  },
  {
    kind: 'credential',
    // The name starts where its run does (see SECRET_RULES). An OAuth error code is no name of
    // a credential: `invalid_token: unknown API key` (RFC 6750, as a hub in front of another
    // says why it refused) and RFC 8628's `expired_token` are followed by their description.
    re: /((?<![A-Za-z0-9_.-])(?!(?:invalid|expired)_token\b)[A-Za-z0-9_.-]*(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|token|credentials?|signature|sig)\b["']?\s*[:=]\s*["']?)(?!\[redacted)[^\s"',;&]{3,}/gi,
    keep: 1,
    gate: 'password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|token|credential|sig',
  },
];

/**
 * A line for the hub's log: every credential rule, the assignments too (LOG_SECRET_RULES), and
 * the config's own secret values (config-secrets.ts).
 */
export function redactLogText(text: string): string {
  return redactConfigSecrets(redactSecretText(text, LOG_SECRET_RULES));
}

/**
 * Upstream text on an error path (an error's message and data, lastError, a progress message,
 * a relayed log line): the rules of log text, assignments and Authorization headers included,
 * and the config's own secret values (config-secrets.ts), which an upstream may echo bare. An
 * error reaches the client and the ledger as the hub's own output: an upstream that says
 * `password=…` in it gives the credential away as surely as one that logs it. Not for tool
 * results, which only the redact-secrets plugin rewrites, by shape; only the error path pays.
 */
export function redactErrorText(text: string): string {
  return redactLogText(text);
}

/** How far past an excerpt's end the text is redacted with it: a secret that starts in the excerpt ends within this. */
export const EXCERPT_MARGIN = 8192;

/**
 * The first `max` characters of `text`, redacted before the cut: cut first, a secret across the
 * end left its first part, which neither a rule (too short for its shape) nor a configured
 * value (not whole) recognises any more.
 */
export function redactedExcerpt(text: string, max: number, redact: (s: string) => string = redactErrorText): string {
  return redact(text.length > max + EXCERPT_MARGIN ? text.slice(0, max + EXCERPT_MARGIN) : text).slice(0, max);
}

/** The mark of a value under a key that says it is a credential, in error or log data. */
export const CREDENTIAL_VALUE_MARK = '[redacted:credential]';

/**
 * redactSecretsIn with redactErrorText, for an upstream error's `data` (and a relayed log
 * line's): besides its strings, any value that is not an object under a key that names a
 * credential (`{"password": "…"}`, `{"apiKey": 12345678}`: DEFAULT_REDACT_KEYS, as the ledger's
 * stored bodies) is replaced, whatever its shape.
 */
export function redactErrorsIn(v: unknown): unknown {
  return walk(v, redactErrorText, { left: MAX_STRINGS }, 0, DEFAULT_REDACT_KEYS);
}

/**
 * An upstream's `notifications/message` params as a client may see them: its `data` (often a
 * string, which redactErrorsIn would pass over as it passes over a resource's base64 `data`)
 * and `logger` get the rules of error text. A server's debug line can hold the token it was
 * given or a header it sent; the client sees it as the hub's output, as it sees an error.
 * The same params object when nothing changed.
 */
export function redactLogMessage(params: Record<string, unknown>): Record<string, unknown> {
  const { data, logger } = params;
  const d = typeof data === 'string' ? redactErrorText(data) : redactLogData(data);
  const l = typeof logger === 'string' ? redactErrorText(logger) : logger;
  if (d === data && l === logger) return params;
  const out: Record<string, unknown> = { ...params, data: d };
  if (l !== logger) out.logger = l;
  return out;
}

/**
 * A log line's structured `data`, redacted. The walk of a result passes over keys and, for
 * bounded work, what lies past MAX_DEPTH or MAX_STRINGS; a tool's result is the client's own
 * answer, but a server's debug dump is anything the server holds (a map keyed by token, a
 * config 40 levels down, a list of 20,000 headers) and the client sees it as the hub's output.
 * Its JSON text, redacted, says whether anything was left: if so the line goes as that text.
 */
function redactLogData(data: unknown): unknown {
  if (data === null || typeof data !== 'object') return data;
  const walked = redactErrorsIn(data);
  const text = JSON.stringify(walked);
  const redacted = redactErrorText(text);
  return redacted === text ? walked : redacted;
}

const MAX_DEPTH = 32;
const MAX_STRINGS = 10_000;

/** How a list of rules is applied: its leading gated rules are skipped together when `gate` finds nothing. */
interface Plan {
  gate: RegExp | undefined;
  /** How many leading rules the gate stands for. */
  gated: number;
}

const plans = new WeakMap<readonly SecretRule[], Plan>();

function planFor(rules: readonly SecretRule[]): Plan {
  let plan = plans.get(rules);
  if (plan === undefined) {
    let gated = 0;
    while (gated < rules.length && rules[gated]!.gate !== undefined) gated++;
    const gate = gated > 0 ? new RegExp(rules.slice(0, gated).map((r) => r.gate).join('|'), 'i') : undefined;
    plan = { gate, gated };
    plans.set(rules, plan);
  }
  return plan;
}

export function redactSecretText(text: string, rules: readonly SecretRule[] = SECRET_RULES): string {
  const plan = planFor(rules);
  // Every match of a gated rule holds its gate: in a text that holds none, none of them would
  // match, so none would change the text for the ones after it.
  const first = plan.gate !== undefined && !plan.gate.test(text) ? plan.gated : 0;
  let out = text;
  for (let i = first; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.hint !== undefined && !out.includes(r.hint)) continue;
    r.re.lastIndex = 0;
    if (!r.re.test(out)) continue;
    r.re.lastIndex = 0;
    const mark = `[redacted:${r.kind}]`;
    const within = r.within;
    out = within ? out.replace(r.re, (region) => within(region, mark)) : out.replace(r.re, (...m: string[]) => (r.keep ? m[r.keep] : '') + mark);
  }
  return out;
}

/**
 * `v` with every string redacted (redactSecretText); the same object when nothing matched, so
 * a clean value costs no copy. Binary payloads (`data`, `blob`) and `requestState` are not text
 * and are left alone; past MAX_DEPTH or MAX_STRINGS the rest is passed on as it is.
 */
export function redactSecretsIn(v: unknown, rules: readonly SecretRule[] = SECRET_RULES): unknown {
  return walk(v, (s) => redactSecretText(s, rules), { left: MAX_STRINGS }, 0);
}

function walk(v: unknown, redact: (s: string) => string, budget: { left: number }, depth: number, keys?: RegExp): unknown {
  if (typeof v === 'string') {
    if (budget.left-- <= 0) return v;
    return redact(v);
  }
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    v.forEach((x, i) => {
      const y = walk(x, redact, budget, depth + 1, keys);
      if (y !== x) (copy ??= v.slice())[i] = y;
    });
    return copy ?? v;
  }
  let copy: Record<string, unknown> | undefined;
  const obj = v as Record<string, unknown>;
  for (const k of Object.keys(obj)) {
    const x = obj[k];
    if (keys !== undefined && typeof x === 'string' && x !== CREDENTIAL_VALUE_MARK && keys.test(k)) {
      (copy ??= { ...obj })[k] = CREDENTIAL_VALUE_MARK;
      continue;
    }
    if ((k === 'data' || k === 'blob' || k === 'requestState') && typeof x === 'string') continue;
    const y = walk(x, redact, budget, depth + 1, keys);
    if (y !== x) (copy ??= { ...obj })[k] = y;
  }
  return copy ?? v;
}
