/**
 * Credentials recognisable by their shape (well-known token formats, bearer tokens, passwords
 * in URLs), found in free text and replaced by "[redacted:<kind>]". Used wherever text from an
 * upstream or a client leaves the hub or is kept: tool results (the bundled redact-secrets
 * plugin), upstream errors (src/upstream/upstream-error.ts) and ledger rows (src/ledger/redact.ts).
 */

export interface SecretRule {
  kind: string;
  re: RegExp;
  /** Keep this capture group (a label such as "Bearer ") and redact the rest of the match. */
  keep?: number;
}

export const SECRET_RULES: readonly SecretRule[] = [
  { kind: 'private-key', re: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----/g },
  { kind: 'aws-access-key', re: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  { kind: 'aws-secret-key', re: /(aws_secret_access_key\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}/gi, keep: 1 },
  { kind: 'github-token', re: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g },
  { kind: 'slack-token', re: /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/g },
  { kind: 'stripe-key', re: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b/g },
  { kind: 'api-key', re: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b/g },
  { kind: 'google-api-key', re: /\bAIza[0-9A-Za-z_-]{35}\b/g },
  { kind: 'jwt', re: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { kind: 'bearer-token', re: /(\bBearer\s+)[A-Za-z0-9._~+/-]{16,}=*/gi, keep: 1 },
  { kind: 'url-credentials', re: /(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+(?=@)/gi, keep: 1 },
];

/**
 * For the hub's own log lines only (an upstream's stderr, error messages): a value assigned to
 * a name that says it is a credential (`password=…`, `DB_PASSWORD: …`, `"apiKey": "…"`). Not in
 * SECRET_RULES, which also rewrite tool results, where it would blank `token: string` in code a
 * filesystem tool returns; in a log line a false positive costs nothing.
 */
export const LOG_SECRET_RULES: readonly SecretRule[] = [
  ...SECRET_RULES,
  {
    kind: 'credential',
    re: /(\b[A-Za-z0-9_.-]*(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|token|credentials?)\b["']?\s*[:=]\s*["']?)[^\s"',;&]{3,}/gi,
    keep: 1,
  },
];

/** A line for the hub's log: every credential rule, the assignments too (LOG_SECRET_RULES). */
export function redactLogText(text: string): string {
  return redactSecretText(text, LOG_SECRET_RULES);
}

const MAX_DEPTH = 32;
const MAX_STRINGS = 10_000;

export function redactSecretText(text: string, rules: readonly SecretRule[] = SECRET_RULES): string {
  let out = text;
  for (const r of rules) {
    r.re.lastIndex = 0;
    if (!r.re.test(out)) continue;
    r.re.lastIndex = 0;
    out = out.replace(r.re, (...m: string[]) => (r.keep ? m[r.keep] : '') + `[redacted:${r.kind}]`);
  }
  return out;
}

/**
 * `v` with every string redacted (redactSecretText); the same object when nothing matched, so
 * a clean value costs no copy. Binary payloads (`data`, `blob`) and `requestState` are not text
 * and are left alone; past MAX_DEPTH or MAX_STRINGS the rest is passed on as it is.
 */
export function redactSecretsIn(v: unknown, rules: readonly SecretRule[] = SECRET_RULES): unknown {
  return walk(v, rules, { left: MAX_STRINGS }, 0);
}

function walk(v: unknown, rules: readonly SecretRule[], budget: { left: number }, depth: number): unknown {
  if (typeof v === 'string') {
    if (budget.left-- <= 0) return v;
    return redactSecretText(v, rules);
  }
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    v.forEach((x, i) => {
      const y = walk(x, rules, budget, depth + 1);
      if (y !== x) (copy ??= v.slice())[i] = y;
    });
    return copy ?? v;
  }
  let copy: Record<string, unknown> | undefined;
  const obj = v as Record<string, unknown>;
  for (const k of Object.keys(obj)) {
    if ((k === 'data' || k === 'blob' || k === 'requestState') && typeof obj[k] === 'string') continue;
    const y = walk(obj[k], rules, budget, depth + 1);
    if (y !== obj[k]) (copy ??= { ...obj })[k] = y;
  }
  return copy ?? v;
}
