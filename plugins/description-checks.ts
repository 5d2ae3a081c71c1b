import { checkItem, DEFAULT_MAX_DESCRIPTION } from '../src/catalog/poisoning.js';
import { definePlugin, type Plugin, type PluginSetup } from '../src/plugins/types.js';

/**
 * Bundled plugin: checks the descriptions of listed tools, prompts and resources for signs of
 * poisoning (src/catalog/poisoning.ts) and flags them with category "poisoning"; the hub then
 * applies `policy.poisoning` (warn: shown with the flag; block: hidden).
 * Options (`plugins.options["description-checks"]`): `maxLength` (default 4000 characters).
 */
export default definePlugin((setup: PluginSetup): Plugin => {
  const max = Number(setup.options.maxLength);
  const maxLength = Number.isInteger(max) && max > 0 ? max : DEFAULT_MAX_DESCRIPTION;
  return {
    name: 'description-checks',
    onList(ctx) {
      for (const item of ctx.items) {
        for (const f of checkItem(item, { maxLength })) ctx.flag(item, { code: f.code, message: f.message, field: f.field, category: 'poisoning' });
      }
    },
  };
});
