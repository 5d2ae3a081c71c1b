import { definePlugin, type Plugin, type PluginSetup } from '../src/plugins/types.js';

/**
 * Bundled plugin: replaces credentials that appear in tool results (text content, embedded
 * text resources, structuredContent strings) with "[redacted:<kind>]" before the client (and
 * the model) sees them. A result without a match is passed on untouched (same object).
 * Options (`plugins.options["redact-secrets"]`): `patterns`, extra regular expressions (source
 * strings) whose matches are redacted as kind "custom".
 */

interface Rule {
  kind: string;
  re: RegExp;
  /** Keep this capture group (a label such as "Bearer ") and redact the rest of the match. */
  keep?: number;
}

const RULES: Rule[] = [
  { kind: 'private-key', re: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----/g },
  { kind: 'aws-access-key', re: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g },
  { kind: 'aws-secret-key', re: /(aws_secret_access_key\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}/gi, keep: 1 },
  { kind: 'github-token', re: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g },
  { kind: 'slack-token', re: /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/g },
  { kind: 'stripe-key', re: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b/g },
  { kind: 'api-key', re: /\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b/g },
  { kind: 'google-api-key', re: /\bAIza[0-9A-Za-z_-]{35}\b/g },
  { kind: 'jwt', re: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g },
  { kind: 'bearer-token', re: /(\bBearer\s+)[A-Za-z0-9._~+/-]{16,}=*/g, keep: 1 },
  { kind: 'url-credentials', re: /(\b[a-z][a-z0-9+.-]*:\/\/[^/\s:@]+:)[^@\s/]+(?=@)/gi, keep: 1 },
];

const MAX_DEPTH = 32;
const MAX_STRINGS = 10_000;

export function redactText(text: string, rules: readonly Rule[]): string {
  let out = text;
  for (const r of rules) {
    r.re.lastIndex = 0;
    if (!r.re.test(out)) continue;
    r.re.lastIndex = 0;
    out = out.replace(r.re, (...m: string[]) => (r.keep ? m[r.keep] : '') + `[redacted:${r.kind}]`);
  }
  return out;
}

/** The value with secrets redacted; the same object when nothing matched. */
function redactValue(v: unknown, rules: readonly Rule[], budget: { left: number }, depth: number): unknown {
  if (typeof v === 'string') {
    if (budget.left-- <= 0) return v;
    return redactText(v, rules);
  }
  if (v === null || typeof v !== 'object' || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    v.forEach((x, i) => {
      const y = redactValue(x, rules, budget, depth + 1);
      if (y !== x) (copy ??= v.slice())[i] = y;
    });
    return copy ?? v;
  }
  let copy: Record<string, unknown> | undefined;
  const obj = v as Record<string, unknown>;
  for (const k of Object.keys(obj)) {
    // Binary payloads are not text; leave them alone.
    if ((k === 'data' || k === 'blob' || k === 'requestState') && typeof obj[k] === 'string') continue;
    const y = redactValue(obj[k], rules, budget, depth + 1);
    if (y !== obj[k]) (copy ??= { ...obj })[k] = y;
  }
  return copy ?? v;
}

export default definePlugin((setup: PluginSetup): Plugin => {
  const rules = [...RULES];
  const extra = setup.options.patterns;
  if (Array.isArray(extra)) {
    for (const src of extra) {
      try {
        rules.push({ kind: 'custom', re: new RegExp(String(src), 'g') });
      } catch {
        setup.log.warn({ pattern: String(src).slice(0, 80) }, 'redact-secrets: skipped an invalid pattern');
      }
    }
  }
  return {
    name: 'redact-secrets',
    afterCall(ctx, result) {
      const out = redactValue(result, rules, { left: MAX_STRINGS }, 0);
      if (out === result) return undefined;
      ctx.log.info({ tool: ctx.tool.hubName }, 'redacted secrets in a tool result');
      return out as Record<string, unknown>;
    },
  };
});
