/**
 * Tools whose `x-mcp-header` annotation breaks the rules are dropped by the hub (digest §3.4,
 * §8.12: an HTTP client M! drop them, and the hub could neither mirror nor check their
 * headers), logged, audited and shown as held back to the operator; a valid annotation's tool
 * stays. Real built hub, a raw modern stdio fixture listing such tools, raw HTTP to see what the
 * hub itself sends (an SDK client might drop them on its own).
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';

const TOOLS = [
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'region', description: 'Valid: a string mirrored as Mcp-Param-Region', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } },
  { name: 'ratio', description: 'Invalid: a number property', inputSchema: { type: 'object', properties: { ratio: { type: 'number', 'x-mcp-header': 'Ratio' } } } },
  { name: 'listed', description: 'Invalid: under items', inputSchema: { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Tag' } } } } },
];

describe('tools with an invalid x-mcp-header annotation', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS: JSON.stringify(TOOLS) }) } });
    await waitForReady(hub.url, ['m']);
  });
  afterAll(async () => void (await hub?.stop()));

  it('are not listed, cannot be called, and are logged, audited and shown held back; a valid one stays', async () => {
    const listed = await modernPost(hub.url, 1, 'tools/list');
    expect((listed.body?.result?.tools as Json[]).map((t) => t.name).sort()).toEqual(['m__echo', 'm__region']);

    const call = await modernPost(hub.url, 2, 'tools/call', { name: 'm__ratio', arguments: { ratio: 0.5 } });
    expect(call.body?.error?.message).toMatch(/m__ratio/);

    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(() => db.prepare("SELECT upstream_name AS tool, outcome, error_message AS why FROM audit WHERE method = 'catalog/drop' ORDER BY upstream_name").all(), { timeout: 5_000 })
        .toEqual([
          { tool: 'listed', outcome: 'denied', why: expect.stringMatching(/items: "Tag" is not on a property reached through properties alone/) },
          { tool: 'ratio', outcome: 'denied', why: expect.stringMatching(/"Ratio" is on a property of type "number"/) },
        ]);
    } finally {
      db.close();
    }
    expect(hub.logs.filter((l) => l.includes('tool dropped: its x-mcp-header annotation'))).not.toHaveLength(0);

    const all = ((await (await fetch(new URL('/admin/tools?all=1', hub.url))).json()) as { tools: Json[] }).tools;
    const ratio = all.find((t) => String(t.name ?? t.upstreamName).includes('ratio'));
    expect(JSON.stringify(ratio)).toMatch(/dropped: its x-mcp-header annotation breaks the rules/);
  });
});
