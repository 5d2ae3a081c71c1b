import { join } from 'node:path';

/**
 * A plugin's source whose beforeCall holds the call whose `text` argument is `held` until the
 * file `open` exists in `dir`, and says it holds it by writing `holding` there: a call routed
 * and held before it is sent, for races with what happens meanwhile (a restart, a reload).
 */
export function holdingPlugin(dir: string): string {
  const [holding, open] = [JSON.stringify(join(dir, 'holding')), JSON.stringify(join(dir, 'open'))];
  return `import { existsSync, writeFileSync } from 'node:fs';
export default { name: 'hold', async beforeCall(ctx) {
  if (ctx.arguments.text !== 'held') return;
  writeFileSync(${holding}, '');
  while (!existsSync(${open})) await new Promise((r) => setTimeout(r, 10));
} };`;
}
