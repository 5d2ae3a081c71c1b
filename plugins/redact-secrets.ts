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
 * repetition, backreferences) or that can backtrack polynomially (several unbounded repeats,
 * repeated alternation, lookaround: safe-regex.ts) is skipped with a warning.
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
      // Results are upstream text, large and possibly hostile, and the pattern runs over all of
      // it on the hub's thread, with no budget (a schema's patterns run in a sandbox): a pattern
      // of catastrophic shape would stall the hub on one of them, and so would one the schema
      // checks only sandbox. `\S+@\S+\.\S+` held the hub 24 s on 4,000 characters of `a@a@…`,
      // 190 s on 8,000.
      const shape = classifyPattern(text);
      if (shape.kind === 'reject') setup.log.warn({ pattern, why: shape.why }, 'redact-secrets: skipped a pattern that can backtrack without end');
      else if (shape.kind === 'sandbox') setup.log.warn({ pattern, why: shape.why }, "redact-secrets: skipped a pattern that can take time growing with a power of a result's length");
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
