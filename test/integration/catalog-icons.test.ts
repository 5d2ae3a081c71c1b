/**
 * Icons of an untrusted server's tools: behind the hub a client cannot tell whose domain an icon
 * is on, so the hub keeps only what the client could have trusted (catalog/icons.ts); a trusted
 * server's pass unchanged. Real built hub, the raw stdio fixture listing tools with icons, raw
 * HTTP to see what the hub itself sends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';

const PNG = { src: 'data:image/png;base64,iVBORw0KGgo=', mimeType: 'image/png', sizes: ['48x48'] };
const SVG = { src: 'data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+', mimeType: 'image/svg+xml' };
const BEACON = { src: 'https://tracker.example/pixel.png?u=1' };
const TOOLS = [
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } }, icons: [PNG, SVG, BEACON] },
  { name: 'plain', description: 'No icon', inputSchema: { type: 'object' }, icons: [BEACON] },
  { name: 'link', description: 'Links a resource', inputSchema: { type: 'object' } },
];
const fixture = (trust?: string) => ({ ...nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS: JSON.stringify(TOOLS) }), ...(trust ? { trust } : {}) });

describe("an untrusted server's icons", () => {
  let hub: HubProcess;
  beforeAll(async () => {
    const prompts = nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_COMPLETE: '1' });
    hub = await startHub({ servers: { u: fixture(), t: fixture('trusted'), q: prompts, qt: { ...prompts, trust: 'trusted' } } });
    await waitForReady(hub.url, ['u', 't', 'q', 'qt']);
  });
  afterAll(async () => void (await hub?.stop()));

  it('keep only raster data: images (no SVG, no URL a stdio server chose); a trusted server keeps its own', async () => {
    const listed = await modernPost(hub.url, 1, 'tools/list');
    const icons = Object.fromEntries((listed.body?.result?.tools as Json[]).map((t) => [t.name, t.icons]));
    expect(icons).toEqual({ u__echo: [PNG], u__plain: undefined, t__echo: [PNG, SVG, BEACON], t__plain: [BEACON] });
  });

  it("are screened so in a tool's result and a prompt's messages too (a resource_link's icons); a trusted server's pass", async () => {
    const linked = async (tool: string) => {
      const r = await modernPost(hub.url, `${tool}-call`, 'tools/call', { name: tool, arguments: { uri: 'mut://elsewhere', icons: [PNG, SVG, BEACON] } });
      return (r.body?.result?.content as Json[]).map((b) => (b.type === 'resource_link' ? b.icons : b.type));
    };
    expect(await linked('u__link')).toEqual([[PNG]]);
    expect(await linked('t__link')).toEqual([[PNG, SVG, BEACON]]);
    const prompted = async (name: string) => {
      const r = await modernPost(hub.url, `${name}-get`, 'prompts/get', { name, arguments: { icons: JSON.stringify([SVG, BEACON]) } });
      return (r.body?.result?.messages as Json[])?.map((m) => m.content);
    };
    expect(await prompted('q__free')).toEqual([{ type: 'resource_link', uri: 'q://doc', name: 'doc' }]);
    expect(await prompted('qt__free')).toEqual([{ type: 'resource_link', uri: 'q://doc', name: 'doc', icons: [SVG, BEACON] }]);
  });
});
