/**
 * A resource template the hub hides (here a plugin's ctx.hide) routes no read, and a link a
 * tool of its server returned does not open its URIs either: the link made them readable again,
 * though a read without one was refused. Links to other URIs still read. The real built hub, a
 * real stdio upstream, clients of both eras over loopback HTTP.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

let hub: HubProcess;

const HIDER = `export default { name: 'hide-files', onList(ctx) {
  for (const t of ctx.items) if (t.uriTemplate === 'mut://files/{name}') ctx.hide(t, 'not for clients');
} };`;
const TOOLS = [{ name: 'link', inputSchema: { type: 'object', properties: { uri: { type: 'string' } } } }];

beforeAll(async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'hide-files.mjs'), HIDER);
  hub = await startHub(
    { plugins: { paths: ['./hide-files.mjs'] }, servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TEMPLATE: 'mut://files/{name}', TOOLS: JSON.stringify(TOOLS) }) } },
    { dir },
  );
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

let id = 0;
const link = async (uri: string): Promise<void> => {
  const r = await modernPost(hub.url, ++id, 'tools/call', { name: 'm__link', arguments: { uri } });
  expect(((r.body?.result as Json).content as Json[])[0]).toMatchObject({ type: 'resource_link', uri });
};

describe('a resource template the hub hides', () => {
  it('is not listed, and a link its server returned to one of its URIs reads nothing; other links still read', async () => {
    const templates = await modernPost(hub.url, ++id, 'resources/templates/list');
    expect((templates.body?.result as Json).resourceTemplates).toEqual([]);
    await link('mut://files/secret');
    await link('mut://other/open');
    const hidden = await modernPost(hub.url, ++id, 'resources/read', { uri: 'mut://files/secret' });
    expect(hidden.body?.error).toMatchObject({ code: -32602, data: { uri: 'mut://files/secret' } });
    const legacy = await legacySession(hub.url);
    const hiddenLegacy = await legacy.request(1, 'resources/read', { uri: 'mut://files/secret' });
    expect(hiddenLegacy.body?.error?.code).toBe(-32002);
    const open = await modernPost(hub.url, ++id, 'resources/read', { uri: 'mut://other/open' });
    expect((open.body?.result as Json).contents).toEqual([{ uri: 'mut://other/open', text: 'linked mut://other/open' }]);
  });
});
