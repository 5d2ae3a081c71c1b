/**
 * `plugins` changed while the hub runs (config watch): the plugins are loaded again from the
 * new section, take over lists and calls at once, the old ones are closed, clients hear
 * list_changed, and no upstream is restarted. The real built hub over loopback HTTP, a real
 * stdio upstream, a plugin file of the test's own, the SDK v1 client.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { setSection, loggedTimes } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, waitForReady, type Json } from '../helpers/wire.js';

let hub: HubProcess;
let dir: string;

/** A plugin that hides the tools its options name, and says when it is closed. */
const HIDER = `import { appendFileSync } from 'node:fs';
export default ({ options }) => ({
  name: 'hider',
  onList(ctx) {
    if (ctx.kind !== 'tools') return;
    for (const t of ctx.items) if ((options.hide ?? []).includes(t.name)) ctx.hide(t, 'hidden by the test');
  },
  close() {
    appendFileSync(options.closedFile, (options.tag ?? '') + '\\n');
  },
});
`;

beforeAll(async () => {
  hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern' }) } });
  dir = hub.configFile.replace(/[\\/][^\\/]+$/, '');
  writeFileSync(join(dir, 'hider.mjs'), HIDER);
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const rewrite = (value: Json | undefined): void => setSection(hub, 'plugins', value);
const reloaded = (n: number): Promise<void> => loggedTimes(hub, 'config reload: plugins replaced', n, 15_000);

const textOf = (r: Json): string => ((r.content ?? []) as { text?: string }[]).map((c) => c.text ?? '').join('');

/** An SDK v1 client of the hub, counting the tools/list_changed it hears, and its tool names. */
async function connect(name: string): Promise<{ client: Client; changed: () => number; names: () => Promise<string[]> }> {
  const client = new Client({ name, version: '1.0.0' });
  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
  await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
  await new Promise((r) => setTimeout(r, 300)); // the client's GET stream opens after initialize
  return { client, changed: () => changed, names: async () => (await client.listTools()).tools.map((t) => t.name) };
}

describe('plugins reloaded while the hub runs', () => {
  it('new options and a new plugin take over lists and calls at once; the old ones are closed; clients hear list_changed', async () => {
    const closed = join(dir, 'closed.txt');
    const { client, changed, names } = await connect('plugins-client');
    const echo = async (text: string): Promise<string> => textOf((await client.callTool({ name: 's__echo', arguments: { text } })) as Json);
    const before = (await health(hub.url)).servers.find((s) => s.id === 's') as unknown as Json;

    expect(await names()).toContain('s__add');
    expect(await echo('ref INTERNAL-123456')).toBe('echo:ref INTERNAL-123456');

    // Options of a bundled plugin, and a plugin of the config's own.
    rewrite({ options: { 'redact-secrets': { patterns: ['INTERNAL-[0-9]{6}'] } }, paths: [{ path: 'hider.mjs', options: { hide: ['add'], closedFile: closed, tag: 'first' } }] });
    await reloaded(1);
    expect(hub.logs.some((l) => l.includes('change only on a restart'))).toBe(false);
    await expect.poll(changed, { timeout: 2_000, interval: 20 }).toBeGreaterThan(0);
    expect(await echo('ref INTERNAL-123456')).toBe('echo:ref [redacted:custom]');
    expect(await names()).not.toContain('s__add');
    expect(await names()).toContain('s__echo');

    // The same plugin with other options: a new instance; the one before is closed.
    const seen = changed();
    rewrite({ options: { 'redact-secrets': { patterns: ['INTERNAL-[0-9]{6}'] } }, paths: [{ path: 'hider.mjs', options: { hide: ['echo'], closedFile: closed, tag: 'second' } }] });
    await reloaded(2);
    await expect.poll(changed, { timeout: 2_000, interval: 20 }).toBeGreaterThan(seen);
    expect(readFileSync(closed, 'utf8')).toBe('first\n');
    const now = await names();
    expect(now).toContain('s__add');
    expect(now).not.toContain('s__echo');

    // The section gone: the defaults again.
    rewrite(undefined);
    await reloaded(3);
    expect(readFileSync(closed, 'utf8')).toBe('first\nsecond\n');
    expect(await names()).toEqual(expect.arrayContaining(['s__add', 's__echo']));
    expect(await echo('ref INTERNAL-123456')).toBe('echo:ref INTERNAL-123456');
    // The upstream kept its connection throughout.
    expect((await health(hub.url)).servers.find((s) => s.id === 's')).toMatchObject({ state: 'ready', restarts: before.restarts, since: before.since });
    expect(existsSync(closed)).toBe(true);
    await client.close();
  });

  it('a SIGHUP loads plugin files edited, added or removed since, with the section unchanged; with nothing changed it loads nothing', async () => {
    const closed = join(dir, 'closed-files.txt');
    const { client, changed, names } = await connect('plugin-files-client');
    const replaced = (): number => hub.logs.filter((l) => l.includes('config reload: plugins replaced')).length;
    const reloads = (): number => hub.logs.filter((l) => l.includes('"msg":"config reloaded"')).length;
    const before = (await health(hub.url)).servers.find((s) => s.id === 's') as unknown as Json;

    writeFileSync(join(dir, 'hider.mjs'), HIDER);
    rewrite({ paths: [{ path: 'hider.mjs', options: { hide: ['add'], closedFile: closed, tag: 'options' } }] });
    let n = replaced() + 1;
    await reloaded(n);
    expect(await names()).not.toContain('s__add');

    // The file edited: this version hides what its own code says, whatever the options.
    writeFileSync(join(dir, 'hider.mjs'), HIDER.replace("(options.hide ?? []).includes(t.name)", "t.name === 'echo'").replace("(options.tag ?? '')", "'edited:' + (options.tag ?? '')"));
    const seen = changed();
    hub.proc.kill('SIGHUP');
    await reloaded(++n);
    expect(hub.logs.filter((l) => l.includes('config reload: plugins replaced')).at(-1)).toContain('plugin files changed');
    await expect.poll(changed, { timeout: 2_000, interval: 20 }).toBeGreaterThan(seen);
    expect(await names()).toEqual(expect.arrayContaining(['s__add']));
    expect(await names()).not.toContain('s__echo');
    expect(readFileSync(closed, 'utf8')).toBe('options\n'); // the version before was closed

    // Nothing changed: a SIGHUP reloads the config and leaves the plugins alone.
    const r = reloads();
    hub.proc.kill('SIGHUP');
    await expect.poll(reloads, { timeout: 10_000, interval: 50 }).toBe(r + 1);
    expect(replaced()).toBe(n);

    // A file added to the plugins folder next to the config is loaded on the next SIGHUP; this
    // one is CommonJS, which Node keeps by file name: an edit of it must be read again too.
    mkdirSync(join(dir, 'plugins'), { recursive: true });
    const folderPlugin = (hide: string) => `module.exports = { name: 'folder', onList(ctx) { for (const t of ctx.items) if (t.name === '${hide}') ctx.hide(t, 'folder'); } };`;
    writeFileSync(join(dir, 'plugins', 'folder.cjs'), folderPlugin('add'));
    hub.proc.kill('SIGHUP');
    await reloaded(++n);
    expect(readFileSync(closed, 'utf8')).toBe('options\nedited:options\n');
    expect(await names()).not.toContain('s__add');
    writeFileSync(join(dir, 'plugins', 'folder.cjs'), folderPlugin('leak'));
    hub.proc.kill('SIGHUP');
    await reloaded(++n);
    expect(await names()).toContain('s__add');
    expect(await names()).not.toContain('s__leak');
    expect(hub.logs.some((l) => l.includes('plugin could not be loaded'))).toBe(false);

    // And taken out again: gone on the next SIGHUP.
    rmSync(join(dir, 'plugins', 'folder.cjs'));
    hub.proc.kill('SIGHUP');
    await reloaded(++n);
    expect(await names()).toEqual(expect.arrayContaining(['s__add', 's__leak']));
    expect(await names()).not.toContain('s__echo');
    // The upstream kept its connection throughout.
    expect((await health(hub.url)).servers.find((s) => s.id === 's')).toMatchObject({ state: 'ready', restarts: before.restarts, since: before.since });
    await client.close();
  });
});
