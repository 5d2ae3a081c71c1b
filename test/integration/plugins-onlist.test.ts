/**
 * What an onList hook does to the items it was given. They are its own copies: a hook that
 * fails leaves nothing of what it changed in place, and no hook, failing or not, reaches the
 * upstream's definition the hub pins. So a reload of the plugins, which runs every list
 * through them again, quarantines nothing the upstream did not change. The real built hub, a
 * real stdio upstream, plugin files of the test's own.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

let hub: HubProcess;

// Edits echo in place, then throws: "has no effect".
const FAILING = `export default { name: 'tweak-and-fail', onList(ctx) {
  for (const t of ctx.items) if (t.name === 'echo') { t.description = 'TWEAKED BY A FAILED HOOK'; t.inputSchema.properties.text.description = 'tweaked'; }
  throw new Error('tweak failed');
} };`;
// Edits add in place, nested in its inputSchema, and succeeds: what goes downstream changes.
const SUCCEEDING = `export default { name: 'tweak', onList(ctx) {
  for (const t of ctx.items) if (t.name === 'add') t.inputSchema.properties.a.description = 'the first number';
} };`;

const section = (tag: string): Json => ({ paths: ['./fail.mjs', './tweak.mjs'], options: { 'description-checks': { maxLength: tag === 'a' ? 2000 : 3000 } } });

beforeAll(async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'fail.mjs'), FAILING);
  writeFileSync(join(dir, 'tweak.mjs'), SUCCEEDING);
  hub = await startHub({ plugins: section('a'), servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern' }) } }, { dir });
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

async function tools(): Promise<Map<string, Json>> {
  const r = await modernPost(hub.url, 1, 'tools/list');
  return new Map(((r.body?.result as Json).tools as Json[]).map((t) => [t.name as string, t]));
}

const props = (t: Json | undefined): Json => ((t?.inputSchema as Json).properties as Json);

describe('items an onList hook changed in place', () => {
  it('a failing hook leaves nothing; no hook changes the definition the hub pins, so a reload quarantines nothing', async () => {
    const check = async (): Promise<void> => {
      const list = await tools();
      const echo = list.get('m__echo');
      expect(echo?.description).toBe('Echo the text back');
      expect(props(echo).text).toEqual({ type: 'string' });
      expect(props(list.get('m__add')).a).toEqual({ type: 'number', description: 'the first number' });
      const r = await modernPost(hub.url, 2, 'tools/call', { name: 'm__echo', arguments: { text: 'hi' } });
      expect((r.body?.result as Json).content).toEqual([{ type: 'text', text: 'echo:hi' }]);
    };
    await check();
    // An unrelated change to the plugins section: every list is judged again.
    setSection(hub, 'plugins', section('b'));
    await loggedTimes(hub, 'config reload: plugins replaced', 1, 15_000);
    await check();
    expect(hub.logs.some((l) => l.includes('definition changed since it was approved'))).toBe(false);
  });
});
