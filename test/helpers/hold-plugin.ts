import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { nodeServer } from './hub-process.js';

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

/** Waits until the holding plugin in `dir` holds a call, and clears its sign for the next one. */
export async function heldNow(dir: string): Promise<void> {
  await expect.poll(() => existsSync(join(dir, 'holding')), { timeout: 10_000, interval: 20 }).toBe(true);
  rmSync(join(dir, 'holding'));
}

/**
 * A hub's pieces for a call held before it is sent: the holding plugin, written in `dir` (the
 * hub's folder), as its `plugins` section; and the repo's mutable server, modern with the one
 * tool `echo`, whose tools/call count `calls` reads (0 before its first).
 */
export function heldCallRig(dir: string): { plugins: { paths: string[] }; r: Record<string, unknown>; calls: () => number } {
  writeFileSync(join(dir, 'plugin.mjs'), holdingPlugin(dir));
  const statsFile = join(dir, 'stats.json');
  const TOOLS = JSON.stringify([{ name: 'echo', inputSchema: { type: 'object' } }]);
  const r = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS, STATS_FILE: statsFile });
  const calls = () => (existsSync(statsFile) ? ((JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>)['tools/call'] ?? 0) : 0);
  return { plugins: { paths: ['./plugin.mjs'] }, r, calls };
}
