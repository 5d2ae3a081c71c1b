/**
 * The SDK clients of both eras parse a list answer whole: one item of any upstream with a field
 * of the wrong type (a tool's `description: 7`, a trusted server's `readOnlyHint: "yes"`, a
 * prompt argument's `required: "yes"`, a resource's `name: 5`, a template's `mimeType: 3`)
 * failed the whole aggregated list for them, the real servers' items with it. Such an item is
 * dropped (logged, a `catalog/drop` row), and a null where a field may be left out is left out,
 * as is an icon clients cannot read.
 * The real built hub over loopback HTTP; the fixture upstream of both eras and npm's
 * server-everything; the SDK clients of both eras.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady, type Json } from '../helpers/wire.js';

const tools = JSON.stringify([
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object' } },
  { name: 'mutate', description: 'test control', inputSchema: { type: 'object' } },
  { name: 'numbered', description: 7, inputSchema: { type: 'object' } },
  { name: 'titled', title: 7, inputSchema: { type: 'object' } },
  { name: 'meta_text', _meta: 'x', inputSchema: { type: 'object' } },
  { name: 'hinted', annotations: { readOnlyHint: 'yes' }, inputSchema: { type: 'object' } },
  { name: 'nulls', title: null, description: null, annotations: { title: null, readOnlyHint: true }, inputSchema: { type: 'object' }, outputSchema: null },
  { name: 'pictured', icons: [{ src: 'https://example.test/a.png', sizes: 48 }, { src: 'data:image/png;base64,AA==', theme: 'dark' }], inputSchema: { type: 'object' } },
]);
const fixture = (era: string, prefix: string) => ({
  ...nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: era, TOOLS: tools, PROMPTS: '1', DOC_URI: `${prefix}://doc`, TEMPLATE: `${prefix}://t/{id}` }),
  trust: 'trusted',
});

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({
    // Changed prompts and templates are shown (flagged), so what decides is their shape.
    policy: { pinning: 'warn' },
    servers: { ev: { command: join(ROOT, 'node_modules/.bin/mcp-server-everything') }, leg: fixture('legacy', 'leg'), mod: fixture('modern', 'mod') },
  });
  await waitForReady(hub.url, ['ev', 'leg', 'mod'], 60_000);
}, 90_000);
afterAll(async () => void (await hub?.stop()));

async function clients(): Promise<{ v1: ClientV1; v2: ClientV2; close: () => Promise<void> }> {
  const v1 = new ClientV1({ name: 'shape-v1', version: '1' });
  await v1.connect(new TransportV1(new URL(hub.url)));
  const v2 = new ClientV2({ name: 'shape-v2', version: '1' }, { versionNegotiation: { mode: 'auto' } });
  await v2.connect(new TransportV2(new URL(hub.url)));
  return { v1, v2, close: async () => void (await Promise.all([v1.close(), v2.close()])) };
}

const names = (items: { name: string }[], prefix: string) => items.map((t) => t.name).filter((n) => n.startsWith(prefix)).sort();

describe('listed items with fields of a type clients do not read', () => {
  it('tools: dropped, so both eras list the rest (every server\'s); a null field is left out', async () => {
    const { v1, v2, close } = await clients();
    try {
      for (const c of [v1, v2]) {
        const listed = (await c.listTools()).tools;
        expect(names(listed, 'ev__')).toContain('ev__echo');
        for (const s of ['leg', 'mod']) expect(names(listed, `${s}__`)).toEqual([`${s}__echo`, `${s}__mutate`, `${s}__nulls`, `${s}__pictured`]);
        // An icon no client reads (sizes not a list) is left out, not its tool.
        expect(listed.find((t) => t.name === 'mod__pictured')!.icons).toEqual([{ src: 'data:image/png;base64,AA==', theme: 'dark' }]);
        const nulls = listed.find((t) => t.name === 'leg__nulls')!;
        expect(nulls).not.toHaveProperty('title');
        expect(nulls).not.toHaveProperty('description');
        expect(nulls).not.toHaveProperty('outputSchema');
        expect(nulls.annotations).toEqual({ readOnlyHint: true });
      }
    } finally {
      await close();
    }
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(() => db.prepare("SELECT server, upstream_name AS tool, error_message AS why FROM audit WHERE method = 'catalog/drop' AND server = 'leg' ORDER BY upstream_name").all(), { timeout: 5_000 })
        .toEqual([
          { server: 'leg', tool: 'hinted', why: 'shape: its annotations.readOnlyHint is string "yes", not a boolean' },
          { server: 'leg', tool: 'meta_text', why: 'shape: its _meta is string "x"' },
          { server: 'leg', tool: 'numbered', why: 'shape: its description is number 7' },
          { server: 'leg', tool: 'titled', why: 'shape: its title is number 7' },
        ]);
    } finally {
      db.close();
    }
    expect(hub.logs.some((l) => l.includes('tool dropped: a field is not of the type clients read'))).toBe(true);
  });

  it('prompts, resources and templates: dropped alike, the other servers\' still listed', async () => {
    const { v1, v2, close } = await clients();
    try {
      for (const s of ['leg', 'mod']) {
        await v1.callTool({ name: `${s}__mutate`, arguments: { op: 'prompt', def: { name: 'greet', description: 'Greet', arguments: [{ name: 'who', required: 'yes' }] } } });
        await v1.callTool({ name: `${s}__mutate`, arguments: { op: 'prompt', def: { name: 'plain', description: null, arguments: [{ name: 'who', description: null }] } } });
        await v1.callTool({ name: `${s}__mutate`, arguments: { op: 'resource', uri: `${s}://doc`, fields: { name: 5 } } });
        await v1.callTool({ name: `${s}__mutate`, arguments: { op: 'template', fields: { mimeType: 3 } } });
      }
      for (const c of [v1, v2]) {
        await expect.poll(async () => names((await c.listPrompts()).prompts, 'leg__'), { timeout: 5_000 }).toEqual(['leg__plain']);
        const prompts = (await c.listPrompts()).prompts;
        expect(names(prompts, 'ev__')).toContain('ev__simple-prompt');
        expect(names(prompts, 'mod__')).toEqual(['mod__plain']);
        expect(prompts.find((p) => p.name === 'mod__plain')).toEqual({ name: 'mod__plain', arguments: [{ name: 'who' }] });
        const uris = (await c.listResources()).resources.map((r) => r.uri);
        expect(uris.some((u) => u.startsWith('demo://'))).toBe(true);
        expect(uris.filter((u) => !u.startsWith('demo://'))).toEqual([]);
        const templates = (await c.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
        expect(templates.some((u) => u.startsWith('demo://'))).toBe(true);
        expect(templates.filter((u) => !u.startsWith('demo://'))).toEqual([]);
      }
      // A dropped resource is hidden: not read either.
      await expect(v1.readResource({ uri: 'leg://doc' })).rejects.toThrow(/not found/i);
    } finally {
      await close();
    }
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(() => db.prepare("SELECT DISTINCT upstream_name AS item, error_message AS why FROM audit WHERE method = 'catalog/drop' AND server = 'mod' AND error_message NOT LIKE 'shape: its annotations%' AND error_message NOT LIKE 'shape: its _meta%' AND error_message NOT LIKE 'shape: its description%' AND error_message NOT LIKE 'shape: its title%' ORDER BY upstream_name").all(), { timeout: 5_000 })
        .toEqual([
          { item: 'greet', why: 'shape: its arguments[0].required is string "yes" (a prompt)' },
          { item: 'mod://doc', why: 'shape: its name is number 5 (a resource)' },
          { item: 'mod://t/{id}', why: 'shape: its mimeType is number 3 (a resource template)' },
        ]);
    } finally {
      db.close();
    }
  });
});
