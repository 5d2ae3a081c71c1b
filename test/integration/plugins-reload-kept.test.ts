/**
 * A plugin module may export a plugin object rather than a factory (PLUGINS.md). While its file
 * is unchanged, a reload of the plugins gets the same object back: it serves on, so it must not
 * be closed; only a reload that leaves it out closes it. The real built hub, a real stdio
 * upstream, a plugin file of the test's own.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

let hub: HubProcess;
let closed: string;

const section = (extra: Json = {}): Json => ({ paths: ['./obj.mjs'], ...extra });

beforeAll(async () => {
  const dir = tmp();
  closed = join(dir, 'closed.txt');
  writeFileSync(
    join(dir, 'obj.mjs'),
    `import { appendFileSync } from 'node:fs';
let closes = 0;
export default {
  name: 'obj-plugin',
  afterCall(ctx, result) { return { content: [{ type: 'text', text: result.content[0].text + ' [closed ' + closes + ']' }] }; },
  close() { closes++; appendFileSync(${JSON.stringify(closed)}, 'closed\\n'); },
};`,
  );
  hub = await startHub({ plugins: section(), servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern' }) } }, { dir });
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const echo = async (id: number, text: string): Promise<string> => {
  const r = await modernPost(hub.url, id, 'tools/call', { name: 'm__echo', arguments: { text } });
  return ((r.body?.result as Json).content as { text: string }[])[0]!.text;
};

describe('a plugin object carried over by a reload', () => {
  it('is not closed while it serves on; a reload that leaves it out closes it once', async () => {
    expect(await echo(1, 'before')).toBe('echo:before [closed 0]');
    // Only another plugin's options change, twice.
    setSection(hub, 'plugins', section({ options: { 'redact-secrets': { patterns: ['AAA-[0-9]{3}'] } } }));
    await loggedTimes(hub, 'config reload: plugins replaced', 1, 15_000);
    expect(await echo(2, 'one reload')).toBe('echo:one reload [closed 0]');
    setSection(hub, 'plugins', section({ options: { 'redact-secrets': { patterns: ['BBB-[0-9]{3}'] } } }));
    await loggedTimes(hub, 'config reload: plugins replaced', 2, 15_000);
    expect(await echo(3, 'two reloads')).toBe('echo:two reloads [closed 0]');
    expect(existsSync(closed)).toBe(false);
    // Left out: closed, and no longer run.
    setSection(hub, 'plugins', { paths: [] });
    await loggedTimes(hub, 'config reload: plugins replaced', 3, 15_000);
    await expect.poll(() => (existsSync(closed) ? readFileSync(closed, 'utf8') : ''), { timeout: 5_000 }).toBe('closed\n');
    expect(await echo(4, 'gone')).toBe('echo:gone');
  });
});
