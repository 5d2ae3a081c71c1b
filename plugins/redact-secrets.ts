import { classifyPattern } from '../src/policy/safe-regex.js';
import { redactSecretsIn, SECRET_RULES, type SecretRule } from '../src/policy/secret-text.js';
import { definePlugin, type Plugin, type PluginSetup } from '../src/plugins/types.js';

/**
 * Bundled plugin: replaces credentials that appear in tool results (text content, embedded
 * text resources, structuredContent strings) with "[redacted:<kind>]" before the client (and
 * the model) sees them (the rules: src/policy/secret-text.ts; upstream errors are redacted by
 * the hub itself). A result without a match is passed on untouched (same object).
 * Options (`plugins.options["redact-secrets"]`): `patterns`, extra regular expressions (source
 * strings) whose matches are redacted as kind "custom"; one of catastrophic shape (nested
 * repetition, backreferences) is skipped with a warning.
 */

export default definePlugin((setup: PluginSetup): Plugin => {
  const rules: SecretRule[] = [...SECRET_RULES];
  const extra = setup.options.patterns;
  if (Array.isArray(extra)) {
    for (const src of extra) {
      const text = String(src);
      const pattern = text.slice(0, 80);
      let re: RegExp;
      try {
        re = new RegExp(text, 'g');
      } catch {
        setup.log.warn({ pattern }, 'redact-secrets: skipped an invalid pattern');
        continue;
      }
      // Results are upstream text, large and possibly hostile: a pattern of catastrophic shape
      // would stall the hub on one of them.
      const shape = classifyPattern(text);
      if (shape.kind === 'reject') setup.log.warn({ pattern, why: shape.why }, 'redact-secrets: skipped a pattern that can backtrack without end');
      else rules.push({ kind: 'custom', re });
    }
  }
  return {
    name: 'redact-secrets',
    afterCall(ctx, result) {
      const out = redactSecretsIn(result, rules);
      if (out === result) return undefined;
      ctx.log.info({ tool: ctx.tool.hubName }, 'redacted secrets in a tool result');
      return out as Record<string, unknown>;
    },
  };
});
